package store

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairn-fs/cairn/internal/clock"

	"github.com/cairn-fs/cairn/internal/meta"
)

// File locks held across the cluster (design 0006). The table lives in
// the namespace's state machine: a request is one commit, decided in the
// apply, the same on every node. This node's locks belong to its lock
// session, which it renews through the log while it has any; the leader
// expires a session that stopped renewing, and a node that cannot renew
// considers its locks lost a margin before that can happen.

// LockKind is the family of a lock: POSIX byte ranges (fcntl and OFD
// locks, one family) or flock(2). Locks of different families never
// conflict.
type LockKind = meta.LockKind

// LockType is what a lock request asks for.
type LockType = meta.LockType

// Lock families and types.
const (
	LockPOSIX  = meta.LockPOSIX
	LockFlock  = meta.LockFlock
	LockRead   = meta.LockRead
	LockWrite  = meta.LockWrite
	LockUnlock = meta.LockUnlock
	LockEOF    = meta.LockEOF
)

// Lock errors.
var (
	// ErrWouldBlock: another owner holds a conflicting lock (EAGAIN).
	ErrWouldBlock = errors.New("store: lock held by another owner")
	// ErrDeadlock: the wait would close a cycle of waiting owners (EDEADLK).
	ErrDeadlock = errors.New("store: lock wait would deadlock")
	// ErrLockLost: this node's lock session expired (it was cut off from
	// the quorum for longer than its lease), so the cluster released the
	// locks it held on the file (EIO).
	ErrLockLost = errors.New("store: this node lost its locks on the file (lock lease expired)")
	// ErrNotUpgraded: the cluster's log version does not carry the
	// command yet, because a member still runs an older binary (a rolling
	// upgrade is unfinished: docs/operations.md, "Upgrades"). For a lock:
	// ENOLCK.
	ErrNotUpgraded = errors.New("store: not available until every node is upgraded")
)

// LockRequest is a lock, an unlock or a test (F_GETLK) by one owner.
type LockRequest struct {
	// Ino is the file's inode number (ObjectInfo.Ino); Path its
	// "bucket/path", shown by status pages.
	Ino  uint64
	Path string
	// Owner is the kernel's lock owner: a process's file table (POSIX) or
	// an open file description (flock, OFD). Pid is the process.
	Owner uint64
	Pid   uint32
	Kind  LockKind
	Type  LockType
	// Start and End (inclusive, LockEOF: to the end) are the byte range of
	// a POSIX lock; flock locks the whole file.
	Start, End uint64
	// Wait blocks until the lock is granted (F_SETLKW, flock without
	// LOCK_NB); the context's end cancels the wait (EINTR).
	Wait bool
}

// LockInfo describes a held lock or a waiter.
type LockInfo struct {
	Ino     uint64    `json:"ino"`
	Path    string    `json:"path,omitempty"`
	Node    uint64    `json:"node,string"`
	Owner   uint64    `json:"owner,string"`
	Pid     uint32    `json:"pid"`
	Kind    string    `json:"kind"` // "posix" or "flock"
	Write   bool      `json:"write"`
	Start   uint64    `json:"start,string"`
	End     uint64    `json:"end,string"` // LockEOF: to the end of the file
	Since   time.Time `json:"since"`
	Waiting bool      `json:"waiting,omitempty"`
}

