package core

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"testing"

	"github.com/cairn-fs/cairn/internal/cas"
	"github.com/cairn-fs/cairn/internal/kv"
	"github.com/cairn-fs/cairn/internal/meta"
)

// The repair pass over buckets of different R keeps the factors of the
// blobs above the smallest R in a spill.Map: its memory does not grow
// with them (issue 35). 300,000 blobs in an R=3 bucket beside an R=1 one,
// every one reported with its R; the factors held in a map in memory
// take more than the limit.
func TestReferencedBlobsMemoryBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a namespace of 300,000 files")
	}
	const n = 300_000
	db := kv.NewMem()
	apply := func(index uint64, cmds []meta.Command) {
		b := db.NewBatch()
		defer b.Close()
		res, err := meta.Apply(b, index, cmds)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.Err != nil {
				t.Fatal(r.Err)
			}
		}
		if err := b.Commit(false); err != nil {
			t.Fatal(err)
		}
	}
	apply(1, []meta.Command{{Op: meta.OpCreateBucket, Bucket: &meta.Bucket{Name: "one", Replicas: 1}, TimeNs: 1},
		{Op: meta.OpCreateBucket, Bucket: &meta.Bucket{Name: "three", Replicas: 3}, TimeNs: 1}})
	hash := func(i int) cas.Hash {
		var h cas.Hash
		binary.BigEndian.PutUint64(h[:], uint64(i)*0x9e3779b97f4a7c15)
		binary.BigEndian.PutUint64(h[8:], uint64(i))
		return h
	}
	idx := uint64(1)
	for i := 0; i < n; i += 1000 {
		cmds := make([]meta.Command, 0, 1000)
		for j := i; j < i+1000; j++ {
			f := &meta.Inode{Type: meta.TypeFile, Size: 1, Extents: []meta.Extent{{Hash: hash(j), Length: 1}}}
			cmds = append(cmds, meta.Command{Op: meta.OpPutFile, BucketName: "three", Path: fmt.Sprintf("d%d/f%d", j%20, j), File: f, TimeNs: 2})
		}
		idx++
		apply(idx, cmds)
	}
	apply(idx+1, []meta.Command{{Op: meta.OpPutFile, BucketName: "one", Path: "x",
		File: &meta.Inode{Type: meta.TypeFile, Size: 1, Extents: []meta.Extent{{Hash: hash(n), Length: 1}}}, TimeNs: 3}})

	heap := func() int64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return int64(ms.HeapAlloc)
	}
	for _, c := range []struct {
		name  string
		run   func(fn func(cas.Hash, int) bool) error
		limit int64 // bytes held at most while fn runs (0: just report)
	}{
		{"spilled", func(fn func(cas.Hash, int) bool) error {
			return referencedBlobs(meta.NewReader(db), 3, t.TempDir(), 1000, fn)
		}, 16 << 20}, // Pebble's fixed 16 MB counts when built without cgo
		{"in memory", func(fn func(cas.Hash, int) bool) error {
			return meta.NewReader(db).ReferencedBlobs(3, nil, fn)
		}, 0},
	} {
		before := heap()
		var held int64
		count, threes, ones := 0, 0, 0
		if err := c.run(func(h cas.Hash, rf int) bool {
			count++
			switch rf {
			case 3:
				threes++
			case 1:
				ones++
			}
			if count == n/2 {
				held = heap() - before
			}
			return true
		}); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %d blobs (%d at R=3, %d at R=1), %.1f MB held half way", c.name, count, threes, ones, float64(held)/(1<<20))
		if count != n+1 || threes != n || ones != 1 {
			t.Fatalf("%s: %d blobs, %d at R=3, %d at R=1", c.name, count, threes, ones)
		}
		if c.limit > 0 && held > c.limit {
			t.Errorf("%s: %.1f MB held, limit %d MB", c.name, float64(held)/(1<<20), c.limit>>20)
		}
	}
}
