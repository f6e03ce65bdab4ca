package fuse

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path"
	"strings"
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
	gone     bool              // unlinked: what is written is never published
	goneInfo *store.ObjectInfo // its description when it was unlinked
	pin      store.Object      // no-open mode: the version last read, or unlinked or replaced here: open descriptors read it once it is gone
	dirTime  time.Time         // a directory: its last change here not committed yet (a create in it)
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
		n.mu.Lock()
		if a := n.local; a != nil { // lchown, utimensat with AT_SYMLINK_NOFOLLOW
			out.Uid, out.Gid = a.uid, a.gid
			mtime, ctime, atime = a.mtime, a.ctime, a.atime
		}
		n.mu.Unlock()
		out.SetTimes(&atime, &mtime, &ctime)
		return
	case info.IsDir:
		out.Mode = syscall.S_IFDIR | mode
		out.Nlink = max(info.Nlink, 2)
	default:
		out.Mode = syscall.S_IFREG | mode
		out.Nlink = max(info.Nlink, 1)
	}
	out.Size = uint64(info.Size)
	n.mu.Lock()
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
	n.mu.Unlock()
	out.SetTimes(&atime, &mtime, &ctime)
	out.Blocks = (out.Size + 511) / 512
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
// does not have yet.
func (n *node) uncommitted() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.fresh || n.pend != nil || n.pendOp != nil || n.local != nil || (n.write != nil && n.write.dirty)
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
	if n.m.wb.unlinking(p) {
		return nil, syscall.ENOENT // removed here; the unlink is queued
	}
	if n.m.wb.queued(p) {
		// Changed here, queued, and its node forgotten by the kernel (an
		// invalidation after an earlier version's commit): publish it
		// first, or the lookup would answer the store's older version.
		n.m.wb.drain()
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
	n.fill(info, &out.Attr)
	return 0
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
		n.m.wb.enqueueOp(n, opAttrs, n.storePath())
	}
	return nil
}

// OpendirHandle opens directory n with the kernel's readdir cache on
// (FOPEN_CACHE_DIR): a warm find or ls costs no call until a change in
// the directory invalidates it (Mount.changed).
func (n *node) OpendirHandle(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	return &dirHandle{n: n}, gofuse.FOPEN_CACHE_DIR | gofuse.FOPEN_KEEP_CACHE, 0
}

// dirHandle is an open directory: its listing is read at the first
// readdir (or seek), and dropped at release.
type dirHandle struct {
	n  *node
	ds fs.DirStream
}

var (
	_ fs.FileReaddirenter = (*dirHandle)(nil)
	_ fs.FileSeekdirer    = (*dirHandle)(nil)
	_ fs.FileReleasedirer = (*dirHandle)(nil)
)

func (d *dirHandle) stream(ctx context.Context) syscall.Errno {
	if d.ds != nil {
		return 0
	}
	ds, e := d.n.Readdir(ctx)
	d.ds = ds
	return e
}

// Readdirent returns the next entry (nil at the end).
func (d *dirHandle) Readdirent(ctx context.Context) (*gofuse.DirEntry, syscall.Errno) {
	if e := d.stream(ctx); e != 0 {
		return nil, e
	}
	if !d.ds.HasNext() {
		return nil, 0
	}
	de, e := d.ds.Next()
	return &de, e
}

// Seekdir moves to entry off.
func (d *dirHandle) Seekdir(ctx context.Context, off uint64) syscall.Errno {
	if e := d.stream(ctx); e != 0 {
		return e
	}
	if sd, ok := d.ds.(fs.FileSeekdirer); ok {
		return sd.Seekdir(ctx, off)
	}
	return syscall.ENOTSUP
}

// Releasedir drops the listing.
func (d *dirHandle) Releasedir(ctx context.Context, flags uint32) {
	if d.ds != nil {
		d.ds.Close()
	}
}

// Readdir lists directory n.
func (n *node) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	n.m.wb.drain() // the files written here are listed
	prefix := n.storePath()
	if prefix != "" {
		prefix += "/"
	}
	var entries []gofuse.DirEntry
	opts := store.ListOptions{Prefix: prefix, Delimiter: "/", Limit: 1000}
	for {
		res, err := n.m.cfg.Store.List(ctx, n.m.cfg.Bucket, opts)
		if err != nil {
			return nil, errno(err)
		}
		for _, e := range res.Entries {
			entries = append(entries, gofuse.DirEntry{Name: path.Base(e.Path), Ino: e.Ino, Mode: fileType(e)})
		}
		for _, p := range res.CommonPrefixes {
			entries = append(entries, gofuse.DirEntry{Name: path.Base(strings.TrimSuffix(p, "/")), Mode: syscall.S_IFDIR})
		}
		if !res.Truncated {
			break
		}
		opts.StartAfter = res.NextToken
	}
	return fs.NewListDirStream(entries), 0
}

