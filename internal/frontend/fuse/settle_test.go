package fuse

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-fs/cairn/internal/store"
	"github.com/cairn-fs/cairn/internal/store/storetest"
	"github.com/hanwen/go-fuse/v2/fs"
	gofuse "github.com/hanwen/go-fuse/v2/fuse"
)

// hookStore is a real in-memory store whose StatIno and ChangeMany can be
// held by a test, to run the mount's calls in a chosen interleaving.
type hookStore struct {
	*store.Local
	mu sync.Mutex
	// afterStat, when set, runs once after the next StatIno has read the
	// store and before it answers.
	afterStat func()
	// beforeChange, when set, runs before every ChangeMany.
	beforeChange func()
}

func (h *hookStore) StatIno(ctx context.Context, bucket, path string, ino uint64) (store.ObjectInfo, error) {
	info, err := h.Local.StatIno(ctx, bucket, path, ino)
	h.mu.Lock()
	f := h.afterStat
	h.afterStat = nil
	h.mu.Unlock()
	if f != nil {
		f()
	}
	return info, err
}

func (h *hookStore) ChangeMany(ctx context.Context, bucket string, cs []store.Change) []error {
	h.mu.Lock()
	f := h.beforeChange
	h.mu.Unlock()
	if f != nil {
		f()
	}
	return h.Local.ChangeMany(ctx, bucket, cs)
}

func (h *hookStore) onStat(f func()) {
	h.mu.Lock()
	h.afterStat = f
	h.mu.Unlock()
}

// testMount is a Mount of bucket "web" of an in-memory store, with its
// write-back queue running and no kernel: the tests call the node
// methods directly.
func testMount(t *testing.T) (*Mount, *hookStore) {
	t.Helper()
	st := &hookStore{Local: storetest.New(t)}
	ctx := context.Background()
	if err := st.CreateBucket(ctx, store.BucketInfo{Name: "web"}); err != nil {
		t.Fatal(err)
	}
	m := &Mount{cfg: Config{Store: st, Bucket: "web", TmpDir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)}}
	m.inval.init()
	m.root = &node{m: m}
	fs.NewNodeFS(m.root, &fs.Options{})
	m.wb = newWriteback(m)
	t.Cleanup(func() { m.wb.close(); m.inval.close() })
	return m, st
}

// child adds the node of path (committed in the store) under the root.
func (m *Mount) testChild(t *testing.T, path string) *node {
	t.Helper()
	info, err := m.cfg.Store.Stat(context.Background(), "web", path)
	if err != nil {
		t.Fatal(err)
	}
	c := &node{m: m}
	ch := m.root.NewPersistentInode(context.Background(), c, fs.StableAttr{Mode: fileType(info), Ino: info.Ino})
	m.root.AddChild(path, ch, false)
	return c
}

// A getattr whose store read predates the publish of the node's change,
// and whose answer comes after that publish dropped the node's
// uncommitted attributes, answers the change, not the store's older
// state (issue 32: pjdfstest chown/00.t #603 saw mode 06555 and the old
// gid right after a chown that cleared them).
func TestGetattrAcrossPublish(t *testing.T) {
	m, st := testMount(t)
	ctx := context.Background()
	mode, uid, gid := uint32(0o6555), uint32(65534), uint32(65532)
	if _, _, err := st.Put(ctx, "web", "f", strings.NewReader("x"), store.PutOptions{Size: 1, Mode: mode, UID: uid, GID: gid, Explicit: true}); err != nil {
		t.Fatal(err)
	}
	f := m.testChild(t, "f")

	// An unprivileged chown: the group changes and suid and sgid go.
	cleared, newGID := uint32(0o555), uint32(65533)
	if err := f.setLocal(ctx, store.SetAttrs{Mode: &cleared, GID: &newGID}); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	p := f.pendOp
	f.mu.Unlock()
	if p == nil {
		t.Fatal("the change was not queued")
	}
	// The getattr reads the store, then the change is published (and
	// the node's uncommitted attributes settle) before it answers.
	st.onStat(func() { <-p.done })
	var out gofuse.AttrOut
	if e := f.Getattr(ctx, nil, &out); e != 0 {
		t.Fatal(e)
	}
	if got := out.Mode & 0o7777; got != cleared || out.Gid != newGID {
		t.Errorf("getattr across the publish: mode %04o gid %d, want %04o %d (the change, not the store's older state)", got, out.Gid, cleared, newGID)
	}
	if p.err != nil {
		t.Fatal(p.err)
	}
	if info, err := st.Stat(ctx, "web", "f"); err != nil || info.Mode&0o7777 != cleared || info.GID != newGID {
		t.Errorf("committed: %+v %v", info, err)
	}
}

