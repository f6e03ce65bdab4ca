package client_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/cairn-fs/cairn/client"
)

// Sync of a 100,000-file tree keeps its lists on disk: once both trees
// are listed and the plan is made (where a list held in memory would be
// whole), the heap it keeps is far below what the two listings take in
// memory (measured: 37 MB for 100,000 files kept in memory; spilled, 2 MB
// with cgo, 10 MB without: Pebble's memtables and block cache, up to 16 MB,
// are then on the Go heap).
func TestSyncMemoryBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 100,000 files")
	}
	const n = 100000
	_, c := newEnv(t)
	dir := t.TempDir()
	for d := range n / 1000 {
		sub := filepath.Join(dir, fmt.Sprintf("dir%03d", d))
		if err := os.Mkdir(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		for i := range 1000 {
			if err := os.WriteFile(filepath.Join(sub, fmt.Sprintf("file%04d.txt", i)), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	if st, _ := runSync(t, c, client.SyncOptions{LocalDir: dir, Bucket: "b", TempDir: t.TempDir()}); st.Uploaded != n {
		t.Fatalf("first sync: %+v", st)
	}
	var before, atPlan runtime.MemStats
	runtime.GC()
	runtime.GC() // sync.Pool keeps its buffers through one
	runtime.ReadMemStats(&before)
	st, err := client.Sync(context.Background(), c, client.SyncOptions{LocalDir: dir, Bucket: "b", Delete: true, TempDir: t.TempDir(),
		OnPlan: func(client.SyncPlan) {
			runtime.GC()
			runtime.GC()
			runtime.ReadMemStats(&atPlan)
		}})
	if err != nil {
		t.Fatal(err)
	}
	if st.LocalFiles != n || st.RemoteFiles != n || st.Skipped != n || st.Uploaded+st.Deleted+st.Failed != 0 {
		t.Fatalf("second sync: %+v", st)
	}
	grew := int64(atPlan.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("heap held at the plan of a sync of %d files: %d KB (before %d KB, at plan %d KB)", n, grew/1024, before.HeapAlloc>>10, atPlan.HeapAlloc>>10)
	if limit := int64(24 << 20); grew > limit {
		t.Fatalf("a sync of %d files holds %d MB at its plan: more than %d MB, the lists are held", n, grew>>20, limit>>20)
	}
}