// Mkdir creates directory name in n: the mount's at once (a reserved
// inode number), queued for the cluster like a closed file. In a
// directory with a default ACL it is made at once, with the ACL.
func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *gofuse.EntryOut) (*fs.Inode, syscall.Errno) {
	ctx, cancel := bounded(ctx)
	defer cancel()
	p, e := n.newName(name)
	if e != 0 {
		return nil, e
	}
	if ch := n.GetChild(name); ch != nil {
		if c, ok := ch.Operations().(*node); ok && c.uncommitted() {
			return nil, syscall.EEXIST
		}
	}
	if _, err := n.existing(ctx, p); err == nil {
		return nil, syscall.EEXIST
	}
	uid, gid := caller(ctx)
	mode &= 0o7777
	xs, err := n.xattrs(ctx)
	if err != nil {
		return nil, errno(err)
	}
	if len(xs[aclDefault]) > 0 {
		return n.mkdirNow(ctx, p, mode, uid, gid, out) // the default ACL, not the umask, narrows the mode
	}
	mode &^= callerUmask(ctx)
	ino, err := n.m.wb.newIno(ctx)
	if err != nil {
		return nil, errno(err)
	}
	now := time.Now()
	c := &node{m: n.m, fresh: true, local: &attrs{mode: mode, uid: uid, gid: gid, mtime: now, ctime: now, atime: now}}
	c.fill(store.ObjectInfo{Ino: ino, IsDir: true, Mode: mode, UID: uid, GID: gid, ModTime: now}, &out.Attr)
	ch := n.NewInode(ctx, c, fs.StableAttr{Mode: syscall.S_IFDIR, Ino: ino})
	c.mu.Lock()
	n.m.wb.enqueueOp(c, opMkdir, p)
	c.mu.Unlock()
	n.touchedDir(now)
	return ch, 0
}

// mkdirNow is Mkdir made at once (then given the parent's default ACL).
func (n *node) mkdirNow(ctx context.Context, p string, mode, uid, gid uint32, out *gofuse.EntryOut) (*fs.Inode, syscall.Errno) {
	n.m.wb.drain()
	if err := n.m.cfg.Store.Mkdir(ctx, n.m.cfg.Bucket, p, store.Attrs{Mode: mode, UID: uid, GID: gid, Explicit: true}); err != nil {
		return nil, errno(err)
	}
	n.inheritACL(ctx, p, true, mode)
	info, err := n.m.cfg.Store.Stat(ctx, n.m.cfg.Bucket, p)
	if err != nil {
		return nil, errno(err)
	}
	return n.newChild(ctx, info, out), 0
}

// Rmdir removes the empty directory name.
func (n *node) Rmdir(ctx context.Context, name string) syscall.Errno {
	ctx, cancel := bounded(ctx)
	defer cancel()
	n.m.wb.drain()
	info, err := n.m.cfg.Store.Stat(ctx, n.m.cfg.Bucket, n.child(name))
	if err != nil {
		return errno(err)
	}
	if !info.IsDir {
		return syscall.ENOTDIR
	}
	return errno(n.m.cfg.Store.Delete(ctx, n.m.cfg.Bucket, n.child(name), ""))
}

// Unlink removes file name. The removal joins the write-back queue (an
// rm -rf costs a few log entries, not a round trip per name): from the
// call on, the mount answers as if the name were gone, and a failure is
// returned by the directory's next fsync. A name whose file has a change
// queued, or was never published, is removed at once, after the queue.
func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	ctx, cancel := bounded(ctx)
	defer cancel()
	p := n.child(name)
	c, _ := n.GetChild(name).Operations().(*node)
	if n.m.wb.queued(p) || (c != nil && c.uncommitted()) {
		return n.unlinkNow(ctx, name, c)
	}
	info, err := n.m.cfg.Store.Stat(ctx, n.m.cfg.Bucket, p)
	if err != nil {
		return errno(err)
	}
	if info.IsDir {
		return syscall.EISDIR
	}
	if info.Nlink > 1 {
		// Another name of the file shows its link count: change it now.
		return n.unlinkNow(ctx, name, c)
	}
	c.pinNow(ctx)
	n.m.wb.enqueueUnlink(c, p)
	if c != nil && info.Nlink <= 1 {
		c.unlinked(info)
	}
	// The directory's mtime and ctime move now, as a local unlink's do
	// (pjdfstest unlink/00.t checks them at once).
	n.touchedDir(time.Now())
	return 0
}

