package store

import (
	"bytes"
	"context"
	"errors"
	"math/rand"
	"reflect"
	"testing"

	"github.com/cairn-fs/cairn/internal/blob"
	"github.com/cairn-fs/cairn/internal/vfs"
)

// newOSEnv is newEnv with the blob store on the real file system (so that
// LocalSpan has OS files to lend).
func newOSEnv(t *testing.T) *env {
	t.Helper()
	return newEnvOn(t, blob.Config{Dir: t.TempDir(), FS: vfs.OS(), MinFreeBytes: 1})
}

// newLendEnv is an OS-backed store holding "small" (15000 bytes, one
// extent) and "big" (two extents) of seeded random content.
func newLendEnv(t *testing.T, seed int64) (e *env, small, big []byte) {
	t.Helper()
	e = newOSEnv(t)
	rng := rand.New(rand.NewSource(seed))
	small = randBytes(rng, 15000)
	big = randBytes(rng, blob.MaxSize+5000)
	mustPut(t, e.s, "small", small)
	mustPut(t, e.s, "big", big)
	return e, small, big
}

func TestLocalSpan(t *testing.T) {
	e, small, big := newLendEnv(t, 1)
	ctx := context.Background()
	check := func(path string, data []byte, off, n int64, wantOK bool) {
		t.Helper()
		o, err := e.s.Open(ctx, "bkt", path)
		if err != nil {
			t.Fatal(err)
		}
		f, foff, release, ok := o.(*object).LocalSpan(off, n)
		if ok != wantOK {
			t.Fatalf("%s [%d,+%d): ok %v, want %v", path, off, n, ok, wantOK)
		}
		if !ok {
			return
		}
		got := make([]byte, n)
		if _, err := f.ReadAt(got, foff); err != nil {
			t.Fatal(err)
		}
		release()
		if !bytes.Equal(got, data[off:off+n]) {
			t.Fatalf("%s [%d,+%d): the span holds other bytes", path, off, n)
		}
	}
	check("small", small, 0, 15000, true)
	check("small", small, 100, 900, true)
	check("small", small, 14999, 1, true)
	check("small", small, 0, 0, false)       // empty
	check("small", small, 1, 15000, false)   // past the end
	check("small", small, -1, 10, false)     // negative
	check("big", big, 0, blob.MaxSize, true) // the first extent
	check("big", big, blob.MaxSize, 5000, true)
	check("big", big, blob.MaxSize-10, 20, false) // spans two extents: ReadAt's job

	// A blob this node lacks (deleted under the namespace): no span, and
	// ReadAt reports the error.
	o, err := e.s.Open(ctx, "bkt", "small")
	if err != nil {
		t.Fatal(err)
	}
	ob := o.(*object)
	if err := e.blobs.Delete(ob.ino.Extents[0].Hash); err != nil {
		t.Fatal(err)
	}
	if _, _, _, ok := ob.LocalSpan(0, 10); ok {
		t.Fatal("span of a deleted blob")
	}
	if _, err := o.ReadAt(make([]byte, 10), 0); err == nil {
		t.Fatal("ReadAt of a deleted blob succeeded")
	}

	// No span on an in-memory file system.
	m := newEnv(t)
	mustPut(t, m.s, "small", small)
	o, err = m.s.Open(ctx, "bkt", "small")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, ok := o.(*object).LocalSpan(0, 10); ok {
		t.Fatal("span from vfs.Mem")
	}
}

// TestOpenSharesCachedObject: a cached file's Open returns one shared
// object (no allocation) with one memo slot, and a new version gets a new
// object; directories, invalid paths and consistent reads behave as before.
func TestOpenSharesCachedObject(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	mustPut(t, e.s, "d/f.txt", []byte("one"))
	o1, err := e.s.Open(ctx, "bkt", "d/f.txt")
	if err != nil {
		t.Fatal(err)
	}
	o2, err := e.s.Open(ctx, "bkt", "d/f.txt")
	if err != nil {
		t.Fatal(err)
	}
	if o1 != o2 {
		t.Fatal("two Opens of a cached file returned different objects")
	}
	o1.(*object).Memo().Store("derived")
	if allocs := testing.AllocsPerRun(100, func() {
		if _, err := e.s.Open(ctx, "bkt", "d/f.txt"); err != nil {
			t.Fatal(err)
		}
	}); allocs != 0 {
		t.Fatalf("Open of a cached file allocates %v times", allocs)
	}

	mustPut(t, e.s, "d/f.txt", []byte("two"))
	o3, err := e.s.Open(ctx, "bkt", "d/f.txt")
	if err != nil {
		t.Fatal(err)
	}
	if o3 == o1 || o3.(*object).Memo().Load() != nil {
		t.Fatal("a new version kept the old object or its memo")
	}
	if got := readAll(t, e.s, "d/f.txt"); string(got) != "two" {
		t.Fatalf("read %q", got)
	}
	if o1.Info().Size != 3 || o3.Info().Path != "d/f.txt" || o3.Info().Bucket != "bkt" {
		t.Fatalf("info %+v", o3.Info())
	}

	if _, err := e.s.Open(ctx, "bkt", "d"); !errors.Is(err, ErrIsDir) {
		t.Fatalf("Open of a directory: %v", err)
	}
	if _, err := e.s.Open(ctx, "bkt", "d//f.txt"); !errors.Is(err, ErrInvalidName) {
		t.Fatalf("Open of an invalid path: %v", err)
	}
	if _, err := e.s.Open(ctx, "Bad_Bucket", "x"); !errors.Is(err, ErrNoBucket) {
		t.Fatalf("Open in an invalid bucket: %v", err)
	}
	c1, err := e.s.Open(WithConsistent(ctx), "bkt", "d/f.txt")
	if err != nil {
		t.Fatal(err)
	}
	if c1 == o3 || !reflect.DeepEqual(c1.Info(), o3.Info()) {
		t.Fatal("a consistent read shared the cached object or differs from it")
	}
	st, err := e.s.Stat(ctx, "bkt", "d")
	if err != nil || !st.IsDir || st.Path != "d" {
		t.Fatalf("Stat of a directory: %+v, %v", st, err)
	}
}

