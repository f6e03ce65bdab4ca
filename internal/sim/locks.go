package sim

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/cairn-fs/cairn/internal/meta"
	"github.com/cairn-fs/cairn/internal/store"
)

// File locks (design 0006): nodes take, wait for and release flock and
// POSIX byte-range locks on a few shared files, through store.Locker as
// the mount does, under the run's faults (a crashed or cut-off node's
// session expires after its lease and frees its locks). The invariant:
// no two conflicting locks are held at one logical instant. It is
// checked twice:
//   - on the log's replay (fencing.go), command by command, for the
//     log's table: no command leaves two conflicting locks granted on
//     one file;
//   - live, for every grant, wherever it was decided (in the log, or by
//     a node under its cached lock right, which the log never sees):
//     what the operations hold is kept in a table per file (heldLocks),
//     with the log's rules, from each grant until its release starts;
//     a new grant that conflicts with a lock whose holder still holds it
//     (its incarnation runs, its session is the one it took it in, and
//     its node has not found the lock lost) breaks the invariant.

// The lock files: lockFiles files of exclBucket, made at bootstrap.
const lockFiles = 2

func lockFile(i int) string { return fmt.Sprintf("lk%d", i) }

// lockOp is one lock operation of the schedule: take (or wait for) a
// lock, hold it, release it.
type lockOp struct {
	file  int
	owner uint64 // the kernel's lock owner on its node (a process, an open file)
	kind  meta.LockKind
	write bool
	start uint64
	end   uint64
	wait  bool
	hold  time.Duration
}

func (o lockOp) String() string {
	k, t := "posix", "read"
	if o.kind == meta.LockFlock {
		k = "flock"
	}
	if o.write {
		t = "write"
	}
	w := "try"
	if o.wait {
		w = "wait"
	}
	return fmt.Sprintf("%s %s %s [%d,%d] of %s by owner %d, hold %v", w, k, t, o.start, o.end, lockFile(o.file), o.owner, o.hold)
}

// lockSchedule draws the run's lock operations from an RNG of their own
// (the rest of a seed's schedule is what it was before them): Config.LockOps
// operations at random times, through random nodes (half the bursts
// through one), by one of three owners per node, in bursts on one file so
// that they contend.
func lockSchedule(seed uint64, cfg Config, ids []uint64) []event {
	rng := rand.New(rand.NewPCG(seed, 0x10c4))
	span := cfg.Duration - 2*time.Second
	if span <= 0 || cfg.LockOps <= 0 {
		return nil
	}
	var evs []event
	for len(evs) < cfg.LockOps {
		at := time.Second + time.Duration(rng.Int64N(int64(span)))
		file := rng.IntN(lockFiles)
		// Half the bursts go through one node: its processes contend
		// under its cached lock right, decided there (lockrights.go).
		one := ids[rng.IntN(len(ids))]
		local := rng.IntN(2) == 0
		for range 2 + rng.IntN(3) {
			op := lockOp{file: file, owner: 1 + uint64(rng.IntN(3)), kind: meta.LockPOSIX,
				write: rng.IntN(2) == 0, wait: rng.IntN(2) == 0,
				// Odd nanoseconds keep it off other timers' instants.
				hold: time.Duration(rng.IntN(800))*time.Millisecond + 4441*time.Nanosecond}
			if rng.IntN(4) == 0 {
				op.kind, op.end = meta.LockFlock, meta.LockEOF
			} else {
				op.start = uint64(rng.IntN(100))
				op.end = op.start + uint64(rng.IntN(50))
				if rng.IntN(5) == 0 {
					op.end = meta.LockEOF
				}
			}
			node := ids[rng.IntN(len(ids))]
			if local {
				node = one
			}
			evs = append(evs, event{at: at + time.Duration(rng.Int64N(int64(50*time.Millisecond))), kind: evLock,
				node: node, lk: op, id: len(evs)})
		}
	}
	return evs
}

// lockCounts are the lock operations' outcomes (Result), and the locks
// they hold (the live check).
type lockCounts struct {
	mu                             sync.Mutex
	granted, refused, failed, lost int
	held                           [lockFiles]*meta.LocalTable
	holders                        map[meta.LockOwner]*incarnation
}

// heldCheck checks lock l of file, just granted through inc, against the
// locks the operations hold, and records it. Under s.locks.mu.
func (s *Sim) heldCheck(file int, l meta.Lock, inc *incarnation, id int) {
	c := &s.locks
	if c.held[file] == nil {
		c.held[file] = meta.NewLocalTable(nil, nil)
		c.holders = map[meta.LockOwner]*incarnation{}
	}
	t := c.held[file]
	held, _ := t.Locks()
	for _, h := range held {
		hi := c.holders[h.Owner]
		if hi == nil || hi.stopping.Load() || hi.st.LockSession() != h.Owner.Epoch || hi.st.LockLost(s.lockInos[file]) {
			t.Release(h.Owner, 0, 0, meta.LockEOF) // no longer held: crashed, or lost with its session
		}
	}
	if x := t.Conflict(l); x != nil {
		s.fail("lock safety, live: lock #%d (%s) granted through node %d while %s still holds %s",
			id, lockString(l), inc.n.id, lockString(*x), lockFile(file))
		return
	}
	t.Request(l, false)
	c.holders[l.Owner] = inc
}

