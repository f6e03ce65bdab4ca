package replica

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-fs/cairn/internal/blob"
)

func fillWith(t *testing.T, c *DiskCache, data []byte) []byte {
	t.Helper()
	got, err := c.Fill(blob.Sum(data), nil, func() ([]byte, bool, error) { return data, true, nil })
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// waitIdle waits until no copy is being kept and no eviction runs.
func waitIdle(t *testing.T, c *DiskCache) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(time.Millisecond) {
		if len(c.keepers) == 0 && c.evictMu.TryLock() {
			c.evictMu.Unlock()
			if len(c.keepers) == 0 {
				return
			}
		}
	}
	t.Fatal("the disk cache is still busy after 10 s")
}

// openCacheStore opens a blob store in dir with c's settings and attaches
// it.
func openCacheStore(t *testing.T, dir string, c *DiskCache) *blob.Store {
	t.Helper()
	bc := blob.DefaultConfig()
	bc.Dir, bc.MinFreeBytes, bc.ScrubPeriod = dir, -1, -1
	bc.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	c.StoreConfig(&bc)
	s, err := blob.Open(bc)
	if err != nil {
		t.Fatal(err)
	}
	c.Attach(s)
	return s
}

func cacheBlob(i int) []byte {
	return bytes.Repeat([]byte(fmt.Sprintf("blob %04d ", i)), 2000) // 20 KB
}

// The disk cache keeps whole blobs in its blob store, where they are read
// as local copies (each read a hit, and its recency); past 70% of its
// bound it deletes the least recently used and compacts, so the store's
// files stay within the bound, even under many fills at once; it finds
// its copies again after a restart.
func TestDiskCache(t *testing.T) {
	dir := t.TempDir()
	const bound = 1 << 20 // about 36 blobs of 20 KB live at most
	c := NewDiskCache(bound)
	s := openCacheStore(t, dir, c)
	for i := range 20 {
		fillWith(t, c, cacheBlob(i))
		waitIdle(t, c) // a fill finding 16 copies being kept is not kept
	}
	if st := c.Stats(); st.Entries != 20 || st.Evictions != 0 || !st.OnDisk {
		t.Fatalf("after 20 fills: %+v", st)
	}
	// Reads of the store are the cache's hits; blobs 0-4 are the most
	// recently used.
	p := make([]byte, 10)
	for i := range 5 {
		if _, err := s.ReadAt(blob.Sum(cacheBlob(i)), p, 100); err != nil {
			t.Fatal(err)
		}
	}
	if st := c.Stats(); st.Hits != 5 {
		t.Fatalf("hits %d, want 5", st.Hits)
	}
	for i := 20; i < 100; i++ {
		fillWith(t, c, cacheBlob(i))
		waitIdle(t, c)
		if st := s.Stats(); st.Bytes > bound {
			t.Fatalf("after fill %d the store's files take %d B, over the bound of %d", i, st.Bytes, bound)
		}
	}
	st := c.Stats()
	if st.Evictions == 0 || st.Bytes > bound || st.Bytes == 0 {
		t.Fatalf("after 100 fills: %+v", st)
	}
	// Many fills at once (more than compaction keeps up with): the files
	// never pass the bound; what does not fit is served, not kept.
	var fillers sync.WaitGroup
	stop := make(chan struct{})
	var worst atomic.Int64
	sampler := make(chan struct{})
	go func() {
		defer close(sampler)
		for {
			worst.Store(max(worst.Load(), s.Stats().Bytes))
			select {
			case <-stop:
				return
			default:
				time.Sleep(100 * time.Microsecond)
			}
		}
	}()
	for g := range 8 {
		fillers.Go(func() {
			for i := range 40 {
				fillWith(t, c, cacheBlob(1000+g*40+i))
			}
		})
	}
	fillers.Wait()
	waitIdle(t, c)
	close(stop)
	<-sampler
	if w := worst.Load(); w > bound {
		t.Fatalf("concurrent fills took the store's files to %d B, over the bound of %d", w, bound)
	}
	// Back to the sequential state for what follows.
	// Blob 100 read after each fill: the most recently used throughout.
	for i := 100; i < 140; i++ {
		fillWith(t, c, cacheBlob(i))
		waitIdle(t, c)
		s.ReadAt(blob.Sum(cacheBlob(100)), p, 100)
	}
	st = c.Stats()
	// The touched blobs outlived the evictions; the untouched first ones
	// went.
	if !s.Has(blob.Sum(cacheBlob(139))) || !s.Has(blob.Sum(cacheBlob(100))) || s.Has(blob.Sum(cacheBlob(101))) {
		t.Fatal("eviction did not take the least recently used")
	}
	// The index matches the store.
	n := 0
	s.Range(func(h blob.Hash, size int64) bool { n++; return true })
	if n != st.Entries {
		t.Fatalf("the store holds %d blobs, the index %d", n, st.Entries)
	}
	// A miss is counted by Get (a cached blob is read as a local copy).
	if _, ok := c.Get(blob.Sum([]byte("absent"))); ok || c.Stats().Misses != 1 {
		t.Fatal("Get answered a blob")
	}
	// A fetch that fails keeps nothing.
	if _, err := c.Fill(blob.Sum([]byte("x")), nil, func() ([]byte, bool, error) { return nil, false, errors.New("no") }); err == nil {
		t.Fatal("a failed fetch answered nil")
	}
	c.Close()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// A restart finds the copies again.
	c2 := NewDiskCache(bound)
	s2 := openCacheStore(t, dir, c2)
	if st2 := c2.Stats(); st2.Entries != st.Entries {
		t.Fatalf("after a restart %d entries, before %d", st2.Entries, st.Entries)
	}
	c2.Close()
	s2.Close()
	// Reopened with a smaller bound: it evicts down to it.
	c3 := NewDiskCache(bound / 4)
	s3 := openCacheStore(t, dir, c3)
	defer s3.Close()
	defer c3.Close()
	if st3 := c3.Stats(); st3.Entries > 10 || st3.Bytes > bound/4 {
		t.Fatalf("reopened at a quarter: %+v", st3)
	}
	if NewDiskCache(0) != nil {
		t.Fatal("a cache of 0 bytes exists")
	}
}

