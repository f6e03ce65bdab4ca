package store

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-fs/cairn/internal/blob"
	"github.com/cairn-fs/cairn/internal/consensus"
	"github.com/cairn-fs/cairn/internal/kv"
	"github.com/cairn-fs/cairn/internal/meta"
	"github.com/cairn-fs/cairn/internal/vfs"
)

// fakeReadLog is a Local log whose read index is chosen by the test, as a
// follower's is by its leader.
type fakeReadLog struct {
	*consensus.Local
	readIndex func(ctx context.Context) (uint64, error)
	calls     atomic.Int32
}

func (f *fakeReadLog) ReadIndex(ctx context.Context) (uint64, error) {
	f.calls.Add(1)
	return f.readIndex(ctx)
}

// WaitApplied polls, as Raft's waits, until the local log reaches index.
func (f *fakeReadLog) WaitApplied(ctx context.Context, index uint64) error {
	for f.AppliedIndex() < index {
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %w", consensus.ErrUnavailable, ctx.Err())
		case <-time.After(time.Millisecond):
		}
	}
	return nil
}

// plainLog is a Log that is not a consensus.ReadIndexer.
type plainLog struct{ consensus.Log }

// newLogEnv is newEnv with the log wrapped by wrap. onApply, if set, runs
// in the log's OnApply before the store's Applied (it may block, as Raft
// is between publishing its applied index and calling OnApply).
func newLogEnv(t *testing.T, wrap func(*consensus.Local) consensus.Log, onApply func(), mut func(*Config)) (*Local, *consensus.Local) {
	t.Helper()
	bs, err := blob.Open(blob.Config{Dir: "/blobs", FS: vfs.NewMem(), MinFreeBytes: 1})
	if err != nil {
		t.Fatal(err)
	}
	db := kv.NewMem()
	var st *Local
	lg, err := consensus.NewLocal(consensus.LocalConfig{KV: db, OnApply: func(i uint64, c []meta.Command, r []meta.Result) {
		if onApply != nil {
			onApply()
		}
		st.Applied(i, c, r)
	}})
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Blobs: bs, KV: db, Log: wrap(lg), GCGrace: time.Minute}
	if mut != nil {
		mut(&cfg)
	}
	st, err = New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close(); lg.Close(); db.Close(); bs.Close() })
	if err := st.CreateBucket(context.Background(), BucketInfo{Name: "bkt"}); err != nil {
		t.Fatal(err)
	}
	return st, lg
}

