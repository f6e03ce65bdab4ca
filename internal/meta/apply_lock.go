package meta

import (
	"encoding/binary"
	"fmt"
	"slices"
)

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
	// The session's directories go with it (owners.go).
	if _, err := a.dropSessionDirs(s.Node, s.Epoch); err != nil {
		return nil, err
	}
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
	rc := a.cmd.Right
	switch {
	case st.Right.heldBy(req.Owner.Node, req.Owner.Epoch):
		return Result{}, fmt.Errorf("inode %d: %w", c.Ino, ErrRightHeld)
	case st.Right != nil && req.Type == LockUnlock:
		// Another session holds the right, so this one has nothing here.
		a.putSession(s)
		return Result{Lock: &LockResult{Granted: true, Grants: grants}}, nil
	case st.Right != nil:
		// lockrights.go: the holder gives the right back first.
		a.putSession(s)
		res := recallRight(st)
		res.Grants = grants
		return Result{Lock: res}, nil
	case rc != nil && rc.Recall:
		a.putSession(s)
		return Result{Lock: &LockResult{Grants: grants}}, nil
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
		var conflict *Lock
		res.Granted, conflict = st.request(req, a.st.lockUnsafe)
		switch {
		case res.Granted:
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
	if rc != nil && rc.Cache && res.Granted && req.Type != LockUnlock && st.onlySession(req.Owner.Node, req.Owner.Epoch) {
		st.Right = &LockRight{Node: req.Owner.Node, Session: req.Owner.Epoch, Seq: max(a.index, 1)}
		res.RightSeq = st.Right.Seq
	}
	a.syncSession(s, c.Ino, st)
	a.putSession(s)
	a.putLockState(c.Ino, st)
	return Result{Lock: res}, nil
}

// request grants req if nothing held conflicts with it (unsafe: in any
// case), or returns the conflicting lock. A flock request converts by
// dropping the owner's flock lock first, as flock(2) does, so a
// conversion that has to wait (or fails) loses it.
func (s *lockState) request(req Lock, unsafe bool) (bool, *Lock) {
	if req.Kind == LockFlock {
		for _, h := range s.Held {
			if h.Owner == req.Owner && h.Kind == LockFlock && h.Type == req.Type {
				return true, nil
			}
		}
		s.remove(req.Owner, LockFlock, 0, LockEOF)
	}
	conflict := s.conflict(&req)
	if unsafe {
		conflict = nil
	}
	if conflict != nil {
		return false, conflict
	}
	s.grant(req)
	return true, nil
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
	if st.Right.heldBy(c.Lock.Owner.Node, c.Lock.Owner.Epoch) {
		return Result{}, fmt.Errorf("inode %d: %w", c.Ino, ErrRightHeld)
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
