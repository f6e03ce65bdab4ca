package meta

import (
	"cmp"
	"errors"
	"math"
	"slices"
)

// File locks (design 0006). The lock table is part of the state machine:
// a lock request is a command whose outcome (granted, refused with the
// conflicting lock, queued, EDEADLK) every node computes identically in
// Apply. Each node's locks belong to its session (node, epoch), renewed
// through the log; the leader expires a session that stopped renewing,
// which frees its locks and grants its waiters' successors.

// LockKind is the family of a lock. Locks of different families never
// conflict (Linux keeps flock and fcntl locks apart); POSIX and OFD locks
// are one family.
type LockKind uint8

// Lock families.
const (
	LockPOSIX LockKind = 1 // fcntl F_SETLK/F_SETLKW and F_OFD_* byte ranges
	LockFlock LockKind = 2 // flock(2): whole file
)

// LockType is what a lock request asks for.
type LockType uint8

// Lock types.
const (
	LockRead   LockType = 1 // shared
	LockWrite  LockType = 2 // exclusive
	LockUnlock LockType = 3 // release the range (OpLock)
)

// LockEOF is the End of a range that runs to the end of the file.
const LockEOF = math.MaxUint64

// LockOwner is who holds a lock: the kernel's lock owner (a process's
// file table for POSIX locks, an open file description for flock and OFD
// locks) on one node, in one session of that node.
type LockOwner struct {
	Node  uint64 // node ID
	Epoch uint64 // the node's session: a restart starts a new one
	ID    uint64 // the kernel's lock_owner
}

// Lock is a granted lock, or a waiting request.
type Lock struct {
	Owner      LockOwner
	Kind       LockKind
	Type       LockType
	Start, End uint64 // inclusive; End LockEOF: to the end of the file
	Pid        uint32 // the process that asked (F_GETLK reports it)
	WaitID     uint64 // a waiter's id, chosen by its node (0 for a granted lock)
	SinceNs    int64  // when it was requested (log time)
}

// LockCmd is the lock part of OpLock, OpLockCancel, OpLockSession and
// OpLockExpire.
type LockCmd struct {
	Ino Ino
	// Lock is the request of OpLock (Type LockUnlock releases its range;
	// Kind 0 with LockUnlock releases every held lock of the owner on Ino,
	// as a close does), the waiter of OpLockCancel (Owner, WaitID), and the
	// session (Owner.Node, Owner.Epoch) of OpLockSession and OpLockExpire.
	Lock Lock
	// Wait queues a conflicting OpLock instead of refusing it.
	Wait bool
	// LeaseNs is the holder's lease (OpLock, OpLockSession).
	LeaseNs int64
	// Path is "bucket/path" of the inode as the requester knows it, kept
	// with the table for status pages (an inode has no path of its own).
	Path string
	// RenewNs is, for OpLockExpire, the time of the last renewal the
	// expiring node saw: the session is expired only if it has not renewed
	// since.
	RenewNs int64
}

// LockResult is the lock part of a Result.
type LockResult struct {
	Granted bool
	Queued  bool
	// Conflict is a lock that refused the request (Granted and Queued
	// false), or one that a queued request waits for.
	Conflict *Lock
	// Grants are the waiters this command granted (an unlock, a cancel or
	// an expiry freed them): their nodes wake them.
	Grants []LockGrant
	// Lost lists, for OpLockExpire, the inodes where the session had locks
	// or waits: its node marks them (a holder then sees EIO).
	Lost []Ino
	// RightSeq is the lock right granted with the lock (RightCmd.Cache),
	// or, with Recall, the right held by another session.
	RightSeq uint64
	// Recall is the session holding the inode's lock right when another
	// one asked: nothing was decided, the holder gives the right back
	// (lockrights.go), and the asker asks again.
	Recall *LockOwner
}

// LockGrant is a waiter that was granted.
type LockGrant struct {
	Ino  Ino
	Lock Lock
}

// LockSession is a node's lock session as the log knows it.
type LockSession struct {
	Node    uint64
	Epoch   uint64
	LeaseNs int64
	RenewNs int64 // log time of the last renewal (OpLock or OpLockSession)
	Expired bool  // expired by OpLockExpire: its locks are gone
	Inos    []Ino // inodes where it holds or waits for locks, sorted
}

// Lock errors (Result.Err).
var (
	ErrDeadlock = errors.New("meta: lock wait would deadlock")
	ErrLockLost = errors.New("meta: the node's lock session expired; its locks were released")
)

// maxLockEntries bounds the locks and waiters of one inode, and
// maxDeadlockDepth the owners a deadlock check follows (Linux: 10).
const (
	maxLockEntries   = 4096
	maxDeadlockDepth = 16
	maxLockInos      = 1 << 20
	lockVersion      = 1
)

// lockState is the table of one inode: granted locks and FIFO waiters.
type lockState struct {
	Path    string // last known "bucket/path" (LockCmd.Path)
	Held    []Lock
	Waiting []Lock
	// Right is the holder of the inode's lock right (lockrights.go):
	// while set, Held and Waiting are as they were at the grant, and the
	// holder's own table is the inode's.
	Right *LockRight
}

