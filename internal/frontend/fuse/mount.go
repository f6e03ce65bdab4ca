package fuse

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cairn-fs/cairn/internal/store"
	"github.com/hanwen/go-fuse/v2/fs"
	gofuse "github.com/hanwen/go-fuse/v2/fuse"
)

// Config configures a Mount.
type Config struct {
	// Store is the node's store. Required.
	Store store.Store
	// Watch registers a watcher of applied changes (store.Local.Watch);
	// nil: the kernel's caches are kept only for CacheTimeout.
	Watch func(store.Watcher) (cancel func())
	// Bucket is the bucket mounted; created with defaults when missing.
	// Required.
	Bucket string
	// Prefix is a directory of the bucket to mount instead of its root
	// ("" for the root; created when missing).
	Prefix string
	// Dir is the mount point: an existing empty directory. Required.
	Dir string
	// TmpDir holds the temporary content of files being written.
	// Default os.TempDir().
	TmpDir string
	// CacheTimeout is how long the kernel may keep entries and attributes
	// without asking (changes invalidate them sooner). Default 1 h.
	CacheTimeout time.Duration
	// Capacity reports the cluster's room for files, total and free bytes,
	// for statfs; nil: the disk of TmpDir.
	Capacity func(ctx context.Context) (total, free uint64, err error)
	// Logger; default slog.Default().
	Logger *slog.Logger
	// NoOpen answers the kernel's first OPEN with ENOSYS: from then on it
	// sends no OPEN and no RELEASE for files (no-open mode, see doc.go):
	// a file's state lives on its node, a close's FLUSH publishes what
	// was written to it.
	NoOpen bool
	// NoFlush (with NoOpen; the "noflush" option) answers the kernel's
	// first FLUSH with ENOSYS: from then on a close costs no call either.
	// What is written is published once it has not changed for
	// noFlushIdle (noopen.go), or at fsync; no lock can be taken (a close
	// would never release it).
	NoFlush bool
	// Locks, when set, takes the mount's flock, fcntl and OFD locks in the
	// cluster's lock table (locks.go); nil: the kernel keeps them, local
	// to this node.
	Locks store.Locker
}

// The modes of a mount (docs/operations.md, the mode table), one per
// mount, named as its --mount option.
const (
	// ModeNoFlush, the default (a web root): no call for an open, a close
	// or an opendir (Config.NoOpen and NoFlush); a write is on every node
	// within 1 s of its last change; no locks.
	ModeNoFlush = "noflush"
	// ModeFlush: no call for an open, one for a close, which publishes
	// (Config.NoOpen): close-to-open consistency, fcntl locks.
	ModeFlush = "flush"
	// ModeHandles: a handle per open file (OPEN and RELEASE): flock and
	// OFD locks too.
	ModeHandles = "handles"
)

// Spec is a parsed --mount value.
type Spec struct {
	Bucket, Prefix, Dir string
	// Mode is ModeNoFlush, ModeFlush or ModeHandles.
	Mode string
	// NoLocks: the "nolocks" option, locks kept by the kernel, local to
	// the node.
	NoLocks bool
}

// ParseSpec parses a --mount value, BUCKET[/PREFIX]:DIR[:OPTIONS], where
// OPTIONS is a comma-separated list of at most one mode ("noflush", the
// default, "flush" or "handles") and "nolocks".
func ParseSpec(spec string) (Spec, error) {
	src, rest, ok := strings.Cut(spec, ":")
	dir, opts, _ := strings.Cut(rest, ":")
	if !ok || src == "" || dir == "" {
		return Spec{}, fmt.Errorf("mount %q: want BUCKET[/PREFIX]:DIR[:OPTIONS]", spec)
	}
	var s Spec
	s.Bucket, s.Prefix, _ = strings.Cut(strings.Trim(src, "/"), "/")
	s.Prefix, s.Dir = strings.Trim(s.Prefix, "/"), dir
	for o := range strings.SplitSeq(opts, ",") {
		switch o {
		case "":
		case ModeNoFlush, ModeFlush, ModeHandles:
			if s.Mode != "" && s.Mode != o {
				return Spec{}, fmt.Errorf("mount %q: %s and %s exclude each other: a mount has one mode", spec, s.Mode, o)
			}
			s.Mode = o
		case "nolocks":
			s.NoLocks = true
		default:
			return Spec{}, fmt.Errorf("mount %q: unknown option %q (known: noflush, flush, handles, nolocks)", spec, o)
		}
	}
	if s.Mode == "" {
		// What a web root needs (docs/operations.md, "Mount modes"): a
		// warm page costs the node no call.
		s.Mode = ModeNoFlush
	}
	return s, nil
}