// A directory's link count counts a subdirectory made in it at once,
// before its queued mkdir is published, while it is published, and after
// (never twice): issue 32, pjdfstest rename/24.t #4 saw 2 after mkdir P/S.
func TestNlinkCountsQueuedMkdir(t *testing.T) {
	m, st := testMount(t)
	ctx := context.Background()
	if err := st.Mkdir(ctx, "web", "p", store.Attrs{Mode: 0o755, Explicit: true}); err != nil {
		t.Fatal(err)
	}
	p := m.testChild(t, "p")
	nlink := func(what string, want uint32) {
		t.Helper()
		var out gofuse.AttrOut
		if e := p.Getattr(ctx, nil, &out); e != 0 {
			t.Fatalf("%s: %v", what, e)
		}
		if out.Nlink != want {
			t.Errorf("%s: nlink %d, want %d", what, out.Nlink, want)
		}
	}

	// Queued: the publisher is held before it commits.
	release := make(chan struct{})
	var once sync.Once
	held := make(chan struct{})
	st.mu.Lock()
	st.beforeChange = func() {
		once.Do(func() { close(held) })
		<-release
	}
	st.mu.Unlock()
	var out gofuse.EntryOut
	if _, e := p.Mkdir(ctx, "s", 0o755, &out); e != 0 {
		t.Fatal(e)
	}
	nlink("mkdir p/s queued", 3)
	// Being published (taken, not committed): the getattr, whose store
	// read may or may not count it, answers once the mkdir settled.
	m.wb.hurry()
	<-held
	statted := make(chan struct{})
	st.onStat(func() { close(statted) })
	answered := make(chan struct{})
	go func() {
		defer close(answered)
		nlink("mkdir p/s being published", 3)
	}()
	<-statted
	close(release)
	<-answered
	m.wb.drain()
	nlink("mkdir p/s published", 3)

	// The store's answer predates the commit, the answer comes after it.
	ch, e := p.Mkdir(ctx, "t", 0o755, &out)
	if e != 0 {
		t.Fatal(e)
	}
	kid := ch.Operations().(*node)
	kid.mu.Lock()
	q := kid.pendOp
	kid.mu.Unlock()
	st.onStat(func() { m.wb.hurry(); <-q.done })
	nlink("mkdir p/t published while the getattr ran", 4)
	nlink("mkdir p/t published", 4)
	if info, err := st.Stat(ctx, "web", "p"); err != nil || info.Nlink != 4 {
		t.Errorf("committed: nlink %d, %v", info.Nlink, err)
	}
}

// A recall that publishes a directory right after a create in it was
// decided, before go-fuse has put the new file in the directory, finds
// the file under its name, not orphaned (issue 32: TestMountExclusiveRace
// saw an O_EXCL create dropped as "lost its name", then refused as fenced
// once the directory had moved, and the other node's create of the same
// name succeed too).
func TestRecallRightAfterCreate(t *testing.T) {
	m, st := testMount(t)
	ctx := context.Background()
	var out gofuse.EntryOut
	ch, fh, _, e := m.root.Create(ctx, "n", syscall.O_CREAT|syscall.O_EXCL|syscall.O_WRONLY, 0o644, &out)
	if e != 0 {
		t.Fatal(e)
	}
	// Here go-fuse would add ch to the root; a recall comes first.
	m.FlushDir(ctx, m.root.dirIno())
	if info, err := st.Stat(ctx, "web", "n"); err != nil || info.Ino != ch.StableAttr().Ino {
		t.Fatalf("the recall did not publish the new file under its name: %+v, %v", info, err)
	}
	fh.(fs.FileReleaser).Release(ctx)
}