// unlinkNow is Unlink once the queue is published.
func (n *node) unlinkNow(ctx context.Context, name string, c *node) syscall.Errno {
	n.m.wb.drain()
	info, err := n.m.cfg.Store.Stat(ctx, n.m.cfg.Bucket, n.child(name))
	if err != nil {
		if c != nil && c.uncommitted() {
			c.unlinked(store.ObjectInfo{Ino: c.StableAttr().Ino}) // created and never published
			return 0
		}
		return errno(err)
	}
	if info.IsDir {
		return syscall.EISDIR
	}
	if info.Nlink <= 1 {
		c.pinNow(ctx)
	}
	if err := n.m.cfg.Store.Delete(ctx, n.m.cfg.Bucket, n.child(name), ""); err != nil {
		return errno(err)
	}
	if c != nil && info.Nlink <= 1 {
		c.unlinked(info)
	}
	return 0
}

// pinNow pins, in no-open mode, the committed version of file n (nil: no
// node) about to be unlinked or replaced through the mount: descriptors
// still open read it (with a handle, the handle keeps the version it
// opened).
func (n *node) pinNow(ctx context.Context) {
	if n == nil || !n.m.cfg.NoOpen || n.IsDir() {
		return
	}
	if obj, err := n.open(ctx); err == nil {
		n.keep(obj)
	}
}

// existing is the store's description of p, unless an unlink of p is
// queued (ErrNotFound: the name is gone for the mount).
func (n *node) existing(ctx context.Context, p string) (store.ObjectInfo, error) {
	if n.m.wb.unlinking(p) {
		return store.ObjectInfo{}, store.ErrNotFound
	}
	return n.m.cfg.Store.Stat(ctx, n.m.cfg.Bucket, p)
}

// unlinked marks n removed (info: its last description): what is still
// written through open handles stays readable through them, is described
// by fstat (link count 0) and is never published.
func (n *node) unlinked(info store.ObjectInfo) {
	n.mu.Lock()
	defer n.mu.Unlock()
	info.Nlink = 0
	n.goneInfo = &info
	n.gone, n.fresh, n.local = true, false, nil
	if n.write != nil {
		n.write.dirty = false
	}
}

// Rename moves name to newName in newParent (within this mount).
func (n *node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	ctx, cancel := bounded(ctx)
	defer cancel()
	np, ok := newParent.(*node)
	if !ok {
		return syscall.EXDEV
	}
	if flags != 0 {
		return syscall.EINVAL // RENAME_NOREPLACE / EXCHANGE: not yet
	}
	dst, e := np.newName(newName)
	if e != 0 {
		return e
	}
	if c, ok := n.GetChild(name).Operations().(*node); ok {
		c.queueDirty() // a file being written moves with its content
	}
	n.m.wb.drain()
	if ch := np.GetChild(newName); ch != nil {
		if c, ok := ch.Operations().(*node); ok {
			c.pinNow(ctx) // replaced: its open descriptors keep reading it
		}
	}
	if c, ok := n.GetChild(name).Operations().(*node); ok {
		if err := c.takeErr(); err != nil {
			return errno(err)
		}
	}
	return errno(n.m.cfg.Store.Rename(ctx, n.m.cfg.Bucket, n.child(name), dst))
}

// fileType is the S_IFMT bits of info.
func fileType(info store.ObjectInfo) uint32 {
	switch {
	case info.IsDir:
		return syscall.S_IFDIR
	case info.Symlink != "":
		return syscall.S_IFLNK
	}
	return syscall.S_IFREG
}

// Symlink creates a symbolic link name -> target in n.
func (n *node) Symlink(ctx context.Context, target, name string, out *gofuse.EntryOut) (*fs.Inode, syscall.Errno) {
	ctx, cancel := bounded(ctx)
	defer cancel()
	p, e := n.newName(name)
	if e != 0 {
		return nil, e
	}
	n.m.wb.drain()
	uid, gid := caller(ctx)
	info, err := n.m.cfg.Store.Symlink(ctx, n.m.cfg.Bucket, p, target, store.Attrs{UID: uid, GID: gid, Explicit: true})
	if err != nil {
		return nil, errno(err)
	}
	return n.newChild(ctx, info, out), 0
}

