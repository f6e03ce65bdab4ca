package fuse

import (
	"context"
	"errors"
	"path"
	"sync"
	"syscall"
	"time"

	"github.com/cairn-fs/cairn/internal/store"
	"github.com/hanwen/go-fuse/v2/fs"
	gofuse "github.com/hanwen/go-fuse/v2/fuse"
)

// node is a file or directory of the mount. Its path is its place in
// go-fuse's tree (which renames keep current), so the store is always
// asked by path.
type node struct {
	fs.Inode
	m *Mount

	mu       sync.Mutex
	write    *content          // the content being written through the mount, or nil
	pend     *pending          // the newest version queued for publishing, or nil
	pendOp   *pending          // the newest directory or attribute change queued, or nil
	local    *attrs            // attributes not committed yet (a new file, a change while a version is pending), or nil
	werr     error             // a failed publish, for the writer's next fsync or close
	fresh    bool              // created through this mount and not committed yet
	persist  bool              // a fresh file: kept in go-fuse's tree (persistent) until published or unlinked (forget.go)
	claim    store.Claim       // a fresh file: the directory claim its create was decided under (own.go)
	gone     bool              // unlinked: what is written is never published
	goneInfo *store.ObjectInfo // its description when it was unlinked
	pin      store.Object      // no-open mode: the version last read, or unlinked or replaced here: open descriptors read it once it is gone
	dirTime  time.Time         // a directory: its last change here not committed yet (a create in it)
	// kids: a directory, the mkdirs of subdirectories made in it that
	// are queued and not settled yet: its link count counts them at
	// once (store.ObjectInfo.Nlink does once they are published).
	kids map[*pending]struct{}
	// deferred: invalidations of n's name that the mount left (ownEntry)
	// while n held changes the store did not have; queued again once it
	// has none (settle), when the store may differ for good (another
	// node's change that n's publish did not override).
	deferred []inval
	// settled counts the times a queued change of n (or of a kid) was
	// published or failed, and n's uncommitted state above dropped for
	// the store's: Getattr reads the store again when it moved meanwhile
	// (the store's answer may predate the change the dropped state held).
	settled uint64
}

// attrs are a file's attributes changed through the mount and not
// committed yet: published with its pending version.
type attrs struct {
	mode, uid, gid uint32
	mtime, ctime   time.Time
	atime          time.Time
	gen            uint64 // counts changes
}

// set is the change that gives a node attributes a.
func (a attrs) set() store.SetAttrs {
	return store.SetAttrs{Mode: &a.mode, UID: &a.uid, GID: &a.gid, ModTime: &a.mtime, ATime: &a.atime}
}

// attrsNow returns a copy of n's uncommitted attributes and their
// generation (zero values without any).
func (n *node) attrsNow() (attrs, uint64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.local == nil {
		return attrs{}, 0
	}
	return *n.local, n.local.gen
}

var (
	_ fs.NodeLookuper       = (*node)(nil)
	_ fs.NodeGetattrer      = (*node)(nil)
	_ fs.NodeSetattrer      = (*node)(nil)
	_ fs.NodeReaddirer      = (*node)(nil)
	_ fs.NodeMkdirer        = (*node)(nil)
	_ fs.NodeRmdirer        = (*node)(nil)
	_ fs.NodeUnlinker       = (*node)(nil)
	_ fs.NodeRenamer        = (*node)(nil)
	_ fs.NodeCreater        = (*node)(nil)
	_ fs.NodeOnForgetter    = (*node)(nil)
	_ fs.NodeOpener         = (*node)(nil)
	_ fs.NodeStatfser       = (*node)(nil)
	_ fs.NodeMknoder        = (*node)(nil)
	_ fs.NodeSymlinker      = (*node)(nil)
	_ fs.NodeLinker         = (*node)(nil)
	_ fs.NodeReadlinker     = (*node)(nil)
	_ fs.NodeGetxattrer     = (*node)(nil)
	_ fs.NodeSetxattrer     = (*node)(nil)
	_ fs.NodeListxattrer    = (*node)(nil)
	_ fs.NodeRemovexattrer  = (*node)(nil)
	_ fs.NodeFsyncer        = (*node)(nil)
	_ fs.NodeOpendirHandler = (*node)(nil)
)