func readCtx(t *testing.T, ctx context.Context, s *Local, path string) string {
	t.Helper()
	o, err := s.Open(ctx, "bkt", path)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	defer o.Close()
	b := make([]byte, o.Info().Size)
	if _, err := o.ReadAt(b, 0); err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestBarrierWaitsForReadIndex: a read index ahead of the applied index
// holds the barrier until the entry applies, and the consistent read then
// sees it; the index is published only after OnApply dropped stale cache
// entries, so no read past the barrier meets them.
func TestBarrierWaitsForReadIndex(t *testing.T) {
	var gating atomic.Bool
	gate := make(chan struct{})
	var fl *fakeReadLog
	s, lg := newLogEnv(t, func(l *consensus.Local) consensus.Log {
		fl = &fakeReadLog{Local: l}
		return fl
	}, func() {
		if gating.Load() {
			<-gate
		}
	}, nil)
	mustPut(t, s, "f", []byte("old"))
	ctx := context.Background()
	if got := readCtx(t, ctx, s, "f"); got != "old" { // now cached
		t.Fatalf("read %q", got)
	}
	ahead := lg.AppliedIndex() + 1
	fl.readIndex = func(context.Context) (uint64, error) { return ahead, nil }

	errc := make(chan error, 1)
	go func() { errc <- s.Barrier(ctx) }()
	select {
	case err := <-errc:
		t.Fatalf("barrier returned %v before its read index applied", err)
	case <-time.After(50 * time.Millisecond):
	}

	// The write lands in KV with OnApply (cache invalidation) held: the log
	// publishes the applied index only after OnApply, so the barrier must
	// still be waiting — no read past it can meet the stale cache.
	gating.Store(true)
	putc := make(chan error, 1)
	go func() {
		_, _, err := s.Put(ctx, "bkt", "f", bytes.NewReader([]byte("new")), PutOptions{Size: 3})
		putc <- err
	}()
	select {
	case err := <-errc:
		t.Fatalf("barrier returned %v while the entry's OnApply was still running", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(gate)
	select {
	case err := <-errc:
		if err != nil {
			t.Fatalf("barrier: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("barrier did not return after its read index applied")
	}
	if err := <-putc; err != nil {
		t.Fatal(err)
	}
	if fl.calls.Load() != 1 {
		t.Fatalf("ReadIndex called %d times, want 1", fl.calls.Load())
	}
	// Past the barrier, plain and consistent reads both see the write.
	cctx := WithConsistent(ctx)
	for _, c := range []context.Context{ctx, cctx} {
		if got := readCtx(t, c, s, "f"); got != "new" {
			t.Fatalf("read after the barrier %q, want new", got)
		}
	}
	if info, err := s.Stat(cctx, "bkt", "f"); err != nil || info.Size != 3 || info.ETag != md5hexOf("new") {
		t.Fatalf("consistent stat %+v %v", info, err)
	}
	if res, err := s.List(cctx, "bkt", ListOptions{}); err != nil || len(res.Entries) != 1 || res.Entries[0].ETag != md5hexOf("new") {
		t.Fatalf("consistent list %+v %v", res, err)
	}
	if _, err := s.Bucket(cctx, "bkt"); err != nil {
		t.Fatal(err)
	}
}

func TestBarrierUnavailable(t *testing.T) {
	for _, tc := range []struct {
		name string
		ri   func(ctx context.Context) (uint64, error)
	}{
		{"no leader", func(ctx context.Context) (uint64, error) {
			<-ctx.Done() // as Raft: re-sent until ctx ends
			return 0, fmt.Errorf("%w: read index: %w", consensus.ErrUnavailable, ctx.Err())
		}},
		{"stopped", func(context.Context) (uint64, error) { return 0, consensus.ErrStopped }},
		{"other", func(context.Context) (uint64, error) { return 0, errors.New("boom") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := newLogEnv(t, func(l *consensus.Local) consensus.Log {
				return &fakeReadLog{Local: l, readIndex: tc.ri}
			}, nil, func(c *Config) { c.ReadBarrierTimeout = 50 * time.Millisecond })
			start := time.Now()
			err := s.Barrier(context.Background())
			if !errors.Is(err, ErrUnavailable) {
				t.Fatalf("barrier: %v, want ErrUnavailable", err)
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Fatalf("barrier took %v, bounded by 50ms", d)
			}
			t.Log(err)
		})
	}
}

func TestBarrierLocalAndPlainLogs(t *testing.T) {
	s, _ := newLogEnv(t, func(l *consensus.Local) consensus.Log { return l }, nil, nil)
	mustPut(t, s, "f", []byte("x"))
	if err := s.Barrier(context.Background()); err != nil {
		t.Fatalf("local barrier: %v", err)
	}
	if s.cfg.ReadBarrierTimeout != 3*time.Second {
		t.Fatalf("default ReadBarrierTimeout %v", s.cfg.ReadBarrierTimeout)
	}
	p, _ := newLogEnv(t, func(l *consensus.Local) consensus.Log { return plainLog{l} }, nil, nil)
	if err := p.Barrier(context.Background()); err != nil {
		t.Fatalf("barrier of a log without read indexes: %v", err)
	}
}

func md5hexOf(s string) string { m := md5.Sum([]byte(s)); return hex.EncodeToString(m[:]) }
