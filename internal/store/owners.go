package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairn-fs/cairn/internal/clock"
	"github.com/cairn-fs/cairn/internal/meta"
)

// Directory ownership, this node's side (design 0008). The log keeps at
// most one owner per directory and refuses a name change from anyone
// else (meta/owners.go). This node keeps the table of the directories it
// owns: a holder (the mount) decides names in them locally under a read
// lock of the directory (Own) and publishes later, stamped with its
// claim; a recall, or a command decided in the log (an HTTP PUT, a
// rename), takes the directory's write lock, has the holders publish what
// they decided there, and then gives the directory up or sends the
// command with this node's claim.

// Claim is a directory this node owns (by inode number) and the epoch of
// the claim in the log. The zero Claim claims nothing.
type Claim struct {
	Dir   uint64
	Epoch uint64
}

// Holder is a front end that decides names locally in directories this
// node owns and publishes them later (the mount).
type Holder interface {
	// FlushDir publishes what the holder decided in directory dir (and
	// files created there and still open, with the content they have),
	// and returns once it is committed or failed. It is called with dir's
	// write lock held, never from a call the holder itself made into the
	// store's publishing methods.
	FlushDir(ctx context.Context, dir uint64)
}

// DirOwners is the store's API for directory ownership. Local implements
// it.
type DirOwners interface {
	// Own returns this node's claim on directory dir (an inode number),
	// claiming it first when this node does not own it (a commit) and,
	// when another node does, recalling it and waiting (bounded by ctx)
	// until it is handed over. The claim holds until done is called:
	// until then the directory is not given up, so the caller decides and
	// queues its changes in between. Errors: ErrNotFound (dir is gone),
	// ErrNotDir, ErrLockLost (the node's session expired: a new one is
	// started, and a retry may succeed), ErrNotUpgraded, ErrUnavailable,
	// or ctx's error.
	// path ("bucket/path") names the directory in status pages.
	Own(ctx context.Context, dir uint64, path string) (c Claim, done func(), err error)
	// Held returns this node's claim on dir without waiting, if it has one.
	Held(dir uint64) (Claim, bool)
	// Adopt records that directory dir (path "bucket/path"), made under
	// claim c by a holder (its mkdir queued), is owned under c: the log
	// makes it so when the mkdir applies.
	Adopt(dir uint64, path string, c Claim)
	// AddHolder registers h; the returned function unregisters it.
	AddHolder(h Holder) (remove func())
	// OwnerStats describes this node's ownership (status and metrics).
	OwnerStats() OwnerStats
	// OwnedDirs lists up to limit directories this node owns, by path.
	OwnedDirs(limit int) []OwnedDir
	// DirOwnerCounts counts the directories each node owns according to
	// the log (the same on every node), by node; only nodes that own one
	// are listed. A node's count stops at limit (NodeDirs.More). It reads
	// the applied namespace and does not block on the network.
	DirOwnerCounts(ctx context.Context, limit int) ([]NodeDirs, error)
}

// NodeDirs is how many directories a node owns according to the log.
type NodeDirs struct {
	Node uint64 `json:"node,string"`
	Dirs int    `json:"dirs"`
	More bool   `json:"more,omitempty"` // the count stopped at its limit: Dirs or more
}

// OwnedDir is a directory this node owns.
type OwnedDir struct {
	Dir   uint64    `json:"ino,string"`
	Path  string    `json:"path"` // "bucket/path" as its holder named it ("" unknown)
	Epoch uint64    `json:"epoch,string"`
	Since time.Time `json:"since"`
}

var _ DirOwners = (*Local)(nil)

// OwnerStats counts this node's directory ownership.
type OwnerStats struct {
	Owned      int    `json:"owned"`       // directories this node owns now
	Claims     uint64 `json:"claims"`      // claims granted
	Recalls    uint64 `json:"recalls"`     // recalls this node sent (another node owned a directory it wanted)
	HandedOver uint64 `json:"handed_over"` // directories this node gave up on another node's recall
	Fenced     uint64 `json:"fenced"`      // commands the log refused because a claim moved
	Lost       uint64 `json:"lost"`        // directories lost with an expired session
}

