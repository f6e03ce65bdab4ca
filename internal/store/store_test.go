package store

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairn-fs/cairn/internal/blob"
	"github.com/cairn-fs/cairn/internal/consensus"
	"github.com/cairn-fs/cairn/internal/kv"
	"github.com/cairn-fs/cairn/internal/meta"
	"github.com/cairn-fs/cairn/internal/vfs"
)

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

type env struct {
	s     *Local
	blobs *blob.Store
	clock *fakeClock
}

func newEnv(t *testing.T) *env {
	t.Helper()
	return newEnvOn(t, blob.Config{Dir: "/blobs", FS: vfs.NewMem(), MinFreeBytes: 1})
}

// newEnvOn is newEnv with its blob store opened with bcfg.
func newEnvOn(t *testing.T, bcfg blob.Config) *env { return newEnvSeeing(t, bcfg, nil) }

// newEnvSeeing is newEnvOn with seen called with every applied entry
// before the store sees it.
func newEnvSeeing(t *testing.T, bcfg blob.Config, seen func(uint64, []meta.Command, []meta.Result)) *env {
	t.Helper()
	bs, err := blob.Open(bcfg)
	if err != nil {
		t.Fatal(err)
	}
	db := kv.NewMem()
	var st *Local
	lg, err := consensus.NewLocal(consensus.LocalConfig{KV: db, OnApply: func(i uint64, c []meta.Command, r []meta.Result) {
		if seen != nil {
			seen(i, c, r)
		}
		st.Applied(i, c, r)
	}})
	if err != nil {
		t.Fatal(err)
	}
	clk := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	st, err = New(Config{Blobs: bs, KV: db, Log: lg, GCGrace: time.Minute, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close(); lg.Close(); db.Close(); bs.Close() })
	if err := st.CreateBucket(context.Background(), BucketInfo{Name: "bkt"}); err != nil {
		t.Fatal(err)
	}
	return &env{s: st, blobs: bs, clock: clk}
}

func randBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	rng.Read(b)
	return b
}

func mustPut(t *testing.T, s *Local, path string, data []byte) ObjectInfo {
	t.Helper()
	info, _, err := s.Put(context.Background(), "bkt", path, bytes.NewReader(data), PutOptions{Size: int64(len(data))})
	if err != nil {
		t.Fatalf("put %s: %v", path, err)
	}
	return info
}

func readAll(t *testing.T, s *Local, path string) []byte {
	t.Helper()
	o, err := s.Open(context.Background(), "bkt", path)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	defer o.Close()
	var buf bytes.Buffer
	if _, err := o.WriteRangeTo(&buf, 0, o.Info().Size); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestPutGetSizes(t *testing.T) {
	e := newEnv(t)
	rng := rand.New(rand.NewSource(1))
	for _, n := range []int{0, 1, 1000, blob.MaxSize - 1, blob.MaxSize, blob.MaxSize + 1, 2*blob.MaxSize + 12345} {
		data := randBytes(rng, n)
		p := fmt.Sprintf("dir/sub/f%d.bin", n)
		info := mustPut(t, e.s, p, data)
		md := md5.Sum(data)
		sh := sha256.Sum256(data)
		if info.Size != int64(n) || info.ETag != hex.EncodeToString(md[:]) || info.SHA256 != hex.EncodeToString(sh[:]) {
			t.Fatalf("%d: bad info %+v", n, info)
		}
		if got := readAll(t, e.s, p); !bytes.Equal(got, data) {
			t.Fatalf("%d: content differs", n)
		}
		// Ranges through ReadAt and WriteRangeTo, across blob boundaries.
		o, _ := e.s.Open(context.Background(), "bkt", p)
		for i := 0; i < 20 && n > 0; i++ {
			off := rng.Int63n(int64(n))
			l := rng.Int63n(int64(n)-off) + 1
			buf := make([]byte, l)
			if _, err := o.ReadAt(buf, off); err != nil && err != io.EOF {
				t.Fatal(err)
			}
			if !bytes.Equal(buf, data[off:off+l]) {
				t.Fatalf("ReadAt %d+%d differs", off, l)
			}
			var w bytes.Buffer
			if _, err := o.WriteRangeTo(&w, off, l); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(w.Bytes(), data[off:off+l]) {
				t.Fatalf("WriteRangeTo %d+%d differs", off, l)
			}
		}
	}
}

func TestPutReplaceAndCreatedFlag(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	_, created, err := e.s.Put(ctx, "bkt", "a.txt", strings.NewReader("one"), PutOptions{Size: -1})
	if err != nil || !created {
		t.Fatalf("first put: created=%v err=%v", created, err)
	}
	_, created, err = e.s.Put(ctx, "bkt", "a.txt", strings.NewReader("two"), PutOptions{Size: -1})
	if err != nil || created {
		t.Fatalf("second put: created=%v err=%v", created, err)
	}
	if got := readAll(t, e.s, "a.txt"); string(got) != "two" {
		t.Fatalf("got %q", got)
	}
}

type failingReader struct {
	r   io.Reader
	err error
}

func (f *failingReader) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if err == io.EOF {
		return n, f.err
	}
	return n, err
}

