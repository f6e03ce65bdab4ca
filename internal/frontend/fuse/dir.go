package fuse

import (
	"cmp"
	"context"
	"errors"
	"path"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/cairn-fs/cairn/internal/store"
	"github.com/hanwen/go-fuse/v2/fs"
	gofuse "github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// OpendirHandle opens directory n with the kernel's readdir cache on
// (FOPEN_CACHE_DIR): a warm find or ls costs no call until a change in
// the directory invalidates it (Mount.changed).
func (n *node) OpendirHandle(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	return &dirHandle{n: n}, gofuse.FOPEN_CACHE_DIR | gofuse.FOPEN_KEEP_CACHE, 0
}

// dirHandle is an open directory: its listing is read from the store a
// page at a time as the kernel reads on (dirStream), and dropped at
// release.
type dirHandle struct {
	n *node
	s *dirStream
	// plus counts READDIRPLUS look-ups answered from the listing.
	plus int
}

// maxPlusLookups bounds the inodes one listing makes through READDIRPLUS:
// past it, entries go to the kernel as plain names (its later stat or
// open looks them up), so that a listing of a huge directory does not
// make an inode per entry in the node's memory.
const maxPlusLookups = 10000

var (
	_ fs.FileReaddirenter = (*dirHandle)(nil)
	_ fs.FileSeekdirer    = (*dirHandle)(nil)
	_ fs.FileReleasedirer = (*dirHandle)(nil)
	_ fs.FileLookuper     = (*dirHandle)(nil)
)

func (d *dirHandle) stream() *dirStream {
	if d.s == nil {
		d.s = d.n.stream()
	}
	return d.s
}

// Lookup answers READDIRPLUS's look-up of an entry the listing just read
// from the store's description of it (a listing of a directory of files
// is then one store call a page, not one per file); the node's Lookup
// answers the others (directories, names changed here).
func (d *dirHandle) Lookup(ctx context.Context, name string, out *gofuse.EntryOut) (*fs.Inode, syscall.Errno) {
	n := d.n
	if d.plus >= maxPlusLookups {
		return nil, syscall.ENOENT // listed as a plain name: no inode (fuse_direntplus_link)
	}
	d.plus++
	info, ok := d.stream().info(name)
	if !ok || n.m.wb.queued(info.Path) {
		return n.Lookup(ctx, name, out)
	}
	if ch := n.GetChild(name); ch != nil {
		if c, ok := ch.Operations().(*node); ok && c.uncommitted() {
			return n.Lookup(ctx, name, out)
		}
	}
	return n.newChild(ctx, info, out), 0
}

// Readdirent returns the next entry (nil at the end).
func (d *dirHandle) Readdirent(ctx context.Context) (*gofuse.DirEntry, syscall.Errno) {
	return d.stream().next(ctx)
}

// Seekdir moves to entry off.
func (d *dirHandle) Seekdir(ctx context.Context, off uint64) syscall.Errno {
	return d.stream().seek(ctx, off)
}

// Releasedir drops the listing.
func (d *dirHandle) Releasedir(ctx context.Context, flags uint32) { d.s = nil }

// Readdir lists directory n (see dirStream).
func (n *node) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	return &dirStreamCtx{s: n.stream(), ctx: ctx}, 0
}

// list is n's whole listing (tests).
func (n *node) list(ctx context.Context) ([]gofuse.DirEntry, syscall.Errno) {
	var out []gofuse.DirEntry
	s := n.stream()
	for {
		de, e := s.next(ctx)
		if e != 0 || de == nil {
			return out, e
		}
		out = append(out, *de)
	}
}

// dirPage is how many entries a listing reads from the store at a time.
const dirPage = 1000