func (s *lockState) empty() bool { return len(s.Held) == 0 && len(s.Waiting) == 0 && s.Right == nil }

func overlaps(a, b *Lock) bool { return a.Start <= b.End && b.Start <= a.End }

// Conflicts reports whether a and b cannot both be held: different
// owners, one family, overlapping ranges, one of them a write lock.
func (a *Lock) Conflicts(b *Lock) bool {
	return a.Owner != b.Owner && a.Kind == b.Kind && overlaps(a, b) &&
		(a.Type == LockWrite || b.Type == LockWrite)
}

// conflict returns the first held lock that conflicts with l, or nil.
func (s *lockState) conflict(l *Lock) *Lock {
	for i := range s.Held {
		if s.Held[i].Conflicts(l) {
			return &s.Held[i]
		}
	}
	return nil
}

// remove drops owner's locks of kind (0: every kind) in [start, end],
// splitting POSIX ranges that stick out. It reports whether anything went.
func (s *lockState) remove(owner LockOwner, kind LockKind, start, end uint64) bool {
	var out []Lock
	changed := false
	for _, h := range s.Held {
		if h.Owner != owner || (kind != 0 && h.Kind != kind) || h.End < start || h.Start > end {
			out = append(out, h)
			continue
		}
		changed = true
		if h.Start < start {
			lo := h
			lo.End = start - 1
			out = append(out, lo)
		}
		if h.End > end {
			hi := h
			hi.Start = end + 1
			out = append(out, hi)
		}
	}
	s.Held = out
	return changed
}

// adjacent reports whether a ends right before b starts, or b before a.
func adjacent(a, b *Lock) bool {
	return (a.End != LockEOF && a.End+1 == b.Start) || (b.End != LockEOF && b.End+1 == a.Start)
}

// grant adds l to the held locks. A POSIX lock replaces its owner's locks
// in its range and merges with its owner's touching locks of the same
// type (fcntl(2)); a flock lock replaces its owner's flock lock.
func (s *lockState) grant(l Lock) {
	l.WaitID = 0
	if l.Kind == LockFlock {
		s.remove(l.Owner, LockFlock, 0, LockEOF)
		s.Held = append(s.Held, l)
		s.sort()
		return
	}
	var out []Lock
	for _, h := range s.Held {
		if h.Owner != l.Owner || h.Kind != LockPOSIX {
			out = append(out, h)
			continue
		}
		if h.Type == l.Type && (overlaps(&h, &l) || adjacent(&h, &l)) {
			l.Start, l.End = min(l.Start, h.Start), max(l.End, h.End)
			l.SinceNs = min(l.SinceNs, h.SinceNs)
			continue
		}
		if !overlaps(&h, &l) {
			out = append(out, h)
			continue
		}
		if h.Start < l.Start {
			lo := h
			lo.End = l.Start - 1
			out = append(out, lo)
		}
		if h.End > l.End {
			hi := h
			hi.Start = l.End + 1
			out = append(out, hi)
		}
	}
	s.Held = append(out, l)
	s.sort()
}

func (s *lockState) sort() {
	slices.SortStableFunc(s.Held, func(a, b Lock) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Start, b.Start),
			cmp.Compare(a.Owner.Node, b.Owner.Node), cmp.Compare(a.Owner.Epoch, b.Owner.Epoch),
			cmp.Compare(a.Owner.ID, b.Owner.ID))
	})
}

// wake grants, in FIFO order, every waiter that no longer conflicts with
// a held lock; a waiter that still conflicts is skipped and keeps its
// place.
func (s *lockState) wake(ino Ino) []LockGrant {
	var grants []LockGrant
	var still []Lock
	for _, w := range s.Waiting {
		if s.conflict(&w) != nil {
			still = append(still, w)
			continue
		}
		grants = append(grants, LockGrant{Ino: ino, Lock: w})
		s.grant(w)
	}
	s.Waiting = still
	return grants
}

// hasSession reports whether the session has a lock, a waiter or the
// lock right here.
func (s *lockState) hasSession(node, epoch uint64) bool {
	if s.Right.heldBy(node, epoch) {
		return true
	}
	for _, l := range slices.Concat(s.Held, s.Waiting) {
		if l.Owner.Node == node && l.Owner.Epoch == epoch {
			return true
		}
	}
	return false
}

// dropSession removes every lock and waiter of a session.
func (s *lockState) dropSession(node, epoch uint64) {
	if s.Right.heldBy(node, epoch) {
		s.Right = nil
	}
	keep := func(l Lock) bool { return l.Owner.Node != node || l.Owner.Epoch != epoch }
	s.Held = slices.DeleteFunc(s.Held, func(l Lock) bool { return !keep(l) })
	s.Waiting = slices.DeleteFunc(s.Waiting, func(l Lock) bool { return !keep(l) })
}