// Ownership errors.
var (
	// ErrFenced: a change was decided under a directory claim that moved
	// before it was published (the node lost its session, or was cut
	// off): the log refused it, nothing of it applied (EIO).
	ErrFenced = errors.New("store: the directory's ownership moved before the change was published; the change was refused")
)

// recallRetry is how often a claimant repeats its claim while another
// node owns the directory: the repeat is the recall again, for an owner
// that did not hear it (restarting, or it applied a snapshot).
const recallRetry = 250 * time.Millisecond

// ownedDir is one directory this node owns.
type ownedDir struct {
	path    string
	epoch   uint64
	session uint64
	rw      dirLock // R: a holder deciding; W: a release or a command decided in the log
	since   time.Time
	// releasing: a recall is being served; Own waits for it to finish.
	releasing bool
	// adopted: made by a holder under its parent's claim, and its mkdir
	// not applied yet (the log has no record of it until then).
	adopted bool
}

// dirLock is a directory's read-write lock, with sync.RWMutex's rules (a
// writer waiting keeps new readers out). It is held across commits (a
// holder's decided change, a release's publishing and hand-over), so its
// waits are channel receives rather than a sync.RWMutex's semaphore: a
// testing/synctest bubble (internal/sim) moves its fake clock only while
// every goroutine is durably blocked, which a goroutine queued on a
// mutex is not, and the simulator would stop for good as soon as two
// commands met on one directory.
type dirLock struct {
	mu      sync.Mutex
	readers int
	writer  bool
	writers int           // waiting for the lock
	wake    chan struct{} // closed when the lock is let go (nil: nobody waits)
}

// wait lets l.mu go until the lock changes (l.mu held).
func (l *dirLock) wait() {
	if l.wake == nil {
		l.wake = make(chan struct{})
	}
	ch := l.wake
	l.mu.Unlock()
	<-ch
	l.mu.Lock()
}

// wakeAll wakes every waiter (l.mu held).
func (l *dirLock) wakeAll() {
	if l.wake != nil {
		close(l.wake)
		l.wake = nil
	}
}

func (l *dirLock) RLock() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for l.writer || l.writers > 0 {
		l.wait()
	}
	l.readers++
}

func (l *dirLock) RUnlock() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.readers <= 0 {
		panic("store: RUnlock of a directory not read-locked")
	}
	l.readers--
	if l.readers == 0 {
		l.wakeAll()
	}
}

func (l *dirLock) Lock() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.writers++
	for l.writer || l.readers > 0 {
		l.wait()
	}
	l.writers--
	l.writer = true
}

func (l *dirLock) Unlock() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.writer {
		panic("store: Unlock of a directory not locked")
	}
	l.writer = false
	l.wakeAll()
}

// owners is this node's table of owned directories.
type owners struct {
	mu      sync.Mutex
	dirs    map[uint64]*ownedDir
	changed chan struct{} // closed (and replaced) when the log changes an owner
	holders map[int]Holder
	nextH   int

	claims, recalls, handedOver, fenced, lost atomic.Uint64
	// everOwned: this node has claimed a directory (its lost sessions are
	// worth continuing).
	everOwned atomic.Bool
}

func newOwners() *owners {
	return &owners{dirs: map[uint64]*ownedDir{}, changed: make(chan struct{}), holders: map[int]Holder{}}
}

// broadcast wakes the claimants waiting for an owner change (o.mu held).
func (o *owners) broadcast() {
	close(o.changed)
	o.changed = make(chan struct{})
}

// count is how many directories the node owns.
func (o *owners) count() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.dirs)
}

// OwnerStats implements DirOwners.
func (s *Local) OwnerStats() OwnerStats {
	o := s.owners
	return OwnerStats{Owned: o.count(), Claims: o.claims.Load(), Recalls: o.recalls.Load(),
		HandedOver: o.handedOver.Load(), Fenced: o.fenced.Load(), Lost: o.lost.Load()}
}

// AddHolder implements DirOwners.
func (s *Local) AddHolder(h Holder) func() {
	o := s.owners
	o.mu.Lock()
	id := o.nextH
	o.nextH++
	o.holders[id] = h
	o.mu.Unlock()
	return func() {
		o.mu.Lock()
		delete(o.holders, id)
		o.mu.Unlock()
	}
}