// Mount is a mounted bucket. Close unmounts it.
type Mount struct {
	cfg    Config
	server *gofuse.Server
	root   *node
	cancel func() // stops watching
	inval  invalQueue
	wb     *writeback
	idle   idleSet // no-open mode: content written and not flushed
	kp     *killPrivFS
	lk     *lockFS      // with Config.Locks: the lock owners of FLUSH and RELEASE
	owners handleOwners // lock owners per open handle (locks.go)
	// lockNodes are the files locked through the mount, by inode, until
	// FlushIno publishes them ahead of their lock right's return.
	lockNodes sync.Map
	// flockOnce logs once that a no-open mount refuses flock.
	flockOnce sync.Once
	calls     counters  // FUSE calls per opcode (stats.go)
	own       ownership // directory ownership (own.go)
	// conn is the kernel's number of the FUSE connection (the minor of
	// the mount's device, its directory under /sys/fs/fuse/connections);
	// -1 if unknown.
	conn int
	wg   sync.WaitGroup
	once sync.Once
}

// New mounts cfg.Bucket (cfg.Prefix) on cfg.Dir and serves it until Close.
// It clears a stale mount left on cfg.Dir by a crash, and refuses a mount
// point that is busy or not empty with an error that says so.
func New(ctx context.Context, cfg Config) (*Mount, error) {
	switch {
	case cfg.Store == nil || cfg.Bucket == "" || cfg.Dir == "":
		return nil, errors.New("fuse: Config.Store, Bucket and Dir are required")
	case cfg.NoFlush && !cfg.NoOpen:
		return nil, errors.New("fuse: noflush needs no-open mode: a mount with handles (--mount-handles, :handles) hears every close")
	}
	if cfg.TmpDir == "" {
		cfg.TmpDir = os.TempDir()
	}
	if cfg.CacheTimeout <= 0 {
		cfg.CacheTimeout = time.Hour
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if err := prepareMountPoint(cfg.Dir); err != nil {
		return nil, err
	}
	if err := ensureTree(ctx, cfg.Store, cfg.Bucket, cfg.Prefix); err != nil {
		return nil, err
	}
	m := &Mount{cfg: cfg}
	if o, ok := cfg.Store.(store.DirOwners); ok {
		info, err := cfg.Store.Stat(ctx, cfg.Bucket, cfg.Prefix)
		if err != nil {
			return nil, fmt.Errorf("mount %s: %w", path.Join(cfg.Bucket, cfg.Prefix), err)
		}
		m.own.o, m.own.rootIno = o, info.Ino
	}
	m.inval.init()
	m.wb = newWriteback(m)
	m.root = &node{m: m}
	// In no-open mode the kernel never sends the OPEN that would carry
	// O_TRUNC: it truncates with a SETATTR after the open instead.
	atomicTrunc := uint64(gofuse.CAP_ATOMIC_O_TRUNC)
	if cfg.NoOpen {
		atomicTrunc = 0
	}
	timeout := cfg.CacheTimeout
	// Misses are kept 5 s at most: a change is invalidated precisely on the
	// names it lists, but a snapshot installed by Raft ("everything may
	// have changed") cannot name the misses it made wrong.
	negative := min(timeout, negativeTimeout)
	opts := &fs.Options{
		EntryTimeout:    &timeout,
		AttrTimeout:     &timeout,
		NegativeTimeout: &negative,
		// Mode 0 is a mode (chmod 0): go-fuse would report 0644 for it.
		NullPermissions: true,
		MountOptions: gofuse.MountOptions{
			AllowOther: true,
			FsName:     "cairn:" + path.Join(cfg.Bucket, cfg.Prefix),
			Name:       "cairn",
			Options:    []string{"default_permissions"},
			MaxWrite:   1 << 20,
			Debug:      os.Getenv("CAIRN_FUSE_DEBUG") != "", // every FUSE message on stderr
			// As root, mount(2) directly; fusermount3 otherwise (or when it fails).
			DirectMount: true,
			// O_TRUNC comes with the open instead of a truncate before it,
			// so a rewrite is published whole at close, never empty first.
			// The caller's umask is applied by the mount, not the kernel:
			// POSIX ignores it under a default ACL (umask.go).
			// The mount clears suid and sgid (killpriv.go): the kernel
			// then stops asking for security.capability before each
			// WRITE.
			ExtraCapabilities: gofuse.CAP_DONT_MASK | atomicTrunc | gofuse.CAP_HANDLE_KILLPRIV_V2,
			// The kernel enforces POSIX ACLs kept in the ACL xattrs (the
			// mount keeps the mode's bits in step, and applies a
			// directory's default ACL to what is made in it).
			EnableAcl: true,
			// flock, fcntl and OFD locks come to the mount, which holds
			// them across the cluster (locks.go).
			EnableLocks: cfg.Locks != nil,
		},
		UID: 0, GID: 0,
	}
	// fs.Mount, with every call counted (countingFS).
	m.kp = &killPrivFS{RawFileSystem: fs.NewNodeFS(m.root, opts)}
	var raw gofuse.RawFileSystem = m.kp
	if cfg.Locks != nil {
		m.lk = &lockFS{RawFileSystem: raw}
		raw = m.lk
	}
	if cfg.NoFlush {
		raw = &noOpendirFS{RawFileSystem: raw} // noopendir.go
	}
	server, err := gofuse.NewServer(&countingFS{RawFileSystem: raw, c: &m.calls}, cfg.Dir, &opts.MountOptions)
	if err == nil {
		go server.Serve()
		err = server.WaitMount()
	}
	if err != nil {
		m.wb.close()
		return nil, fmt.Errorf("mount %s on %s: %w", path.Join(cfg.Bucket, cfg.Prefix), cfg.Dir, err)
	}
	m.server = server
	m.conn = -1
	var st syscall.Stat_t
	if err := syscall.Stat(cfg.Dir, &st); err == nil {
		m.conn = int(unix.Minor(st.Dev))
	}
	if err := setReadAhead(cfg.Dir, readAheadKB); err != nil {
		cfg.Logger.Info("mount: the kernel's read-ahead stays at 128 KiB (cold reads of large files take more round trips)", "dir", cfg.Dir, "err", err)
	}
	if m.own.o != nil {
		m.own.unhold = m.own.o.AddHolder(m)
	}
	if cfg.NoOpen {
		m.idle.start(cfg.NoFlush)
	}
	m.wg.Add(1)
	go m.invalidate()
	if cfg.Watch != nil {
		m.cancel = cfg.Watch(m.changed)
	}
	cfg.Logger.Info("mounted", "bucket", cfg.Bucket, "prefix", cfg.Prefix, "dir", cfg.Dir)
	return m, nil
}

// Close unmounts and stops: lazily if files are still open, and within
// unmountGrace (see unmount), then publishes what was written.
func (m *Mount) Close() error {
	var err error
	m.once.Do(func() {
		err = m.unmount()
		m.idle.close() // no-open mode: what was written and not flushed is queued
		m.wb.close()   // what was closed before the unmount is published
		if m.own.unhold != nil {
			m.own.unhold()
		}
		if m.cancel != nil {
			m.cancel()
		}
		m.inval.close()
		m.wg.Wait()
	})
	return err
}

// unmountGrace is how long Close waits, after the unmount, for the kernel
// to end the FUSE connection before it aborts it.
const unmountGrace = 5 * time.Second

// unmount unmounts the mount point (lazily if it is busy) and waits for
// the FUSE server to stop. Files still open on it, and other mounts of
// the same connection (a bind of the mount's directory, as a CSI publish
// makes for a pod), keep the connection alive after that: past
// unmountGrace it is aborted (fusectl's abort), and they answer ENOTCONN,
// as they would once this process is gone. Without that, Close would wait
// on them for ever and the write-back queue would never be published.
func (m *Mount) unmount() error {
	done := make(chan error, 1)
	go func() {
		err := m.server.Unmount() // waits for the server's loops after a successful unmount
		if err != nil {
			// Busy: detach it now; the kernel finishes when the last user
			// goes away.
			err = syscall.Unmount(m.cfg.Dir, syscall.MNT_DETACH)
		}
		m.server.Wait()
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(unmountGrace):
	}
	aerr := abortConn(m.conn)
	m.cfg.Logger.Warn("mount: still in use after the unmount (open files, or binds of it); its FUSE connection is aborted and they now fail with ENOTCONN",
		"dir", m.cfg.Dir, "connection", m.conn, "abort_err", aerr)
	if aerr != nil {
		// Nothing more can end it from here: publish what is queued and
		// go on, leaving the server's goroutine behind.
		return fmt.Errorf("mount %s: still in use after the unmount, and its connection cannot be aborted: %w", m.cfg.Dir, aerr)
	}
	return <-done
}

// abortConn aborts FUSE connection conn through fusectl
// (/sys/fs/fuse/connections/CONN/abort), mounting fusectl there first if
// it is not.
func abortConn(conn int) error {
	if conn < 0 {
		return errors.New("the connection's number is unknown")
	}
	const ctl = "/sys/fs/fuse/connections"
	p := fmt.Sprintf("%s/%d/abort", ctl, conn)
	if _, err := os.Stat(p); errors.Is(err, os.ErrNotExist) {
		if err := syscall.Mount("fusectl", ctl, "fusectl", 0, ""); err != nil {
			return fmt.Errorf("mount fusectl on %s: %w", ctl, err)
		}
	}
	return os.WriteFile(p, []byte("1"), 0)
}

// prepareMountPoint clears a stale FUSE mount on dir (left by a crash:
// every access fails with ENOTCONN) and checks that dir is an empty
// directory.
func prepareMountPoint(dir string) error {
	_, err := os.Stat(dir)
	if err == nil && mounted(dir) {
		_, err = os.ReadDir(dir) // a stale FUSE mount answers ENOTCONN
	}
	if errors.Is(err, syscall.ENOTCONN) {
		if uerr := syscall.Unmount(dir, syscall.MNT_DETACH); uerr != nil {
			return fmt.Errorf("mount point %s: a stale mount is left there and cannot be cleared: %w", dir, uerr)
		}
		_, err = os.Stat(dir)
	}
	if errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("mount point %s: %w", dir, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("mount point %s: %w", dir, err)
	}
	if mounted(dir) {
		return fmt.Errorf("mount point %s is busy: something is mounted there already (umount it first)", dir)
	}
	f, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("mount point %s: %w", dir, err)
	}
	defer f.Close()
	names, err := f.Readdirnames(1)
	if err != nil && len(names) == 0 && !errors.Is(err, os.ErrNotExist) && err.Error() != "EOF" {
		return fmt.Errorf("mount point %s: %w", dir, err)
	}
	if len(names) > 0 {
		return fmt.Errorf("mount point %s is not empty: mount on an empty directory", dir)
	}
	return nil
}