// Link makes name in n one more name of target's file.
func (n *node) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *gofuse.EntryOut) (*fs.Inode, syscall.Errno) {
	ctx, cancel := bounded(ctx)
	defer cancel()
	t, ok := target.(*node)
	if !ok {
		return nil, syscall.EXDEV
	}
	t.queueDirty() // a file being written links to its current content
	n.m.wb.drain()
	if err := t.takeErr(); err != nil {
		return nil, errno(err)
	}
	p, e := n.newName(name)
	if e != 0 {
		return nil, e
	}
	info, err := n.m.cfg.Store.Link(ctx, n.m.cfg.Bucket, t.storePath(), p)
	if err != nil {
		return nil, errno(err)
	}
	return n.newChild(ctx, info, out), 0
}

// Readlink returns symlink n's target.
func (n *node) Readlink(ctx context.Context) ([]byte, syscall.Errno) {
	info, err := n.stat(ctx)
	if err != nil {
		return nil, errno(err)
	}
	if info.Symlink == "" {
		return nil, syscall.EINVAL
	}
	return []byte(info.Symlink), 0
}

// xattrAllowed: only the user namespace is kept (ACLs and security labels
// are not supported yet: ENOTSUP, so tools fall back).
func xattrAllowed(name string) bool {
	return strings.HasPrefix(name, "user.") || name == aclAccess || name == aclDefault
}

// Getxattr copies attribute attr into dest (or reports its size).
func (n *node) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	if !xattrAllowed(attr) {
		return 0, syscall.ENODATA
	}
	xs, err := n.xattrs(ctx)
	if err != nil {
		return 0, errno(err)
	}
	v, ok := xs[attr]
	if !ok {
		return 0, syscall.ENODATA
	}
	if len(dest) < len(v) {
		return uint32(len(v)), syscall.ERANGE
	}
	return uint32(copy(dest, v)), 0
}

// Setxattr sets attribute attr (XATTR_CREATE / XATTR_REPLACE honoured).
func (n *node) Setxattr(ctx context.Context, attr string, data []byte, flags uint32) syscall.Errno {
	ctx, cancel := bounded(ctx)
	defer cancel()
	if !xattrAllowed(attr) {
		return syscall.ENOTSUP
	}
	if len(attr) > 255 || len(data) > 64<<10 {
		return syscall.E2BIG
	}
	n.queueDirty() // the attribute goes on the file as written
	n.m.wb.drain()
	xs, err := n.m.cfg.Store.Xattrs(ctx, n.m.cfg.Bucket, n.storePath())
	if err != nil {
		return errno(err)
	}
	_, exists := xs[attr]
	switch {
	case flags&0x1 != 0 && exists: // XATTR_CREATE
		return syscall.EEXIST
	case flags&0x2 != 0 && !exists: // XATTR_REPLACE
		return syscall.ENODATA
	}
	v := append([]byte{}, data...) // never nil: nil removes
	set := store.SetAttrs{Xattrs: map[string][]byte{attr: v}}
	if attr == aclAccess {
		// The mode's permission bits follow the access ACL (owner, mask or
		// group, other), in the same change: the kernel consults an ACL
		// only when the mode's group bits allow something.
		info, err := n.stat(ctx)
		if err != nil {
			return errno(err)
		}
		mode, ok := aclMode(v, info.Mode)
		if !ok {
			return syscall.EINVAL
		}
		set.Mode = &mode
	}
	_, err = n.m.cfg.Store.SetAttrs(ctx, n.m.cfg.Bucket, n.storePath(), set)
	return errno(err)
}

// Listxattr lists the attribute names, NUL-terminated.
func (n *node) Listxattr(ctx context.Context, dest []byte) (uint32, syscall.Errno) {
	xs, err := n.xattrs(ctx)
	if err != nil {
		return 0, errno(err)
	}
	var names []byte
	for k := range xs {
		if xattrAllowed(k) {
			names = append(append(names, k...), 0)
		}
	}
	if len(dest) < len(names) {
		return uint32(len(names)), syscall.ERANGE
	}
	return uint32(copy(dest, names)), 0
}