// Fsync of a file returns once its data and attributes written through
// the mount are durable on W replicas and committed (EIO, ENOSPC when
// that failed); of a directory, once everything the mount queued before
// it is (the mount's syncfs: the kernel does not pass syncfs(2) on,
// see doc.go), with the error of a queued unlink, mkdir or attribute
// change that failed since the last directory fsync.
func (n *node) Fsync(ctx context.Context, f fs.FileHandle, flags uint32) syscall.Errno {
	if n.IsDir() {
		if n.m.cfg.NoOpen {
			// Files written and not flushed (noflush mode: every file
			// written since its last publish) are queued too: an fsync
			// of a directory makes the names made in it durable, and a
			// new file's name is published with its content.
			n.m.idle.publish(0)
		}
		n.m.wb.drain()
		return errno(n.m.wb.takeNsErr()) // a queued unlink that failed, say
	}
	if n.lockLost() {
		return syscall.EIO
	}
	return errno(n.sync())
}

// storePath is the node's path inside the bucket.
func (n *node) storePath() string {
	return path.Join(n.m.cfg.Prefix, n.Path(n.Root()))
}

// stat describes n: by inode number (its names may have changed under it,
// through another node's rename or unlink of one of its hard links), by
// path for the mount's root.
func (n *node) stat(ctx context.Context) (store.ObjectInfo, error) {
	if ino := n.StableAttr().Ino; !n.IsRoot() && ino != 0 {
		return n.m.cfg.Store.StatIno(ctx, n.m.cfg.Bucket, n.storePath(), ino)
	}
	return n.m.cfg.Store.Stat(ctx, n.m.cfg.Bucket, n.storePath())
}

// open opens file n's committed version, by inode number.
func (n *node) open(ctx context.Context) (store.Object, error) {
	if ino := n.StableAttr().Ino; ino != 0 {
		return n.m.cfg.Store.OpenIno(ctx, n.m.cfg.Bucket, n.storePath(), ino)
	}
	return n.m.cfg.Store.Open(ctx, n.m.cfg.Bucket, n.storePath())
}

// child is the store path of name in directory n.
func (n *node) child(name string) string { return path.Join(n.storePath(), name) }

// newName is the store path of a name to create in directory n:
// ENAMETOOLONG past the store's limits (a name of 255 bytes, a path of
// store.MaxPathLen from the bucket's root).
func (n *node) newName(name string) (string, syscall.Errno) {
	p := n.child(name)
	if len(name) > store.MaxNameLen || len(p) > store.MaxPathLen {
		return "", syscall.ENAMETOOLONG
	}
	return p, 0
}

// errno maps a store error to an errno (one table, like httpapi's).
func errno(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	table := []struct {
		err error
		no  syscall.Errno
	}{
		{store.ErrNotFound, syscall.ENOENT},
		{store.ErrNoBucket, syscall.ENOENT},
		{store.ErrExists, syscall.EEXIST},
		{store.ErrNotEmpty, syscall.ENOTEMPTY},
		{store.ErrIsDir, syscall.EISDIR},
		{store.ErrNotDir, syscall.ENOTDIR},
		{store.ErrInvalidName, syscall.EINVAL},
		{store.ErrPrecondition, syscall.EEXIST},
		{store.ErrNoSpace, syscall.ENOSPC},
		{store.ErrReadOnly, syscall.EROFS},
		{store.ErrCorrupt, syscall.EIO},
		{store.ErrUnavailable, syscall.EIO},
		{context.DeadlineExceeded, syscall.EIO},
		{store.ErrWouldBlock, syscall.EAGAIN},
		{store.ErrDeadlock, syscall.EDEADLK},
		{store.ErrLockLost, syscall.EIO},
		{store.ErrNotUpgraded, syscall.ENOLCK},
		{context.Canceled, syscall.EINTR},
	}
	for _, e := range table {
		if errors.Is(err, e.err) {
			return e.no
		}
	}
	var no syscall.Errno
	if errors.As(err, &no) {
		return no
	}
	return syscall.EIO
}

