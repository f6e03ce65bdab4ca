package fuse

import (
	"context"
	"errors"
	"io"
	"strings"
	"syscall"
	"time"

	"github.com/cairn-fs/cairn/internal/store"
	"github.com/hanwen/go-fuse/v2/fs"
	gofuse "github.com/hanwen/go-fuse/v2/fuse"
)

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
	excl := flags&syscall.O_EXCL != 0
	uid, gid := caller(ctx)
	mode &= 0o7777
	xs, err := n.xattrs(ctx)
	if err != nil {
		return nil, nil, 0, errno(err)
	}
	if len(xs[aclDefault]) > 0 {
		if info, err := n.existing(ctx, p); err == nil && info.IsDir {
			return nil, nil, 0, syscall.EISDIR
		}
		return n.createNow(ctx, p, mode, uid, gid, excl, out) // the default ACL, not the umask, narrows the mode
	}
	// Decided here, under the directory's claim (own.go): nobody else
	// adds the name until the file is published.
	claim, done, e := n.own(ctx)
	if e != 0 {
		return nil, nil, 0, e
	}
	defer done()
	if info, err := n.existing(ctx, p); err == nil {
		if excl {
			return nil, nil, 0, syscall.EEXIST
		}
		if info.IsDir {
			return nil, nil, 0, syscall.EISDIR
		}
	}
	mode &^= callerUmask(ctx)
	ino, err := n.m.wb.newIno(ctx)
	if err != nil {
		return nil, nil, 0, errno(err)
	}
	w := newContent(n.m.cfg.TmpDir)
	w.dirty, w.users = true, 1
	now := time.Now()
	c := &node{m: n.m, write: w, fresh: true, claim: claim, local: &attrs{mode: mode, uid: uid, gid: gid, mtime: now, ctime: now, atime: now}}
	c.fill(store.ObjectInfo{Ino: ino, Nlink: 1, Mode: mode, UID: uid, GID: gid, ModTime: now}, &out.Attr)
	// Persistent until published (forget.go): the kernel may forget the
	// inode first, and the mount must keep its name to publish it.
	c.persist = true
	ch := n.NewPersistentInode(ctx, c, fs.StableAttr{Mode: syscall.S_IFREG, Ino: ino})
	// In the directory before the claim goes (go-fuse adds it only after
	// Create returns): a recall of n between the two would find it with
	// no name and could not publish it.
	n.AddChild(name, ch, true)
	n.m.addFresh(c, n.dirIno()) // own.go: a recall of n publishes it
	n.touchedDir(now)
	if n.m.cfg.NoOpen {
		n.m.idle.add(c) // dirty from the start (handle.content adds on a clean write)
	}
	return ch, n.m.handleOut(&handle{n: c, writable: true}), 0, 0
}

// createNow is Create publishing the empty file at once (then giving it
// the directory's default ACL).
func (n *node) createNow(ctx context.Context, p string, mode, uid, gid uint32, excl bool, out *gofuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	ch, e := n.putEmpty(ctx, p, mode, uid, gid, excl, out)
	if e != 0 {
		return nil, nil, 0, e
	}
	c := ch.Operations().(*node)
	if _, e := c.openContent(ctx, true); e != 0 {
		return nil, nil, 0, e
	}
	return ch, n.m.handleOut(&handle{n: c, writable: true}), 0, 0
}

// putEmpty commits an empty file at p now (exclusively when excl), with
// the directory's default ACL if it has one.
func (n *node) putEmpty(ctx context.Context, p string, mode, uid, gid uint32, excl bool, out *gofuse.EntryOut) (*fs.Inode, syscall.Errno) {
	n.m.wb.drain()
	info, _, err := n.m.cfg.Store.Put(ctx, n.m.cfg.Bucket, p, strings.NewReader(""),
		store.PutOptions{Size: 0, Mode: mode, UID: uid, GID: gid, Explicit: true, IfNoneMatchAny: excl})
	if err != nil {
		return nil, errno(err)
	}
	n.inheritACL(ctx, p, false, mode)
	if st, err := n.m.cfg.Store.Stat(ctx, n.m.cfg.Bucket, p); err == nil {
		info = st // the mode the default ACL left
	}
	return n.newChild(ctx, info, out), 0
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
	if n.m.cfg.Locks != nil {
		opts.LockedIno = n.StableAttr().Ino // fenced by this node's lock right, if it holds one
	}
	if a == nil {
		// The new version keeps the file's mode, owner and type.
		ctx, cancel := context.WithTimeout(changeCtx(context.Background()), writeTimeout)
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
// change took them are committed now (still in the queue's order), and
// n's uncommitted attributes are dropped only once the store has them
// (a getattr meanwhile must not answer the store's older ones). A
// directory made (p an opMkdir) leaves its parent's kids.
func (n *node) published(ctx context.Context, p *pending, gen uint64, err error) {
	n.mu.Lock()
	var set *store.SetAttrs
	var setGen uint64
	if err != nil {
		n.werr = err
	} else if p.kind != opAttrs {
		n.fresh = false
		n.m.dropFresh(n) // own.go
	}
	if n.pend == p {
		n.pend = nil
	}
	if n.pendOp == p {
		n.pendOp = nil
	}
	if a := n.local; a != nil && n.idleLocked() {
		if a.gen != gen && err == nil && !n.gone {
			s := a.set()
			set, setGen = &s, a.gen
		} else {
			n.local = nil
		}
	}
	n.settled++
	n.mu.Unlock()
	n.unpin()
	if p.f != nil {
		p.f.Close()
	}
	if set != nil {
		_, serr := n.m.cfg.Store.SetAttrs(ctx, n.m.cfg.Bucket, p.path, *set)
		if serr != nil {
			n.m.cfg.Logger.Warn("mount: changing a written file's attributes failed", "path", p.path, "err", serr)
		}
		n.mu.Lock()
		if serr != nil {
			n.werr = serr
		}
		// Unless they changed again meanwhile (then queued, or carried
		// by a version being written).
		if a := n.local; a != nil && a.gen == setGen && n.idleLocked() {
			n.local = nil
		}
		n.settled++
		n.mu.Unlock()
	}
	if d := p.parent; d != nil {
		d.mu.Lock()
		delete(d.kids, p)
		d.settled++
		d.mu.Unlock()
		d.settle()
	}
	n.settle()
	p.err = err
	close(p.done)
}

// idleLocked reports whether n has nothing queued or being written that
// would carry its uncommitted attributes (n.mu held).
func (n *node) idleLocked() bool {
	return n.pend == nil && n.pendOp == nil && (n.write == nil || !n.write.dirty)
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
