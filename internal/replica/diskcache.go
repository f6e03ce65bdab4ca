package replica

import (
	"cmp"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/cairn-fs/cairn/internal/blob"
)

// blobCache is where a Replicator keeps blobs it read from other nodes:
// in memory (Cache) or on the node's disk (DiskCache, a client node's).
type blobCache interface {
	Get(h blob.Hash) ([]byte, bool)
	Fill(h blob.Hash, stop <-chan struct{}, fetch func() (data []byte, complete bool, err error)) ([]byte, error)
	MaxItemBytes() int
	Stats() CacheStats
}

var (
	_ blobCache = (*Cache)(nil)
	_ blobCache = (*DiskCache)(nil)
)

// CacheStore is the blob store a DiskCache keeps its copies in
// (blob.Store implements it).
type CacheStore interface {
	Put(h blob.Hash, data []byte) error
	Delete(h blob.Hash) error
	Range(fn func(h blob.Hash, size int64) bool)
	Compact() (int, error)
	Stats() blob.Stats
}

const (
	// diskCacheLive is the share of the bound that live copies may take;
	// an eviction brings them down to diskCacheLow of it. The rest is
	// for what compaction has not reclaimed yet: the garbage a sealed
	// volume may keep (diskCacheGarbage), the volume being filled
	// (diskCacheVolumes of them make the bound) and the tombstones.
	diskCacheLive    = 0.70
	diskCacheLow     = 0.63
	diskCacheGarbage = 0.25
	diskCacheVolumes = 16
	// diskCacheKeepers bounds the copies being written at once; a fill
	// that finds them all busy is served and not kept (a later read
	// keeps it).
	diskCacheKeepers = 16
	// diskCacheDeleters is how many evictions run at once, so that their
	// tombstones share group commits.
	diskCacheDeleters = 8
	diskCacheShards   = 64
)

// DiskCache is a client node's cache of the blobs it read from other
// nodes (--cache-size): a blob store of its own on the node's disk
// (DATA/cache), the node's local blob store, so that a cached blob is
// read as any local copy is (the HTTP fast path lends it from the
// volume's map or sends it with sendfile, the mount splices it). A blob
// is kept only once its bytes were checked against its name (by the
// Replicator's fetch, as for Cache), in the background: until its copy
// is in the store, a read of it is served from the fetch's bytes (Get)
// rather than fetched again. Recency comes from the store's reads
// (blob.Config.OnRead, set by StoreConfig): each read of a cached blob is
// a hit and makes it the most recently used. When the live copies (their
// needles' bytes in the store) pass 70% of the bound, the least recently
// used are deleted until they are at 63%, and the store is compacted
// (its volumes are a sixteenth of the bound, compacted as soon as a
// quarter of one is garbage); within two volumes of the bound, at least
// a volume's worth goes. A fetched blob is not kept while the store's
// files are within a volume of the bound (compaction behind the
// evictions: a cache smaller than what is read churns), so that they stay
// within it; it counts as NotKept. Copies the store loses otherwise (the
// namespace's garbage collection, a quarantine) leave the index through
// blob.Config.OnDelete. The index (hash, size, recency) is in memory:
// about 100 B a cached blob, besides the blob store's own index (about
// 40 B).
// Safe for concurrent use; a nil *DiskCache caches nothing.
type DiskCache struct {
	maxBytes int64
	maxItem  int

	store   atomic.Pointer[cacheStore] // nil until Attach
	shards  [diskCacheShards]diskShard
	live    atomic.Int64 // bytes of the indexed copies
	writing atomic.Int64 // bytes of the copies being written
	tick    atomic.Int64 // recency clock: one step per read
	fl      flights

	keepers     chan struct{}
	evictMu     sync.Mutex  // one eviction at a time
	evictWanted atomic.Bool // another pass asked for
	bg          sync.WaitGroup
	bgMu        sync.Mutex // orders bg.Add after Close's Wait
	closed      atomic.Bool

	hits, misses, evictions, notKept atomic.Int64
}

type cacheStore struct{ CacheStore }

type diskShard struct {
	mu      sync.RWMutex
	m       map[blob.Hash]*diskEntry
	keeping map[blob.Hash][]byte // fetched blobs being written: Get serves them
	_       [24]byte             // keep shards' locks on separate cache lines
}

type diskEntry struct {
	size int64 // bytes in the store: the needle (blob.NeedleSize)
	last atomic.Int64
}

// NewDiskCache returns a cache bounded to maxBytes of its store's files
// (maxBytes <= 0: nil, no cache). It keeps nothing until Attach gives it
// its store, which must be opened with StoreConfig's settings.
func NewDiskCache(maxBytes int64) *DiskCache {
	if maxBytes <= 0 {
		return nil
	}
	c := &DiskCache{maxBytes: maxBytes, maxItem: int(min(int64(float64(maxBytes)*diskCacheLow), blob.MaxSize)),
		keepers: make(chan struct{}, diskCacheKeepers)}
	for i := range c.shards {
		c.shards[i].m = map[blob.Hash]*diskEntry{}
		c.shards[i].keeping = map[blob.Hash][]byte{}
	}
	return c
}