// dirStream is a listing of directory n read from the store a page at a
// time, so that its memory does not grow with the directory. The
// mount's changes not published yet are laid over it, so that a listing
// never waits for the write-back queue (chmod -R, rm -rf and find list
// every directory they walk): names whose removal is queued are left
// out, and names created here and not yet in the store come at the end.
// Offsets are entry counts: the n-th entry has offset n.
type dirStream struct {
	n      *node
	prefix string
	page   []gofuse.DirEntry
	// infos describe this page's files and prev the last page's, as the
	// store did (READDIRPLUS looks up what Readdirent just returned).
	infos, prev map[string]store.ObjectInfo
	after       string // the store key the next page starts after
	more        bool   // the store has more pages
	// fresh are the names made here and not published when the listing
	// began, by name; those met in the store (seen) are left out at the
	// end, where the others come.
	fresh     []gofuse.DirEntry
	seen      map[string]bool
	freshDone bool
	pos       uint64
	// marks are where the store's pages began: a seek starts again from
	// the last one before its offset, not from the first entry.
	marks []dirMark
}

// dirMark: the entry after offset pos is the first of the store's page
// that starts after key after.
type dirMark struct {
	pos   uint64
	after string
}

func (n *node) stream() *dirStream {
	prefix := n.storePath()
	if prefix != "" {
		prefix += "/"
	}
	s := &dirStream{n: n, prefix: prefix, more: true, seen: map[string]bool{}}
	for name, ch := range n.Children() {
		if c, ok := ch.Operations().(*node); ok && c.isFresh() {
			mode := uint32(syscall.S_IFREG)
			if ch.IsDir() {
				mode = syscall.S_IFDIR
			}
			s.fresh = append(s.fresh, gofuse.DirEntry{Name: name, Ino: ch.StableAttr().Ino, Mode: mode})
		}
	}
	slices.SortFunc(s.fresh, func(a, b gofuse.DirEntry) int { return strings.Compare(a.Name, b.Name) })
	return s
}

// next returns the next entry (nil at the end).
func (s *dirStream) next(ctx context.Context) (*gofuse.DirEntry, syscall.Errno) {
	for len(s.page) == 0 {
		switch {
		case s.more:
			if e := s.fill(ctx); e != 0 {
				return nil, e
			}
		case !s.freshDone:
			s.freshDone = true
			for _, de := range s.fresh {
				if !s.seen[de.Name] {
					s.page = append(s.page, de)
				}
			}
		default:
			return nil, 0
		}
	}
	de := s.page[0]
	s.page = s.page[1:]
	s.pos++
	de.Off = s.pos
	return &de, 0
}

// fill reads the store's next page.
func (s *dirStream) fill(ctx context.Context) syscall.Errno {
	if len(s.marks) == 0 || s.marks[len(s.marks)-1].pos < s.pos {
		s.marks = append(s.marks, dirMark{pos: s.pos, after: s.after})
	}
	res, err := s.n.m.cfg.Store.List(ctx, s.n.m.cfg.Bucket,
		store.ListOptions{Prefix: s.prefix, Delimiter: "/", Limit: dirPage, StartAfter: s.after})
	if err != nil {
		return errno(err)
	}
	s.more, s.after = res.Truncated, res.NextToken
	s.prev, s.infos = s.infos, make(map[string]store.ObjectInfo, len(res.Entries))
	s.page = make([]gofuse.DirEntry, 0, len(res.Entries)+len(res.CommonPrefixes))
	add := func(de gofuse.DirEntry) {
		if s.n.m.wb.unlinking(s.prefix + de.Name) {
			return
		}
		if _, fresh := slices.BinarySearchFunc(s.fresh, de.Name, func(e gofuse.DirEntry, name string) int {
			return strings.Compare(e.Name, name)
		}); fresh {
			s.seen[de.Name] = true
		}
		s.page = append(s.page, de)
	}
	for _, e := range res.Entries {
		name := path.Base(e.Path)
		s.infos[name] = e
		add(gofuse.DirEntry{Name: name, Ino: e.Ino, Mode: fileType(e)})
	}
	for _, p := range res.CommonPrefixes {
		add(gofuse.DirEntry{Name: path.Base(strings.TrimSuffix(p, "/")), Mode: syscall.S_IFDIR})
	}
	return 0
}

