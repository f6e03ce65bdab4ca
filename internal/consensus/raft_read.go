package consensus

import (
	"context"
	"fmt"
)

type readWaiter struct {
	ctx   context.Context
	reply chan uint64
}

type readReq struct {
	waiters []*readWaiter
	issued  int64
}

// ReadIndex is a linearizable read barrier: it asks the leader for its
// commit index (confirmed by a quorum of heartbeats), waits until this node
// has applied it, and returns it. A read of the local store after it
// returns sees every write acknowledged anywhere before it was called. It
// needs a leader and a quorum; the request is re-sent every RetryTicks
// until ctx ends (then the error wraps ErrUnavailable).
func (r *Raft) ReadIndex(ctx context.Context) (uint64, error) {
	w := &readWaiter{ctx: ctx, reply: make(chan uint64, 1)}
	if err := r.do(ctx, func() { r.newReads = append(r.newReads, w) }); err != nil {
		return 0, err
	}
	var index uint64
	select {
	case index = <-w.reply:
	case <-ctx.Done():
		return 0, fmt.Errorf("%w: read index: %w", ErrUnavailable, ctx.Err())
	case <-r.done:
		return 0, r.stopErr()
	}
	if err := r.WaitApplied(ctx, index); err != nil {
		return 0, err
	}
	return index, nil
}

func (r *Raft) issueReads() {
	if len(r.newReads) == 0 {
		return
	}
	r.readSeq++
	rctx := string(u64(r.readSeq))
	r.reads[rctx] = &readReq{waiters: r.newReads, issued: r.ticks}
	r.newReads = nil
	r.rn.ReadIndex([]byte(rctx))
}