// flushHolders asks every holder to publish what it decided in dir.
func (s *Local) flushHolders(ctx context.Context, dir uint64) {
	o := s.owners
	o.mu.Lock()
	hs := make([]Holder, 0, len(o.holders))
	for _, h := range o.holders {
		hs = append(hs, h)
	}
	o.mu.Unlock()
	for _, h := range hs {
		h.FlushDir(ctx, dir)
	}
}

// Held implements DirOwners.
func (s *Local) Held(dir uint64) (Claim, bool) {
	o := s.owners
	o.mu.Lock()
	defer o.mu.Unlock()
	d := o.dirs[dir]
	if d == nil || d.releasing {
		return Claim{}, false
	}
	return Claim{Dir: dir, Epoch: d.epoch}, true
}

// Adopt implements DirOwners.
func (s *Local) Adopt(dir uint64, path string, c Claim) {
	o := s.owners
	o.mu.Lock()
	defer o.mu.Unlock()
	if p := o.dirs[c.Dir]; p != nil && p.epoch == c.Epoch && o.dirs[dir] == nil {
		o.dirs[dir] = &ownedDir{path: path, epoch: c.Epoch, session: p.session, since: s.cfg.Clock.Now(), adopted: true}
	}
}

// OwnedDirs implements DirOwners: by path.
func (s *Local) OwnedDirs(limit int) []OwnedDir {
	o := s.owners
	o.mu.Lock()
	out := make([]OwnedDir, 0, min(len(o.dirs), limit))
	for dir, d := range o.dirs {
		out = append(out, OwnedDir{Dir: dir, Path: d.path, Epoch: d.epoch, Since: d.since})
	}
	o.mu.Unlock()
	slices.SortFunc(out, func(a, b OwnedDir) int { return cmp.Or(cmp.Compare(a.Path, b.Path), cmp.Compare(a.Dir, b.Dir)) })
	return out[:min(len(out), limit)]
}

// DirOwnerCounts implements DirOwners.
func (s *Local) DirOwnerCounts(ctx context.Context, limit int) ([]NodeDirs, error) {
	cs, err := s.meta.DirOwnerCounts(limit)
	if err != nil {
		return nil, mapErr(err)
	}
	out := make([]NodeDirs, len(cs))
	for i, c := range cs {
		out[i] = NodeDirs{Node: c.Node, Dirs: c.Dirs, More: c.More}
	}
	return out, nil
}

// Own implements DirOwners.
func (s *Local) Own(ctx context.Context, dir uint64, path string) (Claim, func(), error) {
	o := s.owners
	for {
		o.mu.Lock()
		d := o.dirs[dir]
		releasing := d != nil && d.releasing // under o.mu: release sets it
		wait := o.changed
		o.mu.Unlock()
		switch {
		case d != nil && !releasing:
			d.rw.RLock()
			o.mu.Lock()
			still := o.dirs[dir] == d && !d.releasing
			adopted := d.adopted
			o.mu.Unlock()
			if still && !adopted && !s.inLog(dir, d.epoch) {
				// The table outlived the log's record (it cannot, by design;
				// this keeps a bug there from failing every decision).
				s.cfg.Logger.Warn("directory ownership: this node's table named a claim the log does not hold; claiming again", "dir", dir, "epoch", d.epoch)
				o.mu.Lock()
				if o.dirs[dir] == d {
					delete(o.dirs, dir)
				}
				o.mu.Unlock()
				still = false
			}
			if still {
				return Claim{Dir: dir, Epoch: d.epoch}, d.rw.RUnlock, nil
			}
			d.rw.RUnlock()
			continue
		case d != nil:
			// Being given up: wait until it is, then claim again.
			if err := s.waitOwner(ctx, wait); err != nil {
				return Claim{}, nil, err
			}
			continue
		}
		granted, err := s.claim(ctx, dir, path, false)
		if err != nil {
			return Claim{}, nil, err
		}
		if granted {
			continue // the applied claim is in the table
		}
		if err := s.waitOwner(ctx, wait); err != nil {
			return Claim{}, nil, err
		}
	}
}

