package rules

import (
	"hash/maphash"
	"regexp"
	"strings"
	"sync"
)

// uaShards is the number of shards of a uaCache, to spread lock contention.
const uaShards = 16

// uaCache remembers, per User-Agent string, which of a rule set's distinct
// User-Agent regexps match it, as a bit set indexed like regexps. It holds
// at most about the configured number of entries, evicting an arbitrary one
// of the shard when a shard is full. Safe for concurrent use.
type uaCache struct {
	seed     maphash.Seed
	regexps  []*regexp.Regexp
	words    int      // len of every bit set
	none     []uint64 // the shared bit set of a User-Agent no regexp matches
	perShard int
	shards   [uaShards]uaShard
}

type uaShard struct {
	mu sync.RWMutex
	m  map[string][]uint64
	_  [32]byte // keep shards on separate cache lines
}

func newUACache(regexps []*regexp.Regexp, entries int) *uaCache {
	words := (len(regexps) + 63) / 64
	c := &uaCache{
		seed:     maphash.MakeSeed(),
		regexps:  regexps,
		words:    words,
		none:     make([]uint64, words),
		perShard: max(1, entries/uaShards),
	}
	for i := range c.shards {
		c.shards[i].m = make(map[string][]uint64)
	}
	return c
}

// lookup returns the bit set of the regexps that match ua. The result is
// shared: callers must not modify it. It allocates only on a miss.
func (c *uaCache) lookup(ua string) []uint64 {
	if len(ua) > maxCachedUA {
		return c.eval(ua)
	}
	s := &c.shards[maphash.String(c.seed, ua)%uaShards]
	s.mu.RLock()
	set, ok := s.m[ua]
	s.mu.RUnlock()
	if ok {
		return set
	}
	// Evaluate outside the lock: regexps take microseconds.
	set = c.eval(ua)
	s.mu.Lock()
	if len(s.m) >= c.perShard {
		for k := range s.m {
			delete(s.m, k)
			break
		}
	}
	// Own copy: ua may be a slice of a large request buffer.
	s.m[strings.Clone(ua)] = set
	s.mu.Unlock()
	return set
}

// eval matches ua against every regexp.
func (c *uaCache) eval(ua string) []uint64 {
	var set []uint64
	for i, re := range c.regexps {
		if re.MatchString(ua) {
			if set == nil {
				set = make([]uint64, c.words)
			}
			set[i>>6] |= 1 << (i & 63)
		}
	}
	if set == nil {
		return c.none
	}
	return set
}

// len returns the number of cached User-Agents, for tests.
func (c *uaCache) len() int {
	n := 0
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.RLock()
		n += len(s.m)
		s.mu.RUnlock()
	}
	return n
}
