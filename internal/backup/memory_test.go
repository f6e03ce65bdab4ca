package backup

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	"github.com/cairn-fs/cairn/client"
	"github.com/cairn-fs/cairn/client/clienttest"
)

// heapNow is the live heap, after the garbage and sync.Pool's buffers
// (kept through one collection) are gone.
func heapNow() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// A backup and a restore of 40,000 files keep their lists on disk: once
// the plan is made (where lists held in memory would all be whole), the
// heap they keep is far below what those lists take in memory.
func TestBackupRestoreMemoryBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("backs up 40,000 files")
	}
	const n = 40000
	files := map[string][]byte{}
	for i := range n {
		files[fmt.Sprintf("d%03d/f%06d.txt", i%1000, i)] = fmt.Appendf(nil, "file %d", i)
	}
	f, c := newFakeCluster(t, files)
	f.page = 10000
	dir := t.TempDir()
	if st, err := runBackup(t, c, dir, nil); err != nil || st.Copied != n {
		t.Fatalf("first backup: %+v %v", st, err)
	}
	// The lists of 40,000 files take 47 MB when they are kept in memory;
	// spilled, about 2 MB, plus Pebble's memtables and block cache (up to
	// 16 MB, on the Go heap in a build without cgo): 14 MB in all.
	const limit = 24 << 20
	before := heapNow()
	var atPlan int64
	st, err := runBackup(t, c, dir, func(cfg *Config) { cfg.OnPlan = func(Summary) { atPlan = heapNow() } })
	if err != nil || st.Unchanged != n || st.Copied != 0 {
		t.Fatalf("second backup: %+v %v", st, err)
	}
	t.Logf("heap held at the plan of a backup of %d files: %d KB", n, (atPlan-before)/1024)
	if atPlan-before > limit {
		t.Fatalf("a backup of %d files holds %d MB at its plan: more than %d MB, the lists are held", n, (atPlan-before)>>20, limit>>20)
	}

	srv := clienttest.NewServer("key")
	t.Cleanup(srv.Close)
	target := client.New(srv.URL, "key")
	if _, err := target.CreateBucket(context.Background(), client.BucketInfo{Name: "web"}); err != nil {
		t.Fatal(err)
	}
	from, err := OpenDir(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	defer from.Close()
	before = heapNow()
	rst, err := Restore(context.Background(), RestoreConfig{From: from, To: target, Bucket: "web", Jobs: 4,
		OnPlan: func(RestorePlan) { atPlan = heapNow() }})
	if err != nil || rst.Restored != n {
		t.Fatalf("restore: %+v %v", rst, err)
	}
	t.Logf("heap held at the plan of a restore of %d files: %d KB", n, (atPlan-before)/1024)
	if atPlan-before > limit {
		t.Fatalf("a restore of %d files holds %d MB at its plan: more than %d MB, the lists are held", n, (atPlan-before)>>20, limit>>20)
	}
}
