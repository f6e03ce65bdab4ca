package meta

import (
	"errors"
	"fmt"
	"slices"
)

// Lock rights (design 0006, "Cached lock rights"). A node whose request
// finds an inode's table free of every other session's locks and waiters
// may take the inode's lock right with the lock (RightCmd.Cache). While it
// holds the right, the node alone decides the inode's locks, in a table of
// its own, and the log's table of the inode is frozen: every other
// session's request is answered with a recall (LockResult.Recall) and
// changes nothing. The holder then publishes what was written under its
// locks and gives the right back with its table (OpLockReturn), which
// becomes the log's table again; the asker sends its request again. A
// right lives with its session: when the session expires (or the node
// starts a new one), the right goes with its locks, and a write stamped
// with it (Command.Right) is refused from then on (ErrFenced).

// lockRightVersion is the payload version that carries Command.Right and
// OpLockReturn; lockRightTableVersion the lock table version that holds a
// right.
const (
	lockRightVersion      = 13
	lockRightTableVersion = 2
)

// LockRight is the holder of an inode's lock right: a node's session, and
// the log index of the grant (Seq), which names this right and no other.
type LockRight struct {
	Node    uint64
	Session uint64
	Seq     uint64
}

// RightCmd is the lock-right part of a command. Log version 13.
type RightCmd struct {
	// Cache, on OpLock: take the inode's lock right with the lock, if the
	// table holds nothing of another session once it is granted.
	Cache bool
	// Recall, on OpLock: ask the holder of the right to give it back and
	// change nothing else (a node's F_GETLK); the lock request is not
	// decided.
	Recall bool
	// Seq is the right given back (OpLockReturn) or, on a write, the
	// right it was made under: the write applies only while that right
	// is still held by Node's session Session (fencing).
	Seq     uint64
	Ino     Ino    // a write's fenced inode
	Node    uint64 // a write's holder (OpLockReturn: Command.Lock's owner)
	Session uint64
	// Held and Waiting are the holder's table of the inode (OpLockReturn),
	// every lock its session's.
	Held, Waiting []Lock
}

// ErrRightHeld refuses a lock command of a session for an inode whose
// right that same session holds: the node decides those locks itself.
var ErrRightHeld = errors.New("meta: this node holds the inode's lock right and decides its locks itself")

// LockRight returns the holder of ino's lock right, or nil.
func (r *Reader) LockRight(ino Ino) (*LockRight, error) {
	s, err := r.lockState(ino)
	if err != nil || s.Right == nil {
		return nil, err
	}
	rt := *s.Right
	return &rt, nil
}

// heldBy reports whether the right is session (node, epoch)'s.
func (rt *LockRight) heldBy(node, epoch uint64) bool {
	return rt != nil && rt.Node == node && rt.Session == epoch
}

// recallRight answers a request of another session for an inode whose
// right is held: the holder gives it back (nothing else changes).
func recallRight(st *lockState) *LockResult {
	return &LockResult{Recall: &LockOwner{Node: st.Right.Node, Epoch: st.Right.Session}, RightSeq: st.Right.Seq}
}

// onlySession reports whether every lock and waiter of st is session
// (node, epoch)'s.
func (s *lockState) onlySession(node, epoch uint64) bool {
	for _, l := range slices.Concat(s.Held, s.Waiting) {
		if l.Owner.Node != node || l.Owner.Epoch != epoch {
			return false
		}
	}
	return true
}

// lockReturn applies OpLockReturn: the holder gives the right back, and
// its table becomes the log's. ErrLockLost if its session is gone (the
// right went with it); ErrFenced if the right is not the one it names.
func (a *applier) lockReturn() (Result, error) {
	c, err := a.checkLockCmd()
	if err != nil {
		return Result{}, err
	}
	rc := a.cmd.Right
	if rc == nil || rc.Seq == 0 {
		return Result{}, fmt.Errorf("%w: a lock right's return without the right", ErrInvalid)
	}
	o := c.Lock.Owner
	s, err := a.r.LockSession(o.Node)
	if err != nil {
		return Result{}, err
	}
	if s == nil || s.Epoch != o.Epoch || s.Expired {
		return Result{}, ErrLockLost
	}
	st, err := a.r.lockState(c.Ino)
	if err != nil {
		return Result{}, err
	}
	if !st.Right.heldBy(o.Node, o.Epoch) || st.Right.Seq != rc.Seq {
		return Result{}, fmt.Errorf("inode %d: the lock right %d of node %d: %w", c.Ino, rc.Seq, o.Node, ErrFenced)
	}
	if len(rc.Held) > maxLockEntries || len(rc.Waiting) > maxLockEntries {
		return Result{}, fmt.Errorf("%w: too many locks returned on inode %d", ErrInvalid, c.Ino)
	}
	for _, l := range slices.Concat(rc.Held, rc.Waiting) {
		if l.Owner.Node != o.Node || l.Owner.Epoch != o.Epoch || (l.Kind != LockPOSIX && l.Kind != LockFlock) ||
			(l.Type != LockRead && l.Type != LockWrite) || l.Start > l.End {
			return Result{}, fmt.Errorf("%w: returned lock %+v", ErrInvalid, l)
		}
	}
	for _, w := range rc.Waiting {
		if w.WaitID == 0 {
			return Result{}, fmt.Errorf("%w: a returned waiter without a wait id", ErrInvalid)
		}
	}
	// The waiters' index for deadlock checks: the old table's owners and
	// the new one's.
	owners := map[LockOwner]bool{}
	for _, w := range slices.Concat(st.Waiting, rc.Waiting) {
		owners[w.Owner] = true
	}
	st.Right = nil
	st.Held = slices.Clone(rc.Held)
	st.Waiting = slices.Clone(rc.Waiting)
	st.sort()
	g := st.wake(c.Ino)
	for ow := range owners {
		a.syncWaits(ow, c.Ino, st)
	}
	if err := a.afterWake(c.Ino, st, g, o.Node); err != nil {
		return Result{}, err
	}
	a.syncSession(s, c.Ino, st)
	a.putSession(s)
	a.putLockState(c.Ino, st)
	return Result{Lock: &LockResult{Granted: true, Grants: g}}, nil
}

