package store

import (
	"context"
	"io"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-fs/cairn/internal/blob"
	"github.com/cairn-fs/cairn/internal/consensus"
	"github.com/cairn-fs/cairn/internal/kv"
	"github.com/cairn-fs/cairn/internal/meta"
	"github.com/cairn-fs/cairn/internal/vfs"
)

// patternReader yields n bytes of a cheap, non-repeating-per-blob pattern.
type patternReader struct {
	n, off int64
}

func (r *patternReader) Read(p []byte) (int, error) {
	if r.off >= r.n {
		return 0, io.EOF
	}
	if int64(len(p)) > r.n-r.off {
		p = p[:r.n-r.off]
	}
	for i := range p {
		x := uint64(r.off + int64(i))
		p[i] = byte(x ^ x>>8 ^ x>>20 ^ x>>28)
	}
	r.off += int64(len(p))
	return len(p), nil
}

// TestLargeUploadStreams uploads a file far larger than the memory the
// upload may use and checks the peak heap stays at a few blobs.
func TestLargeUploadStreams(t *testing.T) {
	size := int64(512 << 20)
	if testing.Short() {
		size = 128 << 20
	}
	dir := t.TempDir()
	bs, err := blob.Open(blob.Config{Dir: dir + "/blobs", FS: vfs.OS(), MinFreeBytes: 1})
	if err != nil {
		t.Fatal(err)
	}
	db := kv.NewMem()
	var st *Local
	lg, _ := consensus.NewLocal(consensus.LocalConfig{KV: db, OnApply: func(i uint64, c []meta.Command, r []meta.Result) { st.Applied(i, c, r) }})
	st, err = New(Config{Blobs: bs, KV: db, Log: lg})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { st.Close(); lg.Close(); bs.Close() }()
	ctx := context.Background()
	if err := st.CreateBucket(ctx, BucketInfo{Name: "big"}); err != nil {
		t.Fatal(err)
	}
	// Collect garbage eagerly so the heap reflects what the upload holds,
	// not what the collector has not reached yet (under -race and load the
	// lag alone came near the limit).
	defer debug.SetGCPercent(debug.SetGCPercent(10))
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	var peak atomic.Uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			if m.HeapInuse > peak.Load() {
				peak.Store(m.HeapInuse)
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	info, _, err := st.Put(ctx, "big", "file.bin", &patternReader{n: size}, PutOptions{Size: size})
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if info.Size != size {
		t.Fatalf("size %d", info.Size)
	}
	grew := int64(peak.Load()) - int64(base.HeapInuse)
	// ParallelBlobWrites (4) blobs in flight, one being filled, pool slack.
	limit := int64(8 * blob.MaxSize)
	t.Logf("uploaded %d MiB; heap grew by at most %d MiB", size>>20, grew>>20)
	if grew > limit {
		t.Fatalf("heap grew by %d MiB during a %d MiB upload; limit %d MiB", grew>>20, size>>20, limit>>20)
	}
	// Spot-check the content.
	o, err := st.Open(ctx, "big", "file.bin")
	if err != nil {
		t.Fatal(err)
	}
	want := make([]byte, 1000)
	(&patternReader{n: size, off: size - 1000}).Read(want)
	got := make([]byte, 1000)
	if _, err := o.ReadAt(got, size-1000); err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Fatal("tail differs")
	}
}

func bytesReader(b []byte) io.Reader { return &patternReader{n: int64(len(b))} }