// mounted reports whether dir is a mount point (its device differs from
// its parent's).
func mounted(dir string) bool {
	var st, pst syscall.Stat_t
	if syscall.Stat(dir, &st) != nil || syscall.Stat(path.Join(dir, ".."), &pst) != nil {
		return false
	}
	return st.Dev != pst.Dev
}

// ensureTree creates the bucket and the prefix's directories when
// missing.
func ensureTree(ctx context.Context, st store.Store, bucket, prefix string) error {
	if _, err := st.Bucket(ctx, bucket); errors.Is(err, store.ErrNoBucket) {
		if err := st.CreateBucket(ctx, store.BucketInfo{Name: bucket}); err != nil && !errors.Is(err, store.ErrBucketExists) {
			return fmt.Errorf("create bucket %s: %w", bucket, err)
		}
	} else if err != nil {
		return fmt.Errorf("bucket %s: %w", bucket, err)
	}
	if prefix != "" {
		if err := st.Mkdir(ctx, bucket, prefix, store.Attrs{}); err != nil && !errors.Is(err, store.ErrExists) {
			return fmt.Errorf("create %s/%s: %w", bucket, prefix, err)
		}
	}
	return nil
}

// negativeTimeout bounds how long the kernel keeps a lookup's miss.
const negativeTimeout = 5 * time.Second

