package meta

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
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
}

func (s *lockState) empty() bool { return len(s.Held) == 0 && len(s.Waiting) == 0 }

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

// hasSession reports whether the session has a lock or a waiter here.
func (s *lockState) hasSession(node, epoch uint64) bool {
	for _, l := range slices.Concat(s.Held, s.Waiting) {
		if l.Owner.Node == node && l.Owner.Epoch == epoch {
			return true
		}
	}
	return false
}

// dropSession removes every lock and waiter of a session.
func (s *lockState) dropSession(node, epoch uint64) {
	keep := func(l Lock) bool { return l.Owner.Node != node || l.Owner.Epoch != epoch }
	s.Held = slices.DeleteFunc(s.Held, func(l Lock) bool { return !keep(l) })
	s.Waiting = slices.DeleteFunc(s.Waiting, func(l Lock) bool { return !keep(l) })
}

// --- keys and encodings ---

// Lock keys: the table of an inode, a session, and the waits of an owner
// (for deadlock detection).
const (
	pLock      = 'l'
	pLockSess  = 's'
	pLockWaits = 'w'
)

func lockKey(ino Ino) []byte { return binary.BigEndian.AppendUint64([]byte{pLock}, uint64(ino)) }

func lockSessionKey(node uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{pLockSess}, node)
}

func ownerWaitsPrefix(o LockOwner) []byte {
	k := binary.BigEndian.AppendUint64([]byte{pLockWaits}, o.Node)
	k = binary.BigEndian.AppendUint64(k, o.Epoch)
	return binary.BigEndian.AppendUint64(k, o.ID)
}

func ownerWaitKey(o LockOwner, ino Ino) []byte {
	return binary.BigEndian.AppendUint64(ownerWaitsPrefix(o), uint64(ino))
}

func appendLock(e *encoder, l *Lock) {
	e.uvarint(l.Owner.Node)
	e.uvarint(l.Owner.Epoch)
	e.uvarint(l.Owner.ID)
	e.byte1(byte(l.Kind))
	e.byte1(byte(l.Type))
	e.uvarint(l.Start)
	e.uvarint(l.End)
	e.uvarint(uint64(l.Pid))
	e.uvarint(l.WaitID)
	e.varint(l.SinceNs)
}

func decodeLock(d *decoder) Lock {
	var l Lock
	l.Owner.Node = d.uvarint()
	l.Owner.Epoch = d.uvarint()
	l.Owner.ID = d.uvarint()
	l.Kind = LockKind(d.byte1())
	l.Type = LockType(d.byte1())
	l.Start = d.uvarint()
	l.End = d.uvarint()
	l.Pid = d.u32()
	l.WaitID = d.uvarint()
	l.SinceNs = d.varint()
	return l
}

func appendLockCmd(e *encoder, c *LockCmd) {
	e.uvarint(uint64(c.Ino))
	appendLock(e, &c.Lock)
	e.bool1(c.Wait)
	e.str(c.Path)
	e.varint(c.LeaseNs)
	e.varint(c.RenewNs)
}

func decodeLockCmd(d *decoder) *LockCmd {
	c := &LockCmd{Ino: Ino(d.uvarint())}
	c.Lock = decodeLock(d)
	c.Wait = d.bool1()
	c.Path = d.str()
	c.LeaseNs = d.varint()
	c.RenewNs = d.varint()
	return c
}

func encodeLockState(s *lockState) []byte {
	e := encoder{}
	e.byte1(lockVersion)
	e.str(s.Path)
	e.uvarint(uint64(len(s.Held)))
	for i := range s.Held {
		appendLock(&e, &s.Held[i])
	}
	e.uvarint(uint64(len(s.Waiting)))
	for i := range s.Waiting {
		appendLock(&e, &s.Waiting[i])
	}
	return e.b
}

