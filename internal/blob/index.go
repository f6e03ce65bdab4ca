package blob

import (
	"encoding/binary"
	"sync"
	"unsafe"
)

// The in-memory index maps a blob hash to its needle's location. To stay
// under 64 bytes of RAM per blob it stores no full hashes: a slot holds the
// first 8 bytes of the hash (the key) and the location, 20 bytes in all, and
// the table is split into 256 shards chosen by hash byte 8, so a slot
// matches on 72 bits of the hash. The full hash is checked against the
// needle header on disk, so two blobs whose hashes share those 72 bits are
// both stored and told apart correctly (lookup returns every candidate).
//
// Each shard is an open-addressing table with linear probing, grown by
// doubling at 3/4 load (so 3/8..3/4 full: 27..53 bytes per blob), with
// backward-shift deletion (no tombstones). Sharding keeps each resize small.
//
// The top bit of a slot's length (verifiedBit; lengths are below 2^26) says
// that the needle passed a whole check (CRC) since the store was opened:
// reads check a needle in full once per process lifetime (see "Verified
// reads" in doc.go). A loc never carries the bit; lookups report it apart.

const (
	// verifiedBit, in a slot's n, marks a needle checked in full since Open.
	verifiedBit   = 1 << 31
	indexShards   = 256
	minShardSlots = 16
	maxCandidates = 4 // slots with the same 72-bit prefix a lookup returns; more never happens in practice
)

// loc is where a needle lives: volume id (never 0), offset in 8-byte units,
// data length in bytes.
type loc struct {
	vol uint32
	off uint32
	n   uint32
}

func (l loc) offset() int64 { return int64(l.off) << 3 }

// slot is one table entry; vol == 0 marks an empty slot.
type slot struct {
	keyLo, keyHi uint32
	vol, off, n  uint32
}

func (s *slot) key() uint64 { return uint64(s.keyLo) | uint64(s.keyHi)<<32 }

type shard struct {
	mu    sync.RWMutex
	slots []slot
	count int
	_     [24]byte // keep shards' locks on separate cache lines
}

// index is safe for concurrent use: lookups take a shard's read lock,
// mutations its write lock.
type index struct {
	shards [indexShards]shard
}

func newIndex() *index {
	ix := &index{}
	for i := range ix.shards {
		ix.shards[i].slots = make([]slot, minShardSlots)
	}
	return ix
}

func splitHash(h *Hash) (key uint64, sh uint8) {
	return binary.LittleEndian.Uint64(h[0:8]), h[8]
}

// lookup returns the locations of up to maxCandidates entries whose key
// matches h. It does not allocate.
func (ix *index) lookup(h *Hash) (c [maxCandidates]loc, n int) {
	c, n, _ = ix.lookupVerified(h)
	return c, n
}

// lookupVerified is lookup that also reports which candidates are
// verified: bit i of verified is set when c[i] passed a whole check.
func (ix *index) lookupVerified(h *Hash) (c [maxCandidates]loc, n int, verified uint8) {
	key, sb := splitHash(h)
	s := &ix.shards[sb]
	s.mu.RLock()
	mask := uint64(len(s.slots) - 1)
	for i := key & mask; ; i = (i + 1) & mask {
		sl := &s.slots[i]
		if sl.vol == 0 {
			break
		}
		if sl.key() == key {
			c[n] = loc{sl.vol, sl.off, sl.n &^ verifiedBit}
			if sl.n&verifiedBit != 0 {
				verified |= 1 << n
			}
			if n++; n == maxCandidates {
				break
			}
		}
	}
	s.mu.RUnlock()
	return c, n, verified
}

// insert adds an entry; the caller has checked that h is not present.
func (ix *index) insert(h *Hash, l loc) {
	key, sb := splitHash(h)
	ix.insertKey(key, sb, l)
}

func (ix *index) insertKey(key uint64, sb uint8, l loc) {
	s := &ix.shards[sb]
	s.mu.Lock()
	if (s.count+1)*4 > len(s.slots)*3 {
		s.grow()
	}
	s.put(key, l)
	s.count++
	s.mu.Unlock()
}

func (s *shard) put(key uint64, l loc) {
	mask := uint64(len(s.slots) - 1)
	i := key & mask
	for s.slots[i].vol != 0 {
		i = (i + 1) & mask
	}
	s.slots[i] = slot{uint32(key), uint32(key >> 32), l.vol, l.off, l.n}
}

