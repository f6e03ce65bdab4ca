package consensus

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/cairn-fs/cairn/internal/clock"

	"go.etcd.io/raft/v3"

	"github.com/cairn-fs/cairn/internal/meta"
)

// waiter is a caller blocked in Propose or a membership change.
type waiter struct {
	id     uint64
	done   chan outcome
	issued int64 // loop-owned: tick of the last (re)proposal, for membership changes
}

type raftProposal struct {
	cmd meta.Command
	w   *waiter
}

// inflightBatch is an entry this node proposed that has not applied yet.
type inflightBatch struct {
	seq   uint64
	props []raftProposal
	data  []byte
	tick  int64 // when last proposed
}

// ---------------------------------------------------------------------------
// Public API

// Propose submits cmd and blocks until this node has applied the entry
// carrying it (the Result is that application's outcome) or ctx ends. A
// follower forwards the entry to the leader. Concurrent proposals are
// batched into one entry. When ctx ends first the error wraps
// ErrUnavailable and ctx.Err(): a command not yet handed to Raft is then
// never proposed, but one already handed may still commit (its outcome is
// unknown to the caller, who must re-read before retrying a non-idempotent
// command). After Close or a storage failure the error wraps ErrStopped.
func (r *Raft) Propose(ctx context.Context, cmd meta.Command) (_ meta.Result, err error) {
	if !cmd.Op.Valid() {
		return meta.Result{}, fmt.Errorf("consensus: propose: %w: unknown op %d", meta.ErrInvalid, cmd.Op)
	}
	cmd = meta.Fit(cmd, byte(r.logVersion.Load()))
	if err := r.allowed(cmd); err != nil {
		return meta.Result{}, err
	}
	if f := r.cfg.OnProposed; f != nil {
		start := r.cfg.Clock.Now()
		defer func() { f(clock.Since(r.cfg.Clock, start), err != nil) }()
	}
	w, err := r.submit(ctx, cmd)
	if err != nil {
		return meta.Result{}, err
	}
	o, err := r.wait(ctx, w)
	if err != nil {
		return meta.Result{}, err
	}
	return o.res, o.err
}

// ProposeMany implements OrderedProposer. ctx bounds the handing over and
// the waits, as for Propose.
func (r *Raft) ProposeMany(ctx context.Context, cmds []meta.Command) ([]meta.Result, []error) {
	active := byte(r.logVersion.Load())
	cmds = slices.Clone(cmds)
	for i := range cmds {
		cmds[i] = meta.Fit(cmds[i], active)
	}
	for _, c := range cmds {
		err := r.allowed(c)
		if !c.Op.Valid() {
			err = fmt.Errorf("consensus: propose: %w: unknown op %d", meta.ErrInvalid, c.Op)
		}
		if err != nil {
			errs := make([]error, len(cmds))
			for i := range errs {
				errs[i] = err
			}
			return make([]meta.Result, len(cmds)), errs
		}
	}
	return proposeMany(ctx, cmds, r.submit, func(w *waiter) (meta.Result, error) {
		o, err := r.wait(ctx, w)
		if err != nil {
			return meta.Result{}, err
		}
		return o.res, o.err
	})
}

// submit hands cmd to the loop, in the caller's order.
func (r *Raft) submit(ctx context.Context, cmd meta.Command) (*waiter, error) {
	w := r.newWaiter()
	select {
	case r.propc <- raftProposal{cmd: cmd, w: w}:
		return w, nil
	case <-ctx.Done():
		r.forget(w.id)
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, ctx.Err())
	case <-r.stopc:
		r.forget(w.id)
		return nil, r.stopErr()
	}
}

// wait blocks until w is answered, ctx ends or the log stops.
func (r *Raft) wait(ctx context.Context, w *waiter) (outcome, error) {
	select {
	case o := <-w.done:
		return o, nil
	case <-ctx.Done():
		if r.forget(w.id) {
			return outcome{}, fmt.Errorf("%w: %w", ErrUnavailable, ctx.Err())
		}
	case <-r.done:
		if r.forget(w.id) {
			return outcome{}, r.stopErr()
		}
	}
	return <-w.done, nil // answered concurrently
}

// ---------------------------------------------------------------------------
// Waiters