// fill sets out from info (and the content being written, if any). The
// access time is the one last set (utimensat); reads do not move it.
func (n *node) fill(info store.ObjectInfo, out *gofuse.Attr) {
	n.mu.Lock()
	n.fillLocked(info, out)
	n.mu.Unlock()
}

// fillLocked is fill with n.mu held: n's uncommitted attributes, size and
// times replace info's, and a directory's link count counts the
// subdirectories whose mkdir is queued (n.kids).
func (n *node) fillLocked(info store.ObjectInfo, out *gofuse.Attr) {
	out.Ino = info.Ino
	out.Uid, out.Gid = info.UID, info.GID
	mode := info.Mode & 0o7777 // 0 is a mode like any other (chmod 0)
	mtime, ctime, atime := info.ModTime, info.ChangeTime, info.AccessTime
	if ctime.IsZero() {
		ctime = mtime
	}
	if atime.IsZero() {
		atime = mtime
	}
	out.Blksize = 4096
	switch {
	case info.Symlink != "":
		out.Mode = syscall.S_IFLNK | 0o777
		out.Nlink = max(info.Nlink, 1)
		out.Size = uint64(len(info.Symlink))
		if a := n.local; a != nil { // lchown, utimensat with AT_SYMLINK_NOFOLLOW
			out.Uid, out.Gid = a.uid, a.gid
			mtime, ctime, atime = a.mtime, a.ctime, a.atime
		}
		out.SetTimes(&atime, &mtime, &ctime)
		return
	case info.IsDir:
		out.Mode = syscall.S_IFDIR | mode
		out.Nlink = max(info.Nlink, 2) + uint32(len(n.kids))
	case info.Special != 0:
		out.Mode = info.Special | mode
		out.Nlink = max(info.Nlink, 1)
		out.Rdev = info.Rdev
	default:
		out.Mode = syscall.S_IFREG | mode
		out.Nlink = max(info.Nlink, 1)
	}
	out.Size = uint64(info.Size)
	if sz, ok := n.localSize(); ok {
		out.Size = uint64(sz)
	}
	if a := n.local; a != nil {
		out.Mode = out.Mode&^0o7777 | a.mode&0o7777
		out.Uid, out.Gid = a.uid, a.gid
		mtime, ctime, atime = a.mtime, a.ctime, a.atime
	} else if t := n.localChange(); !t.IsZero() {
		mtime, ctime = t, t
	}
	if n.dirTime.After(mtime) {
		mtime, ctime = n.dirTime, n.dirTime
	}
	out.SetTimes(&atime, &mtime, &ctime)
	out.Blocks = (out.Size + 511) / 512
}

// settledNow is n.settled.
func (n *node) settledNow() uint64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.settled
}

// fillSettled fills out from info, a store answer read since n.settled
// was settled, and reports true; false when it cannot: a queued change of
// n or of a kid settled meanwhile (info may predate it, and the state
// that showed it is dropped), or a kid's mkdir is being published (info
// may count it or not; fillSettled waits until it settles). The caller
// then reads the store again.
func (n *node) fillSettled(info store.ObjectInfo, settled uint64, out *gofuse.Attr) bool {
	n.mu.Lock()
	if n.settled != settled {
		n.mu.Unlock()
		return false
	}
	for p := range n.kids {
		if p.taken.Load() {
			n.mu.Unlock()
			<-p.done // bounded: the publisher's calls are
			return false
		}
	}
	// Every kid left is still queued: the store has not made it.
	n.fillLocked(info, out)
	n.mu.Unlock()
	return true
}

