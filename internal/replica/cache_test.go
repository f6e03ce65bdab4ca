package replica

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cairn-fs/cairn/internal/blob"
	"github.com/cairn-fs/cairn/internal/placement"
)

func TestCacheBoundAndLRU(t *testing.T) {
	const item = 1000
	c := NewCache(10*(item+cacheEntryOverhead), 4096)
	var hs []blob.Hash
	for i := 0; i < 30; i++ {
		h, d := testBlob(i, item)
		hs = append(hs, h)
		c.Add(h, d)
		if i == 5 {
			c.Get(hs[0]) // keep blob 0 recently used
		}
		if st := c.Stats(); st.Bytes > st.MaxBytes {
			t.Fatalf("after %d adds: %d bytes held, bound %d", i+1, st.Bytes, st.MaxBytes)
		}
	}
	st := c.Stats()
	if st.Entries != 10 || st.Evictions != 20 {
		t.Fatalf("stats %+v, want 10 entries and 20 evictions", st)
	}
	if _, ok := c.Get(hs[29]); !ok {
		t.Fatal("the newest blob was evicted")
	}
	if _, ok := c.Get(hs[1]); ok {
		t.Fatal("an old, unused blob survived")
	}
	// Blobs above the item size are not admitted.
	hb, db := testBlob(100, 5000)
	c.Add(hb, db)
	if _, ok := c.Get(hb); ok {
		t.Fatal("a blob above the item size was cached")
	}
	if NewCache(0, 100) != nil {
		t.Fatal("a zero bound made a cache")
	}
	var nilCache *Cache
	if _, ok := nilCache.Get(hb); ok || nilCache.MaxItemBytes() != 0 {
		t.Fatal("a nil cache served something")
	}
}

// remoteSetup puts blobs held only by other nodes and returns a reader
// node with a cache.
func remoteSetup(t *testing.T, cacheBytes int64, maxItem int, blobs map[blob.Hash][]byte) (*fakeNet, *Replicator) {
	t.Helper()
	f := newFakeNet(1, 2, 3, 4, 5)
	m := mapOf(t)
	for h, d := range blobs {
		for _, id := range placement.Sources(m, h)[:2] {
			if id != 1 {
				f.nodes[id].Put(h, d)
			}
		}
		f.nodes[1].mu.Lock()
		delete(f.nodes[1].blobs, h)
		f.nodes[1].mu.Unlock()
	}
	r, err := New(Config{Self: 1, Local: f.nodes[1], Peers: f, Map: func() *placement.Map { return m },
		HedgeAfter: time.Second, ReadTimeout: 5 * time.Second, CacheBytes: cacheBytes, CacheMaxItemBytes: maxItem})
	if err != nil {
		t.Fatal(err)
	}
	return f, r
}

func (f *fakeNet) totalGets() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, g := range f.gets {
		n += g
	}
	return n
}

// A second read of a remote blob, whole or a range of it, is served from
// the cache without a network call; large blobs are not cached.
func TestCacheServesHitsLocally(t *testing.T) {
	hs, ds := testBlob(1, 3000)
	hl, dl := testBlob(2, 20000)
	f, r := remoteSetup(t, 1<<20, 10000, map[blob.Hash][]byte{hs: ds, hl: dl})
	ctx := context.Background()
	p := make([]byte, len(ds))
	for i := 0; i < 3; i++ {
		if _, err := r.ReadAt(ctx, hs, p, 0); err != nil || !bytes.Equal(p, ds) {
			t.Fatalf("read %d: %v", i, err)
		}
	}
	q := make([]byte, 100)
	if _, err := r.ReadAt(ctx, hs, q, 1000); err != nil || !bytes.Equal(q, ds[1000:1100]) {
		t.Fatalf("range read from the cache: %v", err)
	}
	if g := f.totalGets(); g != 1 {
		t.Fatalf("%d remote reads for 4 reads of one small blob, want 1", g)
	}
	if st := r.CacheStats(); st.Hits != 3 || st.Fills != 1 || st.Entries != 1 {
		t.Fatalf("cache stats %+v", st)
	}
	// A read past the end is io.EOF, as from a local copy.
	if n, err := r.ReadAt(ctx, hs, q, int64(len(ds))-10); n != 10 || err == nil {
		t.Fatalf("read across the end: %d, %v", n, err)
	}
	// The large blob: every read goes out, nothing is cached.
	pl := make([]byte, len(dl))
	for i := 0; i < 2; i++ {
		if _, err := r.ReadAt(ctx, hl, pl, 0); err != nil || !bytes.Equal(pl, dl) {
			t.Fatalf("large read %d: %v", i, err)
		}
	}
	// A small range at the start of the large blob probes for the whole
	// blob, gets a prefix, serves it and caches nothing.
	if _, err := r.ReadAt(ctx, hl, q, 0); err != nil || !bytes.Equal(q, dl[:100]) {
		t.Fatalf("prefix of a large blob: %v", err)
	}
	if g := f.totalGets(); g != 4 {
		t.Fatalf("%d remote reads, want 4", g)
	}
	if st := r.CacheStats(); st.Entries != 1 {
		t.Fatalf("a large blob entered the cache: %+v", st)
	}
}