func TestBadBodiesStoreNothing(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	// Declared longer than sent.
	_, _, err := e.s.Put(ctx, "bkt", "short", strings.NewReader("abc"), PutOptions{Size: 10})
	if !errors.Is(err, ErrShortBody) {
		t.Fatalf("short body: %v", err)
	}
	// Declared shorter than sent.
	_, _, err = e.s.Put(ctx, "bkt", "long", strings.NewReader("abcdef"), PutOptions{Size: 2})
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("long body: %v", err)
	}
	// Client gone mid-body.
	_, _, err = e.s.Put(ctx, "bkt", "gone", &failingReader{strings.NewReader("abc"), io.ErrUnexpectedEOF}, PutOptions{Size: -1})
	if !errors.Is(err, ErrShortBody) {
		t.Fatalf("broken body: %v", err)
	}
	for _, p := range []string{"short", "long", "gone"} {
		if _, err := e.s.Stat(ctx, "bkt", p); !errors.Is(err, ErrNotFound) {
			t.Fatalf("%s visible after failed put: %v", p, err)
		}
	}
	// Bad names.
	for _, p := range []string{"../x", "a//b", "a/./b", "a\x00b", string([]byte{0xff, 0xfe}), strings.Repeat("x", 256)} {
		if _, _, err := e.s.Put(ctx, "bkt", p, strings.NewReader("x"), PutOptions{Size: 1}); !errors.Is(err, ErrInvalidName) {
			t.Fatalf("put %q: got %v, want ErrInvalidName", p, err)
		}
	}
	if _, _, err := e.s.Put(ctx, "nobucket", "x", strings.NewReader("x"), PutOptions{Size: 1}); !errors.Is(err, ErrNoBucket) {
		t.Fatalf("no bucket: %v", err)
	}
}

func listAll(t *testing.T, s *Local, opts ListOptions) (keys []string) {
	t.Helper()
	for i := 0; i < 10000; i++ {
		res, err := s.List(context.Background(), "bkt", opts)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range res.Entries {
			keys = append(keys, e.Path)
		}
		keys = append(keys, res.CommonPrefixes...)
		if !res.Truncated {
			return keys
		}
		if res.NextToken == "" {
			t.Fatal("truncated page without a token")
		}
		opts.StartAfter = res.NextToken
	}
	t.Fatal("listing did not end")
	return nil
}

