package consensus

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cairn-fs/cairn/internal/kv"
	"github.com/cairn-fs/cairn/internal/meta"
)

func mkdir(i int) meta.Command {
	return meta.Command{Op: meta.OpMkdir, BucketName: "bkt", Path: fmt.Sprintf("d%d", i), TimeNs: int64(i + 1)}
}

func TestLocalAppliesInOrderAndResumes(t *testing.T) {
	db := kv.NewMem()
	var mu sync.Mutex
	var entries, cmds int
	l, err := NewLocal(LocalConfig{KV: db, OnApply: func(i uint64, c []meta.Command, r []meta.Result) {
		mu.Lock()
		entries++
		cmds += len(c)
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	res, err := l.Propose(ctx, meta.Command{Op: meta.OpCreateBucket, Bucket: &meta.Bucket{Name: "bkt"}, TimeNs: 1})
	if err != nil || res.Err != nil {
		t.Fatal(err, res.Err)
	}
	const n = 400
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := l.Propose(ctx, mkdir(i))
			if err != nil || res.Err != nil {
				t.Error(err, res.Err)
			}
		}()
	}
	wg.Wait()
	if cmds != n+1 {
		t.Fatalf("applied %d commands, want %d", cmds, n+1)
	}
	t.Logf("%d commands in %d entries", cmds, entries)
	applied := l.AppliedIndex()
	if applied != uint64(entries) {
		t.Fatalf("applied index %d, entries %d", applied, entries)
	}
	// Batching actually happens under concurrency.
	if entries >= n {
		t.Fatalf("no batching: %d entries for %d concurrent proposals", entries, n)
	}
	l.Close()
	// A new log over the same store resumes at the applied index.
	l2, err := NewLocal(LocalConfig{KV: db})
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if l2.AppliedIndex() != applied {
		t.Fatalf("resumed at %d, want %d", l2.AppliedIndex(), applied)
	}
	got, err := meta.NewReader(db).AppliedIndex()
	if err != nil || got != applied {
		t.Fatalf("stored applied index %d %v", got, err)
	}
	for i := 0; i < n; i++ {
		if _, err := meta.NewReader(db).Lookup("bkt", fmt.Sprintf("d%d", i)); err != nil {
			t.Fatalf("d%d: %v", i, err)
		}
	}
}

// failingKV fails every commit after the first `ok` ones.
type failingKV struct {
	kv.Store
	mu sync.Mutex
	ok int
}

type failingBatch struct {
	kv.Batch
	f *failingKV
}

func (f *failingKV) NewBatch() kv.Batch { return &failingBatch{f.Store.NewBatch(), f} }

func (b *failingBatch) Commit(sync bool) error {
	b.f.mu.Lock()
	defer b.f.mu.Unlock()
	if b.f.ok <= 0 {
		return errors.New("injected EIO")
	}
	b.f.ok--
	return b.Batch.Commit(sync)
}

func TestLocalStopsOnCommitFailure(t *testing.T) {
	f := &failingKV{Store: kv.NewMem(), ok: 1}
	l, err := NewLocal(LocalConfig{KV: f})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	if _, err := l.Propose(ctx, meta.Command{Op: meta.OpCreateBucket, Bucket: &meta.Bucket{Name: "bkt"}, TimeNs: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Propose(ctx, mkdir(1)); !errors.Is(err, ErrStopped) {
		t.Fatalf("commit failure: got %v, want ErrStopped", err)
	}
	// Never retried: later proposals fail too, and nothing was applied.
	if _, err := l.Propose(ctx, mkdir(2)); !errors.Is(err, ErrStopped) {
		t.Fatalf("after failure: got %v", err)
	}
	if l.AppliedIndex() != 1 {
		t.Fatalf("applied index moved to %d", l.AppliedIndex())
	}
}

// TestProposeAfterCloseNeverHangs: once the log has stopped, a proposal
// must fail with ErrStopped, not sit forever in the queue nobody reads
// (Propose's select could pick the buffered queue over the closed stop
// channel).
func TestProposeAfterCloseNeverHangs(t *testing.T) {
	l, err := NewLocal(LocalConfig{KV: kv.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := l.Propose(ctx, meta.Command{Op: meta.OpCreateBucket, Bucket: &meta.Bucket{Name: "bkt"}, TimeNs: 1}); err != nil {
		t.Fatal(err)
	}
	l.Close()
	done := make(chan error, 1)
	go func() {
		for i := 0; i < 200; i++ {
			if _, err := l.Propose(ctx, mkdir(i)); !errors.Is(err, ErrStopped) {
				done <- fmt.Errorf("proposal %d after Close: %v, want ErrStopped", i, err)
				return
			}
		}
		done <- nil
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Propose after Close hangs")
	}
}