// checkRight fences a write stamped with a lock right (Command.Right on
// any command but the lock ones): it applies only while that right is
// held.
func (a *applier) checkRight() error {
	rc := a.cmd.Right
	if rc == nil || rc.Seq == 0 || a.cmd.Lock != nil || a.st.unfenced {
		return nil
	}
	st, err := a.r.lockState(rc.Ino)
	if err != nil {
		return err
	}
	if !st.Right.heldBy(rc.Node, rc.Session) || st.Right.Seq != rc.Seq {
		return fmt.Errorf("inode %d: the lock right %d of node %d: %w", rc.Ino, rc.Seq, rc.Node, ErrFenced)
	}
	return nil
}

func appendRightCmd(e *encoder, c *RightCmd) {
	e.bool1(c.Cache)
	e.bool1(c.Recall)
	e.uvarint(c.Seq)
	e.uvarint(uint64(c.Ino))
	e.uvarint(c.Node)
	e.uvarint(c.Session)
	e.uvarint(uint64(len(c.Held)))
	for i := range c.Held {
		appendLock(e, &c.Held[i])
	}
	e.uvarint(uint64(len(c.Waiting)))
	for i := range c.Waiting {
		appendLock(e, &c.Waiting[i])
	}
}

func decodeRightCmd(d *decoder) *RightCmd {
	c := &RightCmd{Cache: d.bool1(), Recall: d.bool1(), Seq: d.uvarint(), Ino: Ino(d.uvarint()), Node: d.uvarint(), Session: d.uvarint()}
	for n := d.count(maxLockEntries); n > 0 && d.err == nil; n-- {
		c.Held = append(c.Held, decodeLock(d))
	}
	for n := d.count(maxLockEntries); n > 0 && d.err == nil; n-- {
		c.Waiting = append(c.Waiting, decodeLock(d))
	}
	return c
}

// LocalTable is a node's own table of an inode whose lock right it holds.
// It decides with the log's rules (locks.go): the same conflicts, POSIX
// splits and merges, flock conversions and FIFO wake-ups. Not safe for
// concurrent use.
type LocalTable struct{ s lockState }

// NewLocalTable starts a table from the log's, as it was at the grant.
func NewLocalTable(held, waiting []Lock) *LocalTable {
	return &LocalTable{s: lockState{Held: slices.Clone(held), Waiting: slices.Clone(waiting)}}
}

// Request grants l, or returns the held lock that conflicts with it
// (unsafe grants in any case: the simulator's sabotage).
func (t *LocalTable) Request(l Lock, unsafe bool) (bool, *Lock) {
	if l.Kind == LockFlock {
		l.Start, l.End = 0, LockEOF
	}
	ok, c := t.s.request(l, unsafe)
	if c != nil {
		cl := *c
		c = &cl
	}
	return ok, c
}

// Queue appends waiter l (it has a WaitID); false when the inode has too
// many.
func (t *LocalTable) Queue(l Lock) bool {
	if len(t.s.Waiting) >= maxLockEntries {
		return false
	}
	if l.Kind == LockFlock {
		l.Start, l.End = 0, LockEOF
	}
	t.s.Waiting = append(t.s.Waiting, l)
	return true
}

// Release drops owner's held locks of kind (0: every kind) in [start,
// end] and returns the waiters that granted.
func (t *LocalTable) Release(owner LockOwner, kind LockKind, start, end uint64) []Lock {
	t.s.remove(owner, kind, start, end)
	return t.wake()
}

// Cancel takes a waiter out of the queue: false if it is not there.
func (t *LocalTable) Cancel(owner LockOwner, waitID uint64) bool {
	n := len(t.s.Waiting)
	t.s.Waiting = slices.DeleteFunc(t.s.Waiting, func(w Lock) bool { return w.Owner == owner && w.WaitID == waitID })
	return len(t.s.Waiting) < n
}

func (t *LocalTable) wake() []Lock {
	var out []Lock
	for _, g := range t.s.wake(0) {
		out = append(out, g.Lock)
	}
	return out
}

// Conflict returns the first held lock that conflicts with l, or nil.
func (t *LocalTable) Conflict(l Lock) *Lock {
	if c := t.s.conflict(&l); c != nil {
		cl := *c
		return &cl
	}
	return nil
}

// Has reports whether owner holds or waits for a lock here.
func (t *LocalTable) Has(owner LockOwner) bool {
	return slices.ContainsFunc(slices.Concat(t.s.Held, t.s.Waiting), func(l Lock) bool { return l.Owner == owner })
}

// Locks returns copies of the held locks and the waiters, in order.
func (t *LocalTable) Locks() (held, waiting []Lock) {
	return slices.Clone(t.s.Held), slices.Clone(t.s.Waiting)
}