// inLog reports whether the log records this node as dir's owner under
// claim epoch.
func (s *Local) inLog(dir, epoch uint64) bool {
	rec, err := s.meta.DirOwner(meta.Ino(dir))
	return err == nil && rec != nil && rec.Node == s.locks.node && rec.Epoch == epoch
}

// waitOwner waits until an owner changes in the log, recallRetry passes,
// or ctx ends (ErrUnavailable).
func (s *Local) waitOwner(ctx context.Context, changed chan struct{}) error {
	err := s.waitRecall(ctx, changed)
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("%w: waiting for another node to hand a directory over: %w", ErrUnavailable, err)
	}
	return err
}

// waitRecall waits, after a recall, until changed is closed (what was
// recalled changed hands in the log), recallRetry passes (the caller
// sends the recall again, for a holder that missed it), or ctx ends (its
// error). Directory claims and lock rights both wait so.
func (s *Local) waitRecall(ctx context.Context, changed chan struct{}) error {
	t := clock.NewTimer(s.cfg.Clock, recallRetry)
	defer t.Stop()
	select {
	case <-changed:
	case <-t.C:
	case <-ctx.Done():
		return ctx.Err()
	case <-s.stop:
		return ErrUnavailable
	}
	return nil
}

// claim proposes OpOwn for dir (a recall when recall): whether it was
// granted. A claim refused by another owner is that owner's recall.
func (s *Local) claim(ctx context.Context, dir uint64, path string, recall bool) (bool, error) {
	ls := s.locks
	ls.mu.Lock()
	session, prev := ls.epoch, ls.prev
	ls.mu.Unlock()
	if recall {
		prev = 0
	}
	start := s.cfg.Clock.Now()
	res, err := s.log.Propose(ctx, meta.Command{Op: meta.OpOwn, TimeNs: s.cfg.Now().UnixNano(),
		Own: &meta.OwnCmd{Node: ls.node, Session: session, LeaseNs: int64(ls.lease), Dir: meta.Ino(dir), Recall: recall, Continues: prev}})
	if err == nil {
		err = res.Err
	}
	switch {
	case errors.Is(err, meta.ErrLockLost):
		s.loseLocks(session, nil)
		return false, ErrLockLost
	case err != nil:
		return false, mapErr(err)
	}
	if !recall {
		ls.mu.Lock()
		if session == ls.epoch && start.After(ls.renewed) {
			ls.renewed = start
		}
		if ls.prev == prev {
			ls.prev = 0
		}
		ls.mu.Unlock()
		s.owners.everOwned.Store(true)
	}
	if res.Own.Granted {
		// The table has it: the apply put it there (appliedOwner), before
		// the proposal returned. Not added here: a recall applied since
		// may have given it up already.
		s.owners.claims.Add(1)
		o := s.owners
		o.mu.Lock()
		if d := o.dirs[dir]; d != nil && d.epoch == res.Own.Owner.Epoch && d.path == "" {
			d.path = path
		}
		o.mu.Unlock()
		return true, nil
	}
	if res.Own.Owner != nil {
		s.owners.recalls.Add(1)
	}
	return false, nil
}

// continueSession proposes the continuation of the session this process
// gave up (meta's OwnCmd.Continues): if the log has not expired it, the
// directories it owned pass to the new session with their claims, and
// what the mount queued under them still applies.
func (s *Local) continueSession() {
	ls := s.locks
	ls.mu.Lock()
	session, prev := ls.epoch, ls.prev
	ls.mu.Unlock()
	if prev == 0 {
		return
	}
	ctx, cancel := clock.WithTimeout(context.Background(), s.cfg.Clock, ls.lease)
	defer cancel()
	start := s.cfg.Clock.Now()
	res, err := s.log.Propose(ctx, meta.Command{Op: meta.OpOwn, TimeNs: s.cfg.Now().UnixNano(),
		Own: &meta.OwnCmd{Node: ls.node, Session: session, LeaseNs: int64(ls.lease), Continues: prev}})
	if err == nil {
		err = res.Err
	}
	if err != nil {
		s.cfg.Logger.Warn("continue the lock session", "err", err)
		return
	}
	ls.mu.Lock()
	if session == ls.epoch {
		if start.After(ls.renewed) {
			ls.renewed = start
		}
		if ls.prev == prev {
			ls.prev = 0
		}
	}
	ls.mu.Unlock()
}

