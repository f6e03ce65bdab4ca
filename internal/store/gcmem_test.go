package store

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cairn-fs/cairn/internal/blob"
	"github.com/cairn-fs/cairn/internal/meta"
	"github.com/cairn-fs/cairn/internal/vfs"
)

// A GC pass reads the garbage queue a page of 1,000 at a time and reaps
// each page with its own log entry, so what it holds does not grow with
// the queue (issue 35; docs/design/0009-scale.md): 2,500 garbage blobs
// are reaped by three OpReap commands of at most 1,000 blobs.
func TestGCPages(t *testing.T) {
	const n = 2500
	var mu sync.Mutex
	var reaps []int // blobs named by each OpReap applied
	e := newEnvSeeing(t, blob.Config{Dir: "/blobs", FS: vfs.NewMem(), MinFreeBytes: 1}, func(_ uint64, c []meta.Command, _ []meta.Result) {
		mu.Lock()
		defer mu.Unlock()
		for k := range c {
			if c[k].Op == meta.OpReap {
				reaps = append(reaps, len(c[k].Reap))
			}
		}
	})
	st, clk, ctx := e.s, e.clock, context.Background()
	files := make([]FilePut, 0, n)
	cs := make([]Change, 0, n)
	for j := range n {
		p := fmt.Sprintf("d%d/f%d", j%10, j)
		files = append(files, FilePut{Path: p, Data: binary.BigEndian.AppendUint64(nil, uint64(j))})
		cs = append(cs, Change{Kind: ChangeDelete, Path: p})
	}
	for _, r := range st.PutFiles(ctx, "bkt", files) {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	for _, err := range st.ChangeMany(ctx, "bkt", cs) {
		if err != nil {
			t.Fatal(err)
		}
	}
	clk.Add(2 * time.Minute) // past the grace
	gs, err := st.gc(ctx, map[blob.Hash]time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if gs.Reaped != n || len(reaps) != 3 || reaps[0] > 1000 || reaps[1] > 1000 || reaps[2] > 1000 {
		t.Fatalf("reaped %d of %d by OpReaps of %v blobs: want three pages of at most 1,000", gs.Reaped, n, reaps)
	}
}
