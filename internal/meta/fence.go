package meta

import (
	"errors"
	"fmt"
)

// Bucket fences: the first building block of a namespace split into
// groups (docs/design/0009-scale.md, "The split"). A bucket moving to
// another namespace group is fenced in the group it leaves: from the
// fence's log position on, that group applies no command that changes the
// bucket, so the copy the new group takes after the fence is complete,
// and a write routed by a node that has not yet seen the group map flip
// fails with ErrMoved instead of landing in a copy nobody reads again.
// Reads go on (they may be stale, as any read through a node may be). The
// fence is a key (keyFence + bucket name), so a Raft snapshot carries it.
//
// OpFenceBucket: BucketName, Count 1 fences the bucket, 0 lifts the
// fence (a move called off). Log version 14.

// fenceVersion is the payload version that carries OpFenceBucket: an
// older binary would not know the op, nor refuse the bucket's writes.
const fenceVersion = 14

// clientVersion is the payload version that carries a node record of
// state NodeClient: an older binary refuses the state.
const clientVersion = 15

// ErrMoved is the result of a command that would change a fenced bucket.
var ErrMoved = errors.New("meta: the bucket is moving to another namespace group; retry through the group map")

var keyFence = []byte("mfence/")

func fenceKey(bucket string) []byte { return append(append([]byte(nil), keyFence...), bucket...) }

// Fenced reports whether bucket is fenced (OpFenceBucket).
func (r *Reader) Fenced(bucket string) (bool, error) {
	_, ok, err := r.get(fenceKey(bucket))
	return ok, err
}

// fenceBucket applies OpFenceBucket.
func (a *applier) fenceBucket() (Result, error) {
	name := a.cmd.BucketName
	if _, err := a.r.Bucket(name); err != nil {
		return Result{}, err
	}
	switch a.cmd.Count {
	case 1:
		a.t.set(fenceKey(name), []byte{1})
	case 0:
		a.t.del(fenceKey(name))
	default:
		return Result{}, fmt.Errorf("%w: fence count %d (1 fences, 0 lifts)", ErrInvalid, a.cmd.Count)
	}
	a.st.fenceKnown = false
	return Result{}, nil
}

// checkFence refuses, with ErrMoved, a command that changes a fenced
// bucket: every command naming a bucket but OpFenceBucket itself and
// OpDeleteBucket (the group that was left drops its copy). Commands that
// name no bucket (the cluster map, records, blob reaps, lock sessions)
// are not a bucket's and pass. One scan per Apply call finds whether any
// fence exists at all.
func (a *applier) checkFence() error {
	switch a.cmd.Op {
	case OpFenceBucket, OpDeleteBucket, OpCreateBucket:
		return nil
	}
	name := bucketName(a.cmd)
	if name == "" {
		return nil
	}
	if !a.st.fenceKnown {
		found := false
		if err := a.t.Scan(keyFence, prefixEnd(keyFence), func(_, _ []byte) bool { found = true; return false }); err != nil {
			return err
		}
		a.st.fenceKnown, a.st.anyFence = true, found
	}
	if !a.st.anyFence {
		return nil
	}
	fenced, err := a.r.Fenced(name)
	if err != nil {
		return err
	}
	if fenced {
		return fmt.Errorf("bucket %q: %w", name, ErrMoved)
	}
	return nil
}