func TestListS3OrderAndPagination(t *testing.T) {
	e := newEnv(t)
	paths := []string{"img.png", "img/a.png", "img/b/c.png", "img-x", "imh", "a", "z/z/z", "img/b.png", "ü/ö"}
	for _, p := range paths {
		mustPut(t, e.s, p, []byte(p))
	}
	want := append([]string(nil), paths...)
	sort.Strings(want)
	for limit := 1; limit <= len(paths)+1; limit++ {
		got := listAll(t, e.s, ListOptions{Limit: limit})
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("limit %d: got %v want %v", limit, got, want)
		}
	}
	// Prefix, recursive.
	got := listAll(t, e.s, ListOptions{Prefix: "img", Limit: 2})
	if fmt.Sprint(got) != "[img-x img.png img/a.png img/b.png img/b/c.png]" {
		t.Fatalf("prefix img: %v", got)
	}
	// Delimiter.
	for limit := 1; limit <= 6; limit++ {
		got = listAll(t, e.s, ListOptions{Delimiter: "/", Limit: limit})
		sort.Strings(got)
		if fmt.Sprint(got) != "[a img-x img.png img/ imh z/ ü/]" {
			t.Fatalf("delimiter limit %d: %v", limit, got)
		}
	}
	got = listAll(t, e.s, ListOptions{Prefix: "img/", Delimiter: "/"})
	if fmt.Sprint(got) != "[img/a.png img/b.png img/b/]" {
		t.Fatalf("img/ delimiter: %v", got)
	}
	if got := listAll(t, e.s, ListOptions{Prefix: "nothing/"}); len(got) != 0 {
		t.Fatalf("missing dir: %v", got)
	}
}

func TestDirsRenameDelete(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	mustPut(t, e.s, "d/x.txt", []byte("x"))
	if err := e.s.Delete(ctx, "bkt", "d", ""); !errors.Is(err, ErrNotEmpty) {
		t.Fatalf("rmdir non-empty: %v", err)
	}
	// As rename(2): the destination's directory must exist.
	if err := e.s.Rename(ctx, "bkt", "d", "e/f"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("rename into a missing directory: %v, want ErrNotFound", err)
	}
	if err := e.s.Mkdir(ctx, "bkt", "e", Attrs{}); err != nil {
		t.Fatal(err)
	}
	if err := e.s.Rename(ctx, "bkt", "d", "e/f"); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, e.s, "e/f/x.txt"); string(got) != "x" {
		t.Fatalf("after rename: %q", got)
	}
	if _, err := e.s.Stat(ctx, "bkt", "d/x.txt"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("old path after rename: %v", err)
	}
	if err := e.s.Delete(ctx, "bkt", "e/f/x.txt", ""); err != nil {
		t.Fatal(err)
	}
	if err := e.s.Delete(ctx, "bkt", "e/f", ""); err != nil {
		t.Fatal(err)
	}
	if err := e.s.Mkdir(ctx, "bkt", "m/n", Attrs{}); err != nil {
		t.Fatal(err)
	}
	if info, err := e.s.Stat(ctx, "bkt", "m/n"); err != nil || !info.IsDir {
		t.Fatalf("mkdir: %+v %v", info, err)
	}
	if _, err := e.s.Open(ctx, "bkt", "m"); !errors.Is(err, ErrIsDir) {
		t.Fatalf("open dir: %v", err)
	}
	if err := e.s.DeleteBucket(ctx, "bkt"); !errors.Is(err, ErrBucketNotEmpty) {
		t.Fatalf("delete non-empty bucket: %v", err)
	}
}

func TestGCReclaimsAfterGrace(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	data := randBytes(rand.New(rand.NewSource(2)), 100_000)
	mustPut(t, e.s, "f", data)
	h := blob.Sum(data)
	if err := e.s.Delete(ctx, "bkt", "f", ""); err != nil {
		t.Fatal(err)
	}
	orphans := map[blob.Hash]time.Time{}
	if _, err := e.s.gc(ctx, orphans); err != nil {
		t.Fatal(err)
	}
	if !e.blobs.Has(h) {
		t.Fatal("blob deleted before the grace period")
	}
	e.clock.Add(2 * time.Minute)
	st, err := e.s.gc(ctx, orphans)
	if err != nil {
		t.Fatal(err)
	}
	if st.Reaped != 1 || e.blobs.Has(h) {
		t.Fatalf("blob not reclaimed after grace: %+v has=%v", st, e.blobs.Has(h))
	}
	// A blob shared by two files survives the deletion of one.
	mustPut(t, e.s, "g1", data)
	mustPut(t, e.s, "g2", data)
	e.s.Delete(ctx, "bkt", "g1", "")
	e.clock.Add(2 * time.Minute)
	if _, err := e.s.gc(ctx, orphans); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, e.s, "g2"); !bytes.Equal(got, data) {
		t.Fatal("shared blob lost")
	}
}