// Bytes that do not hash to the blob's name are never cached: that source
// fails and the next one serves.
func TestCacheRejectsCorruptCopy(t *testing.T) {
	h, d := testBlob(3, 2000)
	f, r := remoteSetup(t, 1<<20, 10000, map[blob.Hash][]byte{h: d})
	m := r.cfg.Map()
	var srcs []placement.NodeID
	for _, id := range placement.Sources(m, h) {
		if f.nodes[id].Has(h) {
			srcs = append(srcs, id)
		}
	}
	bad := bytes.Clone(d)
	bad[0] ^= 1
	f.nodes[srcs[0]].Put(h, bad)
	p := make([]byte, len(d))
	if _, err := r.ReadAt(context.Background(), h, p, 0); err != nil || !bytes.Equal(p, d) {
		t.Fatalf("read with a corrupt first copy: %v", err)
	}
	if g := f.gets[srcs[0]]; g != 1 {
		t.Fatalf("corrupt source asked %d times", g)
	}
	data, ok := r.cache.Get(h)
	if !ok || !bytes.Equal(data, d) {
		t.Fatal("the good copy was not cached")
	}
	if st := r.CacheStats(); st.Corrupt != 1 {
		t.Fatalf("%d corrupt copies counted, want 1", st.Corrupt)
	}
}

// Concurrent misses of the same blob make one remote fetch.
func TestCacheSingleflight(t *testing.T) {
	h, d := testBlob(4, 4000)
	f, r := remoteSetup(t, 1<<20, 10000, map[blob.Hash][]byte{h: d})
	gate := make(chan struct{})
	f.mu.Lock()
	f.getGate = gate
	f.mu.Unlock()
	const n = 16
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := make([]byte, len(d))
			_, err := r.ReadAt(context.Background(), h, p, 0)
			if err == nil && !bytes.Equal(p, d) {
				err = fmt.Errorf("wrong bytes")
			}
			errs <- err
		}()
	}
	deadline := time.Now().Add(5 * time.Second)
	for r.CacheStats().Shared < n-1 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	close(gate)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if g := f.totalGets(); g != 1 {
		t.Fatalf("%d remote reads for %d concurrent readers, want 1", g, n)
	}
	if st := r.CacheStats(); st.Fills != 1 || st.Shared != n-1 {
		t.Fatalf("cache stats %+v", st)
	}
	// A waiting reader whose ctx ends leaves; the fetch goes on.
	h2, d2 := testBlob(5, 100)
	for _, id := range placement.Sources(r.cfg.Map(), h2)[:2] {
		if id != 1 {
			f.nodes[id].Put(h2, d2)
		}
	}
	gate2 := make(chan struct{})
	f.mu.Lock()
	f.getGate = gate2
	f.mu.Unlock()
	first := make(chan error, 1)
	go func() {
		_, err := r.ReadAt(context.Background(), h2, make([]byte, len(d2)), 0)
		first <- err
	}()
	for r.CacheStats().Fills < 2 {
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := r.ReadAt(ctx, h2, make([]byte, len(d2)), 0); err == nil {
		t.Fatal("a waiter with an expired ctx got an answer before the fetch ended")
	}
	close(gate2)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
}

func TestCollector(t *testing.T) {
	h, d := testBlob(6, 500)
	_, r := remoteSetup(t, 1<<20, 10000, map[blob.Hash][]byte{h: d})
	p := make([]byte, len(d))
	for i := 0; i < 2; i++ {
		if _, err := r.ReadAt(context.Background(), h, p, 0); err != nil {
			t.Fatal(err)
		}
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(r.Collector())
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			got[mf.GetName()] = m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	if got["cairn_remote_cache_hits_total"] != 1 || got["cairn_remote_cache_misses_total"] != 1 ||
		got["cairn_remote_cache_entries"] != 1 || got["cairn_remote_cache_max_bytes"] != 1<<20 {
		t.Fatalf("metrics %v", got)
	}
}
