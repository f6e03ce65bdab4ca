package store

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cairn-fs/cairn/internal/blob"
	"github.com/cairn-fs/cairn/internal/consensus"
	"github.com/cairn-fs/cairn/internal/kv"
	"github.com/cairn-fs/cairn/internal/meta"
	"github.com/cairn-fs/cairn/internal/vfs"
)

// twoNodes returns two stores (nodes 1 and 2) over one log and one
// namespace: each applies every entry, as two nodes of a cluster do.
func twoNodes(t *testing.T) (*Local, *Local) {
	t.Helper()
	db := kv.NewMem()
	var sts [2]*Local
	lg, err := consensus.NewLocal(consensus.LocalConfig{KV: db, OnApply: func(i uint64, c []meta.Command, r []meta.Result) {
		for _, st := range sts {
			if st != nil {
				st.Applied(i, c, r)
			}
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range sts {
		bs, err := blob.Open(blob.Config{Dir: "/blobs", FS: vfs.NewMem(), MinFreeBytes: 1})
		if err != nil {
			t.Fatal(err)
		}
		st, err := New(Config{Blobs: bs, KV: db, Log: lg, GCGrace: time.Minute, NodeID: uint64(i + 1)})
		if err != nil {
			t.Fatal(err)
		}
		sts[i] = st
		t.Cleanup(func() { st.Close(); bs.Close() })
	}
	t.Cleanup(func() { lg.Close(); db.Close() })
	if err := sts[0].CreateBucket(context.Background(), BucketInfo{Name: "bkt"}); err != nil {
		t.Fatal(err)
	}
	return sts[0], sts[1]
}

// flushes is a Holder that records the directories it was asked to
// publish.
type flushes struct {
	mu   sync.Mutex
	dirs []uint64
	then func()
}

func (f *flushes) FlushDir(ctx context.Context, dir uint64) {
	f.mu.Lock()
	f.dirs = append(f.dirs, dir)
	then := f.then
	f.mu.Unlock()
	if then != nil {
		then()
	}
}

func (f *flushes) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.dirs)
}

func put(ctx context.Context, st *Local, path string, opts PutOptions) error {
	opts.Size = 1
	_, _, err := st.Put(ctx, "bkt", path, bytes.NewReader([]byte("x")), opts)
	return err
}

// TestOwnAndRecall: a node owns a directory, another node's change there
// recalls it (the owner's holder publishes first), a change decided
// under the old claim is then refused, and a holder's read hold delays
// the hand-over until it is done.
func TestOwnAndRecall(t *testing.T) {
	n1, n2 := twoNodes(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := n1.Mkdir(ctx, "bkt", "d", Attrs{}); err != nil {
		t.Fatal(err)
	}
	info, err := n1.Stat(ctx, "bkt", "d")
	if err != nil {
		t.Fatal(err)
	}
	d := info.Ino
	h1 := &flushes{}
	defer n1.AddHolder(h1)()

	c, done, err := n1.Own(ctx, d, "bkt/d")
	if err != nil {
		t.Fatal(err)
	}
	done()
	if c.Dir != d || c.Epoch == 0 {
		t.Fatalf("claim %+v", c)
	}
	if err := put(ctx, n1, "d/mine", PutOptions{Decided: true, Claims: []Claim{c}}); err != nil {
		t.Fatalf("the owner's decided create: %v", err)
	}
	// Node 1's own undecided write (an HTTP PUT) is sent with its claim,
	// after its holder published.
	if err := put(ctx, n1, "d/http1", PutOptions{}); err != nil {
		t.Fatalf("an undecided write on the owner: %v", err)
	}
	if h1.count() != 1 {
		t.Fatalf("holder flushed %d times before node 1's own write, want 1", h1.count())
	}
	// Node 2's write recalls the directory.
	if err := put(ctx, n2, "d/http2", PutOptions{}); err != nil {
		t.Fatalf("a write through node 2: %v", err)
	}
	if _, ok := n1.Held(d); ok {
		t.Fatal("node 1 still holds the directory after node 2's recall")
	}
	if h1.count() != 2 {
		t.Fatalf("holder flushed %d times, want 2 (the recall)", h1.count())
	}
	if st := n1.OwnerStats(); st.HandedOver != 1 {
		t.Fatalf("node 1 stats %+v", st)
	}
	// A change decided under the moved claim is refused whole.
	if err := put(ctx, n1, "d/late", PutOptions{Decided: true, Claims: []Claim{c}}); !errors.Is(err, ErrFenced) {
		t.Fatalf("a change under a claim that moved: %v, want ErrFenced", err)
	}
	if _, err := n1.Stat(ctx, "bkt", "d/late"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the fenced file exists: %v", err)
	}

	// Node 2 owns it and decides; node 1's claim waits for node 2's
	// read hold, then gets a new epoch.
	c2, done2, err := n2.Own(ctx, d, "bkt/d")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan Claim, 1)
	go func() {
		c, done, err := n1.Own(ctx, d, "bkt/d")
		if err != nil {
			t.Error(err)
		} else {
			done()
		}
		got <- c
	}()
	time.Sleep(100 * time.Millisecond)
	select {
	case <-got:
		t.Fatal("node 1 got the directory while node 2 was deciding in it")
	default:
	}
	if err := put(ctx, n2, "d/two", PutOptions{Decided: true, Claims: []Claim{c2}}); err != nil {
		t.Fatal(err)
	}
	done2()
	c1 := <-got
	if c1.Epoch <= c2.Epoch {
		t.Fatalf("node 1's new claim %+v is not newer than node 2's %+v", c1, c2)
	}
	if _, err := n1.Stat(ctx, "bkt", "d/two"); err != nil {
		t.Fatalf("node 2's change before the hand-over: %v", err)
	}
}

// TestExclusiveMkdir: an exclusive Mkdir of an existing directory fails.
func TestExclusiveMkdir(t *testing.T) {
	st, _ := newLogEnv(t, identity, nil, nil)
	ctx := context.Background()
	if err := st.Mkdir(ctx, "bkt", "d", Attrs{Exclusive: true}); err != nil {
		t.Fatal(err)
	}
	if err := st.Mkdir(ctx, "bkt", "d", Attrs{Exclusive: true}); !errors.Is(err, ErrExists) {
		t.Fatalf("second exclusive mkdir: %v", err)
	}
	if err := st.Mkdir(ctx, "bkt", "d", Attrs{}); err != nil {
		t.Fatalf("mkdir -p: %v", err)
	}
}

// TestOwnerStatusViews: what status pages show of ownership: this node's
// counters and directories (by path), and every node's count from the
// log, which follows a recall.
func TestOwnerStatusViews(t *testing.T) {
	n1, n2 := twoNodes(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	inos := map[string]uint64{}
	for _, p := range []string{"b", "a", "c"} {
		if err := n1.Mkdir(ctx, "bkt", p, Attrs{}); err != nil {
			t.Fatal(err)
		}
		info, err := n1.Stat(ctx, "bkt", p)
		if err != nil {
			t.Fatal(err)
		}
		inos[p] = info.Ino
	}
	own := func(st *Local, p string) {
		t.Helper()
		_, done, err := st.Own(ctx, inos[p], "bkt/"+p)
		if err != nil {
			t.Fatal(err)
		}
		done()
	}
	own(n1, "b")
	own(n1, "a")
	own(n2, "c")
	if st := n1.OwnerStats(); st != (OwnerStats{Owned: 2, Claims: 2}) {
		t.Fatalf("node 1 stats %+v", st)
	}
	dirs := n1.OwnedDirs(10)
	if len(dirs) != 2 || dirs[0].Path != "bkt/a" || dirs[0].Dir != inos["a"] || dirs[0].Epoch == 0 || dirs[0].Since.IsZero() || dirs[1].Path != "bkt/b" {
		t.Fatalf("node 1's directories: %+v", dirs)
	}
	if d := n1.OwnedDirs(1); len(d) != 1 || d[0].Path != "bkt/a" {
		t.Fatalf("node 1's first directory: %+v", d)
	}
	counts := func(limit int) []NodeDirs {
		t.Helper()
		cs, err := n2.DirOwnerCounts(ctx, limit)
		if err != nil {
			t.Fatal(err)
		}
		return cs
	}
	if got, want := counts(100), []NodeDirs{{Node: 1, Dirs: 2}, {Node: 2, Dirs: 1}}; !slices.Equal(got, want) {
		t.Fatalf("counts %+v, want %+v", got, want)
	}
	if got, want := counts(1), []NodeDirs{{Node: 1, Dirs: 1, More: true}, {Node: 2, Dirs: 1}}; !slices.Equal(got, want) {
		t.Fatalf("bounded counts %+v, want %+v", got, want)
	}
	// Node 2 writes in a: a recall, and a hand-over on node 1.
	if err := put(ctx, n2, "a/f", PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if st := n1.OwnerStats(); st.Owned != 1 || st.HandedOver != 1 {
		t.Fatalf("node 1 stats after the recall %+v", st)
	}
	if st := n2.OwnerStats(); st.Owned != 1 || st.Recalls == 0 || st.Claims != 1 {
		t.Fatalf("node 2 stats after its recall %+v", st)
	}
	if got, want := counts(100), []NodeDirs{{Node: 1, Dirs: 1}, {Node: 2, Dirs: 1}}; !slices.Equal(got, want) {
		t.Fatalf("counts after the recall %+v, want %+v", got, want)
	}
}

// TestOwnAfterSessionLost: a node that gave its session up by its own
// clock (it could not renew in time) while the log still names it as a
// directory's owner continues that session: its changes and its holders'
// decisions go on under the same claims, instead of waiting for the
// leader to expire the old session (or being fenced). Once the log
// expires a session, its claims are fenced and a new claim is needed.
func TestOwnAfterSessionLost(t *testing.T) {
	n1, _ := twoNodes(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := n1.Mkdir(ctx, "bkt", "d", Attrs{}); err != nil {
		t.Fatal(err)
	}
	info, _ := n1.Stat(ctx, "bkt", "d")
	c, done, err := n1.Own(ctx, info.Ino, "bkt/d")
	if err != nil {
		t.Fatal(err)
	}
	done()
	epoch := func() uint64 {
		n1.locks.mu.Lock()
		defer n1.locks.mu.Unlock()
		return n1.locks.epoch
	}
	n1.loseLocks(epoch(), nil) // as renewLocks does when it cannot renew
	if _, ok := n1.Held(info.Ino); ok {
		t.Fatal("the directory is still held after the session was lost")
	}
	if err := put(ctx, n1, "d/http", PutOptions{}); err != nil {
		t.Fatalf("an undecided write after the session was lost: %v", err)
	}
	if err := put(ctx, n1, "d/queued", PutOptions{Decided: true, Claims: []Claim{c}}); err != nil {
		t.Fatalf("a decision queued under the claim before the loss: %v", err)
	}
	c2, done, err := n1.Own(ctx, info.Ino, "bkt/d")
	if err != nil {
		t.Fatal(err)
	}
	done()
	if c2 != c {
		t.Fatalf("the claim after the session continued: %+v, want %+v", c2, c)
	}
	// The log expires the session: the claim is fenced from then on.
	sess, err := n1.meta.LockSession(1)
	if err != nil || sess == nil {
		t.Fatalf("session: %+v %v", sess, err)
	}
	if _, err := n1.log.Propose(ctx, meta.Command{Op: meta.OpLockExpire, Lock: &meta.LockCmd{
		Lock: meta.Lock{Owner: meta.LockOwner{Node: 1, Epoch: sess.Epoch}}, RenewNs: sess.RenewNs}}); err != nil {
		t.Fatal(err)
	}
	if err := put(ctx, n1, "d/late", PutOptions{Decided: true, Claims: []Claim{c}}); !errors.Is(err, ErrFenced) {
		t.Fatalf("a decision under the expired session's claim: %v, want ErrFenced", err)
	}
	c3, done, err := n1.Own(ctx, info.Ino, "bkt/d")
	if err != nil {
		t.Fatal(err)
	}
	done()
	if c3.Epoch <= c.Epoch {
		t.Fatalf("the claim after the expiry %+v is not newer than %+v", c3, c)
	}
}

// TestRecallAfterSessionContinued: a node whose table forgot a directory
// (its session was lost by its clock and continued) that the log still
// names it the owner of gives it up on a recall at once.
func TestRecallAfterSessionContinued(t *testing.T) {
	n1, n2 := twoNodes(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := n1.Mkdir(ctx, "bkt", "d", Attrs{}); err != nil {
		t.Fatal(err)
	}
	info, _ := n1.Stat(ctx, "bkt", "d")
	if _, done, err := n1.Own(ctx, info.Ino, "bkt/d"); err != nil {
		t.Fatal(err)
	} else {
		done()
	}
	n1.locks.mu.Lock()
	epoch := n1.locks.epoch
	n1.locks.mu.Unlock()
	n1.loseLocks(epoch, nil)
	n1.continueSession()
	if rec, _ := n1.meta.DirOwner(meta.Ino(info.Ino)); rec == nil || rec.Node != 1 {
		t.Fatalf("owner after the continuation: %+v", rec)
	}
	start := time.Now()
	if err := put(ctx, n2, "d/x", PutOptions{}); err != nil {
		t.Fatalf("node 2's write: %v", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("node 2 waited %v for the directory", took)
	}
}

// TestDirLock: readers share a directory's lock, a writer excludes
// everyone, and a writer waiting keeps new readers out (as
// sync.RWMutex). In a synctest bubble: every wait must be durable (a
// channel receive), or synctest.Wait would not return.
func TestDirLock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var l dirLock
		got := func(ch chan struct{}) bool {
			synctest.Wait()
			select {
			case <-ch:
				return true
			default:
				return false
			}
		}
		l.RLock()
		l.RLock()
		wrote := make(chan struct{})
		go func() {
			l.Lock()
			close(wrote)
		}()
		synctest.Wait() // the writer waits for both readers
		read := make(chan struct{})
		go func() {
			l.RLock()
			close(read)
		}()
		l.RUnlock()
		if got(wrote) {
			t.Fatal("the writer got the lock while a reader held it")
		}
		if got(read) {
			t.Fatal("a new reader got in ahead of a waiting writer")
		}
		l.RUnlock()
		if !got(wrote) {
			t.Fatal("the writer did not get the lock once the readers left")
		}
		if got(read) {
			t.Fatal("a reader got in while the writer held the lock")
		}
		l.Unlock()
		if !got(read) {
			t.Fatal("the reader did not get the lock once the writer left")
		}
		l.RUnlock()
		l.Lock() // free again
		l.Unlock()
	})
}