func decodeLockState(p []byte) (*lockState, error) {
	d := decoder{b: p}
	if v := d.byte1(); d.err == nil && v != lockVersion {
		return nil, errCorrupt("lock table version %d", v)
	}
	s := &lockState{Path: d.str()}
	for n := d.count(maxLockEntries); n > 0 && d.err == nil; n-- {
		s.Held = append(s.Held, decodeLock(&d))
	}
	for n := d.count(maxLockEntries); n > 0 && d.err == nil; n-- {
		s.Waiting = append(s.Waiting, decodeLock(&d))
	}
	if err := d.done(); err != nil {
		return nil, fmt.Errorf("decode lock table: %w", err)
	}
	return s, nil
}

func encodeLockSession(s *LockSession) []byte {
	e := encoder{}
	e.byte1(lockVersion)
	e.uvarint(s.Epoch)
	e.varint(s.LeaseNs)
	e.varint(s.RenewNs)
	e.bool1(s.Expired)
	e.uvarint(uint64(len(s.Inos)))
	for _, ino := range s.Inos {
		e.uvarint(uint64(ino))
	}
	return e.b
}

func decodeLockSession(node uint64, p []byte) (*LockSession, error) {
	d := decoder{b: p}
	if v := d.byte1(); d.err == nil && v != lockVersion {
		return nil, errCorrupt("lock session version %d", v)
	}
	s := &LockSession{Node: node, Epoch: d.uvarint(), LeaseNs: d.varint(), RenewNs: d.varint(), Expired: d.bool1()}
	for n := d.count(maxLockInos); n > 0 && d.err == nil; n-- {
		s.Inos = append(s.Inos, Ino(d.uvarint()))
	}
	if err := d.done(); err != nil {
		return nil, fmt.Errorf("decode lock session: %w", err)
	}
	return s, nil
}

// --- readers ---

func (r *Reader) lockState(ino Ino) (*lockState, error) {
	v, ok, err := r.get(lockKey(ino))
	if err != nil || !ok {
		return &lockState{}, err
	}
	return decodeLockState(v)
}

// Locks returns the granted locks and the waiters of ino, in order.
func (r *Reader) Locks(ino Ino) (held, waiting []Lock, err error) {
	s, err := r.lockState(ino)
	if err != nil {
		return nil, nil, err
	}
	return s.Held, s.Waiting, nil
}

// LockTable is the table of one inode (Reader.AllLocks).
type LockTable struct {
	Ino     Ino
	Path    string // "bucket/path" as the last requester knew it
	Held    []Lock
	Waiting []Lock
}

// LockConflict returns the first granted lock of ino that conflicts with
// l (F_GETLK), or nil.
func (r *Reader) LockConflict(ino Ino, l Lock) (*Lock, error) {
	s, err := r.lockState(ino)
	if err != nil {
		return nil, err
	}
	return s.conflict(&l), nil
}

// AllLocks calls fn for every inode with locks or waiters, in inode order,
// until it returns false.
func (r *Reader) AllLocks(fn func(LockTable) bool) error {
	var derr error
	err := r.r.Scan([]byte{pLock}, []byte{pLock + 1}, func(k, v []byte) bool {
		if len(k) != 9 {
			derr = errCorrupt("lock key of %d bytes", len(k))
			return false
		}
		s, err := decodeLockState(v)
		if err != nil {
			derr = err
			return false
		}
		return fn(LockTable{Ino: Ino(binary.BigEndian.Uint64(k[1:])), Path: s.Path, Held: s.Held, Waiting: s.Waiting})
	})
	return cmp.Or(err, derr)
}

// LockSession returns node's lock session, or nil if it has none.
func (r *Reader) LockSession(node uint64) (*LockSession, error) {
	v, ok, err := r.get(lockSessionKey(node))
	if err != nil || !ok {
		return nil, err
	}
	return decodeLockSession(node, v)
}

// LockSessions returns every node's lock session, by node.
func (r *Reader) LockSessions() ([]*LockSession, error) {
	var out []*LockSession
	var derr error
	err := r.r.Scan([]byte{pLockSess}, []byte{pLockSess + 1}, func(k, v []byte) bool {
		if len(k) != 9 {
			derr = errCorrupt("lock session key of %d bytes", len(k))
			return false
		}
		s, err := decodeLockSession(binary.BigEndian.Uint64(k[1:]), v)
		if err != nil {
			derr = err
			return false
		}
		out = append(out, s)
		return true
	})
	return out, cmp.Or(err, derr)
}

