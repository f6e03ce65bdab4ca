package storetest

import (
	"log/slog"
	"testing"
	"time"

	"github.com/cairn-fs/cairn/internal/blob"
	"github.com/cairn-fs/cairn/internal/consensus"
	"github.com/cairn-fs/cairn/internal/kv"
	"github.com/cairn-fs/cairn/internal/meta"
	"github.com/cairn-fs/cairn/internal/store"
	"github.com/cairn-fs/cairn/internal/vfs"
)

// New returns a store with no bucket, closed at the test's cleanup.
func New(tb testing.TB) *store.Local {
	tb.Helper()
	return NewWith(tb, nil)
}

// NewWith is New with the store's configuration changed by mod first.
func NewWith(tb testing.TB, mod func(*store.Config)) *store.Local {
	tb.Helper()
	bs, err := blob.Open(blob.Config{Dir: "/blobs", FS: vfs.NewMem(), MinFreeBytes: 1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		tb.Fatal(err)
	}
	db := kv.NewMem()
	var st *store.Local
	lg, err := consensus.NewLocal(consensus.LocalConfig{KV: db, OnApply: func(i uint64, c []meta.Command, r []meta.Result) {
		st.Applied(i, c, r)
	}})
	if err != nil {
		tb.Fatal(err)
	}
	cfg := store.Config{Blobs: bs, KV: db, Log: lg, GCGrace: time.Minute}
	if mod != nil {
		mod(&cfg)
	}
	st, err = store.New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close(); lg.Close(); db.Close(); bs.Close() })
	return st
}
