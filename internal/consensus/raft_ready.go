package consensus

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/cairn-fs/cairn/internal/kv"
	"github.com/cairn-fs/cairn/internal/meta"
)

// Step hands a message received from a peer to the loop. It blocks only
// while the inbound queue is full (then until ctx ends). Snapshots arrive
// through ApplySnapshot instead.
func (r *Raft) Step(ctx context.Context, m *pb.Message) error {
	if m.GetTo() != r.id {
		return fmt.Errorf("consensus: message for %d delivered to %d", m.GetTo(), r.id)
	}
	if m.GetType() == pb.MsgSnap {
		return errors.New("consensus: MsgSnap must come through ApplySnapshot")
	}
	select {
	case r.recvc <- m:
		r.stepsQueued.Add(1)
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-r.stopc:
		return r.stopErr()
	}
}

// ReportUnreachable tells Raft that the last send to id failed, so that the
// leader stops optimistic pipelining to it. Never blocks (the report is
// dropped when the loop is busy).
func (r *Raft) ReportUnreachable(id uint64) {
	select {
	case r.ctrlc <- func() { r.rn.ReportUnreachable(id) }:
	default:
	}
}

// ---------------------------------------------------------------------------
// The loop

func (r *Raft) run() {
	defer r.shutdown()
	for {
		var steps, ticks int64
		propc := r.propc
		if len(r.pending) >= 4*r.cfg.MaxBatch {
			propc = nil // back-pressure while no leader takes proposals
		}
		select {
		case <-r.stopc:
			return
		case <-r.tickc:
			r.tick()
			ticks++
		case p := <-propc:
			r.pending = append(r.pending, p)
		case m := <-r.recvc:
			r.step(m)
			steps++
		case in := <-r.installc:
			r.beginInstall(in)
		case f := <-r.ctrlc:
			f()
		case rep := <-r.reportc:
			r.snapshotReported(rep)
		}
		// Take whatever else is queued, so that one Ready (one fsync)
		// covers it: this is where proposals are batched.
	drain:
		for range 4096 {
			select {
			case p := <-propc:
				r.pending = append(r.pending, p)
			case m := <-r.recvc:
				r.step(m)
				steps++
			default:
				break drain
			}
		}
		r.issueReads()
		for {
			// Applying frees in-flight slots: flush again until quiet.
			r.flushProposals()
			if !r.rn.HasReady() {
				break
			}
			if err := r.handleReady(); err != nil {
				if errors.Is(err, meta.ErrUnsupported) {
					// Never skipped: the entry stays next, and a newer
					// binary applies it after a restart.
					r.log.Error("raft log stopped: a committed entry was written by a newer Cairn; this node applies nothing more until its binary is upgraded",
						"applied", r.AppliedIndex(), "err", err)
				} else {
					r.log.Error("raft log stopped", "err", err)
				}
				r.amu.Lock()
				r.err = err
				r.amu.Unlock()
				return
			}
		}
		if in := r.install; in != nil { // Raft did not take it: stale or already known
			r.install = nil
			in.ing.Abort()
			in.reply <- nil
		}
		r.stepsDone.Add(steps)
		r.ticksDone.Add(ticks)
	}
}

func (r *Raft) shutdown() {
	r.stopOnce.Do(func() { close(r.stopc) })
	if r.ticker != nil {
		r.ticker.Stop()
	}
	r.snapCancel()
	r.snapWG.Wait()
	r.snaps.closeAll()
	if in := r.install; in != nil {
		in.ing.Abort()
		in.reply <- ErrStopped
	}
	err := r.stopErr()
	r.wmu.Lock()
	ws := r.waiters
	r.waiters = map[uint64]*waiter{}
	r.wmu.Unlock()
	for _, w := range ws {
		w.done <- outcome{err: err}
	}
	close(r.done)
}

func (r *Raft) step(m *pb.Message) {
	r.heard[m.GetFrom()] = r.ticks
	if err := r.rn.Step(m); err != nil {
		r.log.Debug("raft step", "type", m.GetType().String(), "from", m.GetFrom(), "err", err)
	}
}

func (r *Raft) tick() {
	r.rn.Tick()
	r.ticks++
	r.propBlocked = false
	r.retryBatches(false)
	// Membership changes: Raft drops a conf change silently when another is
	// pending or when the message to the leader is lost; re-propose.
	keep := r.confWait[:0]
	for _, w := range r.confWait {
		switch {
		case !r.isWaiting(w.id):
		case r.ticks-w.issued >= int64(r.cfg.RetryTicks):
			r.deliver(w.id, outcome{err: errRetry})
		default:
			keep = append(keep, w)
		}
	}
	r.confWait = keep
	// Read barriers: re-send those not answered (the request or its answer
	// can be lost, or there was no leader); drop abandoned ones.
	for _, rctx := range slices.Sorted(maps.Keys(r.reads)) {
		req := r.reads[rctx]
		live := req.waiters[:0]
		for _, w := range req.waiters {
			if w.ctx.Err() == nil {
				live = append(live, w)
			}
		}
		req.waiters = live
		if len(live) == 0 {
			delete(r.reads, rctx)
		} else if r.ticks-req.issued >= int64(r.cfg.RetryTicks) {
			req.issued = r.ticks
			r.rn.ReadIndex([]byte(rctx))
		}
	}
	if !r.cfg.DisableAutoPromote && r.ticks%int64(r.cfg.ElectionTicks) == 0 {
		if id := r.promotionCandidate(r.cfg.Voters); id != 0 {
			r.log.Info("promoting learner to voter", "peer", id, "voters", r.st.cs.GetVoters())
			cc := &pb.ConfChangeV2{Changes: []*pb.ConfChangeSingle{{Type: pb.ConfChangeAddNode.Enum(), NodeId: new(id)}},
				Context: encodeConfContext(r.id, 0)}
			if err := r.rn.ProposeConfChange(cc); err != nil {
				r.log.Debug("promotion not proposed", "peer", id, "err", err)
			}
		}
	}
}