// runLock starts a lock operation through node e.node, unless the node is
// down or paused.
func (s *Sim) runLock(e event) {
	n := s.byID[e.node]
	inc := n.inc
	if inc == nil || s.paused(n.id) || s.lockInos[e.lk.file] == 0 {
		return
	}
	s.ops.Add(1)
	s.inOps.Add(1)
	started := inc.goUse(func() {
		defer func() { s.inOps.Add(-1); s.ops.Done(); s.done.Add(1) }()
		s.lockOp(inc, e)
	})
	if !started {
		s.inOps.Add(-1)
		s.ops.Done()
		s.fail("operation %v not started on a running node", e)
	}
}

// lockOp takes the lock, holds it e.lk.hold, and releases it (or, if the
// node lost it meanwhile, finds that out).
func (s *Sim) lockOp(inc *incarnation, e event) {
	o := e.lk
	req := store.LockRequest{Ino: s.lockInos[o.file], Path: exclBucket + "/" + lockFile(o.file), Owner: o.owner,
		Pid: uint32(o.owner), Kind: o.kind, Type: meta.LockRead, Start: o.start, End: o.end, Wait: o.wait}
	if o.write {
		req.Type = meta.LockWrite
	}
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	owner := meta.LockOwner{Node: inc.n.id, Epoch: inc.st.LockSession(), ID: o.owner}
	_, err := inc.st.Lock(ctx, req)
	cancel()
	s.tr.add("lock #%d via %d: %v: %v", e.id, inc.n.id, o, lockErr(err))
	l := meta.Lock{Owner: owner, Kind: req.Kind, Type: req.Type, Start: req.Start, End: req.End}
	s.locks.mu.Lock()
	switch {
	case err == nil:
		s.locks.granted++
		s.heldCheck(o.file, l, inc, e.id)
	case errors.Is(err, store.ErrWouldBlock), errors.Is(err, store.ErrDeadlock):
		s.locks.refused++
	default:
		s.locks.failed++ // a timeout, a lost session, a crash
	}
	s.locks.mu.Unlock()
	if err != nil {
		return
	}
	time.Sleep(o.hold)
	if inc.stopping.Load() {
		return // crashed: its session expires, and frees the lock
	}
	lost := inc.st.LockLost(req.Ino)
	s.locks.mu.Lock()
	if t := s.locks.held[o.file]; t != nil {
		t.Release(owner, l.Kind, l.Start, l.End) // from here, the release may free it
	}
	s.locks.mu.Unlock()
	req.Type, req.Wait = meta.LockUnlock, false
	ctx, cancel = context.WithTimeout(context.Background(), opTimeout)
	_, err = inc.st.Lock(ctx, req)
	cancel()
	s.tr.add("unlock #%d via %d (lost before: %v): %v", e.id, inc.n.id, lost, lockErr(err))
	if lost {
		s.locks.mu.Lock()
		s.locks.lost++
		s.locks.mu.Unlock()
	}
}

// lockErr is err for the trace: the class of a failure, not its text,
// which may carry addresses or timings.
func lockErr(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, store.ErrWouldBlock):
		return "would block"
	case errors.Is(err, store.ErrDeadlock):
		return "deadlock"
	case errors.Is(err, store.ErrLockLost):
		return "lost"
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return "timeout"
	}
	return "failed"
}

// makeLockFiles writes the lock files (bootstrap) and keeps their inode
// numbers.
func (s *Sim) makeLockFiles() error {
	for i := range lockFiles {
		if err := s.await("make "+lockFile(i), 30*time.Second, func(ctx context.Context) error {
			info, _, err := s.nodes[0].inc.st.Put(ctx, exclBucket, lockFile(i), strings.NewReader("lock"), store.PutOptions{Size: 4})
			if err == nil {
				s.lockInos[i] = info.Ino
			}
			return err
		}); err != nil {
			return err
		}
	}
	return nil
}

// checkLockSafety is the invariant, on the replay's state right after
// one command: no two granted locks of the command's file conflict.
func (s *Sim) checkLockSafety(rd *meta.Reader, index uint64, k int, cmd *meta.Command, when string) error {
	if cmd.Lock == nil || cmd.Lock.Ino == 0 {
		return nil
	}
	held, _, err := rd.Locks(cmd.Lock.Ino)
	if err != nil {
		return err
	}
	for i := range held {
		for j := i + 1; j < len(held); j++ {
			if held[i].Conflicts(&held[j]) {
				s.fail("lock safety, %s: after entry %d command %d (op %d), inode %d holds two conflicting locks: %s and %s",
					when, index, k, cmd.Op, cmd.Lock.Ino, lockString(held[i]), lockString(held[j]))
				return nil
			}
		}
	}
	return nil
}

func lockString(l meta.Lock) string {
	t := "read"
	if l.Type == meta.LockWrite {
		t = "write"
	}
	return fmt.Sprintf("%s kind %d [%d,%d] of node %d session %d owner %d", t, l.Kind, l.Start, l.End, l.Owner.Node, l.Owner.Epoch, l.Owner.ID)
}
