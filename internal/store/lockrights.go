package store

import (
	"context"
	"errors"
	"time"

	"github.com/cairn-fs/cairn/internal/clock"
	"github.com/cairn-fs/cairn/internal/meta"
)

// Cached lock rights, this node's side (design 0006, "Cached lock
// rights"; the log's side is meta/lockrights.go). A lock request that
// finds an inode's table free of other nodes' locks takes the inode's
// lock right with the lock. While this node holds it, its own table of
// the inode decides every request of its processes locally: a grant, a
// refusal, a release and a flock wait cost no commit. Another node's
// request is a recall: this node stops deciding locally, has its lock
// holders publish what was written to the file (LockFlusher), and gives
// the right back with its table (OpLockReturn); the asker then asks
// again. A POSIX wait also gives the right back first, so that the log
// checks it for deadlocks across nodes. A right idle for rightIdle is
// given back, and a node holds at most maxRights: a session file locked
// once does not stay this node's for good.

// LockFlusher is a Holder (AddHolder) whose front end writes files under
// locks (the mount): before this node gives an inode's lock right back,
// FlushIno publishes what was written to the inode and returns once it is
// committed or failed.
type LockFlusher interface {
	FlushIno(ctx context.Context, ino uint64)
}

const (
	// rightIdle: a right whose table has been empty this long goes back.
	rightIdle = 10 * time.Second
	// maxRights bounds the rights this node holds; past it, requests
	// ask for none.
	maxRights = 4096
)

// heldRight is an inode's lock right this node holds.
type heldRight struct {
	seq   uint64
	path  string
	table *meta.LocalTable
	// used is when the table was last used (or emptied).
	used time.Time
	// returning: the right is being given back; requests wait for
	// returned, then go to the log.
	returning bool
	returned  chan struct{}
	// sealed: the return is being proposed; a write is stamped with the
	// right no more (the flush before it was: it is written under it).
	sealed bool
	// gate: R while a write stamped with the right is proposed, W while
	// the return is sealed and proposed (no stamped write follows it).
	gate dirLock
}

// rightsChanged wakes the requests waiting for another node's right to
// come back (ls.mu held).
func (l *lockSessions) rightsChanged() {
	close(l.rightWake)
	l.rightWake = make(chan struct{})
}

// LockSession is this node's lock session now (its epoch): the Epoch of
// the owners of the locks it takes.
func (s *Local) LockSession() uint64 {
	ls := s.locks
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.epoch
}

// HoldsLockRight reports whether this node holds ino's lock right: its
// lock requests on ino are decided locally.
func (s *Local) HoldsLockRight(ino uint64) bool { return s.LockRight(ino) != 0 }

// LockRight implements Locker.
func (s *Local) LockRight(ino uint64) uint64 {
	ls := s.locks
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if hr := ls.rights[ino]; hr != nil && !hr.returning {
		return hr.seq
	}
	return 0
}

// lockCached decides req in this node's table of the inode when it holds
// the inode's right. done is false when the request must go to the log
// (no right, or it was just given back).
func (s *Local) lockCached(ctx context.Context, req LockRequest) (info *LockInfo, err error, done bool) {
	ls := s.locks
	ls.mu.Lock()
	hr := ls.rights[req.Ino]
	if hr == nil {
		ls.mu.Unlock()
		return nil, nil, false
	}
	if hr.returning {
		ch := hr.returned
		ls.mu.Unlock()
		select {
		case <-ch:
			return nil, nil, false
		case <-ctx.Done():
			return nil, ctx.Err(), true
		}
	}
	if mono := s.cfg.Clock.Now(); !ls.renewed.IsZero() && mono.Sub(ls.renewed) > ls.lease-min(lockLostMargin, ls.lease/3) {
		// The session may expire before the lock loop's next look: give
		// it up now rather than grant under a right about to go.
		epoch := ls.epoch
		ls.mu.Unlock()
		s.loseLocks(epoch, nil)
		return nil, nil, false
	}
	now := s.cfg.Now()
	hr.used = s.cfg.Clock.Now()
	owner := meta.LockOwner{Node: ls.node, Epoch: ls.epoch, ID: req.Owner}
	l := meta.Lock{Owner: owner, Kind: req.Kind, Type: req.Type, Start: req.Start, End: req.End, Pid: req.Pid, SinceNs: now.UnixNano()}
	if req.Type == LockUnlock {
		s.deliverLocal(hr.table.Release(owner, req.Kind, req.Start, req.End))
		ls.mu.Unlock()
		return nil, nil, true
	}
	granted, conflict := hr.table.Request(l, s.cfg.TestingLockUnsafe)
	switch {
	case granted:
		ls.stats.grants.Add(1)
		ls.stats.localGrants.Add(1)
		ls.mine[req.Ino] = true
		delete(ls.lost, req.Ino)
		ls.anyLost.Store(len(ls.lost) > 0)
		ls.mu.Unlock()
		return nil, nil, true
	case !req.Wait:
		ls.stats.refused.Add(1)
		ls.mu.Unlock()
		return lockInfo(meta.Ino(req.Ino), hr.path, conflict, false), ErrWouldBlock, true
	case req.Kind == LockPOSIX:
		// The log checks a POSIX wait for deadlocks across nodes: the
		// right goes back, and the request follows it there.
		ls.mu.Unlock()
		s.giveBack(hr, req.Ino)
		return nil, nil, false
	}
	// A flock wait: queued here, granted by a local release, or carried
	// to the log's table if the right goes back first.
	ls.nextID++
	l.WaitID = ls.nextID
	if !hr.table.Queue(l) {
		ls.mu.Unlock()
		return nil, ErrWouldBlock, true
	}
	wait := make(chan grantOutcome, 1)
	ls.waits[l.WaitID] = wait
	ls.mu.Unlock()
	ls.stats.waits.Add(1)
	defer func() {
		ls.mu.Lock()
		delete(ls.waits, l.WaitID)
		ls.mu.Unlock()
	}()
	select {
	case o := <-wait:
		if o.err == nil {
			ls.stats.grants.Add(1)
			if o.local {
				ls.stats.localGrants.Add(1)
			}
			s.locked(req.Ino)
		}
		return nil, o.err, true
	case <-ctx.Done():
	}
	// Interrupted: out of the local queue if it is still there, else out
	// of the log's (the right went back with the wait in its table).
	ls.mu.Lock()
	if ls.rights[req.Ino] == hr && !hr.returning && hr.table.Cancel(owner, l.WaitID) {
		ls.mu.Unlock()
		return nil, ctx.Err(), true
	}
	var ch chan struct{}
	if ls.rights[req.Ino] == hr {
		ch = hr.returned
	}
	ls.mu.Unlock()
	if ch != nil {
		<-ch // bounded: the return's proposal is
	}
	return nil, s.cancelWait(req.Ino, owner, l.WaitID, wait, ctx.Err()), true
}