// handleReady carries out one Ready in the order Raft requires: persist the
// snapshot, entries and hard state; send messages; apply committed entries;
// Advance.
func (r *Raft) handleReady() error {
	rd := r.rn.Ready()
	var b kv.Batch
	var after []func()
	stage := func(f func(), err error) error {
		if err == nil {
			after = append(after, f)
		}
		return err
	}
	var installed *install
	var rw *raftWrites
	if !raft.IsEmptySnap(rd.Snapshot) {
		idx := rd.Snapshot.GetMetadata().GetIndex()
		if r.install == nil || r.install.index != idx {
			return fmt.Errorf("consensus: raft produced snapshot %d without its staged state", idx)
		}
		installed, r.install = r.install, nil
		rw = &raftWrites{Reader: r.cfg.KV, w: map[string][]byte{}}
		b = rw
		if err := stage(r.st.stageSnapshot(b, rd.Snapshot)); err != nil {
			installed.ing.Abort()
			return err
		}
	} else {
		b = r.cfg.KV.NewBatch()
	}
	defer b.Close()
	if len(rd.Entries) > 0 {
		if err := stage(r.st.stageAppend(b, rd.Entries)); err != nil {
			return err
		}
	}
	if !raft.IsEmptyHardState(rd.HardState) {
		if err := stage(r.st.stageHardState(b, rd.HardState)); err != nil {
			return err
		}
	}
	if installed != nil {
		// The namespace and the Raft state, in one ingest (durable).
		if err := installed.apply(rw); err != nil {
			return fmt.Errorf("install snapshot: %w", err)
		}
	} else if len(after) > 0 {
		if err := b.Commit(rd.MustSync); err != nil {
			return fmt.Errorf("persist raft state: %w", err)
		}
	}
	if len(after) > 0 {
		for _, f := range after {
			f()
		}
	}
	if installed != nil {
		idx := rd.Snapshot.GetMetadata().GetIndex()
		r.log.Info("installed snapshot", "index", idx, "from", installed.msg.GetFrom())
		r.setApplied(idx, r.st.cs)
		if err := r.loadLogVersion(); err != nil {
			return err
		}
		sess, _, err := getU64(r.cfg.KV, sessionKey(r.id))
		if err != nil {
			return err
		}
		if sess >= r.batchSeq { // our ID's earlier life proposed more
			r.batchSeq = (sess>>40 + 1) << 40
		}
		// Our batches the snapshot covers were applied or skipped there, we
		// cannot tell which: their outcome is unknown, and they must not be
		// proposed again under a new sequence number.
		for _, seq := range r.inflightSeqs() {
			if ib := r.inflight[seq]; seq <= sess {
				delete(r.inflight, seq)
				for _, p := range ib.props {
					r.deliver(p.w.id, outcome{err: errOutcomeUnknown})
				}
			}
		}
		installed.reply <- nil
		if r.cfg.OnSnapshot != nil {
			r.cfg.OnSnapshot(idx)
		}
	}
	r.send(rd.Messages)
	if len(rd.CommittedEntries) > 0 {
		if err := r.apply(rd.CommittedEntries); err != nil {
			return err
		}
	}
	for _, rs := range rd.ReadStates {
		if req, ok := r.reads[string(rs.RequestCtx)]; ok {
			delete(r.reads, string(rs.RequestCtx))
			for _, w := range req.waiters {
				w.reply <- rs.Index
			}
		}
	}
	if rd.SoftState != nil || rd.HardState != nil {
		r.amu.Lock()
		if ss := rd.SoftState; ss != nil {
			if ss.Lead != r.lead {
				r.log.Info("raft leader changed", "leader", ss.Lead, "term", r.rn.BasicStatus().GetTerm(), "state", ss.RaftState.String())
				r.lead = ss.Lead
				r.status.LeaderChanges++
				r.propBlocked = false
				defer r.retryBatches(true)
			}
			r.status.Leader, r.status.State = ss.Lead, ss.RaftState
		}
		if hs := rd.HardState; hs != nil {
			r.status.Term, r.status.Commit = hs.GetTerm(), hs.GetCommit()
		}
		r.amu.Unlock()
	}
	r.rn.Advance(rd)
	return r.maybeCompact()
}

func (r *Raft) send(msgs []*pb.Message) {
	out := msgs[:0:0]
	for _, m := range msgs {
		if m.GetType() == pb.MsgSnap {
			r.sendSnapshot(m)
			continue
		}
		out = append(out, m)
	}
	if len(out) > 0 {
		r.cfg.Transport.Send(out)
	}
}
