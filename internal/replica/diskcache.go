package replica

import (
	"container/list"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

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

// diskEntryOverhead is what one cached blob costs on disk besides its
// bytes (an inode and a directory entry), counted against the bound.
const diskEntryOverhead = 4096

// DiskCache is a bounded LRU of whole blobs fetched from other nodes, kept
// as files on the node's disk (DIR/ab/HASH): a client node's cache
// (--cache-size), which survives restarts and holds far more than memory
// would. A blob is admitted only if its bytes hash to its name (checked
// here, on fill); one that fails counts as Corrupt and is not kept. The
// index (hash, size, recency) is in memory: about 150 B a cached blob.
// Concurrent misses of the same blob share one fetch. Safe for concurrent
// use; a nil *DiskCache caches nothing.
type DiskCache struct {
	dir      string
	maxBytes int64
	maxItem  int

	mu   sync.Mutex
	used int64
	ll   list.List // of *diskEntry, most recently used first
	m    map[blob.Hash]*list.Element
	fl   flights

	hits, misses, evictions, corrupt atomic.Int64
}

type diskEntry struct {
	h    blob.Hash
	size int64
}

// OpenDiskCache opens (creating it if needed) the cache in dir, bounded
// to maxBytes of blobs (plus a per-file overhead), and indexes what an
// earlier run left there, oldest first out; leftovers of interrupted
// writes are removed. maxBytes <= 0 returns nil (no cache).
func OpenDiskCache(dir string, maxBytes int64) (*DiskCache, error) {
	if maxBytes <= 0 {
		return nil, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("blob cache: %w", err)
	}
	c := &DiskCache{dir: dir, maxBytes: maxBytes, maxItem: int(min(maxBytes-diskEntryOverhead, blob.MaxSize)),
		m: map[blob.Hash]*list.Element{}}
	type found struct {
		h    blob.Hash
		size int64
		mod  time.Time
	}
	var all []found
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		h, perr := blob.ParseHash(d.Name())
		info, ierr := d.Info()
		if perr != nil || ierr != nil {
			os.Remove(p) // a temporary file of an interrupted fill
			return nil
		}
		all = append(all, found{h, info.Size(), info.ModTime()})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("blob cache: %w", err)
	}
	slices.SortFunc(all, func(a, b found) int { return b.mod.Compare(a.mod) }) // newest first
	for _, f := range all {
		c.m[f.h] = c.ll.PushBack(&diskEntry{h: f.h, size: f.size})
		c.used += f.size + diskEntryOverhead
	}
	c.mu.Lock()
	c.evictLocked(0)
	c.mu.Unlock()
	return c, nil
}

func (c *DiskCache) path(h blob.Hash) string {
	s := h.String()
	return filepath.Join(c.dir, s[:2], s)
}

// MaxItemBytes is the largest blob the cache admits (0 for a nil cache).
func (c *DiskCache) MaxItemBytes() int {
	if c == nil {
		return 0
	}
	return c.maxItem
}

// Get returns the cached bytes of blob h, read from its file, and counts
// a hit or a miss. A file that went missing or changed size is a miss
// (and leaves the index).
func (c *DiskCache) Get(h blob.Hash) ([]byte, bool) {
	if c == nil {
		return nil, false
	}
	c.mu.Lock()
	e, ok := c.m[h]
	if ok {
		c.ll.MoveToFront(e)
	}
	c.mu.Unlock()
	if ok {
		data, err := os.ReadFile(c.path(h))
		if err == nil && int64(len(data)) == e.Value.(*diskEntry).size {
			c.hits.Add(1)
			return data, true
		}
		c.drop(h)
	}
	c.misses.Add(1)
	return nil, false
}

// drop removes h from the index and the disk.
func (c *DiskCache) drop(h blob.Hash) {
	c.mu.Lock()
	if e, ok := c.m[h]; ok {
		c.ll.Remove(e)
		delete(c.m, h)
		c.used -= e.Value.(*diskEntry).size + diskEntryOverhead
	}
	c.mu.Unlock()
	os.Remove(c.path(h))
}

// add stores blob h after checking that data hashes to it.
func (c *DiskCache) add(h blob.Hash, data []byte) {
	if len(data) > c.maxItem {
		return
	}
	if blob.Sum(data) != h {
		c.corrupt.Add(1)
		return
	}
	c.mu.Lock()
	if e, ok := c.m[h]; ok {
		c.ll.MoveToFront(e)
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	p := c.path(h)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return
	}
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		os.Remove(tmp)
		return
	}
	if err := os.Rename(tmp, p); err != nil {
		os.Remove(tmp)
		return
	}
	cost := int64(len(data)) + diskEntryOverhead
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[h]; ok {
		return
	}
	c.evictLocked(cost)
	c.m[h] = c.ll.PushFront(&diskEntry{h: h, size: int64(len(data))})
	c.used += cost
}

// evictLocked drops the least recently used blobs until room more bytes
// fit.
func (c *DiskCache) evictLocked(room int64) {
	for c.used+room > c.maxBytes {
		back := c.ll.Back()
		if back == nil {
			return
		}
		old := c.ll.Remove(back).(*diskEntry)
		delete(c.m, old.h)
		c.used -= old.size + diskEntryOverhead
		os.Remove(c.path(old.h))
		c.evictions.Add(1)
	}
}

// Fill is Cache.Fill's, keeping complete blobs on disk.
func (c *DiskCache) Fill(h blob.Hash, stop <-chan struct{}, fetch func() (data []byte, complete bool, err error)) ([]byte, error) {
	return c.fl.do(h, stop, fetch, c.add)
}

// Stats returns the counters (zero for a nil cache).
func (c *DiskCache) Stats() CacheStats {
	if c == nil {
		return CacheStats{}
	}
	c.mu.Lock()
	used, n := c.used, len(c.m)
	c.mu.Unlock()
	return CacheStats{Hits: c.hits.Load(), Misses: c.misses.Load(), Fills: c.fl.fills.Load(), Shared: c.fl.shared.Load(),
		Evictions: c.evictions.Load(), Corrupt: c.corrupt.Load(), Bytes: used, Entries: n, MaxBytes: c.maxBytes, OnDisk: true}
}
