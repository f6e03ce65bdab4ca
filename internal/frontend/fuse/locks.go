package fuse

import (
	"context"
	"errors"
	"math"
	"sync"
	"syscall"

	"github.com/cairn-fs/cairn/internal/store"
	"github.com/hanwen/go-fuse/v2/fs"
	gofuse "github.com/hanwen/go-fuse/v2/fuse"
)

// File locks held across the cluster (design 0006). With Config.Locks
// set, the kernel passes flock(2), fcntl and OFD lock requests to the
// mount (EnableLocks), which takes them in the cluster's lock table
// (store.Locker):
//   - a POSIX lock is released when its process closes any descriptor of
//     the file: the FLUSH of that close carries the process's lock owner;
//   - flock and OFD locks go with their open file description: the
//     RELEASE of its last close carries its owner. No-open mode sends no
//     RELEASE, so a no-open mount answers flock with ENOLCK (a mount with
//     handles, the :handles option of --mount, takes them), and cannot
//     tell an OFD lock from a POSIX one (both come without a flag): there
//     an OFD lock lives until the node's lock session ends;
//   - an unlock, and a close that releases locks, first publishes what
//     was written to the file, and a granted lock drops the kernel's
//     pages and attributes of the file: the taker reads at least what
//     the last holder wrote;
//   - when the node lost its locks (its lock session expired: it was cut
//     off from the quorum longer than its lease), writes, fsyncs and
//     closes of a file it held locks on answer EIO until the file is
//     locked again through this node.

var (
	_ fs.NodeGetlker  = (*node)(nil)
	_ fs.NodeSetlker  = (*node)(nil)
	_ fs.NodeSetlkwer = (*node)(nil)
)

// lockFS wraps the raw file system to learn the lock owner of FLUSH and
// RELEASE, which go-fuse's fs API does not pass on: the request is known
// by its cancel channel, as in killPrivFS.
type lockFS struct {
	gofuse.RawFileSystem
	owners sync.Map // <-chan struct{} → uint64: the lock owner of a FLUSH or a flock RELEASE
}

func (f *lockFS) String() string { return f.RawFileSystem.String() }

func (f *lockFS) Flush(cancel <-chan struct{}, in *gofuse.FlushIn) gofuse.Status {
	f.owners.Store(cancel, in.LockOwner)
	defer f.owners.Delete(cancel)
	return f.RawFileSystem.Flush(cancel, in)
}

func (f *lockFS) Release(cancel <-chan struct{}, in *gofuse.ReleaseIn) {
	if in.ReleaseFlags&gofuse.FUSE_RELEASE_FLOCK_UNLOCK != 0 {
		f.owners.Store(cancel, in.LockOwner)
		defer f.owners.Delete(cancel)
	}
	f.RawFileSystem.Release(cancel, in)
}

// lockOwner returns the lock owner of the FLUSH or RELEASE behind ctx.
func (m *Mount) lockOwner(ctx context.Context) (uint64, bool) {
	c, ok := ctx.(*gofuse.Context)
	if !ok || m.lk == nil {
		return 0, false
	}
	v, ok := m.lk.owners.Load(c.Cancel)
	if !ok {
		return 0, false
	}
	return v.(uint64), true
}

// lockRequest converts a kernel lock request.
func (n *node) lockRequest(owner uint64, lk *gofuse.FileLock, flags uint32) (store.LockRequest, syscall.Errno) {
	req := store.LockRequest{Ino: n.StableAttr().Ino, Path: n.m.cfg.Bucket + "/" + n.storePath(), Owner: owner,
		Pid: lk.Pid, Kind: store.LockPOSIX, Start: lk.Start, End: lk.End}
	if lk.End >= math.MaxInt64 { // OFFSET_MAX: to the end of the file
		req.End = store.LockEOF
	}
	if flags&gofuse.FUSE_LK_FLOCK != 0 {
		req.Kind, req.Start, req.End = store.LockFlock, 0, store.LockEOF
	}
	switch lk.Typ {
	case syscall.F_RDLCK:
		req.Type = store.LockRead
	case syscall.F_WRLCK:
		req.Type = store.LockWrite
	case syscall.F_UNLCK:
		req.Type = store.LockUnlock
	default:
		return req, syscall.EINVAL
	}
	if req.Start > req.End {
		return req, syscall.EINVAL
	}
	return req, 0
}

