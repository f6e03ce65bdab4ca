package kv

import (
	"bytes"
	"sync"
	"sync/atomic"

	"github.com/RaduBerinde/btreemap"
)

// tree is one immutable committed state of a memStore (or a batch's
// pending writes, where a nil value marks a delete).
type tree = btreemap.BTreeMap[[]byte, []byte]

const memDegree = 16

func newTree() *tree { return btreemap.New[[]byte, []byte](memDegree, bytes.Compare) }

// memStore is the in-memory Store. The published tree is never modified:
// a commit clones it (copy-on-write, O(log n) per write), applies the batch
// and publishes the clone, so readers and snapshots need no lock.
type memStore struct {
	commitMu sync.Mutex // serializes commits (Clone is not concurrent-safe)
	cur      atomic.Pointer[tree]
}

// NewMem returns an empty in-memory Store with the same semantics as the
// Pebble one except durability (nothing survives the process). It is
// deterministic: the same writes give the same Scan output. Safe for
// concurrent use; Close is a no-op.
func NewMem() Store {
	s := &memStore{}
	s.cur.Store(newTree())
	return s
}

func memGet(t *tree, key []byte) ([]byte, error) {
	_, v, ok := t.Get(key)
	if !ok {
		return nil, ErrNotFound
	}
	return bytes.Clone(v), nil
}

func bounds(lower, upper []byte) (btreemap.LowerBound[[]byte], btreemap.UpperBound[[]byte]) {
	lo := btreemap.Min[[]byte]()
	if lower != nil {
		lo = btreemap.GE(lower)
	}
	hi := btreemap.Max[[]byte]()
	if upper != nil {
		hi = btreemap.LT(upper)
	}
	return lo, hi
}

func memScan(t *tree, lower, upper []byte, fn func(k, v []byte) bool) error {
	if lower != nil && upper != nil && bytes.Compare(lower, upper) >= 0 {
		return nil
	}
	lo, hi := bounds(lower, upper)
	t.AscendFunc(lo, hi, fn)
	return nil
}

// Get implements Reader.
func (s *memStore) Get(key []byte) ([]byte, error) { return memGet(s.cur.Load(), key) }

// Scan implements Reader.
func (s *memStore) Scan(lower, upper []byte, fn func(k, v []byte) bool) error {
	return memScan(s.cur.Load(), lower, upper, fn)
}

// NewBatch implements Store.
func (s *memStore) NewBatch() Batch { return &memBatch{s: s, w: newTree()} }

// Snapshot implements Store.
func (s *memStore) Snapshot() Snapshot { return memSnapshot{t: s.cur.Load()} }

// Sync implements Store: memory has nothing to sync.
func (s *memStore) Sync() error { return nil }

// Close implements Store.
func (s *memStore) Close() error { return nil }

type memSnapshot struct{ t *tree }

func (s memSnapshot) Get(key []byte) ([]byte, error) { return memGet(s.t, key) }

func (s memSnapshot) Scan(lower, upper []byte, fn func(k, v []byte) bool) error {
	return memScan(s.t, lower, upper, fn)
}

func (s memSnapshot) Close() error { return nil }

// memBatch holds pending writes in w (nil value = delete); reads merge w
// over the store's current committed tree, like a Pebble indexed batch.
type memBatch struct {
	s    *memStore
	w    *tree
	done bool
}

// tombstone is stored in w for a delete; Set stores a non-nil copy.
func (b *memBatch) Get(key []byte) ([]byte, error) {
	if _, v, ok := b.w.Get(key); ok {
		if v == nil {
			return nil, ErrNotFound
		}
		return bytes.Clone(v), nil
	}
	return b.s.Get(key)
}

func (b *memBatch) Scan(lower, upper []byte, fn func(k, v []byte) bool) error {
	if lower != nil && upper != nil && bytes.Compare(lower, upper) >= 0 {
		return nil
	}
	lo, hi := bounds(lower, upper)
	// The batch is small and single-threaded: collect its range, then merge
	// it into the ascent over the committed tree.
	type kvp struct{ k, v []byte }
	var over []kvp
	b.w.AscendFunc(lo, hi, func(k, v []byte) bool {
		over = append(over, kvp{k, v})
		return true
	})
	i := 0
	stopped := false
	emit := func(p kvp) bool { // returns false to stop
		if p.v == nil {
			return true
		}
		return fn(p.k, p.v)
	}
	b.s.cur.Load().AscendFunc(lo, hi, func(k, v []byte) bool {
		for i < len(over) && bytes.Compare(over[i].k, k) < 0 {
			if !emit(over[i]) {
				stopped = true
				return false
			}
			i++
		}
		if i < len(over) && bytes.Equal(over[i].k, k) {
			p := over[i]
			i++
			if !emit(p) {
				stopped = true
				return false
			}
			return true
		}
		if !fn(k, v) {
			stopped = true
			return false
		}
		return true
	})
	for ; !stopped && i < len(over); i++ {
		if !emit(over[i]) {
			break
		}
	}
	return nil
}

func (b *memBatch) Set(key, value []byte) error {
	v := make([]byte, len(value)) // non-nil even when empty: nil means delete
	copy(v, value)
	b.w.ReplaceOrInsert(bytes.Clone(key), v)
	return nil
}

func (b *memBatch) Delete(key []byte) error {
	b.w.ReplaceOrInsert(bytes.Clone(key), nil)
	return nil
}

func (b *memBatch) Commit(bool) error {
	b.s.commitMu.Lock()
	defer b.s.commitMu.Unlock()
	next := b.s.cur.Load().Clone()
	b.w.AscendFunc(btreemap.Min[[]byte](), btreemap.Max[[]byte](), func(k, v []byte) bool {
		if v == nil {
			next.Delete(k)
		} else {
			next.ReplaceOrInsert(k, v)
		}
		return true
	})
	b.s.cur.Store(next)
	b.done = true
	b.w = newTree()
	return nil
}

func (b *memBatch) Close() error {
	b.done = true
	return nil
}
