package rules

import (
	"encoding/binary"
	"math"
	"math/bits"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// maxClientShards is the most shards a clientSet splits its buckets into,
// to spread lock contention across cores.
const maxClientShards = 64

// clientSet holds the token buckets of one throttle rule, one per client IP,
// in a sharded map of bounded size. Safe for concurrent use.
type clientSet struct {
	limit    rate.Limit
	burst    int
	perShard int  // most buckets in one shard
	shift    uint // 64 - log2(len(shards))
	shards   []clientShard
}

type clientShard struct {
	mu sync.Mutex
	m  map[netip.Addr]*rate.Limiter
	_  [48]byte // keep shards on separate cache lines
}

// newClientSet returns a clientSet that holds at most maxClients buckets:
// a power-of-two number of shards of maxClients/shards buckets each.
func newClientSet(limit rate.Limit, burst, maxClients int) *clientSet {
	n := 1
	for n*2 <= maxClientShards && n*2 <= maxClients {
		n *= 2
	}
	c := &clientSet{
		limit:    limit,
		burst:    burst,
		perShard: maxClients / n,
		shift:    uint(64 - bits.TrailingZeros(uint(n))),
		shards:   make([]clientShard, n),
	}
	for i := range c.shards {
		c.shards[i].m = make(map[netip.Addr]*rate.Limiter)
	}
	return c
}

// get returns the bucket of ip, creating a full one if there is none. It
// allocates only when it creates a bucket.
func (c *clientSet) get(ip netip.Addr, now time.Time) *rate.Limiter {
	s := &c.shards[c.shardOf(ip)]
	s.mu.Lock()
	lim := s.m[ip]
	if lim == nil {
		if len(s.m) >= c.perShard {
			c.evict(s, now)
		}
		lim = rate.NewLimiter(c.limit, c.burst)
		s.m[ip] = lim
	}
	s.mu.Unlock()
	return lim
}

// evict frees room in a full shard: every bucket that is full again (its
// client has been idle for burst/rate) goes, since a new bucket would be the
// same; if that frees less than a sixteenth of the shard, arbitrary buckets
// go too (Go's map iteration starts at a random place). Freeing a sixteenth
// at a time keeps the amortized cost per new client constant. Called with
// s.mu held.
func (c *clientSet) evict(s *clientShard, now time.Time) {
	target := max(1, c.perShard/16)
	freed := 0
	full := float64(c.burst)
	for ip, lim := range s.m {
		if lim.TokensAt(now) >= full {
			delete(s.m, ip)
			freed++
		}
	}
	for ip := range s.m {
		if freed >= target {
			break
		}
		delete(s.m, ip)
		freed++
	}
}

// len returns the number of buckets held, for tests.
func (c *clientSet) len() int {
	n := 0
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		n += len(s.m)
		s.mu.Unlock()
	}
	return n
}

func (c *clientSet) shardOf(ip netip.Addr) uint64 {
	if len(c.shards) == 1 {
		return 0
	}
	a := ip.As16()
	x := binary.LittleEndian.Uint64(a[8:]) ^ bits.RotateLeft64(binary.LittleEndian.Uint64(a[:8]), 29)
	x *= 0x9e3779b97f4a7c15 // Fibonacci hashing: the top bits mix all of x
	return x >> c.shift
}

// waitFor returns how long until lim holds a whole token at limit tokens
// per second, 0 if it holds one at now.
func waitFor(lim *rate.Limiter, limit rate.Limit, now time.Time) time.Duration {
	t := lim.TokensAt(now)
	if t >= 1 {
		return 0
	}
	d := math.Ceil((1 - t) / float64(limit) * float64(time.Second))
	return time.Duration(max(d, 1))
}
