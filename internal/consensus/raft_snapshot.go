package consensus

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/cairn-fs/cairn/internal/kv"
	"github.com/cairn-fs/cairn/internal/meta"
)

var errSnapshotAborted = errors.New("consensus: snapshot stream aborted")

type install struct {
	msg   *pb.Message
	ing   kv.Ingest // the new namespace, staged on disk (stageSnapshotIngest)
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
// (format in doc.go). The stream is staged in files on the store's disk
// (kv.Ingest, in bounded memory whatever the namespace's size) that
// delete every namespace key of this node and write the received ones;
// the loop then steps the message and, if Raft accepts it, ingests them
// with a file of the new log state (log dropped, truncation point,
// configuration, hard state) in one atomic step, so readers see the old
// namespace or the new one.
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
	g, err := r.cfg.KV.NewIngest()
	if err != nil {
		return err
	}
	if err := stageSnapshotIngest(body, base, g, md.GetIndex(), md.GetTerm()); err != nil {
		g.Abort()
		return fmt.Errorf("snapshot %d from %d: %w", md.GetIndex(), msg.GetFrom(), err)
	}
	r.log.Info("snapshot staged", "index", md.GetIndex(), "from", msg.GetFrom(), "bytes", g.Staged())
	in := &install{msg: msg, ing: g, base: baseApplied, index: md.GetIndex(), reply: make(chan error, 1)}
	select {
	case r.installc <- in:
	case <-ctx.Done():
		g.Abort()
		return ctx.Err()
	case <-r.stopc:
		g.Abort()
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
		in.ing.Abort()
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

// raftWrites records the Raft state changes of the Ready that installs a
// snapshot (truncation point, configuration, entries, hard state: the
// storage's stage functions only Set and Delete), to be written into the
// install's last file, so that they apply with the namespace in one
// ingest. Reads go to the store.
type raftWrites struct {
	kv.Reader
	w map[string][]byte // nil: deleted
}

func (b *raftWrites) Set(k, v []byte) error { b.w[string(k)] = bytes.Clone(v); return nil }
func (b *raftWrites) Delete(k []byte) error { b.w[string(k)] = nil; return nil }
func (b *raftWrites) Commit(bool) error {
	return errors.New("consensus: raftWrites is applied by an ingest")
}
func (b *raftWrites) Close() error { return nil }

// applyInstall writes the Raft state changes into a file of the install
// (its keys, all under the Raft prefix, sort between the two namespace
// ranges' files) and ingests every file at once.
func (in *install) apply(w *raftWrites) error {
	keys := make([]string, 0, len(w.w))
	for k := range w.w {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		var err error
		if v := w.w[k]; v == nil {
			err = in.ing.Delete([]byte(k))
		} else {
			err = in.ing.Set([]byte(k), v)
		}
		if err != nil {
			in.ing.Abort()
			return err
		}
	}
	return in.ing.Apply()
}