// release gives dir up on another node's recall: no holder decides in it
// any more (its write lock), the holders publish what they decided there,
// and OpDisown hands it over.
func (s *Local) release(dir uint64) {
	o := s.owners
	o.mu.Lock()
	d := o.dirs[dir]
	if d == nil {
		// Not in the table, but the log names this node (a session it
		// continued, or a claim it has not used since): give it up all
		// the same, or the asker waits for the session to expire.
		if rec, err := s.meta.DirOwner(meta.Ino(dir)); err == nil && rec != nil && rec.Node == s.locks.node {
			d = &ownedDir{epoch: rec.Epoch, session: rec.Session, since: s.cfg.Clock.Now()}
			o.dirs[dir] = d
		}
	}
	if d == nil || d.releasing {
		o.mu.Unlock()
		return
	}
	d.releasing = true
	o.mu.Unlock()
	d.rw.Lock()
	defer d.rw.Unlock()
	ctx, cancel := clock.WithTimeout(context.Background(), s.cfg.Clock, 30*time.Second)
	defer cancel()
	s.flushHolders(ctx, dir)
	_, err := s.log.Propose(ctx, meta.Command{Op: meta.OpDisown, TimeNs: s.cfg.Now().UnixNano(),
		Own: &meta.OwnCmd{Node: s.locks.node, Dir: meta.Ino(dir), Epoch: d.epoch}})
	if err != nil {
		s.cfg.Logger.Warn("give a directory up on another node's recall", "dir", dir, "err", err)
	}
	o.mu.Lock()
	if o.dirs[dir] == d {
		delete(o.dirs, dir) // the disown failed (no quorum): a new claim finds the log's record
	}
	d.releasing = false
	o.broadcast()
	o.mu.Unlock()
}

// loseDirs forgets every owned directory (the session was lost).
func (s *Local) loseDirs() {
	o := s.owners
	o.mu.Lock()
	defer o.mu.Unlock()
	if n := len(o.dirs); n > 0 {
		o.lost.Add(uint64(n))
		s.cfg.Logger.Warn("directory ownership lost with the lock session: changes queued in those directories are refused by the log",
			"directories", n)
	}
	clear(o.dirs)
	o.broadcast()
}

// appliedOwner handles an applied ownership command, or one that can end
// a session: the table follows the log, a recall of a directory this
// node owns starts its release, and claimants wake.
func (s *Local) appliedOwner(cmd *meta.Command, r *meta.Result) {
	o := s.owners
	self := s.locks.node
	switch cmd.Op {
	case meta.OpOwn:
		if r.Err != nil || r.Own == nil || r.Own.Owner == nil {
			return
		}
		w := r.Own.Owner
		o.mu.Lock()
		if r.Own.Granted && w.Node == self && o.dirs[uint64(w.Dir)] == nil {
			o.dirs[uint64(w.Dir)] = &ownedDir{epoch: w.Epoch, session: w.Session, since: s.cfg.Clock.Now()}
		}
		o.mu.Unlock()
		if !r.Own.Granted && w.Node == self && cmd.Own.Node != self {
			// Off the apply goroutine: the release publishes and commits.
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				s.release(uint64(w.Dir))
			}()
		}
		return // no directory was freed
	case meta.OpDisown:
		if r.Err == nil && cmd.Own.Node == self {
			o.mu.Lock()
			if d := o.dirs[uint64(cmd.Own.Dir)]; d != nil && d.epoch == cmd.Own.Epoch {
				delete(o.dirs, uint64(cmd.Own.Dir))
				o.handedOver.Add(1)
			}
			o.mu.Unlock()
		}
	case meta.OpMkdir:
		// A directory adopted under a claim is the log's now, or, if the
		// log refused the mkdir, not this node's.
		if cmd.Own != nil && cmd.Own.Node == self && cmd.File != nil && cmd.File.Ino != 0 {
			o.mu.Lock()
			if d := o.dirs[uint64(cmd.File.Ino)]; d != nil && d.adopted {
				if r.Err != nil && !d.releasing {
					delete(o.dirs, uint64(cmd.File.Ino))
				}
				d.adopted = false
			}
			o.mu.Unlock()
		}
		return
	}
	o.mu.Lock()
	o.broadcast()
	o.mu.Unlock()
}

