package sim

import (
	"bytes"
	"errors"
	"fmt"
	"sync"

	"github.com/cairn-fs/cairn/internal/kv"
	"github.com/cairn-fs/cairn/internal/meta"
)

// The fencing invariant (design 0008): a command stamped with directory
// claims (Command.Own.Held) applies only while each of those directories'
// owner record names exactly the stamping node and that claim's epoch. A
// change decided under a claim that has moved never applies, however late
// it reaches the log.
//
// The nodes' own state cannot show it: an entry's OnApply comes after its
// whole batch of entries is committed, so the owner records a command met
// are gone. So the sim keeps the committed log as the nodes apply it
// (every command entry, from the first node to apply it; a node that
// skipped entries through a snapshot was sent a state some node built by
// applying them), and replays it, command by command, onto a namespace of
// its own with meta's Apply, reading each directory's owner record right
// before a stamped command applies. It replays up to the nodes' common
// applied index after every heal and at the end, and checks that the
// replay reproduces each command's outcome and, at the end, node 1's
// namespace byte for byte: the log it checked is the log that was applied.
// The replay also traces every change of an owner record — claims,
// hand-overs, expiries, adoptions — into the run's digest.

// logReplay is the committed log as applied, and its replay.
type logReplay struct {
	mu   sync.Mutex
	ents map[uint64]loggedEntry // applied by some node, not replayed yet

	// Replay state (the driver's only).
	db   kv.Store
	done uint64 // replayed through this index
	opts meta.ApplyOptions

	// Counts of what the replay saw (Result).
	claims, recalls, handOvers, dropped, fenced int
}

type loggedEntry struct {
	cmds []meta.Command
	res  []meta.Result
}

func newLogReplay(opts meta.ApplyOptions) (*logReplay, error) {
	r := &logReplay{ents: map[uint64]loggedEntry{}, db: kv.NewMem(), done: 1, opts: opts}
	// What consensus.NewRaft writes when it bootstraps an empty store:
	// the root at index 1 and the newest log version.
	b := r.db.NewBatch()
	defer b.Close()
	if _, err := meta.Apply(b, 1, nil); err != nil {
		return nil, err
	}
	if err := meta.InitLogVersion(b, 0); err != nil {
		return nil, err
	}
	return r, b.Commit(false)
}

// record keeps an applied entry (OnApply of any node; safe from any
// goroutine). The first copy of an index wins: every node applies the
// same commands, and invariant (b) checks they reached the same state.
func (r *logReplay) record(index uint64, cmds []meta.Command, res []meta.Result) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if index <= r.done {
		return
	}
	if _, ok := r.ents[index]; !ok {
		r.ents[index] = loggedEntry{cmds: cmds, res: res}
	}
}

// ownerTable is the owner records of a namespace, by directory.
func ownerTable(rd *meta.Reader) (map[meta.Ino]meta.DirOwner, error) {
	out := map[meta.Ino]meta.DirOwner{}
	var after meta.Ino
	for {
		os, err := rd.DirOwners(after, 256)
		if err != nil {
			return nil, err
		}
		for _, o := range os {
			out[o.Dir] = o
			after = o.Dir
		}
		if len(os) < 256 {
			return out, nil
		}
	}
}

func ownerString(o meta.DirOwner, ok bool) string {
	if !ok {
		return "none"
	}
	return fmt.Sprintf("node %d epoch %d", o.Node, o.Epoch)
}

// replay replays the log through index upTo (every node has applied it),
// checking the fencing invariant; when says at which check.
func (s *Sim) replay(upTo uint64, when string) {
	r := s.logs
	for i := r.done + 1; i <= upTo; i++ {
		r.mu.Lock()
		e, ok := r.ents[i]
		delete(r.ents, i)
		r.done = i
		r.mu.Unlock()
		if err := s.replayEntry(i, e, ok, when); err != nil {
			s.fail("fencing, %s: replay of entry %d: %v", when, i, err)
			return
		}
	}
}