// Locker is the store's API for file locks (the mount's flock and fcntl).
// Local implements it.
type Locker interface {
	// Lock takes, waits for or releases (Type LockUnlock) a lock. A
	// refused request returns ErrWouldBlock and the conflicting lock.
	Lock(ctx context.Context, req LockRequest) (conflict *LockInfo, err error)
	// TestLock returns a lock that would refuse req (F_GETLK), or nil.
	TestLock(ctx context.Context, req LockRequest) (*LockInfo, error)
	// ReleaseOwner drops every lock and wait of owner on ino (a close). It
	// costs nothing when this node holds no lock on ino.
	ReleaseOwner(ctx context.Context, ino uint64, owner uint64) error
	// HasLocks reports whether owner, on this node, holds or waits for a
	// lock on ino (a local read).
	HasLocks(ino, owner uint64) bool
	// LockLost reports whether this node lost its locks on ino (its
	// session expired while it held some) and no lock was taken since.
	LockLost(ino uint64) bool
	// LockRight names this node's lock right on ino (lockrights.go), 0
	// if it holds none: its requests are decided here, and what was
	// written under its locks is published (LockFlusher) before the
	// right goes back, not at each release. A right that is given back
	// and taken again has another name.
	LockRight(ino uint64) uint64
	// Locks lists every lock and waiter of the cluster.
	Locks(ctx context.Context) ([]LockInfo, error)
}

var _ Locker = (*Local)(nil)

// Default lock lease, and the margin by which a node that cannot renew
// gives its locks up before the leader may expire them.
const (
	DefaultLockLease = 5 * time.Second
	lockLostMargin   = time.Second
)

// grantOutcome ends a wait: granted (here, by a release under this
// node's lock right: local), or the session was lost.
type grantOutcome struct {
	err   error
	local bool
}

// lockSessions is this node's side of the lock table.
type lockSessions struct {
	node  uint64
	lease time.Duration

	mu      sync.Mutex
	epoch   uint64
	mine    map[uint64]bool // inodes where the session has locks or waits (the log's view)
	lost    map[uint64]bool // inodes whose locks the node lost
	waits   map[uint64]chan grantOutcome
	renewed time.Time // start of the last lock command or renewal that committed
	nextID  uint64
	anyLost atomic.Bool
	// renewing: a renewal is in flight (renewLocks)
	renewing atomic.Bool
	// prev is the session this process gave up last (loseLocks), which the
	// next claim continues if the log has not expired it (owners.go).
	prev uint64
	// rights are the inodes whose lock right this node holds, and
	// rightWake is closed (and replaced) when a right changes hands in
	// the log (lockrights.go).
	rights    map[uint64]*heldRight
	rightWake chan struct{}

	stats lockCounters

	// leader side: the last renewal seen of each session, and when
	seen       map[uint64]seenRenewal
	wasLeader  bool
	lastRenew  time.Time
	renewEvery time.Duration
}

// LockStats counts this node's lock requests (Locker), for metrics.
type LockStats struct {
	// Commits: lock commands this node committed (requests, unlocks,
	// cancels; renewals of the session not counted).
	Commits uint64 `json:"commits"`
	// Grants: requests granted (at once or after a wait); Waits: requests
	// that waited; Refused: refused because another owner held a
	// conflicting lock (EAGAIN) or the wait would deadlock (EDEADLK).
	Grants  uint64 `json:"grants"`
	Waits   uint64 `json:"waits"`
	Refused uint64 `json:"refused"`
	// Lost: times this node's lock session expired while it held locks.
	Lost uint64 `json:"lost"`
	// LocalGrants: grants decided here, under the inode's lock right,
	// with no commit (part of Grants). Recalled: rights another node
	// asked this one to give back; Returned: rights given back (recalled,
	// idle, or ahead of a POSIX wait). Rights: rights held now.
	LocalGrants uint64 `json:"local_grants"`
	Recalled    uint64 `json:"recalled"`
	Returned    uint64 `json:"returned"`
	Rights      int    `json:"rights"`
	// Held: the files on which this node's session holds or waits for
	// locks now (the log's view).
	Held int `json:"files"`
}

type lockCounters struct {
	commits, grants, waits, refused, lost, localGrants, recalled, returned atomic.Uint64
}

