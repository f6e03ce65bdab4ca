package store

import (
	"bytes"
	"context"
	"errors"
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