func (s *Sim) replayEntry(index uint64, e loggedEntry, ok bool, when string) error {
	r := s.logs
	b := r.db.NewBatch()
	defer b.Close()
	if !ok {
		// No node applied commands at this index through OnApply: an
		// empty entry, a membership change, or a proposer's duplicate.
		if _, err := r.opts.Apply(b, index, nil); err != nil {
			return err
		}
		return b.Commit(false)
	}
	rd := meta.NewReader(b)
	before, err := ownerTable(rd)
	if err != nil {
		return err
	}
	for k := range e.cmds {
		cmd := &e.cmds[k]
		live := e.res[k].Err
		if c := cmd.Own; c != nil && cmd.Op != meta.OpOwn && cmd.Op != meta.OpDisown && live == nil {
			for _, h := range c.Held {
				o, err := rd.DirOwner(h.Dir)
				if err != nil {
					return err
				}
				if o == nil || o.Node != c.Node || o.Epoch != h.Epoch {
					s.fail("fencing, %s: entry %d command %d (op %d %s/%s -> %s) by node %d, stamped with directory %d epoch %d, applied while the directory's owner was %s",
						when, index, k, cmd.Op, cmd.BucketName, cmd.Path, cmd.DstPath, c.Node, h.Dir, h.Epoch, ownerString(derefOwner(o)))
				}
			}
		}
		if errors.Is(live, meta.ErrFenced) {
			r.fenced++
		}
		if cmd.Op == meta.OpOwn && live == nil && e.res[k].Own != nil && !e.res[k].Own.Granted && e.res[k].Own.Owner != nil {
			r.recalls++
		}
		res, err := r.opts.Apply(b, index, []meta.Command{*cmd})
		if err != nil {
			return err
		}
		if err := s.checkLockSafety(rd, index, k, cmd, when); err != nil {
			return err
		}
		if (res[0].Err == nil) != (live == nil) {
			return fmt.Errorf("command %d (op %d %s/%s) replays to %v, but the nodes applied it with %v: the recorded log is not the applied one",
				k, cmd.Op, cmd.BucketName, cmd.Path, res[0].Err, live)
		}
	}
	after, err := ownerTable(rd)
	if err != nil {
		return err
	}
	// Every change of an owner record goes into the trace, in directory
	// order; the counts go into the Result.
	var dirs []meta.Ino
	for d := range before {
		dirs = append(dirs, d)
	}
	for d := range after {
		if _, ok := before[d]; !ok {
			dirs = append(dirs, d)
		}
	}
	sortInos(dirs)
	for _, d := range dirs {
		o0, ok0 := before[d]
		o1, ok1 := after[d]
		if ok0 == ok1 && o0 == o1 {
			continue
		}
		s.tr.add("owner of dir %d at index %d: %s -> %s", d, index, ownerString(o0, ok0), ownerString(o1, ok1))
		switch {
		case ok1:
			r.claims++ // a claim or an adoption (a new epoch, or one more directory under one)
		case hasOp(e.cmds, meta.OpDisown):
			r.handOvers++
		default:
			r.dropped++ // an expired session, a removed directory
		}
	}
	return b.Commit(false)
}

func derefOwner(o *meta.DirOwner) (meta.DirOwner, bool) {
	if o == nil {
		return meta.DirOwner{}, false
	}
	return *o, true
}

func hasOp(cmds []meta.Command, op meta.Op) bool {
	for i := range cmds {
		if cmds[i].Op == op {
			return true
		}
	}
	return false
}

func sortInos(ds []meta.Ino) {
	for i := 1; i < len(ds); i++ {
		for j := i; j > 0 && ds[j] < ds[j-1]; j-- {
			ds[j], ds[j-1] = ds[j-1], ds[j]
		}
	}
}

// checkReplay compares the replay's namespace with node 1's (both at
// index idx, Raft's "R" and the proposer sessions "P" left out: those
// are the log's, not the state machine's).
func (s *Sim) checkReplay(idx uint64) {
	s.replay(idx, "at the end")
	snap := s.logs.db.Snapshot()
	defer snap.Close()
	got, err := dumpState(snap)
	if err != nil {
		s.fail("fencing: dump the replay: %v", err)
		return
	}
	nsnap := s.nodes[0].inc.kv.Snapshot()
	defer nsnap.Close()
	want, err := dumpState(nsnap)
	if err != nil {
		s.fail("fencing: dump node 1: %v", err)
		return
	}
	if !bytes.Equal(got, want) {
		s.fail("fencing: the replay of the log at index %d differs from node 1's namespace (%s): the fencing check did not see the applied log",
			idx, firstDiff(want, got))
	}
}

// dumpState is dump's encoding of every key but "P" and "R".
func dumpState(r kv.Reader) ([]byte, error) {
	var buf []byte
	for _, rg := range [][2][]byte{{nil, []byte("P")}, {[]byte("Q"), []byte("R")}, {[]byte("S"), nil}} {
		if err := r.Scan(rg[0], rg[1], func(k, v []byte) bool {
			buf = appendRecord(buf, k, v)
			return true
		}); err != nil {
			return nil, err
		}
	}
	return buf, nil
}