func (s *shard) grow() {
	old := s.slots
	s.slots = make([]slot, 2*len(old))
	for i := range old {
		if old[i].vol != 0 {
			s.put(old[i].key(), loc{old[i].vol, old[i].off, old[i].n})
		}
	}
}

// find returns the slot index of the entry (key, l), or -1. Holds s.mu.
func (s *shard) find(key uint64, l loc) int {
	mask := uint64(len(s.slots) - 1)
	for i := key & mask; ; i = (i + 1) & mask {
		sl := &s.slots[i]
		if sl.vol == 0 {
			return -1
		}
		if sl.key() == key && sl.vol == l.vol && sl.off == l.off && sl.n&^verifiedBit == l.n {
			return int(i)
		}
	}
}

// has reports whether the exact entry (h, l) exists.
func (ix *index) has(h *Hash, l loc) bool {
	key, sb := splitHash(h)
	return ix.hasKey(key, sb, l)
}

// hasKey is has by key and shard.
func (ix *index) hasKey(key uint64, sb uint8, l loc) bool {
	s := &ix.shards[sb]
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.find(key, l) >= 0
}

// markVerified records that the entry (h, l) passed a whole check, if it
// still exists.
func (ix *index) markVerified(h *Hash, l loc) {
	key, sb := splitHash(h)
	ix.markVerifiedKey(key, sb, l)
}

// markVerifiedKey is markVerified by key and shard.
func (ix *index) markVerifiedKey(key uint64, sb uint8, l loc) {
	s := &ix.shards[sb]
	s.mu.Lock()
	if i := s.find(key, l); i >= 0 {
		s.slots[i].n |= verifiedBit
	}
	s.mu.Unlock()
}

// replace changes the entry (h, old) to (h, new) if it exists, atomically
// for readers, and reports whether it did. The new location is not
// verified.
func (ix *index) replace(h *Hash, old, new loc) bool {
	key, sb := splitHash(h)
	s := &ix.shards[sb]
	s.mu.Lock()
	defer s.mu.Unlock()
	i := s.find(key, old)
	if i < 0 {
		return false
	}
	s.slots[i].vol, s.slots[i].off, s.slots[i].n = new.vol, new.off, new.n
	return true
}

// remove deletes the entry (h, l) if it exists and reports whether it did.
func (ix *index) remove(h *Hash, l loc) bool {
	key, sb := splitHash(h)
	return ix.removeKey(key, sb, l)
}

// removeKey is remove by key and shard.
func (ix *index) removeKey(key uint64, sb uint8, l loc) bool {
	s := &ix.shards[sb]
	s.mu.Lock()
	defer s.mu.Unlock()
	i := s.find(key, l)
	if i < 0 {
		return false
	}
	// Backward-shift deletion: move later entries of the probe run into the
	// hole when their home slot does not lie strictly between hole and them.
	mask := len(s.slots) - 1
	hole := i
	for j := (i + 1) & mask; s.slots[j].vol != 0; j = (j + 1) & mask {
		home := int(s.slots[j].key() & uint64(mask))
		if (j-home)&mask >= (j-hole)&mask {
			s.slots[hole] = s.slots[j]
			hole = j
		}
	}
	s.slots[hole] = slot{}
	s.count--
	return true
}

// len returns the number of entries.
func (ix *index) len() int64 {
	var n int64
	for i := range ix.shards {
		s := &ix.shards[i]
		s.mu.RLock()
		n += int64(s.count)
		s.mu.RUnlock()
	}
	return n
}

// memBytes returns the bytes of RAM held by the tables.
func (ix *index) memBytes() int64 {
	n := int64(unsafe.Sizeof(*ix))
	for i := range ix.shards {
		s := &ix.shards[i]
		s.mu.RLock()
		n += int64(len(s.slots)) * int64(unsafe.Sizeof(slot{}))
		s.mu.RUnlock()
	}
	return n
}

// forEach calls fn for every entry, one shard at a time. Each shard is
// copied first, so fn may call index methods; entries changed during the
// walk may or may not be seen.
func (ix *index) forEach(fn func(key uint64, sb uint8, l loc) bool) {
	var buf []slot
	for i := range ix.shards {
		s := &ix.shards[i]
		s.mu.RLock()
		buf = buf[:0]
		for _, sl := range s.slots {
			if sl.vol != 0 {
				buf = append(buf, sl)
			}
		}
		s.mu.RUnlock()
		for _, sl := range buf {
			if !fn(sl.key(), uint8(i), loc{sl.vol, sl.off, sl.n &^ verifiedBit}) {
				return
			}
		}
	}
}