// ownerOp reports whether applied commands of op may change an owner.
func ownerOp(op meta.Op) bool {
	switch op {
	case meta.OpOwn, meta.OpDisown, meta.OpLockExpire, meta.OpLockSession, meta.OpLock, meta.OpMkdir:
		return true
	}
	return false
}

// stamp is a command's claims being gathered by proposeOwned: the write
// locks it holds, to let go after the proposal.
type stamp struct {
	held   []meta.DirEpoch // sorted by Dir
	unlock []func()        // unlock[i] lets held[i]'s write lock go
}

func (st *stamp) add(dir uint64, d *ownedDir) {
	i, _ := slices.BinarySearchFunc(st.held, meta.Ino(dir), func(h meta.DirEpoch, x meta.Ino) int { return cmp.Compare(h.Dir, x) })
	st.held = slices.Insert(st.held, i, meta.DirEpoch{Dir: meta.Ino(dir), Epoch: d.epoch})
	st.unlock = slices.Insert(st.unlock, i, d.rw.Unlock)
}

func (st *stamp) has(dir uint64) bool {
	return slices.ContainsFunc(st.held, func(h meta.DirEpoch) bool { return uint64(h.Dir) == dir })
}

func (st *stamp) done() {
	for _, u := range st.unlock {
		u()
	}
	st.held, st.unlock = nil, nil
}

// lockOwned takes the write lock of dir if this node owns it, has the
// holders publish what they decided there, and adds its claim to st.
func (s *Local) lockOwned(ctx context.Context, st *stamp, dir uint64) bool {
	if st.has(dir) {
		return true
	}
	o := s.owners
	o.mu.Lock()
	d := o.dirs[dir]
	o.mu.Unlock()
	if d == nil {
		return false
	}
	d.rw.Lock()
	o.mu.Lock()
	still := o.dirs[dir] == d
	o.mu.Unlock()
	if !still {
		d.rw.Unlock()
		return false
	}
	s.flushHolders(ctx, dir)
	st.add(dir, d)
	return true
}

// maxOwnRetries bounds how often a command decided in the log is sent
// again after a directory it touches was found owned, and recallWait for
// how long (an owner that died frees its directories after its lock
// lease).
const (
	maxOwnRetries = 1000
	recallWait    = 2*DefaultLockLease + 5*time.Second
)

// proposeOwned proposes a command decided in the log (not a holder's):
// with the claims of the directories this node owns that it changes
// names in (their holders first publish what they decided there), and,
// when the log answers that another node owns one, after recalling it.
// The result's error is the command's (mapped), or the log's.
func (s *Local) proposeOwned(ctx context.Context, cmd meta.Command) (meta.Result, error) {
	var st stamp
	defer st.done()
	var deadline time.Time
	if s.owners.count() > 0 {
		for _, dir := range s.touchedDirs(ctx, &cmd) {
			s.lockOwned(ctx, &st, dir)
		}
	}
	for attempt := 0; ; attempt++ {
		cmd.Own = nil
		if len(st.held) > 0 {
			cmd.Own = &meta.OwnCmd{Node: s.locks.node, Held: slices.Clone(st.held)}
		}
		res, err := s.log.Propose(ctx, cmd)
		if err != nil {
			return res, err
		}
		if errors.Is(res.Err, meta.ErrFenced) && len(st.held) > 0 && attempt < maxOwnRetries {
			// This node's table named a claim the log no longer has (the
			// command is decided in the log, so no decision of a holder is
			// at stake): forget the stale claims and send it again.
			if s.dropStale(&st) {
				continue
			}
		}
		var oe *meta.OwnedError
		if deadline.IsZero() {
			deadline = s.cfg.Clock.Now().Add(max(recallWait, 2*s.locks.lease+5*time.Second))
		}
		if errors.As(res.Err, &oe) && (attempt >= maxOwnRetries || s.cfg.Clock.Now().After(deadline)) {
			s.cfg.Logger.Warn("a change waited too long for another node to hand a directory over",
				"dir", oe.Dir, "owner", oe.Node, "attempts", attempt+1)
		}
		if !errors.As(res.Err, &oe) || attempt >= maxOwnRetries || s.cfg.Clock.Now().After(deadline) {
			if errors.Is(res.Err, meta.ErrFenced) {
				s.owners.fenced.Add(1)
			}
			return res, nil
		}
		if oe.Node == s.locks.node {
			if s.lockOwned(ctx, &st, uint64(oe.Dir)) {
				continue
			}
			// The log names this node, but not under its table: a claim
			// of a session this node has since given up (it could not
			// renew in time). Claiming it with the current session
			// replaces that session, and the directory is this node's
			// again; the next round stamps it.
			st.done()
			if _, err := s.claim(ctx, uint64(oe.Dir), "", false); err != nil {
				return res, err
			}
			continue
		}
		// Another node owns it (or this node's table has not caught up):
		// recall without holding any write lock, then start over.
		st.done()
		wait := s.ownerChanged()
		if _, err := s.claim(ctx, uint64(oe.Dir), "", true); err != nil {
			return res, err
		}
		if err := s.waitOwner(ctx, wait); err != nil {
			return res, err
		}
	}
}