// localSize is the size of n's uncommitted content, if any (n.mu held).
func (n *node) localSize() (int64, bool) {
	switch {
	case n.write != nil && n.write.f != nil:
		return n.write.size(), true
	case n.pend != nil:
		return n.pend.size, true
	}
	return 0, false
}

// touchedDir records that directory n changed here at t (a name made in
// it, not committed yet): its mtime and ctime show it at once.
func (n *node) touchedDir(t time.Time) {
	n.mu.Lock()
	n.dirTime = t
	n.mu.Unlock()
}

// pinned is n's pinned version in no-open mode (n.pin), or nil.
func (n *node) pinned() store.Object {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.pin
}

// keep pins obj, a version of n just read, in no-open mode: with no handle
// to hold the version a descriptor opened, a file unlinked or replaced
// while open reads the version it read last (and what the kernel caches).
func (n *node) keep(obj store.Object) {
	n.mu.Lock()
	if n.pin != obj {
		n.pin = obj
	}
	n.mu.Unlock()
}

// unlinkedInfo is n's description when it was unlinked, or nil.
func (n *node) unlinkedInfo() *store.ObjectInfo {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.goneInfo
}

// uncommitted reports whether n has a version or attributes the store
// does not have yet (a directory: a link count, kids).
func (n *node) uncommitted() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.uncommittedLocked()
}

// uncommittedLocked is uncommitted with n.mu held.
func (n *node) uncommittedLocked() bool {
	return n.fresh || n.pend != nil || n.pendOp != nil || n.local != nil || (n.write != nil && n.write.dirty) || len(n.kids) > 0
}

// isFresh reports whether n was created through this mount, is not
// published yet, and was not removed.
func (n *node) isFresh() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.fresh && !n.gone
}

func (n *node) newChild(ctx context.Context, info store.ObjectInfo, out *gofuse.EntryOut) *fs.Inode {
	c := &node{m: n.m}
	c.fill(info, &out.Attr)
	return n.NewInode(ctx, c, fs.StableAttr{Mode: fileType(info), Ino: info.Ino})
}

// Lookup finds name in directory n.
func (n *node) Lookup(ctx context.Context, name string, out *gofuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if len(name) > store.MaxNameLen {
		return nil, syscall.ENAMETOOLONG
	}
	if isSnapshotsDir(n, name) {
		return n.lookupSnapshots(ctx, out) // snapshots.go
	}
	if len(n.child(name)) > store.MaxPathLen {
		return nil, syscall.ENOENT // nothing can be stored there
	}
	if ch := n.GetChild(name); ch != nil {
		// A file written here and not published yet is known by its node.
		if c, ok := ch.Operations().(*node); ok && c.uncommitted() {
			var a gofuse.AttrOut
			if e := c.Getattr(ctx, nil, &a); e == 0 {
				out.Attr = a.Attr
				return ch, 0
			}
		}
	}
	p := n.child(name)
	switch gone, queued := n.m.wb.only(p); {
	case gone:
		return nil, syscall.ENOENT // removed here; the unlink is queued
	case queued:
		// Changed here, queued, and its node forgotten by the kernel (an
		// invalidation after an earlier version's commit; a directory
		// made again after an unlink): publish it first, or the lookup
		// would answer the store's older version.
		n.m.wb.drain()
	case n.isFresh():
		// A directory made here and not published: nobody else knows it,
		// so what is in it is in the mount's tree or queue. The store
		// holds nothing under its path, or another's (a file unlinked
		// here before the mkdir, both queued: ENOTDIR).
		return nil, syscall.ENOENT
	}
	info, err := n.m.cfg.Store.Stat(ctx, n.m.cfg.Bucket, p)
	if err != nil {
		return nil, errno(err)
	}
	return n.newChild(ctx, info, out), 0
}