// info is the store's description of name, a file of the current or the
// last page.
func (s *dirStream) info(name string) (store.ObjectInfo, bool) {
	if info, ok := s.infos[name]; ok {
		return info, true
	}
	info, ok := s.prev[name]
	return info, ok
}

// seek moves to offset off: the next entry returned is the (off+1)-th.
// The kernel reads on from where it stopped; another offset (a reader
// that started again, two readers of one directory without handles)
// reads again from the start of the store's page that holds it.
func (s *dirStream) seek(ctx context.Context, off uint64) syscall.Errno {
	if off == s.pos {
		return 0
	}
	var m dirMark // the first entry's
	if i, found := slices.BinarySearchFunc(s.marks, off, func(m dirMark, off uint64) int { return cmp.Compare(m.pos, off) }); found {
		m = s.marks[i]
	} else if i > 0 {
		m = s.marks[i-1]
	}
	s.page, s.infos, s.prev, s.after, s.more, s.freshDone, s.pos = nil, nil, nil, m.after, true, false, m.pos
	for s.pos < off {
		de, e := s.next(ctx)
		if e != 0 {
			return e
		}
		if de == nil {
			break
		}
	}
	return 0
}

// dirStreamCtx is a dirStream as an fs.DirStream.
type dirStreamCtx struct {
	s    *dirStream
	ctx  context.Context
	peek *gofuse.DirEntry
	err  syscall.Errno
}

func (d *dirStreamCtx) HasNext() bool {
	if d.peek == nil && d.err == 0 {
		d.peek, d.err = d.s.next(d.ctx)
	}
	return d.peek != nil || d.err != 0
}

func (d *dirStreamCtx) Next() (gofuse.DirEntry, syscall.Errno) {
	if !d.HasNext() {
		return gofuse.DirEntry{}, syscall.ENOENT
	}
	if d.err != 0 {
		return gofuse.DirEntry{}, d.err
	}
	de := *d.peek
	d.peek = nil
	return de, 0
}

func (d *dirStreamCtx) Close() {}

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
	uid, gid := caller(ctx)
	mode &= 0o7777
	xs, err := n.xattrs(ctx)
	if err != nil {
		return nil, errno(err)
	}
	if len(xs[aclDefault]) > 0 {
		return n.mkdirNow(ctx, p, mode, uid, gid, out) // the default ACL, not the umask, narrows the mode
	}
	// Decided here, under the directory's claim (own.go): nobody else
	// adds a name to n until the mkdir is published.
	claim, done, e := n.own(ctx)
	if e != 0 {
		return nil, e
	}
	defer done()
	if _, err := n.existing(ctx, p); err == nil {
		return nil, syscall.EEXIST
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
	n.m.wb.enqueueMkdir(n, c, p, claim)
	n.adopt(c, p, claim) // what the mount makes in it is decided here too
	n.touchedDir(now)
	return ch, 0
}

// mkdirNow is Mkdir made at once (then given the parent's default ACL).
func (n *node) mkdirNow(ctx context.Context, p string, mode, uid, gid uint32, out *gofuse.EntryOut) (*fs.Inode, syscall.Errno) {
	n.m.wb.drain()
	if err := n.m.cfg.Store.Mkdir(ctx, n.m.cfg.Bucket, p, store.Attrs{Mode: mode, UID: uid, GID: gid, Explicit: true, Exclusive: true}); err != nil {
		return nil, errno(err)
	}
	n.inheritACL(ctx, p, true, mode)
	info, err := n.m.cfg.Store.Stat(ctx, n.m.cfg.Bucket, p)
	if err != nil {
		return nil, errno(err)
	}
	return n.newChild(ctx, info, out), 0
}