// dropStale removes from st, and from the table, the claims the log does
// not hold for this node; it reports whether it removed any.
func (s *Local) dropStale(st *stamp) bool {
	o := s.owners
	var keep []meta.DirEpoch
	var unlock []func()
	dropped := false
	for i, h := range st.held {
		rec, err := s.meta.DirOwner(h.Dir)
		if err == nil && rec != nil && rec.Node == s.locks.node && rec.Epoch == h.Epoch {
			keep = append(keep, h)
			unlock = append(unlock, st.unlock[i])
			continue
		}
		dropped = true
		o.mu.Lock()
		if d := o.dirs[uint64(h.Dir)]; d != nil && d.epoch == h.Epoch {
			delete(o.dirs, uint64(h.Dir))
		}
		o.mu.Unlock()
		st.unlock[i]()
	}
	st.held, st.unlock = keep, unlock
	return dropped
}

func (s *Local) ownerChanged() chan struct{} {
	s.owners.mu.Lock()
	defer s.owners.mu.Unlock()
	return s.owners.changed
}

// touchedDirs lists, from this node's view, the directories whose names
// cmd changes: the parents of its paths, and a removed directory itself.
// The log checks the real ones; this only spares a refused proposal.
func (s *Local) touchedDirs(ctx context.Context, cmd *meta.Command) []uint64 {
	var paths []string
	switch cmd.Op {
	case meta.OpPutFile, meta.OpMkdir, meta.OpTrashRestore, meta.OpVersionDelete:
		paths = append(paths, parentPath(cmd.Path))
	case meta.OpDelete:
		paths = append(paths, parentPath(cmd.Path), cmd.Path)
	case meta.OpRename:
		paths = append(paths, parentPath(cmd.Path), parentPath(cmd.DstPath), cmd.DstPath)
	case meta.OpLink:
		paths = append(paths, parentPath(cmd.DstPath))
	}
	var dirs []uint64
	for _, p := range paths {
		if n, err := s.lookup(ctx, cmd.BucketName, p); err == nil && n.Type == meta.TypeDir {
			dirs = append(dirs, uint64(n.Ino))
		}
	}
	return dirs
}

func parentPath(p string) string {
	d := path.Dir(p)
	if d == "." || d == "/" {
		return ""
	}
	return d
}

// heldOwn is the meta form of a holder's claims: never nil, so that the
// command is known as decided (commitFile), even without a claim.
func (s *Local) heldOwn(claims []Claim) *meta.OwnCmd {
	var held []meta.DirEpoch
	for _, c := range claims {
		if c.Dir != 0 {
			held = append(held, meta.DirEpoch{Dir: meta.Ino(c.Dir), Epoch: c.Epoch})
		}
	}
	slices.SortFunc(held, func(a, b meta.DirEpoch) int { return cmp.Compare(a.Dir, b.Dir) })
	held = slices.CompactFunc(held, func(a, b meta.DirEpoch) bool { return a.Dir == b.Dir })
	return &meta.OwnCmd{Node: s.locks.node, Held: held}
}