// storeRead runs read, a store read of n. When the store has nothing and
// n has changes it has not committed yet, local is true (the caller
// answers from n); when n's changes were committed while read ran, read
// runs again.
func storeRead[T any](n *node, read func() (T, error)) (v T, local bool, err error) {
	was := n.uncommitted()
	v, err = read()
	switch {
	case !errors.Is(err, store.ErrNotFound):
		return v, false, err
	case n.uncommitted():
		return v, true, nil
	case was: // committed meanwhile
		v, err = read()
	}
	return v, false, err
}

// Getattr reports n's attributes.
func (n *node) Getattr(ctx context.Context, f fs.FileHandle, out *gofuse.AttrOut) syscall.Errno {
	if gi := n.unlinkedInfo(); gi != nil {
		// Unlinked through this mount (maybe still queued): link count 0,
		// the version an open handle reads.
		info := *gi
		if h, _ := f.(*handle); h != nil && h.obj != nil {
			info = h.obj.Info()
		}
		n.fill(info, &out.Attr)
		out.Nlink = 0
		return 0
	}
	for {
		// The store's answer and n's uncommitted state must be of one
		// moment: a publish that commits n's change and drops its state
		// between the two would show the older committed attributes.
		settled := n.settledNow()
		info, local, err := storeRead(n, func() (store.ObjectInfo, error) { return n.stat(ctx) })
		switch h, _ := f.(*handle); {
		case local: // created, not published yet
			info = store.ObjectInfo{Ino: n.StableAttr().Ino, Nlink: 1, IsDir: n.IsDir()}
		case errors.Is(err, store.ErrNotFound) && h != nil && h.obj != nil: // unlinked while open: the version it reads
			n.fill(h.obj.Info(), &out.Attr)
			out.Nlink = 0
			return 0
		case errors.Is(err, store.ErrNotFound) && h == nil && n.pinned() != nil: // no-open mode: unlinked or replaced while open
			n.fill(n.pinned().Info(), &out.Attr)
			out.Nlink = 0
			return 0
		case errors.Is(err, store.ErrNotFound) && n.unlinkedInfo() != nil: // unlinked while open for writing
			n.fill(*n.unlinkedInfo(), &out.Attr)
			out.Nlink = 0
			return 0
		case err != nil:
			return errno(err)
		}
		if n.fillSettled(info, settled, &out.Attr) {
			return 0
		}
	}
}

// caller is the user and group of the process making a FUSE call (the
// owner of what it creates).
func caller(ctx context.Context) (uid, gid uint32) {
	if c, ok := gofuse.FromContext(ctx); ok {
		return c.Uid, c.Gid
	}
	return 0, 0
}