// TestLocalBytes checks the bytes lent from the volume maps (the fast
// path's sendmsg source) against the content, the cases that lend nothing,
// and that every lent range is released.
func TestLocalBytes(t *testing.T) {
	e, small, big := newLendEnv(t, 2)
	ctx := context.Background()
	check := func(path string, data []byte, off, n int64, wantOK bool) {
		t.Helper()
		o, err := e.s.Open(ctx, "bkt", path)
		if err != nil {
			t.Fatal(err)
		}
		b, ref, ok := o.(*object).LocalBytes(off, n)
		if ok != wantOK {
			t.Fatalf("%s [%d,+%d): ok %v, want %v", path, off, n, ok, wantOK)
		}
		if !ok {
			return
		}
		if !bytes.Equal(b, data[off:off+n]) {
			t.Fatalf("%s [%d,+%d): lent other bytes", path, off, n)
		}
		ref.Release()
		if !o.(*object).Resident(off, n) {
			t.Fatalf("%s [%d,+%d): not resident just after writing", path, off, n)
		}
	}
	check("small", small, 0, 15000, true)
	check("small", small, 100, 900, true)
	check("small", small, 14999, 1, true)
	check("small", small, 0, 0, false)
	check("small", small, 1, 15000, false)
	check("small", small, -1, 10, false)
	check("big", big, 0, blob.MaxSize, true)
	check("big", big, blob.MaxSize, 5000, true)
	check("big", big, blob.MaxSize-10, 20, false) // spans two extents
	o, err := e.s.Open(ctx, "bkt", "small")
	if err != nil {
		t.Fatal(err)
	}
	if allocs := testing.AllocsPerRun(100, func() {
		_, ref, _ := o.(*object).LocalBytes(0, 15000)
		ref.Release()
	}); allocs != 0 {
		t.Fatalf("LocalBytes allocates %.1f times", allocs)
	}
	// On a file system without maps nothing is lent.
	m := newEnv(t)
	mustPut(t, m.s, "small", small)
	om, err := m.s.Open(ctx, "bkt", "small")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, ok := om.(*object).LocalBytes(0, 10); ok {
		t.Fatal("lent from an in-memory file system")
	}
}

// TestOpenCachesMisses: a path found missing is cached (a repeated miss
// neither allocates nor reads the namespace) and becomes visible at once
// when a file is put there, renamed there (alone or with its directory),
// and missing again when it is deleted.
func TestOpenCachesMisses(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	missing := func(p string) {
		t.Helper()
		if _, err := e.s.Open(ctx, "bkt", p); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Open %s: %v, want ErrNotFound", p, err)
		}
	}
	missing("d/f.md5")
	missing("d/f.md5")
	if allocs := testing.AllocsPerRun(100, func() { _, _ = e.s.Open(ctx, "bkt", "d/f.md5") }); allocs != 0 {
		t.Fatalf("a repeated miss allocates %v times", allocs)
	}
	mustPut(t, e.s, "d/f.md5", []byte("sum"))
	if got := readAll(t, e.s, "d/f.md5"); string(got) != "sum" {
		t.Fatalf("after the put: %q", got)
	}
	if err := e.s.Delete(ctx, "bkt", "d/f.md5", ""); err != nil {
		t.Fatal(err)
	}
	missing("d/f.md5")

	missing("x/g.md5")
	mustPut(t, e.s, "y/g.md5", []byte("moved"))
	if err := e.s.Rename(ctx, "bkt", "y", "x"); err != nil { // a directory
		t.Fatal(err)
	}
	if got := readAll(t, e.s, "x/g.md5"); string(got) != "moved" {
		t.Fatalf("after the directory rename: %q", got)
	}
	// A put creates its missing parents: they are no longer missing.
	missing("p/q")
	missing("p")
	mustPut(t, e.s, "p/q/r.txt", []byte("deep"))
	for _, dir := range []string{"p", "p/q"} {
		if _, err := e.s.Open(ctx, "bkt", dir); !errors.Is(err, ErrIsDir) {
			t.Fatalf("Open %s after a put below it: %v, want ErrIsDir", dir, err)
		}
	}
	missing("z.md5")
	mustPut(t, e.s, "w.md5", []byte("file"))
	if err := e.s.Rename(ctx, "bkt", "w.md5", "z.md5"); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, e.s, "z.md5"); string(got) != "file" {
		t.Fatalf("after the file rename: %q", got)
	}
}