// Removexattr removes attribute attr.
func (n *node) Removexattr(ctx context.Context, attr string) syscall.Errno {
	ctx, cancel := bounded(ctx)
	defer cancel()
	if !xattrAllowed(attr) {
		return syscall.ENOTSUP
	}
	n.queueDirty()
	n.m.wb.drain()
	xs, err := n.m.cfg.Store.Xattrs(ctx, n.m.cfg.Bucket, n.storePath())
	if err != nil {
		return errno(err)
	}
	if _, ok := xs[attr]; !ok {
		return syscall.ENODATA
	}
	_, err = n.m.cfg.Store.SetAttrs(ctx, n.m.cfg.Bucket, n.storePath(), store.SetAttrs{Xattrs: map[string][]byte{attr: nil}})
	return errno(err)
}

// xattrs returns n's extended attributes: none for a file created here
// and not published yet.
func (n *node) xattrs(ctx context.Context) (map[string][]byte, error) {
	xs, local, err := storeRead(n, func() (map[string][]byte, error) {
		return n.m.cfg.Store.Xattrs(ctx, n.m.cfg.Bucket, n.storePath())
	})
	if local {
		return nil, nil
	}
	return xs, err
}

// Mknod refuses FIFOs, sockets and devices.
func (n *node) Mknod(ctx context.Context, name string, mode, dev uint32, out *gofuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return nil, syscall.EPERM
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

// Create makes file name in n, open for writing. The new file is the
// mount's at once (an inode number reserved from the store, its attributes
// and content here) and reaches the cluster when it is closed (the
// write-back queue). In a directory with a default ACL it is published
// empty at once, and given the ACL, as before a write.
func (n *node) Create(ctx context.Context, name string, flags, mode uint32, out *gofuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	ctx, cancel := bounded(ctx)
	defer cancel()
	p, e := n.newName(name)
	if e != 0 {
		return nil, nil, 0, e
	}
	if info, err := n.existing(ctx, p); err == nil {
		if flags&syscall.O_EXCL != 0 {
			return nil, nil, 0, syscall.EEXIST
		}
		if info.IsDir {
			return nil, nil, 0, syscall.EISDIR
		}
	}
	uid, gid := caller(ctx)
	mode &= 0o7777
	xs, err := n.xattrs(ctx)
	if err != nil {
		return nil, nil, 0, errno(err)
	}
	if len(xs[aclDefault]) > 0 {
		return n.createNow(ctx, p, mode, uid, gid, out) // the default ACL, not the umask, narrows the mode
	}
	mode &^= callerUmask(ctx)
	ino, err := n.m.wb.newIno(ctx)
	if err != nil {
		return nil, nil, 0, errno(err)
	}
	w := newContent(n.m.cfg.TmpDir)
	w.dirty, w.users = true, 1
	now := time.Now()
	c := &node{m: n.m, write: w, fresh: true, local: &attrs{mode: mode, uid: uid, gid: gid, mtime: now, ctime: now, atime: now}}
	c.fill(store.ObjectInfo{Ino: ino, Nlink: 1, Mode: mode, UID: uid, GID: gid, ModTime: now}, &out.Attr)
	ch := n.NewInode(ctx, c, fs.StableAttr{Mode: syscall.S_IFREG, Ino: ino})
	n.touchedDir(now)
	if n.m.cfg.NoOpen {
		n.m.idle.add(c) // dirty from the start (handle.content adds on a clean write)
	}
	return ch, n.m.handleOut(&handle{n: c, writable: true}), 0, 0
}

// createNow is Create publishing the empty file at once (then giving it
// the directory's default ACL).
func (n *node) createNow(ctx context.Context, p string, mode, uid, gid uint32, out *gofuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	n.m.wb.drain()
	info, _, err := n.m.cfg.Store.Put(ctx, n.m.cfg.Bucket, p, strings.NewReader(""),
		store.PutOptions{Size: 0, Mode: mode, UID: uid, GID: gid, Explicit: true})
	if err != nil {
		return nil, nil, 0, errno(err)
	}
	n.inheritACL(ctx, p, false, mode)
	if st, err := n.m.cfg.Store.Stat(ctx, n.m.cfg.Bucket, p); err == nil {
		info = st // the mode the default ACL left
	}
	ch := n.newChild(ctx, info, out)
	c := ch.Operations().(*node)
	if _, e := c.openContent(ctx, true); e != 0 {
		return nil, nil, 0, e
	}
	return ch, n.m.handleOut(&handle{n: c, writable: true}), 0, 0
}

// Open opens file n. In no-open mode it answers ENOSYS, which the kernel
// takes as a success with no handle, and sends no OPEN again.
func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	if n.m.cfg.NoOpen {
		return nil, 0, syscall.ENOSYS
	}
	h := &handle{n: n, writable: flags&syscall.O_ACCMODE != syscall.O_RDONLY}
	if h.writable && n.m.killFlagged(ctx) { // O_TRUNC by a caller without CAP_FSETID
		if err := n.dropPrivs(ctx); err != nil {
			return nil, 0, errno(err)
		}
	}
	if h.writable {
		if _, e := n.openContent(ctx, flags&syscall.O_TRUNC != 0); e != 0 {
			return nil, 0, e
		}
		return h, 0, 0
	}
	// The kernel keeps the pages of a file opened for reading until a
	// change invalidates them. The version is pinned at open: a version
	// closed and queued here is published first (so that it stays
	// readable through this handle if it is unlinked or replaced).
	n.mu.Lock()
	queued := n.pend != nil && (n.write == nil || n.write.f == nil)
	n.mu.Unlock()
	if queued {
		n.m.wb.drain()
	}
	// A read-only handle has nothing to publish at close: FOPEN_NOFLUSH
	// spares the FLUSH call of every close(2) (one call of three for
	// a framework's open-read-close of a template).
	obj, local, err := storeRead(n, func() (store.Object, error) { return n.open(ctx) })
	if local {
		return h, gofuse.FOPEN_NOFLUSH, 0 // created here, not published yet: reads see its content here
	}
	if err != nil {
		return nil, 0, errno(err)
	}
	h.obj = obj
	return h, gofuse.FOPEN_KEEP_CACHE | gofuse.FOPEN_NOFLUSH, 0
}

