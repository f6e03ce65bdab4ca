package consensus

import (
	"context"
	"errors"
	"fmt"
	"io"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/cairn-fs/cairn/internal/kv"
	"github.com/cairn-fs/cairn/internal/meta"
)

var errSnapshotAborted = errors.New("consensus: snapshot stream aborted")

type install struct {
	msg   *pb.Message
	b     kv.Batch
	base  uint64
	index uint64
	reply chan error
}

type snapReport struct {
	to, index uint64
	err       error
}

// ApplySnapshot installs a snapshot received from a peer: msg is the
// MsgSnap (metadata only) and body the stream written by the sender
// (format in doc.go). The stream is staged in one KV batch that deletes
// every namespace key of this node and writes the received ones; the loop
// then steps the message and, if Raft accepts it, commits the batch with
// the new log state (log dropped, truncation point, configuration, hard
// state) atomically, so readers see the old namespace or the new one.
// It returns nil when installed or when the snapshot is stale (the node is
// already past it), ErrBadSnapshot for a corrupt stream, another error when
// the node moved on while staging (the sender retries later).
func (r *Raft) ApplySnapshot(ctx context.Context, msg *pb.Message, body io.Reader) error {
	md := msg.GetSnapshot().GetMetadata()
	if msg.GetType() != pb.MsgSnap || msg.GetTo() != r.id || md.GetIndex() == 0 {
		return fmt.Errorf("%w: not a snapshot for node %d", ErrBadSnapshot, r.id)
	}
	if md.GetIndex() <= r.AppliedIndex() {
		return nil
	}
	base := r.cfg.KV.Snapshot()
	defer base.Close()
	baseApplied, err := meta.NewReader(base).AppliedIndex()
	if err != nil {
		return err
	}
	b := r.cfg.KV.NewBatch()
	if err := stageSnapshot(body, base, b, md.GetIndex(), md.GetTerm()); err != nil {
		b.Close()
		return fmt.Errorf("snapshot %d from %d: %w", md.GetIndex(), msg.GetFrom(), err)
	}
	in := &install{msg: msg, b: b, base: baseApplied, index: md.GetIndex(), reply: make(chan error, 1)}
	select {
	case r.installc <- in:
	case <-ctx.Done():
		b.Close()
		return ctx.Err()
	case <-r.stopc:
		b.Close()
		return r.stopErr()
	}
	select {
	case err := <-in.reply:
		return err
	case <-r.done:
		return r.stopErr()
	}
}

func (r *Raft) beginInstall(in *install) {
	if r.st.applied != in.base {
		in.b.Close()
		in.reply <- errSnapshotRaced
		return
	}
	r.install = in
	r.step(in.msg)
}

func (r *Raft) sendSnapshot(m *pb.Message) {
	md := m.GetSnapshot().GetMetadata()
	idx, term, to := md.GetIndex(), md.GetTerm(), m.GetTo()
	snap := r.snaps.acquire(idx)
	if snap == nil {
		r.rn.ReportSnapshot(to, raft.SnapshotFailure)
		return
	}
	r.log.Info("sending snapshot", "peer", to, "index", idx)
	r.snapsInflight.Add(1)
	r.snapWG.Add(1)
	go func() {
		defer r.snapWG.Done()
		pr, pw := io.Pipe()
		werr := make(chan error, 1)
		go func() {
			err := writeSnapshot(pw, snap, idx, term)
			pw.CloseWithError(err)
			werr <- err
		}()
		err := r.cfg.Transport.SendSnapshot(r.snapCtx, to, m, pr)
		pr.CloseWithError(errSnapshotAborted) // unblocks the writer if the transport stopped reading
		if werr := <-werr; err == nil && werr != nil {
			err = werr
		}
		select {
		case r.reportc <- snapReport{to: to, index: idx, err: err}:
		case <-r.stopc: // shutdown closes the KV snapshots
		}
	}()
}

func (r *Raft) snapshotReported(rep snapReport) {
	r.snaps.release(rep.index)
	r.snapsInflight.Add(-1)
	if rep.err != nil {
		r.log.Warn("snapshot not delivered", "peer", rep.to, "index", rep.index, "err", rep.err)
		r.rn.ReportSnapshot(rep.to, raft.SnapshotFailure)
		return
	}
	r.log.Info("snapshot delivered", "peer", rep.to, "index", rep.index)
	r.rn.ReportSnapshot(rep.to, raft.SnapshotFinish)
}
