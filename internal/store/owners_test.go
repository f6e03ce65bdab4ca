package store

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
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

// TestProposeOwnedAfterRecall: a command decided in the log that held a
// directory's claim, was refused for another directory, and let its
// claim go to recall that one, is sent again without the claim it let
// go: the directory may have moved meanwhile (issue 32: a rename through
// the mount answered EIO, "the directory's ownership moved", in
// TestMountExclusiveRace).
func TestProposeOwnedAfterRecall(t *testing.T) {
	n1, n2 := twoNodes(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ino := func(p string) uint64 {
		t.Helper()
		if err := n1.Mkdir(ctx, "bkt", p, Attrs{}); err != nil {
			t.Fatal(err)
		}
		info, err := n1.Stat(ctx, "bkt", p)
		if err != nil {
			t.Fatal(err)
		}
		return info.Ino
	}
	a, b := ino("a"), ino("b")
	if err := put(ctx, n1, "a/x", PutOptions{}); err != nil {
		t.Fatal(err)
	}
	own := func(st *Local, dir uint64, name string) {
		t.Helper()
		_, done, err := st.Own(ctx, dir, name)
		if err != nil {
			t.Fatal(err)
		}
		done()
	}
	own(n1, a, "bkt/a")
	own(n2, b, "bkt/b")
	// When node 1's rename recalls b, node 2 takes a from node 1 before
	// it hands b over: node 1's claim on a, which the rename held on its
	// first try, has moved by its next.
	var once sync.Once
	h2 := &flushes{then: func() {
		once.Do(func() { own(n2, a, "bkt/a") })
	}}
	defer n2.AddHolder(h2)()
	if err := n1.Rename(ctx, "bkt", "a/x", "b/y"); err != nil {
		t.Fatalf("rename across two directories owned by two nodes: %v", err)
	}
	if _, err := n1.Stat(ctx, "bkt", "b/y"); err != nil {
		t.Fatal(err)
	}
}