// writing reports whether n has content being written.
func (n *node) writing() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.write != nil
}

// openContent returns n's content being written, starting it when there
// is none: empty when trunc, else based on the newest version (copied at
// the first change, ensureFile).
func (n *node) openContent(ctx context.Context, trunc bool) (*content, syscall.Errno) {
	n.mu.Lock()
	defer n.mu.Unlock()
	w := n.write
	if w == nil {
		w = &content{}
		n.write = w
	}
	w.users++
	if trunc {
		if err := n.ensureEmpty(w); err != nil {
			w.users--
			return nil, errno(err)
		}
	}
	return w, 0
}

// ensureEmpty makes w an empty content (n.mu held).
func (n *node) ensureEmpty(w *content) error {
	if w.f == nil {
		w.f = newBuffer(n.m.cfg.TmpDir)
	} else if err := w.f.Truncate(0); err != nil {
		return err
	}
	n.changed(w)
	return nil
}

// changed records a change of n's content w now (n.mu held): its mtime and
// ctime, shown until it is published (and carried by the publish when n
// has uncommitted attributes).
func (n *node) changed(w *content) {
	now := time.Now()
	w.dirty, w.changed = true, now
	if a := n.local; a != nil {
		a.mtime, a.ctime = now, now
	}
}

// localChange is when n's uncommitted content last changed (zero without
// any; n.mu held).
func (n *node) localChange() time.Time {
	switch {
	case n.write != nil && n.write.dirty:
		return n.write.changed
	case n.pend != nil:
		return n.pend.changed
	}
	return time.Time{}
}

// ensureFile gives w its private file, a copy of the newest version (the
// one queued, else the committed one), before a change (n.mu held).
func (n *node) ensureFile(ctx context.Context, w *content) error {
	if w.f != nil {
		return nil
	}
	f := newBuffer(n.m.cfg.TmpDir)
	var err error
	if p := n.pend; p != nil {
		_, err = io.Copy(io.NewOffsetWriter(f, 0), io.NewSectionReader(p.f, 0, p.size))
	} else if !n.fresh {
		var obj store.Object
		if obj, err = n.open(ctx); err == nil {
			_, err = io.Copy(io.NewOffsetWriter(f, 0), io.NewSectionReader(obj, 0, obj.Info().Size))
			obj.Close()
		}
		if errors.Is(err, store.ErrNotFound) {
			err = nil
		}
	}
	if err != nil {
		f.Close()
		return err
	}
	w.f = f
	return nil
}