// --- apply ---

func (a *applier) putLockState(ino Ino, s *lockState) {
	if s.empty() {
		a.t.del(lockKey(ino))
		return
	}
	a.t.set(lockKey(ino), encodeLockState(s))
}

func (a *applier) putSession(s *LockSession) {
	a.t.set(lockSessionKey(s.Node), encodeLockSession(s))
}

// syncSession keeps session s's inode list true for ino after a change.
func (a *applier) syncSession(s *LockSession, ino Ino, st *lockState) {
	i, found := slices.BinarySearch(s.Inos, ino)
	has := st.hasSession(s.Node, s.Epoch)
	switch {
	case has && !found:
		s.Inos = slices.Insert(s.Inos, i, ino)
	case !has && found:
		s.Inos = slices.Delete(s.Inos, i, i+1)
	}
}

// syncWaits keeps the owner-waits index of owner on ino true.
func (a *applier) syncWaits(owner LockOwner, ino Ino, st *lockState) {
	for _, w := range st.Waiting {
		if w.Owner == owner {
			a.t.set(ownerWaitKey(owner, ino), nil)
			return
		}
	}
	a.t.del(ownerWaitKey(owner, ino))
}

// lockSession returns the command's session, renewed, or ErrLockLost when
// the log already expired it or a newer epoch of the node replaced it. A
// newer epoch replaces the node's old session, whose locks go (the node
// restarted: its processes and their locks are gone).
func (a *applier) lockSession(node, epoch uint64, leaseNs int64) (*LockSession, []LockGrant, error) {
	if node == 0 || epoch == 0 {
		return nil, nil, fmt.Errorf("%w: lock session of node %d epoch %d", ErrInvalid, node, epoch)
	}
	s, err := a.r.LockSession(node)
	if err != nil {
		return nil, nil, err
	}
	var grants []LockGrant
	switch {
	case s == nil:
		s = &LockSession{Node: node, Epoch: epoch}
	case epoch < s.Epoch || (epoch == s.Epoch && s.Expired):
		return nil, nil, ErrLockLost
	case epoch > s.Epoch:
		if grants, err = a.dropSession(s); err != nil {
			return nil, nil, err
		}
		s = &LockSession{Node: node, Epoch: epoch}
	}
	s.RenewNs = a.now
	if leaseNs > 0 {
		s.LeaseNs = leaseNs
	}
	return s, grants, nil
}

// dropSession releases every lock and wait of s and grants the waiters
// that frees.
func (a *applier) dropSession(s *LockSession) ([]LockGrant, error) {
	var grants []LockGrant
	for _, ino := range s.Inos {
		st, err := a.r.lockState(ino)
		if err != nil {
			return nil, err
		}
		var owners []LockOwner
		for _, w := range st.Waiting {
			if w.Owner.Node == s.Node && w.Owner.Epoch == s.Epoch {
				owners = append(owners, w.Owner)
			}
		}
		st.dropSession(s.Node, s.Epoch)
		g := st.wake(ino)
		grants = append(grants, g...)
		for _, o := range owners {
			a.syncWaits(o, ino, st)
		}
		if err := a.afterWake(ino, st, g, s.Node); err != nil {
			return nil, err
		}
		a.putLockState(ino, st)
	}
	s.Inos = nil
	return grants, nil
}

// afterWake updates the sessions and wait indexes of granted waiters
// (except skip's session, which the caller keeps).
func (a *applier) afterWake(ino Ino, st *lockState, grants []LockGrant, skip uint64) error {
	for _, g := range grants {
		a.syncWaits(g.Lock.Owner, ino, st)
		if g.Lock.Owner.Node == skip {
			continue
		}
		s, err := a.r.LockSession(g.Lock.Owner.Node)
		if err != nil {
			return err
		}
		if s != nil && s.Epoch == g.Lock.Owner.Epoch {
			a.syncSession(s, ino, st)
			a.putSession(s)
		}
	}
	return nil
}