// A directory made again under a name whose unlink is queued ahead of it
// has nothing in it yet: a lookup in it answers ENOENT while both are
// queued, not the store's view of the path (ENOTDIR under the file still
// there). pjdfstest unlink/00.t #72: bind n0, unlink n0, mkdir n0, then
// create n0/n1 failed with ENOTDIR.
func TestLookupInDirMadeAgain(t *testing.T) {
	m, st := testMount(t)
	ctx := context.Background()
	if _, _, err := st.Put(ctx, "web", "s", strings.NewReader(""), store.PutOptions{Mode: 0o644, Explicit: true}); err != nil {
		t.Fatal(err)
	}
	m.testChild(t, "s")
	release := make(chan struct{})
	st.mu.Lock()
	st.beforeChange = func() { <-release }
	st.mu.Unlock()
	defer close(release)
	if e := m.root.Unlink(ctx, "s"); e != 0 {
		t.Fatal(e)
	}
	m.root.RmChild("s") // as go-fuse does once Unlink returns
	var out gofuse.EntryOut
	ch, e := m.root.Mkdir(ctx, "s", 0o755, &out)
	if e != 0 {
		t.Fatal(e)
	}
	m.root.AddChild("s", ch, true) // as go-fuse does once Mkdir returns
	dir := ch.Operations().(*node)
	if _, e := dir.Lookup(ctx, "x", &out); e != syscall.ENOENT {
		t.Errorf("lookup of x in s, made again with its mkdir queued: %v, want ENOENT", e)
	}
	if es, e := dir.list(ctx); e != 0 || len(es) != 0 {
		t.Errorf("listing of s, made again with its mkdir queued: %v, %v, want it empty", es, e)
	}
	if _, e := m.root.Lookup(ctx, "s", &out); e != 0 || out.Mode&syscall.S_IFMT != syscall.S_IFDIR {
		t.Errorf("lookup of s: mode %o, %v, want the directory", out.Mode, e)
	}
}

// An invalidation of a name that leads to a file made here and not yet
// published waits for the publish (the kernel must not forget the file
// first), then is made: the store may differ for good, and the entry
// must then go.
func TestInvalDeferredUntilPublished(t *testing.T) {
	m, _ := testMount(t)
	ctx := context.Background()
	var out gofuse.EntryOut
	ch, fh, _, e := m.root.Create(ctx, "f", syscall.O_CREAT|syscall.O_WRONLY, 0o644, &out)
	if e != 0 {
		t.Fatal(e)
	}
	f := ch.Operations().(*node)
	iv := inval{parent: m.root.EmbeddedInode(), name: "f", path: "f"}
	if c := ownEntry(iv); c != f {
		t.Fatalf("ownEntry: %v, want the new file's node", c)
	}
	if !f.deferInval(iv) {
		t.Fatal("the invalidation of a file not yet published was not deferred")
	}
	if e := fh.(fs.FileFlusher).Flush(ctx); e != 0 {
		t.Fatal(e)
	}
	m.wb.drain()
	m.inval.close() // take answers what is queued, without waiting
	got := m.inval.take()
	if len(got) != 1 || got[0].parent != iv.parent || got[0].name != "f" || got[0].child != ch {
		t.Fatalf("after the publish, the invalidations queued are %+v, want the deferred one with the file's inode", got)
	}
	if f.deferInval(iv) {
		t.Fatal("an invalidation of a published file was deferred")
	}
	fh.(fs.FileReleaser).Release(ctx)
}

// TestDrainWithBusyWriter: drain waits for what was queued before it, not
// for an empty queue, which a writer that keeps queuing never leaves (a
// recall of a directory waited 30 s for it, and the claimant on another
// node answered EIO: TestMountStatAfterChange, handles mode).
func TestDrainWithBusyWriter(t *testing.T) {
	m, st := testMount(t)
	st.mu.Lock()
	st.beforeChange = func() { time.Sleep(3 * time.Millisecond) }
	st.mu.Unlock()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Microsecond):
			}
			m.wb.enqueueRmdir(fmt.Sprintf("gone-%d", i), store.Claim{}, store.Claim{}) // not there: published as done
		}
	}()
	defer func() { close(stop); wg.Wait() }()
	time.Sleep(50 * time.Millisecond) // the queue is never empty from here
	for range 5 {
		start := time.Now()
		done := make(chan struct{})
		go func() { m.wb.drain(); close(done) }()
		select {
		case <-done:
		case <-time.After(2 * time.Second):
			t.Fatalf("drain still waiting after 2 s while a writer keeps queuing")
		}
		if took := time.Since(start); took > 500*time.Millisecond {
			t.Errorf("drain took %v", took)
		}
	}
}