// LockStats returns this node's lock counters.
func (s *Local) LockStats() LockStats {
	ls := s.locks
	c := &ls.stats
	ls.mu.Lock()
	held, rights := len(ls.mine), len(ls.rights)
	ls.mu.Unlock()
	return LockStats{Commits: c.commits.Load(), Grants: c.grants.Load(), Waits: c.waits.Load(),
		Refused: c.refused.Load(), Lost: c.lost.Load(), Held: held,
		LocalGrants: c.localGrants.Load(), Recalled: c.recalled.Load(), Returned: c.returned.Load(), Rights: rights}
}

type seenRenewal struct {
	epoch   uint64
	renewNs int64
	at      time.Time
}

func newLockSessions(node uint64, lease time.Duration, now time.Time) *lockSessions {
	return &lockSessions{node: node, lease: lease, epoch: uint64(max(now.UnixNano(), 1)),
		mine: map[uint64]bool{}, lost: map[uint64]bool{}, waits: map[uint64]chan grantOutcome{},
		rights: map[uint64]*heldRight{}, rightWake: make(chan struct{}),
		seen: map[uint64]seenRenewal{}, renewEvery: lease / 3}
}

func (l *lockSessions) owner(id uint64) meta.LockOwner {
	l.mu.Lock()
	defer l.mu.Unlock()
	return meta.LockOwner{Node: l.node, Epoch: l.epoch, ID: id}
}

func lockInfo(ino meta.Ino, path string, l *meta.Lock, waiting bool) *LockInfo {
	kind := "posix"
	if l.Kind == meta.LockFlock {
		kind = "flock"
	}
	return &LockInfo{Ino: uint64(ino), Path: path, Node: l.Owner.Node, Owner: l.Owner.ID, Pid: l.Pid,
		Kind: kind, Write: l.Type == meta.LockWrite, Start: l.Start, End: l.End,
		Since: time.Unix(0, l.SinceNs).UTC(), Waiting: waiting}
}

// proposeLock proposes a lock command of this node's session. A session
// the log expired is replaced by a new one (ErrLockLost is returned, and
// the node's locks are marked lost).
func (s *Local) proposeLock(ctx context.Context, op meta.Op, c meta.LockCmd, right ...*meta.RightCmd) (meta.Result, error) {
	ls := s.locks
	start := s.cfg.Clock.Now()
	c.LeaseNs = int64(ls.lease)
	cmd := meta.Command{Op: op, TimeNs: s.cfg.Now().UnixNano(), Lock: &c}
	if len(right) > 0 {
		cmd.Right = right[0]
	}
	res, err := s.log.Propose(ctx, cmd)
	if err == nil {
		err = res.Err
	}
	switch {
	case err == nil:
		ls.stats.commits.Add(1)
		ls.mu.Lock()
		if c.Lock.Owner.Epoch == ls.epoch && start.After(ls.renewed) {
			ls.renewed = start
		}
		ls.mu.Unlock()
		return res, nil
	case errors.Is(err, meta.ErrLockLost):
		s.loseLocks(c.Lock.Owner.Epoch, nil)
		return res, ErrLockLost
	case errors.Is(err, meta.ErrDeadlock):
		return res, ErrDeadlock
	case errors.Is(err, meta.ErrRightHeld):
		return res, err
	}
	return res, mapErr(err)
}

// Lock implements Locker: decided here under the inode's lock right if
// this node holds it (lockrights.go), else in the log, asking for the
// right with the lock; a request that finds another node holding the
// right waits for it to come back and asks again.
func (s *Local) Lock(ctx context.Context, req LockRequest) (*LockInfo, error) {
	if req.Type == LockUnlock && !s.HasLocks(req.Ino, req.Owner) {
		return nil, nil // nothing of the owner's to release
	}
	for {
		if info, err, done := s.lockCached(ctx, req); done {
			return info, err
		}
		ls := s.locks
		ls.mu.Lock()
		wake := ls.rightWake
		ls.mu.Unlock()
		info, err, recalled := s.lockInLog(ctx, req)
		if !recalled {
			return info, err
		}
		if s.HoldsLockRight(req.Ino) {
			continue // granted to this node meanwhile
		}
		if err := s.waitRecall(ctx, wake); err != nil {
			return nil, err
		}
	}
}