// deliverLocal wakes this node's waiters granted by a local release
// (ls.mu held).
func (s *Local) deliverLocal(grants []meta.Lock) {
	ls := s.locks
	for _, g := range grants {
		if w, ok := ls.waits[g.WaitID]; ok {
			w <- grantOutcome{local: true}
			delete(ls.waits, g.WaitID)
		}
	}
}

// cancelWait takes an interrupted wait out of the log's queue; if the
// grant came first, the lock is held and the call succeeds (the cancel's
// apply comes after the grant's, so the grant has been delivered when
// the cancel returns). cause is the interruption.
func (s *Local) cancelWait(ino uint64, owner meta.LockOwner, waitID uint64, wait chan grantOutcome, cause error) error {
	cctx, cancel := clock.WithTimeout(context.Background(), s.cfg.Clock, 10*time.Second)
	defer cancel()
	if _, err := s.proposeLock(cctx, meta.OpLockCancel, meta.LockCmd{Ino: meta.Ino(ino), Lock: meta.Lock{Owner: owner, WaitID: waitID}}); err != nil {
		s.cfg.Logger.Warn("cancel an interrupted lock wait", "ino", ino, "err", err)
	}
	select {
	case o := <-wait:
		if o.err == nil {
			s.locked(ino)
		}
		return o.err
	default:
	}
	return cause
}

// giveBack returns hr, this node's right on ino, to the log: no local
// decision from now, no stamped write in flight, the holders publish
// what was written to the inode, then OpLockReturn carries the table.
// A return already under way is waited for. If the return fails (no
// quorum), the right stays this node's and a later recall tries again.
func (s *Local) giveBack(hr *heldRight, ino uint64) {
	ls := s.locks
	ls.mu.Lock()
	if ls.rights[ino] != hr {
		ls.mu.Unlock()
		return
	}
	if hr.returning {
		ch := hr.returned
		ls.mu.Unlock()
		<-ch
		return
	}
	hr.returning = true
	ls.mu.Unlock()
	ctx, cancel := clock.WithTimeout(context.Background(), s.cfg.Clock, ls.lease)
	defer cancel()
	s.flushLocked(ctx, ino) // its writes are stamped: made under the right
	hr.gate.Lock()
	defer hr.gate.Unlock()
	ls.mu.Lock()
	hr.sealed = true
	held, waiting := hr.table.Locks()
	owner := meta.LockOwner{Node: ls.node, Epoch: ls.epoch}
	ls.mu.Unlock()
	res, err := s.log.Propose(ctx, meta.Command{Op: meta.OpLockReturn, TimeNs: s.cfg.Now().UnixNano(),
		Lock:  &meta.LockCmd{Ino: meta.Ino(ino), Lock: meta.Lock{Owner: owner}},
		Right: &meta.RightCmd{Seq: hr.seq, Held: held, Waiting: waiting}})
	if err == nil {
		err = res.Err
	}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	switch {
	case err == nil, errors.Is(err, meta.ErrLockLost), errors.Is(err, meta.ErrFenced):
		if err == nil {
			ls.stats.returned.Add(1)
		}
		if ls.rights[ino] == hr {
			delete(ls.rights, ino)
		}
		close(hr.returned)
	default:
		s.cfg.Logger.Warn("give a lock right back on another node's request", "ino", ino, "err", err)
		hr.returning, hr.sealed = false, false
		close(hr.returned)
		hr.returned = make(chan struct{})
	}
}

