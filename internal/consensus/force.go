package consensus

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/cairn-fs/cairn/internal/kv"
	"github.com/cairn-fs/cairn/internal/meta"
)

// ErrNoRaftState is returned by ForceNewCluster for a store that never ran
// a Raft log (a single node, or a node that never joined).
var ErrNoRaftState = errors.New("consensus: the store holds no Raft state")

// ForceResult says what ForceNewCluster changed.
type ForceResult struct {
	ID        uint64   // this node, now the only voter
	Removed   []uint64 // members taken out of the configuration (voters and learners)
	Discarded int      // log entries after the commit index thrown away (never known committed here)
	Applied   uint64   // the applied index before the change: the namespace kept
	Index     uint64   // last index of the rewritten log; entries up to it are committed
	Term      uint64   // term of the appended entries
}

// ForceNewCluster rewrites the Raft state of a stopped node's store so that
// the node starts as the only voter of its group: etcd's
// --force-new-cluster, for a lone survivor of a cluster that lost its
// majority for good. The store must not be open by a running Raft.
//
// What it does, in one synced batch:
//
//  1. discards the log entries after the commit index (their fate is
//     unknown: they may have committed elsewhere, or never);
//  2. appends, at the current term, configuration changes that leave a
//     joint configuration if the committed log ends in one, make this
//     node a voter if it is not, and remove every other voter and learner
//     — one change per entry, each checked against the configuration that
//     the committed log leads to;
//  3. appends one normal entry carrying cmds (if any), proposed in this
//     node's name under a new incarnation (the host passes the cluster-map
//     removals of the other members, so that every node's map agrees);
//  4. marks everything committed, so that the next NewRaft applies the
//     committed-but-unapplied entries and then the forced ones, and the
//     node, alone in its configuration, elects itself.
//
// The namespace and the applied index are kept: nothing that was applied
// is lost. The log keeps the forced changes, so the recovery is part of the
// node's history (and of what a new member replays).
//
// The other members must never come back with their old data: they would
// still believe in the old configuration (split brain). Wipe them and join
// them anew.
func ForceNewCluster(db kv.Store, id uint64, cmds []meta.Command) (ForceResult, error) {
	var res ForceResult
	stored, ok, err := getU64(db, keyNodeID)
	if err != nil {
		return res, err
	}
	if !ok {
		return res, ErrNoRaftState
	}
	if id != 0 && id != stored {
		return res, fmt.Errorf("consensus: store belongs to node %d, not %d", stored, id)
	}
	id = stored
	res.ID = id
	st, err := openStorage(db, 4<<20, newSnapshots())
	if err != nil {
		return res, err
	}
	if len(st.cs.GetVoters())+len(st.cs.GetLearners()) == 0 && st.last == 0 {
		return res, ErrNoRaftState
	}
	applied, err := meta.NewReader(db).AppliedIndex()
	if err != nil {
		return res, fmt.Errorf("consensus: read applied index: %w", err)
	}
	res.Applied = applied
	if applied < st.truncIndex || applied > st.last {
		return res, fmt.Errorf("consensus: applied index %d outside the log [%d, %d]", applied, st.truncIndex, st.last)
	}
	commit := max(st.hs.GetCommit(), applied)
	if commit > st.last {
		return res, fmt.Errorf("consensus: commit index %d beyond the last log entry %d", commit, st.last)
	}
	term := st.hs.GetTerm()
	if t, err := st.Term(commit); err != nil {
		return res, err
	} else if t > term {
		term = t
	}
	res.Term = term

	// A throwaway RawNode at the applied configuration replays the
	// committed configuration changes not applied yet, then checks ours.
	ms := raft.NewMemoryStorage()
	base := max(applied, 1)
	if err := ms.ApplySnapshot(&pb.Snapshot{Metadata: &pb.SnapshotMetadata{
		Index: new(base), Term: new(uint64(1)), ConfState: proto.Clone(st.cs).(*pb.ConfState)}}); err != nil {
		return res, err
	}
	sim, err := raft.NewRawNode(&raft.Config{ID: id, ElectionTick: 10, HeartbeatTick: 1, Storage: ms,
		Applied: base, MaxSizePerMsg: 1 << 20, MaxInflightMsgs: 1, Logger: raftLogger{slog.New(slog.DiscardHandler)}})
	if err != nil {
		return res, fmt.Errorf("consensus: force: %w", err)
	}
	cs := proto.Clone(st.cs).(*pb.ConfState)
	apply := func(cc pb.ConfChangeI) (out *pb.ConfState, err error) {
		defer func() {
			if p := recover(); p != nil { // raft panics on an invalid change
				err = fmt.Errorf("consensus: force: configuration change %s: %v", raft.DescribeConfChange(cc), p)
			}
		}()
		return sim.ApplyConfChange(cc), nil
	}
	if commit > applied {
		ents, err := st.Entries(applied+1, commit+1, ^uint64(0))
		if err != nil {
			return res, err
		}
		for _, e := range ents {
			var cc pb.ConfChangeI
			switch e.GetType() {
			case pb.EntryConfChange:
				c := &pb.ConfChange{}
				if err := proto.Unmarshal(e.GetData(), c); err != nil {
					return res, fmt.Errorf("consensus: entry %d: %w", e.GetIndex(), err)
				}
				cc = c
			case pb.EntryConfChangeV2:
				c := &pb.ConfChangeV2{}
				if err := proto.Unmarshal(e.GetData(), c); err != nil {
					return res, fmt.Errorf("consensus: entry %d: %w", e.GetIndex(), err)
				}
				cc = c
			default:
				continue
			}
			if cs, err = apply(cc); err != nil {
				return res, err
			}
		}
	}

	// The forced changes, one per entry, each valid after the previous.
	var changes []*pb.ConfChangeV2
	add := func(cc *pb.ConfChangeV2) error {
		out, err := apply(cc)
		if err != nil {
			return err
		}
		cs = out
		changes = append(changes, cc)
		return nil
	}
	if len(cs.GetVotersOutgoing()) > 0 {
		if err := add(&pb.ConfChangeV2{}); err != nil { // leave the joint configuration
			return res, err
		}
	}
	if !slices.Contains(cs.GetVoters(), id) {
		if err := add(single(pb.ConfChangeAddNode, id)); err != nil {
			return res, err
		}
	}
	others := slices.Concat(cs.GetVoters(), cs.GetLearners())
	slices.Sort(others)
	for _, m := range slices.Compact(others) {
		if m == id {
			continue
		}
		if err := add(single(pb.ConfChangeRemoveNode, m)); err != nil {
			return res, err
		}
		res.Removed = append(res.Removed, m)
	}
	if got := cs.GetVoters(); len(got) != 1 || got[0] != id || len(cs.GetLearners()) > 0 {
		return res, fmt.Errorf("consensus: force: configuration ends as %v, not [%d]", cs, id)
	}

	b := db.NewBatch()
	defer b.Close()
	for i := commit + 1; i <= st.last; i++ {
		if err := b.Delete(entryKey(i)); err != nil {
			return res, err
		}
		res.Discarded++
	}
	next := commit
	var ents []*pb.Entry
	for _, cc := range changes {
		next++
		ents = append(ents, &pb.Entry{Type: pb.EntryConfChangeV2.Enum(), Term: new(term), Index: new(next),
			Data: mustMarshal(cc)})
	}
	if len(cmds) > 0 {
		// A new incarnation of this node proposes the entry: its sequence
		// number is above every batch this node proposed before, applied
		// or not, and NewRaft's next incarnation is above it.
		inc, _, err := getU64(db, keyIncarnation)
		if err != nil {
			return res, err
		}
		sess, _, err := getU64(db, sessionKey(id))
		if err != nil {
			return res, err
		}
		inc = max(inc, sess>>40) + 1
		if err := b.Set(keyIncarnation, u64(inc)); err != nil {
			return res, err
		}
		data, err := encodePayload(id, inc<<40+1, make([]uint64, len(cmds)), cmds)
		if err != nil {
			return res, err
		}
		next++
		ents = append(ents, &pb.Entry{Type: pb.EntryNormal.Enum(), Term: new(term), Index: new(next), Data: data})
	}
	for _, e := range ents {
		if err := b.Set(entryKey(e.GetIndex()), mustMarshal(e)); err != nil {
			return res, err
		}
	}
	hs := &pb.HardState{Term: new(term), Vote: new(st.hs.GetVote()), Commit: new(next)}
	if err := b.Set(keyHardState, mustMarshal(hs)); err != nil {
		return res, err
	}
	if err := b.Commit(true); err != nil {
		return res, fmt.Errorf("consensus: force: %w", err)
	}
	res.Index = next
	return res, nil
}

func single(t pb.ConfChangeType, id uint64) *pb.ConfChangeV2 {
	return &pb.ConfChangeV2{Changes: []*pb.ConfChangeSingle{{Type: t.Enum(), NodeId: new(id)}}}
}