// lockable checks that this mount takes the request's kind of lock.
func (n *node) lockable(req store.LockRequest) syscall.Errno {
	if n.IsDir() && req.Kind == store.LockPOSIX {
		return 0 // a lock on a directory: allowed, as on Linux
	}
	if n.m.cfg.NoFlush {
		n.m.flockOnce.Do(func() {
			n.m.cfg.Logger.Error("a lock on a noflush mount answers ENOLCK: the kernel tells a noflush mount of no close, so no lock could be released; mount the files that are locked without noflush",
				"dir", n.m.cfg.Dir)
		})
		return syscall.ENOLCK
	}
	if req.Kind == store.LockFlock && n.m.cfg.NoOpen {
		n.m.flockOnce.Do(func() {
			n.m.cfg.Logger.Error("flock on a no-open mount answers ENOLCK: the kernel never tells a no-open mount when a flock lock's file is closed; mount it with handles (--mount BUCKET:DIR:handles)",
				"dir", n.m.cfg.Dir)
		})
		return syscall.ENOLCK
	}
	return 0
}

func (n *node) Getlk(ctx context.Context, f fs.FileHandle, owner uint64, lk *gofuse.FileLock, flags uint32, out *gofuse.FileLock) syscall.Errno {
	req, e := n.lockRequest(owner, lk, flags)
	if e != 0 {
		return e
	}
	if e := n.lockable(req); e != 0 {
		return e
	}
	c, err := n.m.cfg.Locks.TestLock(ctx, req)
	if err != nil {
		return errno(err)
	}
	if c == nil {
		*out = gofuse.FileLock{Typ: syscall.F_UNLCK}
		return 0
	}
	*out = gofuse.FileLock{Start: c.Start, End: c.End, Typ: syscall.F_RDLCK, Pid: c.Pid}
	if c.Write {
		out.Typ = syscall.F_WRLCK
	}
	if c.End == store.LockEOF {
		out.End = math.MaxInt64
	}
	return 0
}

func (n *node) Setlk(ctx context.Context, f fs.FileHandle, owner uint64, lk *gofuse.FileLock, flags uint32) syscall.Errno {
	return n.setlk(ctx, f, owner, lk, flags, false)
}

func (n *node) Setlkw(ctx context.Context, f fs.FileHandle, owner uint64, lk *gofuse.FileLock, flags uint32) syscall.Errno {
	return n.setlk(ctx, f, owner, lk, flags, true)
}

func (n *node) setlk(ctx context.Context, f fs.FileHandle, owner uint64, lk *gofuse.FileLock, flags uint32, wait bool) syscall.Errno {
	req, e := n.lockRequest(owner, lk, flags)
	if e != 0 {
		return e
	}
	if e := n.lockable(req); e != 0 {
		return e
	}
	locks := n.m.cfg.Locks
	if req.Type == store.LockUnlock {
		if !locks.HasLocks(req.Ino, owner) {
			return 0
		}
		// Publish first: the next holder reads what this one wrote. Under
		// this node's lock right the next holder is on this node, and the
		// right's return publishes first (FlushIno).
		if locks.LockRight(req.Ino) == 0 {
			if err := n.sync(); err != nil {
				return errno(err)
			}
		}
		bctx, cancel := bounded(ctx)
		defer cancel()
		_, err := locks.Lock(bctx, req)
		return errno(err)
	}
	req.Wait = wait
	if h, ok := f.(*handle); ok {
		h.lockedBy(owner) // released with the handle (OFD locks)
	}
	lctx, cancel := ctx, context.CancelFunc(func() {})
	if !wait {
		lctx, cancel = bounded(ctx)
	}
	defer cancel()
	right := locks.LockRight(req.Ino)
	if _, err := locks.Lock(lctx, req); err != nil {
		if errors.Is(err, context.Canceled) {
			return syscall.EINTR
		}
		return errno(err)
	}
	n.m.lockNodes.Store(req.Ino, n) // FlushIno publishes it before the right goes
	// The grant was applied after the release that freed the lock, and
	// so after the holder's writes: drop what the kernel caches of the
	// file, so that the taker reads them. Granted under a lock right this
	// node held all along, the last holder was on this node, and wrote
	// through this kernel's cache.
	if !n.IsDir() && (right == 0 || locks.LockRight(req.Ino) != right) {
		n.NotifyContent(0, 0)
	}
	return 0
}