// StoreConfig sets what the cache needs of its blob store's settings:
// volumes of a sixteenth of the bound, compacted as soon as a quarter of
// one is garbage, and the reads reported to the cache.
func (c *DiskCache) StoreConfig(bc *blob.Config) {
	if c == nil {
		return
	}
	bc.MaxVolumeSize = c.volumeSize()
	bc.CompactGarbageRatio = diskCacheGarbage
	bc.CompactAge = -1 // no wait
	bc.OnRead = c.touch
	bc.OnDelete = c.forget
}

// volumeSize is the size of the store's volumes: a sixteenth of the
// bound.
func (c *DiskCache) volumeSize() int64 {
	return min(max(c.maxBytes/diskCacheVolumes, 4<<10), 1<<30)
}

// Attach gives the cache its store and indexes the copies an earlier run
// left in it (their recency is not kept across a restart: they come first
// out, in no particular order), evicting down to the bound.
func (c *DiskCache) Attach(s CacheStore) {
	if c == nil {
		return
	}
	s.Range(func(h blob.Hash, size int64) bool {
		c.insert(h, blob.NeedleSize(int(size)))
		return true
	})
	c.store.Store(&cacheStore{s})
	c.evict()
}

// Close waits for the copies being kept and the eviction under way; the
// cache keeps nothing more. Call it before closing the store.
func (c *DiskCache) Close() error {
	if c == nil {
		return nil
	}
	c.bgMu.Lock()
	c.closed.Store(true)
	c.bgMu.Unlock()
	c.bg.Wait()
	return nil
}

// startBG runs f in the background unless the cache is closed.
func (c *DiskCache) startBG(f func()) bool {
	c.bgMu.Lock()
	defer c.bgMu.Unlock()
	if c.closed.Load() {
		return false
	}
	c.bg.Add(1)
	go func() {
		defer c.bg.Done()
		f()
	}()
	return true
}

func (c *DiskCache) shard(h *blob.Hash) *diskShard { return &c.shards[h[0]%diskCacheShards] }

func (c *DiskCache) liveBound() int64 { return int64(float64(c.maxBytes) * diskCacheLive) }

// touch is the store's OnRead: a read of a cached copy.
func (c *DiskCache) touch(h blob.Hash) {
	c.hits.Add(1)
	sh := c.shard(&h)
	sh.mu.RLock()
	e := sh.m[h]
	sh.mu.RUnlock()
	if e != nil {
		e.last.Store(c.tick.Add(1))
	}
}

// forget is the store's OnDelete: a copy left the store (an eviction,
// whose entry is gone already; the namespace's garbage collection; a
// quarantine).
func (c *DiskCache) forget(h blob.Hash) {
	sh := c.shard(&h)
	sh.mu.Lock()
	if e, ok := sh.m[h]; ok {
		delete(sh.m, h)
		c.live.Add(-e.size)
	}
	sh.mu.Unlock()
}