func (a *applier) checkLockCmd() (*LockCmd, error) {
	c := a.cmd.Lock
	if c == nil {
		return nil, fmt.Errorf("%w: %v without a lock", ErrInvalid, a.cmd.Op)
	}
	l := &c.Lock
	if a.cmd.Op == OpLock {
		if c.Ino == 0 || l.Start > l.End ||
			(l.Kind != LockPOSIX && l.Kind != LockFlock && !(l.Kind == 0 && l.Type == LockUnlock)) ||
			(l.Type != LockRead && l.Type != LockWrite && l.Type != LockUnlock) {
			return nil, fmt.Errorf("%w: lock request %+v", ErrInvalid, *l)
		}
		if c.Wait && l.WaitID == 0 {
			return nil, fmt.Errorf("%w: a waiting lock request needs a wait id", ErrInvalid)
		}
	}
	return c, nil
}

// lock applies OpLock.
func (a *applier) lock() (Result, error) {
	c, err := a.checkLockCmd()
	if err != nil {
		return Result{}, err
	}
	req := c.Lock
	req.SinceNs = a.now
	if req.Kind == LockFlock {
		req.Start, req.End = 0, LockEOF
	}
	s, grants, err := a.lockSession(req.Owner.Node, req.Owner.Epoch, c.LeaseNs)
	if err != nil {
		return Result{}, err
	}
	st, err := a.r.lockState(c.Ino)
	if err != nil {
		return Result{}, err
	}
	if c.Path != "" {
		st.Path = c.Path
	}
	res := &LockResult{}
	switch {
	case req.Type == LockUnlock:
		// A close (Kind 0) drops held locks only: a waiter is blocked on an
		// open description, and a POSIX process's other threads keep
		// waiting after one of them closes, as on Linux.
		st.remove(req.Owner, req.Kind, req.Start, req.End)
		res.Granted = true
	default:
		if req.Kind == LockFlock {
			// flock(2) converts by dropping the old lock first, so a
			// conversion that has to wait (or fails) loses it.
			for _, h := range st.Held {
				if h.Owner == req.Owner && h.Kind == LockFlock && h.Type == req.Type {
					res.Granted = true
				}
			}
			if !res.Granted {
				st.remove(req.Owner, LockFlock, 0, LockEOF)
			}
		}
		if res.Granted {
			break
		}
		conflict := st.conflict(&req)
		switch {
		case conflict == nil:
			st.grant(req)
			res.Granted = true
		case !c.Wait:
			cl := *conflict
			res.Conflict = &cl
		default:
			if req.Kind == LockPOSIX {
				dead, err := a.deadlock(req, c.Ino, st)
				if err != nil {
					return Result{}, err
				}
				if dead {
					return Result{}, ErrDeadlock
				}
			}
			if len(st.Waiting) >= maxLockEntries {
				return Result{}, fmt.Errorf("%w: too many lock waiters on inode %d", ErrInvalid, c.Ino)
			}
			cl := *conflict
			res.Conflict = &cl
			res.Queued = true
			st.Waiting = append(st.Waiting, req)
			a.syncWaits(req.Owner, c.Ino, st)
		}
	}
	if len(st.Held) > maxLockEntries {
		return Result{}, fmt.Errorf("%w: too many locks on inode %d", ErrInvalid, c.Ino)
	}
	g := st.wake(c.Ino)
	if err := a.afterWake(c.Ino, st, g, s.Node); err != nil {
		return Result{}, err
	}
	res.Grants = append(grants, g...)
	a.syncSession(s, c.Ino, st)
	a.putSession(s)
	a.putLockState(c.Ino, st)
	return Result{Lock: res}, nil
}