// writeTimeout bounds a FUSE call that changes the namespace: a node that
// lost its write quorum answers EIO after it instead of hanging the
// caller (reads need no quorum and are not bounded).
const writeTimeout = 30 * time.Second

// bounded returns a context for a change: limited to writeTimeout, and
// not cancelled when the kernel interrupts the call (a signal to the
// caller, e.g. the Go runtime's preemption signal, makes go-fuse cancel
// the call's context): a change that has started is finished, not cut at
// an unknown point and answered EIO.
func bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(changeCtx(context.WithoutCancel(ctx)), writeTimeout)
}

// changeCtx names the mount as the origin of the changes made with ctx
// (the bucket's trash records it).
func changeCtx(ctx context.Context) context.Context {
	return store.WithOrigin(ctx, "mount", "")
}

// inval is one invalidation for the kernel: the entry name in parent
// (when parent is set) and the attributes and pages of child (when set).
type inval struct {
	parent *fs.Inode
	name   string
	child  *fs.Inode
	path   string // the entry's path in the bucket, when child is set
}

// changed is the store.Watcher: it finds the inodes the kernel may cache
// for the changed paths and queues their invalidation (never blocking the
// applying goroutine: a full queue drops to invalidating everything on the
// next change it can queue).
func (m *Mount) changed(paths []string, all bool) {
	if all {
		m.queueAll() // and the paths too: a directory renamed onto a name the kernel missed
	}
	base := m.cfg.Bucket + "/"
	if m.cfg.Prefix != "" {
		base += m.cfg.Prefix + "/"
	}
	for _, p := range paths {
		rel, ok := strings.CutPrefix(p, base)
		if !ok {
			continue
		}
		parent := m.root.EmbeddedInode()
		comps := strings.Split(rel, "/")
		for i, c := range comps {
			child := parent.GetChild(c)
			if i == len(comps)-1 || child == nil {
				// The deepest name the kernel may cache: the changed entry,
				// or a parent it never found (a negative entry that the
				// change may have made wrong: a directory created with the
				// file). Nothing below an unknown directory is cached.
				m.queue(inval{parent: parent, name: c, child: child,
					path: path.Join(m.cfg.Prefix, strings.Join(comps[:i+1], "/"))})
				m.queue(inval{child: parent}) // its listing (the kernel's readdir cache) and times
				break
			}
			parent = child
		}
	}
}