func (r *Raft) newWaiter() *waiter {
	w := &waiter{id: r.idBase | (r.idSeq.Add(1) & (1<<40 - 1)), done: make(chan outcome, 1)}
	r.wmu.Lock()
	r.waiters[w.id] = w
	r.wmu.Unlock()
	return w
}

// forget removes waiter id; false means it was already answered.
func (r *Raft) forget(id uint64) bool {
	r.wmu.Lock()
	defer r.wmu.Unlock()
	_, ok := r.waiters[id]
	delete(r.waiters, id)
	return ok
}

func (r *Raft) isWaiting(id uint64) bool {
	r.wmu.Lock()
	defer r.wmu.Unlock()
	_, ok := r.waiters[id]
	return ok
}

func (r *Raft) deliver(id uint64, o outcome) {
	r.wmu.Lock()
	w, ok := r.waiters[id]
	delete(r.waiters, id)
	r.wmu.Unlock()
	if ok {
		w.done <- o
	}
}

// flushProposals turns queued proposals into entries: at most MaxBatch
// commands each, and at most MaxInflightEntries of this node's entries
// unapplied at a time (so that under load proposals gather into big
// entries while earlier ones commit).
func (r *Raft) flushProposals() {
	for len(r.pending) > 0 && r.lead != raft.None && !r.propBlocked && len(r.inflight) < r.cfg.MaxInflightEntries {
		n := min(len(r.pending), r.cfg.MaxBatch)
		var props []raftProposal
		for _, p := range r.pending[:n] {
			if r.isWaiting(p.w.id) { // its caller gave up: never propose it
				props = append(props, p)
			}
		}
		r.pending = r.pending[n:]
		if len(props) == 0 {
			continue
		}
		ids := make([]uint64, len(props))
		cmds := make([]meta.Command, len(props))
		for i, p := range props {
			ids[i], cmds[i] = p.w.id, p.cmd
		}
		r.batchSeq++
		data, err := encodePayload(r.id, r.batchSeq, ids, cmds)
		if err != nil { // Propose checked the ops; fail the batch rather than the log
			for _, id := range ids {
				r.deliver(id, outcome{err: err})
			}
			continue
		}
		b := &inflightBatch{seq: r.batchSeq, props: props, data: data}
		r.inflight[b.seq] = b
		r.proposeBatch(b)
	}
	if len(r.pending) == 0 {
		r.pending = nil
	}
}

// proposeBatch hands b to Raft (again). Proposing the same batch twice is
// safe: the session check at apply time skips the second copy.
func (r *Raft) proposeBatch(b *inflightBatch) {
	b.tick = r.ticks
	if err := r.rn.Propose(b.data); err != nil {
		// Not appended anywhere (no leader, leadership transfer, log
		// full): retried at the next tick.
		b.tick = r.ticks - int64(r.cfg.RetryTicks)
		r.propBlocked = true
	}
}

// retryBatches re-proposes this node's unapplied entries that waited
// RetryTicks (all of them when force, after a leader change: the old leader
// may have lost them) and forgets those nobody waits for any more.
// inflightSeqs returns the sequence numbers of the batches in flight, in
// order: the loop acts on them in a fixed order, so that a run replays
// (the simulator's traces), whatever the map's iteration order.
func (r *Raft) inflightSeqs() []uint64 { return slices.Sorted(maps.Keys(r.inflight)) }

func (r *Raft) retryBatches(force bool) {
	for _, seq := range r.inflightSeqs() {
		b := r.inflight[seq]
		live := false
		for _, p := range b.props {
			if r.isWaiting(p.w.id) {
				live = true
				break
			}
		}
		if !live {
			delete(r.inflight, seq)
			continue
		}
		if r.lead != raft.None && !r.propBlocked && (force || r.ticks-b.tick >= int64(r.cfg.RetryTicks)) {
			r.proposeBatch(b)
		}
	}
}

// requeue puts the proposals of batches that can no longer apply back at
// the head of the queue, to be proposed under a new sequence number.
func (r *Raft) requeue(batches []*inflightBatch) {
	if len(batches) == 0 {
		return
	}
	slices.SortFunc(batches, func(a, b *inflightBatch) int { return cmp.Compare(a.seq, b.seq) })
	var props []raftProposal
	for _, b := range batches {
		props = append(props, b.props...)
	}
	r.pending = append(props, r.pending...)
}