// deadlock reports whether req, blocked on ino, would wait for itself:
// following each blocking owner to what it waits for reaches req's owner.
func (a *applier) deadlock(req Lock, ino Ino, st *lockState) (bool, error) {
	blockers := func(st *lockState, w *Lock) []LockOwner {
		var out []LockOwner
		for i := range st.Held {
			if st.Held[i].Conflicts(w) {
				out = append(out, st.Held[i].Owner)
			}
		}
		return out
	}
	frontier := blockers(st, &req)
	seen := map[LockOwner]bool{}
	for depth := 0; depth < maxDeadlockDepth && len(frontier) > 0; depth++ {
		var next []LockOwner
		for _, o := range frontier {
			if o == req.Owner {
				return true, nil
			}
			if seen[o] {
				continue
			}
			seen[o] = true
			var inos []Ino
			p := ownerWaitsPrefix(o)
			if err := a.t.Scan(p, prefixEnd(p), func(k, _ []byte) bool {
				inos = append(inos, Ino(binary.BigEndian.Uint64(k[len(p):])))
				return true
			}); err != nil {
				return false, err
			}
			for _, wi := range inos {
				ws := st
				if wi != ino {
					var err error
					if ws, err = a.r.lockState(wi); err != nil {
						return false, err
					}
				}
				for i := range ws.Waiting {
					if ws.Waiting[i].Owner == o && ws.Waiting[i].Kind == LockPOSIX {
						next = append(next, blockers(ws, &ws.Waiting[i])...)
					}
				}
			}
		}
		frontier = next
	}
	return false, nil
}

// lockCancel applies OpLockCancel: an interrupted wait leaves its queue.
// Granted reports that the wait was no longer queued (granted before the
// cancel, or unknown).
func (a *applier) lockCancel() (Result, error) {
	c, err := a.checkLockCmd()
	if err != nil {
		return Result{}, err
	}
	st, err := a.r.lockState(c.Ino)
	if err != nil {
		return Result{}, err
	}
	n := len(st.Waiting)
	st.Waiting = slices.DeleteFunc(st.Waiting, func(w Lock) bool {
		return w.Owner == c.Lock.Owner && w.WaitID == c.Lock.WaitID
	})
	if len(st.Waiting) == n {
		return Result{Lock: &LockResult{Granted: true}}, nil
	}
	a.syncWaits(c.Lock.Owner, c.Ino, st)
	g := st.wake(c.Ino) // a waiter that was only behind it never waits on a waiter, but keep the rule in one place
	if err := a.afterWake(c.Ino, st, g, 0); err != nil {
		return Result{}, err
	}
	s, err := a.r.LockSession(c.Lock.Owner.Node)
	if err != nil {
		return Result{}, err
	}
	if s != nil && s.Epoch == c.Lock.Owner.Epoch {
		a.syncSession(s, c.Ino, st)
		a.putSession(s)
	}
	a.putLockState(c.Ino, st)
	return Result{Lock: &LockResult{Grants: g}}, nil
}

// lockRenew applies OpLockSession: the node's session is renewed (or
// started). ErrLockLost if the log expired it.
func (a *applier) lockRenew() (Result, error) {
	c, err := a.checkLockCmd()
	if err != nil {
		return Result{}, err
	}
	s, grants, err := a.lockSession(c.Lock.Owner.Node, c.Lock.Owner.Epoch, c.LeaseNs)
	if err != nil {
		return Result{}, err
	}
	a.putSession(s)
	return Result{Lock: &LockResult{Granted: true, Grants: grants}}, nil
}

// lockExpire applies OpLockExpire: a session that has not renewed since
// RenewNs loses its locks and waits. ErrPrecondition if it renewed.
func (a *applier) lockExpire() (Result, error) {
	c, err := a.checkLockCmd()
	if err != nil {
		return Result{}, err
	}
	s, err := a.r.LockSession(c.Lock.Owner.Node)
	if err != nil {
		return Result{}, err
	}
	if s == nil || s.Epoch != c.Lock.Owner.Epoch || s.Expired || s.RenewNs != c.RenewNs {
		return Result{}, fmt.Errorf("%w: the lock session renewed or is gone", ErrPrecondition)
	}
	lost := s.Inos
	grants, err := a.dropSession(s)
	if err != nil {
		return Result{}, err
	}
	s.Expired = true
	a.putSession(s)
	return Result{Lock: &LockResult{Granted: true, Grants: grants, Lost: lost}}, nil
}
