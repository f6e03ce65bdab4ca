package store

import (
	"strings"
	"sync"

	"github.com/cairn-fs/cairn/internal/blob"
	"github.com/cairn-fs/cairn/internal/meta"
)

// pathCache maps "bucket/path" to its resolved inode, so that serving a hot
// file is a map lookup instead of one KV read per path component. Entries
// are dropped when an applied command changes their path or a name below
// them (a directory's times and link count); gen makes a lookup that
// raced with an apply unable to insert a stale inode.
//
// An entry is the immutable *object Open returns (inode plus ObjectInfo),
// so that opening a cached file neither allocates nor rebuilds its
// ObjectInfo; directories are cached the same way (Open refuses them).
//
// Paths found missing are cached too (absent, with the error their
// lookup returned), apart and bounded at a quarter of max so that a
// crawler's storm of 404s cannot push out the hot files: a repeated miss
// — a checksum sidecar answered from its file's digests, a favicon that
// is not there — costs a map lookup, not a KV read per path component
// and two error allocations. The same applied commands drop them (a
// command that creates a path lists it in Result.Changed, as one that
// removes it does, and the parents it creates with it are the path's
// ancestors, dropped with it).
type pathCache struct {
	mu      sync.RWMutex
	max     int
	gen     uint64
	paths   map[string]*object
	absent  map[string]error
	buckets map[string]*meta.Bucket
}

func newPathCache(max int) *pathCache {
	return &pathCache{max: max, paths: make(map[string]*object), absent: make(map[string]error),
		buckets: make(map[string]*meta.Bucket)}
}

// getAbsent reports whether key is cached as missing, with the error its
// lookup returned.
func (c *pathCache) getAbsent(key []byte) (error, bool) {
	c.mu.RLock()
	err, ok := c.absent[string(key)]
	c.mu.RUnlock()
	return err, ok
}

// putAbsent caches key as missing (err: its lookup's error) unless an
// apply came between the lookup and now (gen).
func (c *pathCache) putAbsent(key string, err error, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != c.gen {
		return
	}
	if len(c.absent) >= max(c.max/4, 1) {
		c.absent = make(map[string]error)
	}
	c.absent[key] = err
}

// get looks key ("bucket/path") up; the conversion of the byte slice does
// not allocate.
func (c *pathCache) get(key []byte) (*object, bool) {
	c.mu.RLock()
	o, ok := c.paths[string(key)]
	c.mu.RUnlock()
	return o, ok
}

func (c *pathCache) generation() uint64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.gen
}

func (c *pathCache) put(key string, o *object, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != c.gen {
		return
	}
	if len(c.paths) >= c.max {
		// Simple and bounded: start over. Hot paths come back at once.
		c.paths = make(map[string]*object)
	}
	c.paths[key] = o
}

func (c *pathCache) bucket(name string) (*meta.Bucket, bool) {
	c.mu.RLock()
	b, ok := c.buckets[name]
	c.mu.RUnlock()
	return b, ok
}

// putBucket caches b unless the cache was cleared since gen was read.
func (c *pathCache) putBucket(name string, b *meta.Bucket, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != c.gen {
		return
	}
	c.buckets[name] = b
}

func (c *pathCache) drop(key string) {
	c.mu.Lock()
	c.gen++
	delete(c.paths, key)
	delete(c.absent, key)
	// A command lists only the path it changes, but a name made or
	// removed changes its directory too (mtime, ctime, link count), and
	// one that creates its missing parent directories changes the
	// nearest existing one: the ancestors' descriptions are dropped (a
	// Stat of a directory then reads its inode again), and they are no
	// longer missing either.
	for k := key; ; {
		i := strings.LastIndexByte(k, '/')
		if i < 0 {
			break
		}
		k = k[:i]
		if strings.IndexByte(k, '/') < 0 {
			delete(c.paths, k+"/") // the bucket's root, "bucket/"
			break
		}
		delete(c.paths, k)
		delete(c.absent, k)
	}
	c.mu.Unlock()
}

func (c *pathCache) clear() {
	c.mu.Lock()
	c.gen++
	c.paths = make(map[string]*object)
	c.absent = make(map[string]error)
	c.buckets = make(map[string]*meta.Bucket)
	c.mu.Unlock()
}

// pins records the blobs held by uploads in flight, so that the local copy
// of a blob an upload relies on is not deleted under it, and a deletion in
// progress is not raced by an upload that found the blob present.
type pins struct {
	mu       sync.Mutex
	cond     *sync.Cond
	held     map[blob.Hash]int
	deleting map[blob.Hash]bool
}

func newPins() *pins {
	p := &pins{held: make(map[blob.Hash]int), deleting: make(map[blob.Hash]bool)}
	p.cond = sync.NewCond(&p.mu)
	return p
}

// pin holds h; it waits for a deletion of h in progress to finish, so the
// caller's following write of h is not undone.
func (p *pins) pin(h blob.Hash) {
	p.mu.Lock()
	for p.deleting[h] {
		p.cond.Wait()
	}
	p.held[h]++
	p.mu.Unlock()
}

func (p *pins) unpin(h blob.Hash) {
	p.mu.Lock()
	if p.held[h]--; p.held[h] <= 0 {
		delete(p.held, h)
	}
	p.mu.Unlock()
}

// startDelete reports whether h may be deleted now (no upload holds it),
// and if so blocks pins of h until endDelete.
func (p *pins) startDelete(h blob.Hash) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held[h] > 0 || p.deleting[h] {
		return false
	}
	p.deleting[h] = true
	return true
}

func (p *pins) endDelete(h blob.Hash) {
	p.mu.Lock()
	delete(p.deleting, h)
	p.cond.Broadcast()
	p.mu.Unlock()
}

func (p *pins) isHeld(h blob.Hash) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.held[h] > 0
}