// Setattr truncates, and changes the mode, owner and modification time
// (the kernel checked the caller may: default_permissions).
func (n *node) Setattr(ctx context.Context, f fs.FileHandle, in *gofuse.SetAttrIn, out *gofuse.AttrOut) syscall.Errno {
	ctx, cancel := bounded(ctx)
	defer cancel()
	if sz, ok := in.GetSize(); ok {
		// A file open for writing is truncated in its content being
		// written, published with the rest at fsync or close (the new
		// version appears whole); truncate(2) of a file nobody writes is
		// published now.
		writing := n.writing()
		if n.m.cfg.NoOpen {
			// The kernel sends open(O_TRUNC)'s truncation as a SETATTR
			// after the open, the same as truncate(2) of a path: it is
			// kept with the content, published by the next FLUSH (the
			// writer's close) or once idle (idlePublish), so that a
			// rewrite is not published empty first.
			writing = true
			n.m.idle.add(n)
		}
		w, e := n.openContent(ctx, false)
		if e != 0 {
			return e
		}
		n.mu.Lock()
		err := n.ensureFile(ctx, w)
		if err == nil {
			err = w.truncate(int64(sz))
		}
		if err == nil {
			n.changed(w)
		}
		n.mu.Unlock()
		if writing {
			n.unref()
		} else if rerr := n.release(); err == nil {
			err = rerr
		}
		if err != nil {
			return errno(err)
		}
	}
	var set store.SetAttrs
	if m, ok := in.GetMode(); ok {
		set.Mode = &m
	}
	if u, ok := in.GetUID(); ok {
		set.UID = &u
	}
	if g, ok := in.GetGID(); ok {
		set.GID = &g
	}
	if t, ok := in.GetMTime(); ok {
		set.ModTime = &t
	}
	if t, ok := in.GetATime(); ok {
		set.ATime = &t
	}
	if set.Mode == nil && setattrDropsPrivs(in) { // killpriv.go
		if err := n.dropPrivs(ctx); err != nil {
			return errno(err)
		}
	}
	if set.Mode != nil || set.UID != nil || set.GID != nil || set.ModTime != nil || set.ATime != nil {
		// A file with a version not published yet takes the change with
		// it (an untar's chown, chmod and utimensat after each file cost
		// no commit of their own); any other change is made now, after
		// what the mount queued before it.
		if err := n.setLocal(ctx, set); err != nil {
			return errno(err)
		}
	}
	return n.Getattr(ctx, f, out)
}

// setLocal applies set to n's uncommitted attributes, which go with its
// pending version or change, or with a change queued now.
func (n *node) setLocal(ctx context.Context, set store.SetAttrs) error {
	n.mu.Lock()
	a := n.local
	n.mu.Unlock()
	if a == nil {
		info, err := n.stat(ctx)
		if err != nil {
			return err
		}
		a = &attrs{mode: info.Mode & 0o7777, uid: info.UID, gid: info.GID, mtime: info.ModTime, ctime: info.ChangeTime, atime: info.AccessTime}
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.local != nil {
		a = n.local
	}
	if (set.Mode == nil || *set.Mode&0o7777 == a.mode) && (set.UID == nil || *set.UID == a.uid) &&
		(set.GID == nil || *set.GID == a.gid) && (set.ModTime == nil || set.ModTime.Equal(a.mtime)) &&
		(set.ATime == nil || set.ATime.Equal(a.atime)) {
		return nil // nothing changes (tar's chown to the owner a file already has)
	}
	if set.Mode != nil {
		a.mode = *set.Mode & 0o7777
	}
	if set.UID != nil {
		a.uid = *set.UID
	}
	if set.GID != nil {
		a.gid = *set.GID
	}
	if set.ModTime != nil {
		a.mtime = *set.ModTime
	}
	if set.ATime != nil {
		a.atime = *set.ATime
	}
	a.ctime = time.Now()
	a.gen++
	n.local = a
	carried := (n.pend != nil && !n.pend.taken.Load()) || (n.pendOp != nil && !n.pendOp.taken.Load()) ||
		(n.write != nil && n.write.dirty)
	if !carried && !n.gone {
		n.m.wb.enqueueOp(n, opAttrs, n.storePath(), store.Claim{})
	}
	return nil
}

// Statfs reports the cluster's capacity (Config.Capacity), in 4 KiB
// blocks; the disk of TmpDir without one.
func (n *node) Statfs(ctx context.Context, out *gofuse.StatfsOut) syscall.Errno {
	var st syscall.Statfs_t
	if err := syscall.Statfs(n.m.cfg.TmpDir, &st); err != nil {
		return errno(err)
	}
	out.FromStatfsT(&st)
	out.NameLen = 255
	if c := n.m.cfg.Capacity; c != nil {
		if total, free, err := c(ctx); err == nil && total > 0 {
			const bsize = 4096
			out.Bsize, out.Frsize = bsize, bsize
			out.Blocks, out.Bfree, out.Bavail = total/bsize, free/bsize, free/bsize
		}
	}
	return 0
}