// Rmdir removes the empty directory name. When this node owns both n and
// the directory (it made them, as an rm -rf of a tree it wrote), the
// removal is decided here and queued like an unlink; otherwise it is
// decided in the log.
func (n *node) Rmdir(ctx context.Context, name string) syscall.Errno {
	ctx, cancel := bounded(ctx)
	defer cancel()
	if e, done := n.rmdirQueued(ctx, name); done {
		return e
	}
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

// maxQueuedRmdir bounds the entries Rmdir looks at to find a directory
// empty once the queued unlinks are published; a larger one is removed in
// the log.
const maxQueuedRmdir = 1024

// rmdirQueued queues the removal of directory name when this node owns n
// and the directory, and finds the directory empty in its own view (the
// store's names all being removed by the queue, none created here);
// done is false when it did not decide (the caller removes it in the
// log).
func (n *node) rmdirQueued(ctx context.Context, name string) (syscall.Errno, bool) {
	o := n.m.own.o
	ch := n.GetChild(name)
	if o == nil || ch == nil || !ch.IsDir() {
		return 0, false
	}
	c, ok := ch.Operations().(*node)
	if !ok {
		return 0, false
	}
	if _, held := o.Held(c.dirIno()); !held {
		return 0, false
	}
	if _, held := o.Held(n.dirIno()); !held {
		return 0, false
	}
	pc, pdone, e := n.own(ctx)
	if e != 0 {
		return 0, false
	}
	defer pdone()
	cc, cdone, e := c.own(ctx)
	if e != 0 {
		return 0, false
	}
	defer cdone()
	if pc.Dir == 0 || cc.Dir == 0 {
		return 0, false
	}
	p := n.child(name)
	for _, gc := range c.Children() {
		if g, ok := gc.Operations().(*node); ok && g.isFresh() {
			return syscall.ENOTEMPTY, true
		}
	}
	if !c.isFresh() {
		res, err := n.m.cfg.Store.List(ctx, n.m.cfg.Bucket, store.ListOptions{Prefix: p + "/", Delimiter: "/", Limit: maxQueuedRmdir})
		if err != nil || res.Truncated {
			return 0, false
		}
		// A name listed and not being removed may have had its removal
		// published since the listing: the log decides then.
		for _, e := range res.Entries {
			if !n.m.wb.unlinking(e.Path) {
				return 0, false
			}
		}
		for _, sub := range res.CommonPrefixes {
			if !n.m.wb.unlinking(strings.TrimSuffix(sub, "/")) {
				return 0, false
			}
		}
	}
	n.m.wb.enqueueRmdir(p, pc, cc)
	n.touchedDir(time.Now())
	return 0, true
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
	// Decided here, under the directory's claim (own.go).
	claim, done, e := n.own(ctx)
	if e != 0 {
		return e
	}
	info, err := n.m.cfg.Store.Stat(ctx, n.m.cfg.Bucket, p)
	if err != nil {
		done()
		return errno(err)
	}
	if info.IsDir {
		done()
		return syscall.EISDIR
	}
	if info.Nlink > 1 {
		// Another name of the file shows its link count: change it now.
		done() // decided in the log, which may need the claim's write lock
		return n.unlinkNow(ctx, name, c)
	}
	defer done()
	c.pinNow(ctx)
	n.m.wb.enqueueUnlink(c, p, claim)
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
	info.Nlink = 0
	n.goneInfo = &info
	n.gone, n.fresh, n.local = true, false, nil
	n.settled++
	n.m.dropFresh(n)
	if n.write != nil {
		n.write.dirty = false
	}
	n.mu.Unlock()
	n.unpin()
}

// Rename moves name to newName in newParent (within this mount).
func (n *node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	ctx, cancel := bounded(ctx)
	defer cancel()
	np, ok := newParent.(*node)
	if !ok {
		return syscall.EXDEV
	}
	noReplace := flags == unix.RENAME_NOREPLACE
	er, ok := n.m.cfg.Store.(store.ExclusiveRenamer)
	if flags != 0 && !(noReplace && ok) {
		return syscall.EINVAL // RENAME_EXCHANGE and RENAME_WHITEOUT: not supported
	}
	dst, e := np.newName(newName)
	if e != 0 {
		return e
	}
	if e, done := n.renameFresh(ctx, name, np, dst); done {
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
	var err error
	if noReplace {
		// Decided in the log: one winner across the cluster.
		err = er.RenameNoReplace(ctx, n.m.cfg.Bucket, n.child(name), dst)
	} else {
		err = n.m.cfg.Store.Rename(ctx, n.m.cfg.Bucket, n.child(name), dst)
	}
	return n.m.failed("rename", n.child(name), err)
}

// renameFresh renames a file created here and never published (PHP's
// upload: written to a temporary name, then renamed into place) without
// waiting for anything, when this node owns both directories and the new
// name is free in its view: the file is then published under its new
// name, decided under the new directory's claim. done is false when it
// did not decide (the caller renames in the log).
func (n *node) renameFresh(ctx context.Context, name string, np *node, dst string) (syscall.Errno, bool) {
	o := n.m.own.o
	ch := n.GetChild(name)
	if o == nil || ch == nil || ch.IsDir() {
		return 0, false
	}
	c, ok := ch.Operations().(*node)
	if !ok || !c.isFresh() {
		return 0, false
	}
	if _, held := o.Held(n.dirIno()); !held {
		return 0, false
	}
	if _, held := o.Held(np.dirIno()); !held {
		return 0, false
	}
	_, sdone, e := n.own(ctx)
	if e != 0 {
		return 0, false
	}
	defer sdone()
	claim := store.Claim{}
	if np != n {
		var ddone func()
		claim, ddone, e = np.own(ctx)
		if e != 0 {
			return 0, false
		}
		defer ddone()
	} else {
		claim, _ = o.Held(n.dirIno())
	}
	if claim.Dir == 0 {
		return 0, false
	}
	if dc := np.GetChild(path.Base(dst)); dc != nil {
		return 0, false // a name the mount knows: replaced in the log
	}
	if _, err := np.existing(ctx, dst); !errors.Is(err, store.ErrNotFound) {
		return 0, false
	}
	if !n.m.wb.move(c, dst, np.dirIno(), claim) {
		return 0, false
	}
	now := time.Now()
	n.touchedDir(now)
	np.touchedDir(now)
	return 0, true
}

// fileType is the S_IFMT bits of info.
func fileType(info store.ObjectInfo) uint32 {
	switch {
	case info.IsDir:
		return syscall.S_IFDIR
	case info.Symlink != "":
		return syscall.S_IFLNK
	case info.Special != 0:
		return info.Special
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

// Mknod makes a FIFO, socket, device or empty regular file, decided in
// the log as a symlink is: of two nodes racing for one name, one wins and
// the other gets EEXIST. A FIFO or socket is a name on every node, and
// each node's kernel makes its own pipe or socket behind it: processes on
// one node talk through it, processes on two nodes do not.
func (n *node) Mknod(ctx context.Context, name string, mode, dev uint32, out *gofuse.EntryOut) (*fs.Inode, syscall.Errno) {
	kind := mode & syscall.S_IFMT
	switch kind {
	case 0, syscall.S_IFREG, syscall.S_IFIFO, syscall.S_IFSOCK, syscall.S_IFCHR, syscall.S_IFBLK:
	default:
		return nil, syscall.EINVAL
	}
	ctx, cancel := bounded(ctx)
	defer cancel()
	p, e := n.newName(name)
	if e != 0 {
		return nil, e
	}
	uid, gid := caller(ctx)
	mode &= 0o7777
	xs, err := n.xattrs(ctx)
	if err != nil {
		return nil, errno(err)
	}
	if len(xs[aclDefault]) == 0 {
		mode &^= callerUmask(ctx) // else the default ACL narrows the mode
	}
	if kind == 0 || kind == syscall.S_IFREG { // mknod(2) of a regular file: an empty one, exclusively
		return n.putEmpty(ctx, p, mode, uid, gid, true, out)
	}
	n.m.wb.drain()
	info, err := n.m.cfg.Store.Mknod(ctx, n.m.cfg.Bucket, p, kind, dev, store.Attrs{Mode: mode, UID: uid, GID: gid, Explicit: true})
	if err != nil {
		return nil, errno(err)
	}
	return n.newChild(ctx, info, out), 0
}