// insert indexes a copy now in the store, of size bytes there (its
// needle); it reports whether it was new.
func (c *DiskCache) insert(h blob.Hash, size int64) bool {
	sh := c.shard(&h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if _, ok := sh.m[h]; ok {
		return false
	}
	e := &diskEntry{size: size}
	e.last.Store(c.tick.Add(1))
	sh.m[h] = e
	c.live.Add(size)
	return true
}

// MaxItemBytes is the largest blob the cache admits (0 for a nil cache).
func (c *DiskCache) MaxItemBytes() int {
	if c == nil {
		return 0
	}
	return c.maxItem
}

// Get is asked by a read that found no local copy (a cached copy is a
// local one, read before this). A blob fetched and still being written
// to the store is served from the fetch's bytes (a hit), so that it is
// not fetched again; anything else is a miss.
func (c *DiskCache) Get(h blob.Hash) ([]byte, bool) {
	if c == nil {
		return nil, false
	}
	sh := c.shard(&h)
	sh.mu.RLock()
	data, ok := sh.keeping[h]
	sh.mu.RUnlock()
	if ok {
		c.hits.Add(1)
		return data, true
	}
	c.misses.Add(1)
	return nil, false
}

// setKeeping records data as h's copy being written (data nil: written or
// given up).
func (c *DiskCache) setKeeping(h blob.Hash, data []byte) {
	sh := c.shard(&h)
	sh.mu.Lock()
	if data != nil {
		sh.keeping[h] = data
	} else {
		delete(sh.keeping, h)
	}
	sh.mu.Unlock()
}

// Fill is Cache.Fill's, keeping complete blobs in the store.
func (c *DiskCache) Fill(h blob.Hash, stop <-chan struct{}, fetch func() (data []byte, complete bool, err error)) ([]byte, error) {
	return c.fl.do(h, stop, fetch, c.keep)
}

// keep writes a fetched blob, whose bytes the fetch checked against h, to
// the store in the background; the readers already have them.
func (c *DiskCache) keep(h blob.Hash, data []byte) {
	if len(data) > c.maxItem || c.closed.Load() {
		return
	}
	s := c.store.Load()
	if s == nil {
		return
	}
	select {
	case c.keepers <- struct{}{}:
	default:
		return
	}
	c.setKeeping(h, data)
	if !c.startBG(func() { c.write(s, h, data) }) {
		c.setKeeping(h, nil)
		<-c.keepers
	}
}

// write is keep's background part: a keeper slot is held and h is in
// the keeping set until the copy is indexed (or not kept).
func (c *DiskCache) write(s *cacheStore, h blob.Hash, data []byte) {
	defer func() {
		c.setKeeping(h, nil)
		<-c.keepers
	}()
	// The files, the copies being written (this one included) and a
	// volume's worth for a compaction's copies stay within the bound.
	n := blob.NeedleSize(len(data))
	if s.Stats().Bytes+c.writing.Add(n) > c.maxBytes-c.volumeSize() {
		// Compaction has not caught up with the evictions (a cache
		// smaller than what is read churns): served, not kept, until it
		// has.
		c.writing.Add(-n)
		c.notKept.Add(1)
		c.evict()
		return
	}
	err := s.Put(h, data)
	c.writing.Add(-n)
	if err != nil {
		return // a full disk, a closed store: served, not kept
	}
	if c.insert(h, n) && c.live.Load() > c.liveBound() {
		c.evict()
	}
}

// evict deletes the least recently used copies until the live ones are
// at diskCacheLow of the bound, then compacts the store. One eviction
// runs at a time: a call while one runs asks it for another pass and
// returns at once.
func (c *DiskCache) evict() {
	c.evictWanted.Store(true)
	for c.evictWanted.Load() {
		if !c.evictMu.TryLock() {
			return // the one running sees evictWanted
		}
		for c.evictWanted.Swap(false) {
			c.evictPass()
		}
		c.evictMu.Unlock()
	}
}

// evictPass is one eviction, then a compaction: the least recently used
// copies go until the live ones are at diskCacheLow of the bound, and at
// least a volume's worth when the files are within two volumes of the
// bound (so that a fill refused for want of room always makes some: the
// tombstones and the garbage compaction leaves also take room).
func (c *DiskCache) evictPass() {
	s := c.store.Load()
	if s == nil {
		return
	}
	var excess int64
	if live := c.live.Load(); live > c.liveBound() {
		excess = live - int64(float64(c.maxBytes)*diskCacheLow)
	}
	if s.Stats().Bytes > c.maxBytes-2*c.volumeSize() {
		excess = max(excess, c.volumeSize())
	}
	if excess > 0 {
		c.deleteLRU(s, excess)
	}
	s.Compact()
}

// deleteLRU deletes the least recently used copies, excess bytes of them.
func (c *DiskCache) deleteLRU(s *cacheStore, excess int64) {
	type cand struct {
		h    blob.Hash
		size int64
		last int64
	}
	var all []cand
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.RLock()
		for h, e := range sh.m {
			all = append(all, cand{h, e.size, e.last.Load()})
		}
		sh.mu.RUnlock()
	}
	slices.SortFunc(all, func(a, b cand) int { return cmp.Compare(a.last, b.last) })
	var victims []cand
	for _, v := range all {
		if excess <= 0 {
			break
		}
		sh := c.shard(&v.h)
		sh.mu.Lock()
		if e, ok := sh.m[v.h]; ok && e.last.Load() == v.last {
			delete(sh.m, v.h)
			c.live.Add(-e.size)
			excess -= e.size
			victims = append(victims, v)
		}
		sh.mu.Unlock()
	}
	all = nil
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(diskCacheDeleters, len(victims)) {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(len(victims)); i = next.Add(1) - 1 {
				if err := s.Delete(victims[i].h); err != nil {
					c.insert(victims[i].h, victims[i].size) // still there: evictable later
				} else {
					c.evictions.Add(1)
				}
			}
		})
	}
	wg.Wait()
}

// Stats returns the counters (zero for a nil cache). Bytes is the size
// of the store's files, which the bound applies to.
func (c *DiskCache) Stats() CacheStats {
	if c == nil {
		return CacheStats{}
	}
	n := 0
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.RLock()
		n += len(sh.m)
		sh.mu.RUnlock()
	}
	st := CacheStats{Hits: c.hits.Load(), Misses: c.misses.Load(), Fills: c.fl.fills.Load(), Shared: c.fl.shared.Load(),
		Evictions: c.evictions.Load(), NotKept: c.notKept.Load(), Entries: n, MaxBytes: c.maxBytes, OnDisk: true}
	if s := c.store.Load(); s != nil {
		st.Bytes = s.Stats().Bytes
	}
	return st
}
