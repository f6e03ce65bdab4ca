package s3

import (
	"hash/maphash"
	"sync"
	"time"
)

// presignCache remembers the presigned URLs the fast path verified, until
// they expire: a URL is immutable and its signature depends only on the
// request's method, host, path and query and on the key's secret (a key
// id's secret never changes; a revoked key fails PrincipalFor on every
// hit). A popular signed download link then costs a map lookup instead of
// a SigV4 verification (about 8 µs, bench/BENCHMARKS.md "S3 GET").
// Bounded: presignShards × presignPerShard entries (about 12 MB of keys at
// most); a full shard drops an arbitrary entry.
type presignCache struct {
	seed   maphash.Seed
	shards [presignShards]presignShard
}

const (
	presignShards   = 32
	presignPerShard = 1024
)

type presignShard struct {
	mu sync.RWMutex
	m  map[string]presignEntry
}

type presignEntry struct {
	keyID   string
	expires time.Time
}

func newPresignCache() *presignCache {
	c := &presignCache{seed: maphash.MakeSeed()}
	for i := range c.shards {
		c.shards[i].m = make(map[string]presignEntry)
	}
	return c
}

func (c *presignCache) shard(key []byte) *presignShard {
	return &c.shards[maphash.Bytes(c.seed, key)%presignShards]
}

// get returns the key id of a cached URL that is valid at now. It does
// not allocate.
func (c *presignCache) get(key []byte, now time.Time) (string, bool) {
	s := c.shard(key)
	s.mu.RLock()
	e, ok := s.m[string(key)]
	s.mu.RUnlock()
	if !ok || !now.Before(e.expires) {
		return "", false
	}
	return e.keyID, true
}

// put remembers a verified URL.
func (c *presignCache) put(key []byte, keyID string, expires time.Time) {
	s := c.shard(key)
	s.mu.Lock()
	if len(s.m) >= presignPerShard {
		for k := range s.m {
			delete(s.m, k)
			break
		}
	}
	s.m[string(key)] = presignEntry{keyID: keyID, expires: expires}
	s.mu.Unlock()
}

// presignKey builds the cache key of a request into buf.
func presignKey(buf []byte, method, host, path, rawQuery string) []byte {
	buf = append(buf, method...)
	buf = append(buf, ' ')
	buf = append(buf, host...)
	buf = append(buf, path...)
	buf = append(buf, '?')
	return append(buf, rawQuery...)
}