// queueDirty queues n's content being written, if it changed, for
// publishing (a flush).
func (n *node) queueDirty() {
	n.mu.Lock()
	if w := n.write; w != nil && w.dirty && !n.gone {
		n.m.wb.enqueue(n, w)
	}
	n.mu.Unlock()
	n.m.wb.throttle()
}

// takeErr returns and forgets the failure of n's last publish.
func (n *node) takeErr() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	err := n.werr
	n.werr = nil
	return err
}

// sync queues n's changes and waits until they are published: nil when
// the data and the namespace change are durable and committed.
func (n *node) sync() error {
	n.queueDirty()
	n.mu.Lock()
	p := n.pend
	n.mu.Unlock()
	if p != nil {
		n.m.wb.hurry()
		<-p.done // bounded: the publisher's calls are
	}
	n.m.wb.drain() // attributes changed while it was published
	return n.takeErr()
}

// release drops one user of n's content being written; the last one
// queues it (if it changed) and forgets it.
func (n *node) release() error {
	n.mu.Lock()
	w := n.write
	if w != nil {
		w.users--
		if w.users <= 0 {
			if w.dirty && !n.gone {
				n.m.wb.enqueue(n, w)
			}
			n.write = nil
			w.close()
		}
	}
	err := n.werr
	n.werr = nil
	n.mu.Unlock()
	n.m.wb.throttle()
	return err
}

// unref drops one user of n's content being written, without queueing it
// (other handles still write it).
func (n *node) unref() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.write != nil {
		n.write.users--
	}
}

// putOptions are the options of the publish of n's queued version of size
// bytes, and the generation of the attributes they carry: the
// uncommitted attributes, else the committed file's.
func (n *node) putOptions(size int64) (store.PutOptions, uint64) {
	opts := store.PutOptions{Size: size, Explicit: true}
	n.mu.Lock()
	a, fresh := n.local, n.fresh
	var gen uint64
	if a != nil {
		opts.Mode, opts.UID, opts.GID, opts.ModTime, opts.AccessTime = a.mode, a.uid, a.gid, a.mtime, a.atime
		gen = a.gen
	}
	n.mu.Unlock()
	if fresh {
		opts.Ino = n.StableAttr().Ino
	}
	if a == nil {
		// The new version keeps the file's mode, owner and type.
		ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
		defer cancel()
		if cur, err := n.stat(ctx); err == nil {
			opts.Mode, opts.UID, opts.GID, opts.ContentType = cur.Mode, cur.UID, cur.GID, cur.ContentType
			opts.AccessTime = cur.AccessTime
		}
	}
	return opts, gen
}

// published settles n's queued change p: its failure is kept for the
// writer; once n has nothing else queued, attributes changed since the
// change took them are committed now (still in the queue's order).
func (n *node) published(ctx context.Context, p *pending, gen uint64, err error) {
	n.mu.Lock()
	var set *store.SetAttrs
	if err != nil {
		n.werr = err
	} else if p.kind != opAttrs {
		n.fresh = false
	}
	if n.pend == p {
		n.pend = nil
	}
	if n.pendOp == p {
		n.pendOp = nil
	}
	if a := n.local; a != nil && n.pend == nil && n.pendOp == nil && (n.write == nil || !n.write.dirty) {
		if a.gen != gen && err == nil && !n.gone {
			s := a.set()
			set = &s
		}
		n.local = nil
	}
	n.mu.Unlock()
	if p.f != nil {
		p.f.Close()
	}
	if set != nil {
		if _, err := n.m.cfg.Store.SetAttrs(ctx, n.m.cfg.Bucket, p.path, *set); err != nil {
			n.m.cfg.Logger.Warn("mount: changing a written file's attributes failed", "path", p.path, "err", err)
			n.mu.Lock()
			n.werr = err
			n.mu.Unlock()
		}
	}
	p.err = err
	close(p.done)
}

// content is a file's content being written: a private temporary file,
// made at the first change (nil until then: reads go to the newest
// version).
type content struct {
	f       *buffer
	dirty   bool      // changed since it was last queued
	changed time.Time // its last change (n.changed)
	users   int       // open handles writing it
}

func newContent(dir string) *content { return &content{f: newBuffer(dir)} }

// oTmpfile is Linux's O_TMPFILE (with O_DIRECTORY).
const oTmpfile = 0x410000