// Small blobs: their needles' headers, the tombstones of their evictions
// and the garbage compaction leaves count against the bound as much as
// their bytes do, and the cache goes on keeping what is read (it once
// froze: refusing every fill while it saw nothing to evict).
func TestDiskCacheSmallBlobs(t *testing.T) {
	const bound = 128 << 10
	c := NewDiskCache(bound)
	s := openCacheStore(t, t.TempDir(), c)
	defer s.Close()
	defer c.Close()
	kept := 0
	for i := range 2000 {
		d := []byte(fmt.Sprintf("small blob %06d %s", i, bytes.Repeat([]byte{'x'}, 80)))
		fillWith(t, c, d)
		waitIdle(t, c)
		if st := s.Stats(); st.Bytes > bound {
			t.Fatalf("after fill %d the store's files take %d B, over the bound of %d", i, st.Bytes, bound)
		}
		if i >= 1800 && s.Has(blob.Sum(d)) {
			kept++
		}
	}
	if st := c.Stats(); kept < 150 || st.Evictions == 0 {
		t.Fatalf("kept %d of the last 200 fills (want at least 150); %+v", kept, st)
	}
	// The index matches the store.
	n := 0
	s.Range(func(blob.Hash, int64) bool { n++; return true })
	if st := c.Stats(); n != st.Entries {
		t.Fatalf("the store holds %d blobs, the index %d", n, st.Entries)
	}
}

// A copy deleted behind the cache's back (the namespace's garbage
// collection deletes reaped blobs from every node's store) leaves its
// index.
func TestDiskCacheForgetsDeleted(t *testing.T) {
	c := NewDiskCache(1 << 20)
	s := openCacheStore(t, t.TempDir(), c)
	defer s.Close()
	defer c.Close()
	fillWith(t, c, cacheBlob(1))
	fillWith(t, c, cacheBlob(2))
	waitIdle(t, c)
	if err := s.Delete(blob.Sum(cacheBlob(1))); err != nil {
		t.Fatal(err)
	}
	if st := c.Stats(); st.Entries != 1 || c.live.Load() != blob.NeedleSize(len(cacheBlob(2))) {
		t.Fatalf("after a delete: %+v, live %d", st, c.live.Load())
	}
}

// gatedStore holds every Put until gate closes.
type gatedStore struct {
	CacheStore
	gate <-chan struct{}
}

func (g gatedStore) Put(h blob.Hash, data []byte) error {
	<-g.gate
	return g.CacheStore.Put(h, data)
}

// A blob read again while its fetched copy is still being written is
// served from the fetch's bytes (a hit), not fetched a second time.
func TestDiskCacheServesWhileKeeping(t *testing.T) {
	const bound = 1 << 20
	c := NewDiskCache(bound)
	s := openCacheStore(t, t.TempDir(), c)
	defer s.Close()
	gate := make(chan struct{})
	c.Attach(gatedStore{s, gate}) // writes wait for the gate
	data := cacheBlob(1)
	h := blob.Sum(data)
	fillWith(t, c, data)
	got, ok := c.Get(h)
	if !ok || !bytes.Equal(got, data) {
		t.Fatal("a blob being kept was not served by Get")
	}
	if st := c.Stats(); st.Hits != 1 || st.Misses != 0 || st.Fills != 1 {
		t.Fatalf("after a read while keeping: %+v", st)
	}
	close(gate)
	waitIdle(t, c)
	if !s.Has(h) {
		t.Fatal("the blob was not kept")
	}
	if _, ok := c.Get(h); ok {
		t.Fatal("Get still serves a kept blob from memory: it is the store's to serve")
	}
	c.Close()
}