// lockInLog is Lock decided in the log. recalled: another node holds the
// inode's lock right (asked to give it back), nothing was decided.
func (s *Local) lockInLog(ctx context.Context, req LockRequest) (info *LockInfo, err error, recalled bool) {
	ls := s.locks
	owner := ls.owner(req.Owner)
	c := meta.LockCmd{Ino: meta.Ino(req.Ino), Path: req.Path, Wait: req.Wait && req.Type != LockUnlock,
		Lock: meta.Lock{Owner: owner, Kind: req.Kind, Type: req.Type, Start: req.Start, End: req.End, Pid: req.Pid}}
	var right *meta.RightCmd
	if req.Type != LockUnlock {
		ls.mu.Lock()
		if len(ls.rights) < maxRights {
			right = &meta.RightCmd{Cache: true}
		}
		ls.mu.Unlock()
	}
	var wait chan grantOutcome
	if c.Wait {
		ls.mu.Lock()
		ls.nextID++
		c.Lock.WaitID = ls.nextID
		wait = make(chan grantOutcome, 1)
		ls.waits[c.Lock.WaitID] = wait
		ls.mu.Unlock()
		defer func() {
			ls.mu.Lock()
			delete(ls.waits, c.Lock.WaitID)
			ls.mu.Unlock()
		}()
	}
	res, err := s.proposeLock(ctx, meta.OpLock, c, right)
	if errors.Is(err, meta.ErrRightHeld) {
		// Granted to this node since it looked: decide it here.
		return nil, nil, true
	}
	if err != nil {
		if errors.Is(err, ErrDeadlock) {
			ls.stats.refused.Add(1)
		}
		return nil, err, false
	}
	r := res.Lock
	switch {
	case r.Recall != nil:
		return nil, nil, true
	case r.Granted:
		if req.Type != LockUnlock {
			ls.stats.grants.Add(1)
		}
		s.locked(req.Ino)
		return nil, nil, false
	case !r.Queued:
		ls.stats.refused.Add(1)
		return lockInfo(c.Ino, req.Path, r.Conflict, false), ErrWouldBlock, false
	}
	ls.stats.waits.Add(1)
	select {
	case o := <-wait:
		if o.err == nil {
			ls.stats.grants.Add(1)
			s.locked(req.Ino)
		}
		return nil, o.err, false
	case <-ctx.Done():
	}
	// Interrupted: leave the queue.
	return nil, s.cancelWait(req.Ino, owner, c.Lock.WaitID, wait, ctx.Err()), false
}

// locked clears a lost mark: the file was locked again.
func (s *Local) locked(ino uint64) {
	ls := s.locks
	ls.mu.Lock()
	defer ls.mu.Unlock()
	ls.mine[ino] = true
	delete(ls.lost, ino)
	ls.anyLost.Store(len(ls.lost) > 0)
}

