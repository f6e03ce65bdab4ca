package consensus

import (
	"fmt"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/cairn-fs/cairn/internal/meta"
)

type appliedEntry struct {
	index uint64
	node  uint64
	seq   uint64
	ids   []uint64
	cmds  []meta.Command
	res   []meta.Result
	conf  bool
}

// apply applies committed entries onto one batch that also records the
// applied index (meta.Apply writes it for each entry), then wakes waiters.
// The batch is committed without sync: the entries are durable in the log
// (and on a quorum), so a crash that loses the batch re-applies them.
func (r *Raft) apply(ents []*pb.Entry) error {
	b := r.cfg.KV.NewBatch()
	defer b.Close()
	var done []appliedEntry
	var stale []uint64
	var cs *pb.ConfState
	last := r.st.applied
	for _, e := range ents {
		i := e.GetIndex()
		if i <= last {
			continue
		}
		if i != last+1 {
			return fmt.Errorf("consensus: apply entry %d after %d", i, last)
		}
		switch e.GetType() {
		case pb.EntryNormal:
			if len(e.GetData()) == 0 { // a new leader's empty entry
				if _, err := meta.Apply(b, i, nil); err != nil {
					return err
				}
				break
			}
			node, seq, ids, cmds, err := decodePayload(e.GetData())
			if err != nil {
				return fmt.Errorf("consensus: entry %d: %w", i, err)
			}
			// Session check: a proposer's batches apply only in increasing
			// sequence order, so a re-proposed copy, or a batch overtaken
			// by a later one of the same proposer, is skipped everywhere.
			last, _, err := getU64(b, sessionKey(node))
			if err != nil {
				return err
			}
			if seq <= last {
				if _, err := meta.Apply(b, i, nil); err != nil {
					return err
				}
				if node == r.id {
					stale = append(stale, seq)
				}
				break
			}
			if err := b.Set(sessionKey(node), u64(seq)); err != nil {
				return err
			}
			res, err := meta.ApplyOptions{TestingUnfenced: r.cfg.TestingUnfenced, TestingLockUnsafe: r.cfg.TestingLockUnsafe}.Apply(b, i, cmds)
			if err != nil {
				return err
			}
			done = append(done, appliedEntry{index: i, node: node, seq: seq, ids: ids, cmds: cmds, res: res})
		case pb.EntryConfChange, pb.EntryConfChangeV2:
			var cc pb.ConfChangeI
			var ctx []byte
			if e.GetType() == pb.EntryConfChange {
				c := &pb.ConfChange{}
				if err := proto.Unmarshal(e.GetData(), c); err != nil {
					return fmt.Errorf("consensus: entry %d: %w", i, err)
				}
				cc, ctx = c, c.GetContext()
			} else {
				c := &pb.ConfChangeV2{}
				if err := proto.Unmarshal(e.GetData(), c); err != nil {
					return fmt.Errorf("consensus: entry %d: %w", i, err)
				}
				cc, ctx = c, c.GetContext()
			}
			cs = r.rn.ApplyConfChange(cc)
			if err := b.Set(keyConfState, mustMarshal(cs)); err != nil {
				return err
			}
			if _, err := meta.Apply(b, i, nil); err != nil {
				return err
			}
			r.log.Info("membership changed", "index", i, "change", raft.DescribeConfChange(cc), "voters", cs.GetVoters(), "learners", cs.GetLearners())
			if node, id, ok := decodeConfContext(ctx); ok && id != 0 {
				done = append(done, appliedEntry{index: i, node: node, ids: []uint64{id}, conf: true})
			}
		default:
			return fmt.Errorf("consensus: entry %d of unknown type %v", i, e.GetType())
		}
		last = i
	}
	if last == r.st.applied {
		return nil
	}
	if err := b.Commit(false); err != nil {
		return fmt.Errorf("commit applied entries through %d: %w", last, err)
	}
	r.st.applied = last
	if cs != nil {
		r.st.cs = cs
	}
	// Hosts drop caches in OnApply: run it before the new applied index is
	// published, so a read that waited for the index (WaitApplied, a
	// consistent read) never meets a cache still holding the old state.
	for _, d := range done {
		if !d.conf && upgrades(d.cmds) {
			if err := r.loadLogVersion(); err != nil {
				return err
			}
		}
	}
	for _, d := range done {
		if !d.conf && r.cfg.OnApply != nil {
			r.cfg.OnApply(d.index, d.cmds, d.res)
		}
	}
	r.setApplied(last, cs)
	var dead []*inflightBatch
	for _, seq := range stale {
		if b, ok := r.inflight[seq]; ok {
			dead = append(dead, b)
			delete(r.inflight, seq)
		}
	}
	r.requeue(dead)
	for _, d := range done {
		if d.node != r.id {
			continue
		}
		if !d.conf {
			delete(r.inflight, d.seq)
			// Our earlier batches still in flight can never apply now.
			var dead []*inflightBatch
			for _, seq := range r.inflightSeqs() {
				if b := r.inflight[seq]; seq < d.seq {
					dead = append(dead, b)
					delete(r.inflight, seq)
				}
			}
			r.requeue(dead)
		}
		for k, id := range d.ids {
			if d.conf {
				r.deliver(id, outcome{})
			} else {
				r.deliver(id, outcome{res: d.res[k]})
			}
		}
	}
	return nil
}

func (r *Raft) setApplied(index uint64, cs *pb.ConfState) {
	r.amu.Lock()
	r.applied = index
	if cs != nil {
		r.members = proto.Clone(cs).(*pb.ConfState)
	}
	close(r.appliedc)
	r.appliedc = make(chan struct{})
	r.amu.Unlock()
}

// maybeCompact truncates the log behind the applied index once it holds
// more than CompactAfter applied entries, keeping CompactMargin of them.
// The batch needs no sync: it follows the apply batches it relies on in
// the store's write order.
func (r *Raft) maybeCompact() error {
	if r.st.applied-r.st.truncIndex <= r.cfg.CompactAfter {
		return nil
	}
	to := r.st.applied - r.cfg.CompactMargin
	b := r.cfg.KV.NewBatch()
	defer b.Close()
	f, err := r.st.stageCompact(b, to)
	if err != nil {
		return err
	}
	if err := b.Commit(false); err != nil {
		return fmt.Errorf("truncate raft log through %d: %w", to, err)
	}
	f()
	r.log.Debug("raft log truncated", "through", to)
	return nil
}
