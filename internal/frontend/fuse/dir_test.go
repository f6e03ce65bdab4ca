package fuse

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"testing"

	"github.com/cairn-fs/cairn/internal/store"
	gofuse "github.com/hanwen/go-fuse/v2/fuse"
)

// putMany stores n empty files dir/f000000... in the test mount's bucket.
func putMany(t *testing.T, st store.BatchPutter, dir string, n int) {
	t.Helper()
	ctx := context.Background()
	for i := 0; i < n; i += 1000 {
		var files []store.FilePut
		for j := i; j < min(n, i+1000); j++ {
			files = append(files, store.FilePut{Path: fmt.Sprintf("%s/f%06d", dir, j), Data: []byte{}})
		}
		for _, r := range st.PutFiles(ctx, "web", files) {
			if r.Err != nil {
				t.Fatal(r.Err)
			}
		}
	}
}

// A listing reads the store a page at a time: every entry once, in
// offsets that count them, and a seek back lists again from there.
func TestReaddirPages(t *testing.T) {
	m, st := testMount(t)
	ctx := context.Background()
	putMany(t, st, "d", 2*dirPage+500)
	d := &dirHandle{n: m.testChild(t, "d")}
	seen := map[string]bool{}
	var names []string
	for {
		de, e := d.Readdirent(ctx)
		if e != 0 {
			t.Fatal(e)
		}
		if de == nil {
			break
		}
		if seen[de.Name] {
			t.Fatalf("%s listed twice", de.Name)
		}
		seen[de.Name] = true
		names = append(names, de.Name)
		if de.Off != uint64(len(names)) {
			t.Fatalf("entry %d (%s) has offset %d", len(names), de.Name, de.Off)
		}
		if _, ok := d.stream().info(de.Name); !ok {
			t.Fatalf("READDIRPLUS has no description of %s, just listed", de.Name)
		}
	}
	if len(names) != 2*dirPage+500 {
		t.Fatalf("listed %d entries, want %d", len(names), 2*dirPage+500)
	}
	for _, off := range []uint64{1500, 0, 2499} {
		if e := d.Seekdir(ctx, off); e != 0 {
			t.Fatal(e)
		}
		de, e := d.Readdirent(ctx)
		if e != 0 || de == nil || de.Name != names[off] {
			t.Fatalf("after a seek to %d: %v %v, want %s", off, de, e, names[off])
		}
	}
}

// A listing of a 100,000-entry directory holds a page, not the list: the
// heap it keeps half way through is far below what the entries alone
// would take (40 B each for the kernel's entry, before any name or the
// store's description).
func TestReaddirMemoryBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("stores 100,000 files")
	}
	const n = 100000
	m, st := testMount(t)
	ctx := context.Background()
	putMany(t, st, "big", n)
	big := m.testChild(t, "big")
	var before, mid runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	d := &dirHandle{n: big}
	for range n / 2 {
		if de, e := d.Readdirent(ctx); e != 0 || de == nil {
			t.Fatal(e)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&mid)
	count := n / 2
	for {
		de, e := d.Readdirent(ctx)
		if e != 0 {
			t.Fatal(e)
		}
		if de == nil {
			break
		}
		count++
	}
	if count != n {
		t.Fatalf("listed %d entries, want %d", count, n)
	}
	grew := int64(mid.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("heap held half way through a listing of %d entries: %d KB", n, grew/1024)
	if limit := int64(n * 40 / 2); grew > limit {
		t.Fatalf("a listing of %d entries holds %d KB half way through: more than %d KB, the list is held", n, grew/1024, limit/1024)
	}
}

// readAll reads d from its position to the end.
func readAll(t *testing.T, d *dirHandle) []string {
	t.Helper()
	var names []string
	for {
		de, e := d.Readdirent(context.Background())
		if e != 0 {
			t.Fatal(e)
		}
		if de == nil {
			return names
		}
		names = append(names, de.Name)
	}
}

// Names made here and not yet published come once, after the store's,
// and at the same offsets when a seek reads the listing again; once
// published they come once, from the store.
func TestReaddirFreshAcrossSeeks(t *testing.T) {
	m, st := testMount(t)
	ctx := context.Background()
	putMany(t, st, "d", 2*dirPage+500)
	dir := m.testChild(t, "d")
	release := make(chan struct{})
	st.mu.Lock()
	st.beforeChange = func() { <-release }
	st.mu.Unlock()
	var out gofuse.EntryOut
	for _, name := range []string{"zz-new", "a-new"} {
		ch, e := dir.Mkdir(ctx, name, 0o755, &out)
		if e != 0 {
			t.Fatal(e)
		}
		dir.AddChild(name, ch, true) // as go-fuse does once Mkdir returns
	}
	d := &dirHandle{n: dir}
	all := readAll(t, d)
	if n := len(all); n != 2*dirPage+502 || all[n-2] != "a-new" || all[n-1] != "zz-new" {
		t.Fatalf("%d entries, ending %v: want %d, the two new names last", n, all[max(0, n-3):], 2*dirPage+502)
	}
	for _, off := range []uint64{1200, 2*dirPage + 500, 2*dirPage + 501, 1} {
		if e := d.Seekdir(ctx, off); e != 0 {
			t.Fatal(e)
		}
		if got := readAll(t, d); !slices.Equal(got, all[off:]) {
			t.Fatalf("after a seek to %d: %d entries, want %d", off, len(got), len(all)-int(off))
		}
	}
	during := &dirHandle{n: dir}
	during.stream() // begun before the publish, read after it
	close(release)
	st.mu.Lock()
	st.beforeChange = nil
	st.mu.Unlock()
	m.wb.drain()
	slices.Sort(all)
	for _, h := range []*dirHandle{during, {n: dir}} {
		again := readAll(t, h)
		slices.Sort(again)
		if !slices.Equal(again, all) {
			t.Fatalf("after the publish: %d entries, want the same %d", len(again), len(all))
		}
	}
}