// FlushIno implements store.LockFlusher: before this node gives the
// lock right of ino back, what was written to the file is published.
func (m *Mount) FlushIno(ctx context.Context, ino uint64) {
	v, ok := m.lockNodes.LoadAndDelete(ino)
	if !ok {
		return
	}
	n := v.(*node)
	if err := n.sync(); err != nil {
		m.cfg.Logger.Warn("publish a locked file before its lock right goes to another node", "path", n.storePath(), "err", err)
	}
}

// releaseLocks drops owner's locks on n (a close), publishing what was
// written to n first.
func (n *node) releaseLocks(ctx context.Context, owner uint64) syscall.Errno {
	locks := n.m.cfg.Locks
	ino := n.StableAttr().Ino
	if locks == nil || !locks.HasLocks(ino, owner) {
		return 0
	}
	serr := n.sync()
	bctx, cancel := bounded(ctx)
	defer cancel()
	if err := locks.ReleaseOwner(bctx, ino, owner); err != nil {
		n.m.cfg.Logger.Warn("release file locks at close", "path", n.storePath(), "err", err)
		return errno(err)
	}
	return errno(serr)
}

// lockLost reports whether this node lost its locks on n (EIO for a
// write, an fsync or a close until n is locked again).
func (n *node) lockLost() bool {
	l := n.m.cfg.Locks
	return l != nil && l.LockLost(n.StableAttr().Ino)
}

// handleOwners counts, per lock owner, the open handles of the mount that
// took locks for it. The kernel names a flock or OFD lock's owner by its
// struct file's address, which a new open may reuse before the RELEASE
// of the old one arrives (the kernel sends RELEASE asynchronously): that
// RELEASE must not drop the new description's locks. A RELEASE therefore
// drops an owner's locks only when no other open handle took locks for
// it, deciding and releasing under the owner's gate, which a lock
// request passes before it records its handle.
type handleOwners struct {
	mu sync.Mutex
	m  map[uint64]*ownerGate
}

type ownerGate struct {
	sync.Mutex
	handles int // open handles that took locks for the owner
	users   int // holders of the gate (the entry lives while > 0)
}

func (o *handleOwners) gate(owner uint64) *ownerGate {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.m == nil {
		o.m = map[uint64]*ownerGate{}
	}
	g := o.m[owner]
	if g == nil {
		g = &ownerGate{}
		o.m[owner] = g
	}
	g.users++
	return g
}

func (o *handleOwners) put(owner uint64, g *ownerGate) {
	o.mu.Lock()
	defer o.mu.Unlock()
	g.users--
	if g.users == 0 && g.handles == 0 {
		delete(o.m, owner)
	}
}

// lockedBy records that owner takes a lock through h (an OFD or flock
// lock, or a POSIX one): the handle's RELEASE drops them.
func (h *handle) lockedBy(owner uint64) {
	m := h.n.m
	g := m.owners.gate(owner)
	g.Lock()
	h.n.mu.Lock()
	if !h.lockOwners[owner] {
		if h.lockOwners == nil {
			h.lockOwners = map[uint64]bool{}
		}
		h.lockOwners[owner] = true
		g.handles++
		g.users++ // held by the handle until its release
	}
	h.n.mu.Unlock()
	g.Unlock()
	m.owners.put(owner, g)
}

// releaseHandleLocks drops the locks of the handle's open file
// description at RELEASE: its flock lock (the kernel names its owner) and
// the locks taken through it, unless another open handle took locks for
// the same owner.
func (h *handle) releaseHandleLocks(ctx context.Context) {
	n := h.n
	m := n.m
	n.mu.Lock()
	owners := h.lockOwners
	h.lockOwners = nil
	n.mu.Unlock()
	if o, ok := m.lockOwner(ctx); ok && !owners[o] {
		g := m.owners.gate(o)
		g.Lock()
		if g.handles == 0 {
			n.releaseLocks(ctx, o)
		}
		g.Unlock()
		m.owners.put(o, g)
	}
	for o := range owners {
		g := m.owners.gate(o)
		g.Lock()
		g.handles--
		g.users-- // the handle's hold
		if g.handles == 0 {
			n.releaseLocks(ctx, o)
		}
		g.Unlock()
		m.owners.put(o, g)
	}
}
