package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/cairn-fs/cairn/internal/clock"

	"github.com/cairn-fs/cairn/internal/consensus"
)

// consistentKey marks a context made by WithConsistent.
type consistentKey struct{}

// WithConsistent returns ctx marked for a consistent read: the Local
// store's reads with it skip its path and bucket caches and read the
// namespace itself. Call Barrier first (once per request); together they
// make the reads linearizable. (The caches are invalidated when an entry
// is applied, but Raft publishes its applied index, which Barrier waits
// for, just before it calls OnApply: a cached path may be stale for that
// moment.)
func WithConsistent(ctx context.Context) context.Context {
	return context.WithValue(ctx, consistentKey{}, true)
}

// IsConsistent reports whether ctx was marked by WithConsistent.
func IsConsistent(ctx context.Context) bool {
	v, _ := ctx.Value(consistentKey{}).(bool)
	return v
}

// Barrier is the read barrier of a consistent read: it asks the log for a
// read index (in a cluster the leader's commit index, confirmed by a
// quorum) and waits until this node has applied it, within
// Config.ReadBarrierTimeout. Reads made afterwards with a WithConsistent
// context see every write acknowledged anywhere before Barrier was called.
// No leader reachable in time (or a stopped log) is ErrUnavailable. A log
// without read indexes (not a consensus.ReadIndexer) has nothing to wait for.
func (s *Local) Barrier(ctx context.Context) error {
	ri, ok := s.log.(consensus.ReadIndexer)
	if !ok {
		return nil
	}
	ctx, cancel := clock.WithTimeout(ctx, s.cfg.Clock, s.cfg.ReadBarrierTimeout)
	defer cancel()
	index, err := ri.ReadIndex(ctx)
	if err == nil {
		err = ri.WaitApplied(ctx, index)
	}
	if err != nil {
		if !errors.Is(err, consensus.ErrStopped) && !errors.Is(err, consensus.ErrUnavailable) {
			err = fmt.Errorf("%w: %w", consensus.ErrUnavailable, err)
		}
		return mapErr(fmt.Errorf("consistent read: the read index was not confirmed by a leader (waited up to %v): %w", s.cfg.ReadBarrierTimeout, err))
	}
	return nil
}