// flushLocked has the lock holders publish what was written to ino.
func (s *Local) flushLocked(ctx context.Context, ino uint64) {
	o := s.owners
	o.mu.Lock()
	var fs []LockFlusher
	for _, h := range o.holders {
		if f, ok := h.(LockFlusher); ok {
			fs = append(fs, f)
		}
	}
	o.mu.Unlock()
	for _, f := range fs {
		f.FlushIno(ctx, ino)
	}
}

// appliedRight follows an applied lock command's rights: a right this
// node was granted becomes its table (read from the log's at the grant:
// the apply is consistent), a recall of one it holds starts its return,
// and requests waiting for another node's right wake when one changes.
func (s *Local) appliedRight(cmd *meta.Command, r *meta.Result) {
	ls := s.locks
	if r.Err != nil || r.Lock == nil {
		if cmd.Op == meta.OpLockReturn || cmd.Op == meta.OpLockExpire {
			ls.mu.Lock()
			ls.rightsChanged()
			ls.mu.Unlock()
		}
		return
	}
	ino := uint64(cmd.Lock.Ino)
	switch {
	case cmd.Op == meta.OpLock && r.Lock.RightSeq != 0 && r.Lock.Recall == nil:
		o := cmd.Lock.Lock.Owner
		ls.mu.Lock()
		defer ls.mu.Unlock()
		if o.Node != ls.node || o.Epoch != ls.epoch || ls.rights[ino] != nil {
			return // an old session's: the log dropped it with the session
		}
		held, waiting, err := s.meta.Locks(cmd.Lock.Ino)
		if err != nil {
			s.cfg.Logger.Warn("read a granted lock right's table", "ino", ino, "err", err)
			return
		}
		ls.rights[ino] = &heldRight{seq: r.Lock.RightSeq, path: cmd.Lock.Path, table: meta.NewLocalTable(held, waiting),
			used: s.cfg.Clock.Now(), returned: make(chan struct{})}
	case r.Lock.Recall != nil:
		ls.mu.Lock()
		mine := r.Lock.Recall.Node == ls.node && r.Lock.Recall.Epoch == ls.epoch && cmd.Lock.Lock.Owner.Node != ls.node
		hr := ls.rights[ino]
		ls.mu.Unlock()
		if mine && hr != nil && hr.seq == r.Lock.RightSeq {
			ls.stats.recalled.Add(1)
			s.wg.Add(1)
			go func() { // off the apply goroutine: it publishes and commits
				defer s.wg.Done()
				s.giveBack(hr, ino)
			}()
		}
	case cmd.Op == meta.OpLockReturn, cmd.Op == meta.OpLockExpire:
		ls.mu.Lock()
		ls.rightsChanged()
		ls.mu.Unlock()
	}
}

// returnIdleRights gives back the rights whose tables have been empty for
// rightIdle (the lock loop).
func (s *Local) returnIdleRights() {
	ls := s.locks
	now := s.cfg.Clock.Now()
	type idle struct {
		ino uint64
		hr  *heldRight
	}
	var out []idle
	ls.mu.Lock()
	for ino, hr := range ls.rights {
		held, waiting := hr.table.Locks()
		if len(held) == 0 && len(waiting) == 0 && !hr.returning && now.Sub(hr.used) >= rightIdle {
			out = append(out, idle{ino, hr})
		}
	}
	ls.mu.Unlock()
	for _, x := range out {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.giveBack(x.hr, x.ino)
		}()
	}
}

// stampRight stamps cmd, a write of a file whose inode it names
// (cmd.Right.Ino, Seq 0), with this node's right on it, if it holds one:
// the log applies it only while the right is still this node's. The
// returned function ends the stamp's hold on the right (call it once the
// proposal returns). Without a right, cmd.Right is cleared.
func (s *Local) stampRight(cmd *meta.Command) func() {
	rc := cmd.Right
	if rc == nil || rc.Seq != 0 || cmd.Lock != nil {
		return func() {}
	}
	ls := s.locks
	for {
		ls.mu.Lock()
		hr := ls.rights[uint64(rc.Ino)]
		if hr == nil {
			ls.mu.Unlock()
			cmd.Right = nil
			return func() {}
		}
		if hr.sealed {
			ch := hr.returned
			ls.mu.Unlock()
			<-ch
			continue
		}
		node, epoch := ls.node, ls.epoch
		ls.mu.Unlock()
		hr.gate.RLock()
		ls.mu.Lock()
		still := ls.rights[uint64(rc.Ino)] == hr && !hr.sealed
		ls.mu.Unlock()
		if !still {
			hr.gate.RUnlock()
			continue
		}
		c := *rc
		c.Seq, c.Node, c.Session = hr.seq, node, epoch
		cmd.Right = &c
		return hr.gate.RUnlock
	}
}