func TestOrphansFromFailedUploadsCollected(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	data := randBytes(rand.New(rand.NewSource(3)), blob.MaxSize+10)
	_, _, err := e.s.Put(ctx, "bkt", "x", bytes.NewReader(data), PutOptions{Size: int64(len(data)) + 5})
	if !errors.Is(err, ErrShortBody) {
		t.Fatal(err)
	}
	if !e.blobs.Has(blob.Sum(data[:blob.MaxSize])) {
		t.Skip("store did not keep the first blob; nothing to collect")
	}
	orphans := map[blob.Hash]time.Time{}
	e.s.gc(ctx, orphans)
	if !e.blobs.Has(blob.Sum(data[:blob.MaxSize])) {
		t.Fatal("orphan deleted before its grace period")
	}
	e.clock.Add(2 * time.Minute)
	st, err := e.s.gc(ctx, orphans)
	if err != nil {
		t.Fatal(err)
	}
	if st.Orphans != 2 || e.blobs.Has(blob.Sum(data[:blob.MaxSize])) {
		t.Fatalf("orphans not collected: %+v", st)
	}
}

// An upload that deduplicates against a garbage blob while that blob is
// reaped must still end with a readable file.
func TestReapRacingUpload(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	data := []byte("shared content")
	mustPut(t, e.s, "old", data)
	e.s.Delete(ctx, "bkt", "old", "")
	e.clock.Add(2 * time.Minute)
	// Reap while the upload holds the blob: after its blobs are written,
	// before its command is proposed.
	var gcErr error
	e.s.beforePropose = func() { _, gcErr = e.s.gc(ctx, map[blob.Hash]time.Time{}) }
	if _, _, err := e.s.Put(ctx, "bkt", "new", bytes.NewReader(data), PutOptions{Size: -1}); err != nil {
		t.Fatal(err)
	}
	if gcErr != nil {
		t.Fatal(gcErr)
	}
	if got := readAll(t, e.s, "new"); !bytes.Equal(got, data) {
		t.Fatalf("got %q", got)
	}
}

// TestBucketCacheNotStaleAfterRacingUpdate: a Bucket lookup that read the
// store before an UpdateBucket applied must not cache the old options after
// the apply cleared the cache (a bucket made private would stay public).
func TestBucketCacheNotStaleAfterRacingUpdate(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if err := e.s.CreateBucket(ctx, BucketInfo{Name: "pub", Public: true}); err != nil {
		t.Fatal(err)
	}
	once := false
	e.s.afterBucketRead = func() {
		if once {
			return
		}
		once = true
		if err := e.s.UpdateBucket(ctx, BucketInfo{Name: "pub", Public: false}); err != nil {
			t.Error(err)
		}
	}
	if _, err := e.s.Bucket(ctx, "pub"); err != nil { // races the update
		t.Fatal(err)
	}
	e.s.afterBucketRead = nil
	b, err := e.s.Bucket(ctx, "pub")
	if err != nil {
		t.Fatal(err)
	}
	if b.Public {
		t.Fatal("bucket still public after UpdateBucket: stale cache entry")
	}
}

// TestListStartAfterPastPrefix: S3 start-after is exclusive over full
// keys; a StartAfter that sorts after every key with the prefix (but does
// not itself have the prefix's directory) yields an empty page, not the
// listing from the start.
func TestListStartAfterPastPrefix(t *testing.T) {
	e := newEnv(t)
	for _, p := range []string{"a/x", "a/y", "b"} {
		mustPut(t, e.s, p, []byte(p))
	}
	for _, sa := range []string{"b", "a0", "a~"} {
		res, err := e.s.List(context.Background(), "bkt", ListOptions{Prefix: "a/", StartAfter: sa})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Entries)+len(res.CommonPrefixes) != 0 {
			t.Fatalf("prefix a/ start-after %q: got %+v, want nothing", sa, res)
		}
	}
	// Still lists what sorts after StartAfter.
	if got := listAll(t, e.s, ListOptions{Prefix: "a/", StartAfter: "a"}); fmt.Sprint(got) != "[a/x a/y]" {
		t.Fatalf("start-after a: %v", got)
	}
}