// tempFile is an anonymous temporary file in dir (O_TMPFILE: one call).
func tempFile(dir string) (*os.File, error) {
	if f, err := os.OpenFile(dir, os.O_RDWR|oTmpfile, 0o600); err == nil {
		return f, nil
	}
	f, err := os.CreateTemp(dir, "cairn-mount-*")
	if err != nil {
		return nil, err
	}
	os.Remove(f.Name()) // anonymous: gone with the last descriptor
	return f, nil
}

func (c *content) size() int64 {
	if c.f == nil {
		return 0
	}
	return c.f.Size()
}

func (c *content) truncate(sz int64) error {
	c.dirty = true
	return c.f.Truncate(sz)
}

func (c *content) close() {
	if c.f != nil {
		c.f.Close()
		c.f = nil
	}
}

// The POSIX ACL xattrs (the kernel checks them, CAP_POSIX_ACL), kept on
// the inode like any xattr.
const (
	aclAccess  = "system.posix_acl_access"
	aclDefault = "system.posix_acl_default"
)

// POSIX ACL entry tags of the xattr format: version 2 (4 bytes), then
// entries of tag (2), perm (2), id (4), little-endian.
const (
	aclUserObj  = 0x01
	aclGroupObj = 0x04
	aclMask     = 0x10
	aclOther    = 0x20
)

// aclMode returns mode with its permission bits taken from the access ACL
// acl: owner from USER_OBJ, group from MASK (or GROUP_OBJ without one),
// other from OTHER; setuid, setgid and sticky bits are kept. ok is false
// for a malformed ACL.
func aclMode(acl []byte, mode uint32) (uint32, bool) {
	if len(acl) < 4 || (len(acl)-4)%8 != 0 || binary.LittleEndian.Uint32(acl) != 2 {
		return 0, false
	}
	var owner, group, mask, other uint32
	hasMask := false
	for e := acl[4:]; len(e) > 0; e = e[8:] {
		tag, perm := binary.LittleEndian.Uint16(e), uint32(binary.LittleEndian.Uint16(e[2:]))&7
		switch tag {
		case aclUserObj:
			owner = perm
		case aclGroupObj:
			group = perm
		case aclMask:
			mask, hasMask = perm, true
		case aclOther:
			other = perm
		}
	}
	if hasMask {
		group = mask
	}
	return mode&0o7000 | owner<<6 | group<<3 | other, true
}

// aclNarrow returns a copy of acl whose owner, mask (or group, without a
// mask) and other entries allow no more than mode's bits (POSIX's
// posix_acl_create).
func aclNarrow(acl []byte, mode uint32) []byte {
	out := append([]byte{}, acl...)
	hasMask := false
	for e := out[4:]; len(e) >= 8; e = e[8:] {
		hasMask = hasMask || binary.LittleEndian.Uint16(e) == aclMask
	}
	for e := out[4:]; len(e) >= 8; e = e[8:] {
		var bits uint32
		switch tag := binary.LittleEndian.Uint16(e); {
		case tag == aclUserObj:
			bits = mode >> 6 & 7
		case tag == aclMask, tag == aclGroupObj && !hasMask:
			bits = mode >> 3 & 7
		case tag == aclOther:
			bits = mode & 7
		default:
			continue
		}
		binary.LittleEndian.PutUint16(e[2:], binary.LittleEndian.Uint16(e[2:])&uint16(bits))
	}
	return out
}

// inheritACL gives a new file or directory at p, made in directory n, the
// default ACL of n, as the kernel would on a local file system: its access
// ACL is the default (a directory also keeps it as its default), and its
// mode is narrowed by it. Without a default ACL nothing changes.
func (n *node) inheritACL(ctx context.Context, p string, dir bool, mode uint32) {
	xs, err := n.m.cfg.Store.Xattrs(ctx, n.m.cfg.Bucket, n.storePath())
	def := xs[aclDefault]
	if err != nil || len(def) == 0 {
		return
	}
	m, ok := aclMode(def, mode)
	if !ok {
		return
	}
	m &= mode | 0o7000 // the mode asked for bounds the ACL's (the umask is not applied under a default ACL)
	set := store.SetAttrs{Mode: &m, Xattrs: map[string][]byte{aclAccess: aclNarrow(def, m)}}
	if dir {
		set.Xattrs[aclDefault] = def
	}
	if _, err := n.m.cfg.Store.SetAttrs(ctx, n.m.cfg.Bucket, p, set); err != nil {
		n.m.cfg.Logger.Warn("mount: inheriting a default ACL failed", "path", p, "err", err)
	}
}
