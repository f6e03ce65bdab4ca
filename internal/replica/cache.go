package replica

import (
	"container/list"
	"sync"
	"sync/atomic"

	"github.com/cairn-fs/cairn/internal/blob"
)

// cacheEntryOverhead is what one cached blob costs besides its bytes (map
// entry, list element, slice header, hash), counted against the bound.
const cacheEntryOverhead = 160

// Cache is a bounded, in-memory LRU of whole blobs fetched from other nodes,
// for the reads of a node that holds no copy (buckets with R < N). Blobs
// are named by their SHA-256 and never change, so an entry can never be
// stale: a blob deleted cluster-wide is simply never asked for again and
// ages out. Only whole blobs whose bytes were checked against their hash
// are admitted, and only blobs of at most MaxItemBytes. Concurrent misses
// of the same blob share one fetch (Fill). Safe for concurrent use.
type Cache struct {
	maxBytes int64
	maxItem  int

	mu   sync.Mutex
	used int64
	ll   list.List // of *cacheEntry, most recently used first
	m    map[blob.Hash]*list.Element
	fl   flights

	hits, misses, evictions atomic.Int64
}

type cacheEntry struct {
	h    blob.Hash
	data []byte
}

type flight struct {
	done chan struct{}
	data []byte
	err  error
}

// CacheStats counts a Cache's work.
type CacheStats struct {
	// Hits and Misses count lookups; Fills the remote fetches made on
	// misses; Shared the misses that waited for another caller's fetch of
	// the same blob instead of making their own; Evictions the blobs
	// dropped to stay within the bound.
	Hits, Misses, Fills, Shared, Evictions int64
	// Corrupt counts whole blobs fetched for a read whose bytes did not
	// hash to their name: refused (never cached), and another replica
	// asked (Replicator.CacheStats).
	Corrupt int64
	// NotKept counts fetched blobs a DiskCache served but did not keep:
	// its files were at the bound, compaction behind the evictions.
	NotKept int64
	// Bytes (blob bytes plus per-entry overhead; a DiskCache's: the size
	// of its store's files) and Entries held now.
	Bytes   int64
	Entries int
	// MaxBytes is the bound.
	MaxBytes int64
	// OnDisk: the cache is a DiskCache (a client node's).
	OnDisk bool
}

// NewCache returns a cache of at most maxBytes (blob bytes plus a fixed
// per-entry overhead) admitting blobs of at most maxItem bytes. maxBytes
// <= 0 returns nil (no cache); a nil *Cache is valid and caches nothing.
func NewCache(maxBytes int64, maxItem int) *Cache {
	if maxBytes <= 0 {
		return nil
	}
	if maxItem <= 0 || int64(maxItem)+cacheEntryOverhead > maxBytes {
		maxItem = int(min(maxBytes-cacheEntryOverhead, 256<<10))
	}
	return &Cache{maxBytes: maxBytes, maxItem: max(maxItem, 0), m: map[blob.Hash]*list.Element{}}
}

// MaxItemBytes is the largest blob the cache admits (0 for a nil cache).
func (c *Cache) MaxItemBytes() int {
	if c == nil {
		return 0
	}
	return c.maxItem
}

// Get returns the cached bytes of blob h (the caller must not modify them)
// and counts a hit or a miss.
func (c *Cache) Get(h blob.Hash) ([]byte, bool) {
	if c == nil {
		return nil, false
	}
	c.mu.Lock()
	e, ok := c.m[h]
	if ok {
		c.ll.MoveToFront(e)
	}
	c.mu.Unlock()
	if !ok {
		c.misses.Add(1)
		return nil, false
	}
	c.hits.Add(1)
	return e.Value.(*cacheEntry).data, true
}

// Add stores blob h, whose bytes the caller checked against h. Blobs above
// MaxItemBytes are ignored. The cache keeps data: the caller must not
// modify it afterwards.
func (c *Cache) Add(h blob.Hash, data []byte) {
	if c == nil || len(data) > c.maxItem {
		return
	}
	cost := int64(len(data)) + cacheEntryOverhead
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[h]; ok {
		c.ll.MoveToFront(e)
		return
	}
	for c.used+cost > c.maxBytes {
		back := c.ll.Back()
		if back == nil {
			return
		}
		old := c.ll.Remove(back).(*cacheEntry)
		delete(c.m, old.h)
		c.used -= int64(len(old.data)) + cacheEntryOverhead
		c.evictions.Add(1)
	}
	c.m[h] = c.ll.PushFront(&cacheEntry{h: h, data: data})
	c.used += cost
}

// Fill returns blob h's bytes from fetch, which is called once for all the
// concurrent Fills of the same h (the others wait for its result). fetch
// returns the bytes it read (which may be a prefix of the blob: the whole
// blob only when complete is true, and then checked against h) and the
// cache keeps complete blobs. Waiting callers give up when stop is closed
// (e.g. their ctx's Done), returning errStopped; the fetch goes on for the
// others.
func (c *Cache) Fill(h blob.Hash, stop <-chan struct{}, fetch func() (data []byte, complete bool, err error)) ([]byte, error) {
	return c.fl.do(h, stop, fetch, c.Add)
}

// flights runs one fetch for all the concurrent fills of a blob (the
// single flight of Cache.Fill and DiskCache.Fill).
type flights struct {
	mu            sync.Mutex
	m             map[blob.Hash]*flight
	fills, shared atomic.Int64
}

// do calls fetch once for the concurrent callers of the same h, the others
// waiting for its result (or giving up when stop closes: errStopped), and
// keep with a complete blob's bytes.
func (fl *flights) do(h blob.Hash, stop <-chan struct{}, fetch func() ([]byte, bool, error), keep func(blob.Hash, []byte)) ([]byte, error) {
	fl.mu.Lock()
	if f, ok := fl.m[h]; ok {
		fl.mu.Unlock()
		fl.shared.Add(1)
		select {
		case <-f.done:
			return f.data, f.err
		case <-stop:
			return nil, errStopped
		}
	}
	if fl.m == nil {
		fl.m = map[blob.Hash]*flight{}
	}
	f := &flight{done: make(chan struct{})}
	fl.m[h] = f
	fl.mu.Unlock()
	fl.fills.Add(1)
	data, complete, err := fetch()
	f.data, f.err = data, err
	if err == nil && complete {
		keep(h, data)
	}
	fl.mu.Lock()
	delete(fl.m, h)
	fl.mu.Unlock()
	close(f.done)
	return data, err
}

// Stats returns the counters (zero for a nil cache).
func (c *Cache) Stats() CacheStats {
	if c == nil {
		return CacheStats{}
	}
	c.mu.Lock()
	used, n := c.used, len(c.m)
	c.mu.Unlock()
	return CacheStats{Hits: c.hits.Load(), Misses: c.misses.Load(), Fills: c.fl.fills.Load(),
		Shared: c.fl.shared.Load(), Evictions: c.evictions.Load(), Bytes: used, Entries: n, MaxBytes: c.maxBytes}
}
