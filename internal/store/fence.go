package store

import (
	"context"
	"fmt"

	"github.com/cairn-fs/cairn/internal/meta"
)

// ErrMoved is the failure of a change to a bucket that is fenced for a
// move to another namespace group (FenceBucket, meta.ErrMoved): it is an
// ErrUnavailable (front ends answer 503; a client retries), and the one
// that routed it there learns that the group map is about to change.
var ErrMoved = fmt.Errorf("%w: the bucket is moving to another namespace group", ErrUnavailable)

// FenceBucket fences bucket (fence true) or lifts its fence: from the
// command's place in the log on, no change to the bucket applies here
// (meta.ErrMoved), reads go on. It returns once the fence is applied on
// this node, so a read through this node after it sees everything the
// bucket will ever hold here: the first step of moving a bucket to
// another namespace group (docs/design/0009-scale.md). Needs log version
// 14 (ErrNotUpgraded before).
func (s *Local) FenceBucket(ctx context.Context, bucket string, fence bool) error {
	var n uint64
	if fence {
		n = 1
	}
	_, err := s.propose(ctx, meta.Command{Op: meta.OpFenceBucket, BucketName: bucket, Count: n})
	return err
}