// TestLock implements Locker: a read of the table after a read barrier,
// so that it sees every lock change committed before it.
// Under this node's lock right it reads its own table; when another
// node holds the right, it has it given back first.
func (s *Local) TestLock(ctx context.Context, req LockRequest) (*LockInfo, error) {
	if req.Kind == LockFlock {
		req.Start, req.End = 0, LockEOF
	}
	ls := s.locks
	l := meta.Lock{Owner: ls.owner(req.Owner), Kind: req.Kind, Type: req.Type, Start: req.Start, End: req.End}
	for {
		ls.mu.Lock()
		hr := ls.rights[req.Ino]
		if hr != nil && !hr.returning {
			c := hr.table.Conflict(l)
			ls.mu.Unlock()
			if c == nil {
				return nil, nil
			}
			return lockInfo(meta.Ino(req.Ino), req.Path, c, false), nil
		}
		wake := ls.rightWake
		ls.mu.Unlock()
		if hr != nil {
			select {
			case <-hr.returned:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		if err := s.Barrier(ctx); err != nil {
			return nil, err
		}
		rt, err := s.meta.LockRight(meta.Ino(req.Ino))
		if err != nil {
			return nil, err
		}
		if rt == nil {
			c, err := s.meta.LockConflict(meta.Ino(req.Ino), l)
			if err != nil || c == nil {
				return nil, err
			}
			return lockInfo(meta.Ino(req.Ino), req.Path, c, false), nil
		}
		if s.HoldsLockRight(req.Ino) {
			continue // granted to this node since it looked: read its table
		}
		// Another node's: recall it, and read once it is back (or, if the
		// log still names this node, once its return is applied).
		_, err = s.proposeLock(ctx, meta.OpLock, meta.LockCmd{Ino: meta.Ino(req.Ino), Path: req.Path, Lock: l}, &meta.RightCmd{Recall: true})
		if err != nil && !errors.Is(err, meta.ErrRightHeld) {
			return nil, err
		}
		if err := s.waitRecall(ctx, wake); err != nil {
			return nil, err
		}
	}
}

// ReleaseOwner implements Locker.
func (s *Local) ReleaseOwner(ctx context.Context, ino uint64, owner uint64) error {
	if !s.HasLocks(ino, owner) {
		return nil // the owner has nothing here: no commit
	}
	// Kind 0: every held lock of the owner (waits are not a close's).
	_, err := s.Lock(ctx, LockRequest{Ino: ino, Owner: owner, Type: LockUnlock, End: LockEOF})
	if errors.Is(err, ErrLockLost) {
		return nil // nothing is held any more
	}
	return err
}

// HasLocks implements Locker.
func (s *Local) HasLocks(ino, owner uint64) bool {
	ls := s.locks
	ls.mu.Lock()
	if hr := ls.rights[ino]; hr != nil {
		has := hr.table.Has(meta.LockOwner{Node: ls.node, Epoch: ls.epoch, ID: owner})
		ls.mu.Unlock()
		return has
	}
	ls.mu.Unlock()
	if !s.locks.has(ino) {
		return false // the common case: a map lookup
	}
	o := s.locks.owner(owner)
	held, waiting, err := s.meta.Locks(meta.Ino(ino))
	if err != nil {
		return true // let the release decide
	}
	return slices.ContainsFunc(slices.Concat(held, waiting), func(l meta.Lock) bool { return l.Owner == o })
}

func (l *lockSessions) has(ino uint64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mine[ino]
}

// LockLost implements Locker.
func (s *Local) LockLost(ino uint64) bool {
	ls := s.locks
	if !ls.anyLost.Load() {
		return false
	}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.lost[ino]
}

// Locks implements Locker.
// An inode whose lock right this node holds shows its own table; one
// whose right another node holds shows the table as it was at the grant.
func (s *Local) Locks(ctx context.Context) ([]LockInfo, error) {
	var out []LockInfo
	ls := s.locks
	err := s.meta.AllLocks(func(t meta.LockTable) bool {
		ls.mu.Lock()
		if hr := ls.rights[uint64(t.Ino)]; hr != nil {
			t.Held, t.Waiting = hr.table.Locks()
		}
		ls.mu.Unlock()
		for i := range t.Held {
			out = append(out, *lockInfo(t.Ino, t.Path, &t.Held[i], false))
		}
		for i := range t.Waiting {
			out = append(out, *lockInfo(t.Ino, t.Path, &t.Waiting[i], true))
		}
		return true
	})
	return out, err
}

// loseLocks marks every inode of session epoch lost (plus inos), fails
// its waits and starts a new session. No-op for an epoch already left.
func (s *Local) loseLocks(epoch uint64, inos []meta.Ino) {
	ls := s.locks
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if epoch != ls.epoch {
		return
	}
	if len(ls.mine) > 0 || len(inos) > 0 {
		ls.stats.lost.Add(1)
	}
	for ino := range ls.mine {
		ls.lost[ino] = true
	}
	for _, ino := range inos {
		ls.lost[uint64(ino)] = true
	}
	n := len(ls.lost)
	ls.anyLost.Store(n > 0)
	clear(ls.mine)
	for ino, hr := range ls.rights {
		ls.lost[ino] = true
		if !hr.returning {
			close(hr.returned)
		}
	}
	ls.anyLost.Store(len(ls.lost) > 0)
	clear(ls.rights)
	ls.rightsChanged()
	for id, w := range ls.waits {
		w <- grantOutcome{err: ErrLockLost}
		delete(ls.waits, id)
	}
	next := uint64(s.cfg.Now().UnixNano())
	if sess, err := s.meta.LockSession(ls.node); err == nil && sess != nil {
		next = max(next, sess.Epoch+1)
	}
	ls.prev = ls.epoch
	ls.epoch = max(next, ls.epoch+1)
	ls.renewed = time.Time{}
	s.loseDirs() // owners.go: this node decides in them again only under a new claim
	if s.owners.everOwned.Load() {
		// Continue the session at once, so that what the mount queued under
		// its claims still applies if the log has not expired it.
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.continueSession()
		}()
	}
	if n > 0 {
		s.cfg.Logger.Warn("file locks lost: the lock session expired; writes to the files answer EIO until they are locked again",
			"files", n, "lease", ls.lease)
	}
}

// appliedLocks handles an applied lock command: wakes this node's
// granted waiters, and marks the locks lost when the log expired this
// node's session.
func (s *Local) appliedLocks(cmd *meta.Command, r *meta.Result) {
	ls := s.locks
	if r.Lock == nil {
		return
	}
	ls.mu.Lock()
	epoch := ls.epoch
	for _, g := range r.Lock.Grants {
		o := g.Lock.Owner
		if o.Node != ls.node || o.Epoch != epoch {
			continue
		}
		ls.mine[uint64(g.Ino)] = true
		if w, ok := ls.waits[g.Lock.WaitID]; ok {
			w <- grantOutcome{}
			delete(ls.waits, g.Lock.WaitID)
		}
	}
	ls.mu.Unlock()
	if cmd.Lock == nil {
		return // an OpOwn that started a new session: only its grants
	}
	s.appliedRight(cmd, r) // lockrights.go
	if cmd.Op == meta.OpLockExpire && cmd.Lock.Lock.Owner.Node == ls.node && r.Err == nil {
		s.loseLocks(cmd.Lock.Lock.Owner.Epoch, r.Lock.Lost)
		return
	}
	if cmd.Lock.Lock.Owner.Node == ls.node && cmd.Lock.Lock.Owner.Epoch == epoch && r.Err == nil {
		// The log's view of the session's inodes.
		if sess, err := s.meta.LockSession(ls.node); err == nil && sess != nil && sess.Epoch == epoch {
			ls.mu.Lock()
			next := map[uint64]bool{}
			for _, ino := range sess.Inos {
				next[uint64(ino)] = true
			}
			ls.mine = next
			ls.mu.Unlock()
		}
	}
}

// lockLoop renews this node's session while it has locks, gives them up
// when it cannot renew in time, and, on the leader, expires the sessions
// of nodes that stopped renewing.
func (s *Local) lockLoop() {
	defer s.wg.Done()
	ls := s.locks
	t := clock.NewTicker(s.cfg.Clock, max(ls.lease/10, 20*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		s.renewLocks()
		s.expireLocks()
		s.returnIdleRights() // lockrights.go
	}
}

func (s *Local) renewLocks() {
	ls := s.locks
	ls.mu.Lock()
	busy := len(ls.mine) > 0 || len(ls.waits) > 0 || len(ls.rights) > 0
	epoch, renewed, last := ls.epoch, ls.renewed, ls.lastRenew
	ls.mu.Unlock()
	if !busy {
		// Owned directories live with the session: the table's, and those
		// the log still names this node for (a session it continued).
		busy = s.owners.count() > 0
		if !busy {
			busy, _ = s.meta.OwnsDirs(ls.node)
		}
	}
	if !busy {
		return
	}
	now := s.cfg.Clock.Now()
	margin := min(lockLostMargin, ls.lease/3)
	if !renewed.IsZero() && now.Sub(renewed) > ls.lease-margin {
		s.loseLocks(epoch, nil)
		return
	}
	if now.Sub(renewed) < ls.renewEvery || now.Sub(last) < ls.renewEvery/2 {
		return
	}
	if !ls.renewing.CompareAndSwap(false, true) {
		return // a renewal is in flight
	}
	ls.mu.Lock()
	ls.lastRenew = now
	ls.mu.Unlock()
	// Off the loop: a renewal that hangs (no quorum) must not delay the
	// check above, which gives the locks up in time.
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer ls.renewing.Store(false)
		ctx, cancel := clock.WithTimeout(context.Background(), s.cfg.Clock, ls.lease)
		defer cancel()
		if _, err := s.proposeLock(ctx, meta.OpLockSession, meta.LockCmd{Lock: meta.Lock{Owner: meta.LockOwner{Node: ls.node, Epoch: epoch}}}); err != nil {
			s.cfg.Logger.Warn("renew the lock session", "err", err)
		}
	}()
}

func (s *Local) expireLocks() {
	ls := s.locks
	leader := s.cfg.IsLeader == nil || s.cfg.IsLeader()
	if !leader {
		ls.wasLeader = false
		return
	}
	now := s.cfg.Clock.Now()
	if !ls.wasLeader {
		// A new leader counts every lease from now: it cannot know when
		// the sessions last renewed by its own clock.
		ls.wasLeader = true
		clear(ls.seen)
	}
	sessions, err := s.meta.LockSessions()
	if err != nil {
		s.cfg.Logger.Warn("read lock sessions", "err", err)
		return
	}
	live := map[uint64]bool{}
	for _, sess := range sessions {
		if sess.Expired {
			continue
		}
		if len(sess.Inos) == 0 {
			if owns, err := s.meta.OwnsDirs(sess.Node); err != nil || !owns {
				continue // nothing to free
			}
		}
		live[sess.Node] = true
		seen, ok := ls.seen[sess.Node]
		if !ok || seen.epoch != sess.Epoch || seen.renewNs != sess.RenewNs {
			ls.seen[sess.Node] = seenRenewal{epoch: sess.Epoch, renewNs: sess.RenewNs, at: now}
			continue
		}
		lease := time.Duration(sess.LeaseNs)
		if lease <= 0 {
			lease = DefaultLockLease
		}
		if now.Sub(seen.at) < lease {
			continue
		}
		ctx, cancel := clock.WithTimeout(context.Background(), s.cfg.Clock, ls.lease/3)
		_, err := s.propose(ctx, meta.Command{Op: meta.OpLockExpire, Lock: &meta.LockCmd{
			Lock: meta.Lock{Owner: meta.LockOwner{Node: sess.Node, Epoch: sess.Epoch}}, RenewNs: sess.RenewNs}})
		cancel()
		switch {
		case err == nil:
			s.cfg.Logger.Warn("lock session expired: the node stopped renewing; its file locks are released",
				"node", sess.Node, "files", len(sess.Inos), "lease", lease)
		case !errors.Is(err, ErrPrecondition):
			s.cfg.Logger.Warn("expire a lock session", "node", sess.Node, "err", err)
		}
	}
	for _, n := range slices.Collect(maps.Keys(ls.seen)) {
		if !live[n] {
			delete(ls.seen, n)
		}
	}
}