func (m *Mount) queue(iv inval) { m.inval.add(iv) }

// invalQueue holds the invalidations to make, each once: a batch of a
// thousand unlinks in one directory invalidates the directory once, not a
// thousand times (each invalidation of an inode also drops its cached
// ACL, which the kernel then asks for again). It never blocks the
// applying goroutine and never drops an invalidation; its size is bounded
// by the inodes and names the kernel knows.
type invalQueue struct {
	mu     sync.Mutex
	cond   *sync.Cond
	items  []inval
	seen   map[inval]bool
	closed bool
}

func (q *invalQueue) init() {
	q.cond = sync.NewCond(&q.mu)
	q.seen = map[inval]bool{}
}

// add queues iv unless the same invalidation is queued already.
func (q *invalQueue) add(iv inval) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed || q.seen[iv] {
		return
	}
	q.seen[iv] = true
	q.items = append(q.items, iv)
	q.cond.Signal()
}

// take waits for invalidations and returns all of them (nil once closed
// and empty).
func (q *invalQueue) take() []inval {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.items) == 0 && !q.closed {
		q.cond.Wait()
	}
	out := q.items
	q.items = nil
	clear(q.seen)
	return out
}

func (q *invalQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.cond.Broadcast()
	q.mu.Unlock()
}

// queueAll invalidates every inode the kernel knows.
func (m *Mount) queueAll() {
	var walk func(n *fs.Inode, dir string)
	walk = func(n *fs.Inode, dir string) {
		for name, c := range n.Children() {
			p := path.Join(dir, name)
			m.queue(inval{parent: n, name: name, child: c, path: p})
			if c.IsDir() {
				walk(c, p)
			}
		}
	}
	walk(m.root.EmbeddedInode(), m.cfg.Prefix)
	m.queue(inval{child: m.root.EmbeddedInode()})
}

// sameInode reports whether iv's name still leads to the inode the kernel
// has for it (a change of its attributes or content, not of the name):
// then the entry stays. Dropping a directory's entry would cut it out of
// the path of every process working in it (getcwd fails with ENOENT).
func (m *Mount) sameInode(iv inval) bool {
	if iv.child == nil || iv.path == "" {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
	defer cancel()
	info, err := m.cfg.Store.Stat(ctx, m.cfg.Bucket, iv.path)
	return err == nil && info.Ino == iv.child.StableAttr().Ino
}

// ownEntry returns the node iv's name leads to in the mount, if any: the
// kernel's entry may be the mount's own, newer than the store's (which
// may not have the file at all: a name unlinked and made again, whose
// unlink's commit is the change).
func ownEntry(iv inval) *node {
	ch := iv.parent.GetChild(iv.name)
	if ch == nil {
		return nil
	}
	c, _ := ch.Operations().(*node)
	return c
}

// deferInval keeps iv, an invalidation of n's name, until n's changes
// are published, if n has changes the store does not have yet (a file or
// directory made or changed here): dropping the kernel's entry now would
// have it forget n's inode (in noflush mode before n is published, see
// forget.go). False when n has none: invalidate now.
func (n *node) deferInval(iv inval) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.uncommittedLocked() {
		return false
	}
	n.deferred = append(n.deferred, inval{parent: iv.parent, name: iv.name, child: n.EmbeddedInode(), path: iv.path})
	return true
}

// settle queues again the invalidations deferred while n had changes
// not published, once it has none.
func (n *node) settle() {
	n.mu.Lock()
	var ivs []inval
	if !n.uncommittedLocked() {
		ivs, n.deferred = n.deferred, nil
	}
	n.mu.Unlock()
	for _, iv := range ivs {
		n.m.queue(iv)
	}
}

// invalidate carries out the queued invalidations.
func (m *Mount) invalidate() {
	defer m.wg.Done()
	for {
		ivs := m.inval.take()
		if ivs == nil {
			return
		}
		for _, iv := range ivs {
			if iv.child != nil {
				iv.child.NotifyContent(0, 0) // attributes and pages
			}
			if iv.parent != nil && !m.sameInode(iv) {
				if c := ownEntry(iv); c == nil || !c.deferInval(iv) {
					iv.parent.NotifyEntry(iv.name)
				}
			}
		}
	}
}
