package spill

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"

	"github.com/cairn-fs/cairn/internal/kv"
)

// Options configures New.
type Options struct {
	// Dir is where the database goes once the map spills (a new
	// directory under it). Default: os.TempDir().
	Dir string
	// MemEntries is how many keys the map holds in memory before it
	// spills. Default 100,000; negative: spill at once.
	MemEntries int
}

// DefaultMemEntries is Options.MemEntries' default.
const DefaultMemEntries = 100000

// Memory Pebble may use once spilled: two memtables and the block cache.
const (
	memTableSize = 4 << 20
	cacheSize    = 8 << 20
	batchBytes   = 1 << 20
)

// Map is an ordered map from keys to values. Safe for concurrent use.
type Map struct {
	opts Options
	mu   sync.Mutex
	db   kv.Store
	dir  string // the spilled database's directory ("" in memory)
	// pending are the writes not yet committed to db (a batch's own read
	// cache would grow with every Get), pendingBytes their size.
	pending      map[string]write
	pendingBytes int
	n            int // Sets (an upper bound of the keys)
}

type write struct {
	v   []byte
	del bool
}

// New returns an empty Map.
func New(opts Options) *Map {
	if opts.MemEntries == 0 {
		opts.MemEntries = DefaultMemEntries
	}
	return &Map{opts: opts, db: kv.NewMem(), pending: map[string]write{}}
}

// Spilled reports whether the map has moved to disk.
func (m *Map) Spilled() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.dir != ""
}

// Set stores value at key (both copied).
func (m *Map) Set(key, value []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pending[string(key)] = write{v: bytes.Clone(value)}
	m.pendingBytes += len(key) + len(value) + 64
	m.n++
	if m.pendingBytes >= batchBytes {
		if err := m.flushLocked(); err != nil {
			return err
		}
	}
	if m.dir == "" && m.n > m.opts.MemEntries {
		return m.spillLocked()
	}
	return nil
}

// Delete removes key.
func (m *Map) Delete(key []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pending[string(key)] = write{del: true}
	m.pendingBytes += len(key) + 64
	if m.pendingBytes >= batchBytes {
		return m.flushLocked()
	}
	return nil
}

// Get returns a copy of key's value; ok is false when there is none.
func (m *Map) Get(key []byte) (value []byte, ok bool, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if w, ok := m.pending[string(key)]; ok {
		if w.del {
			return nil, false, nil
		}
		return bytes.Clone(w.v), true, nil
	}
	v, err := m.db.Get(key)
	if errors.Is(err, kv.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return v, true, nil
}

// Has reports whether key is set.
func (m *Map) Has(key []byte) (bool, error) {
	_, ok, err := m.Get(key)
	return ok, err
}

// Scan calls fn for every key starting with prefix, in order, until fn
// returns false. k and v are valid only during the call. fn may write to
// the map: the scan reads the map as it was when the scan began.
func (m *Map) Scan(prefix []byte, fn func(k, v []byte) bool) error {
	m.mu.Lock()
	if err := m.flushLocked(); err != nil {
		m.mu.Unlock()
		return err
	}
	snap := m.db.Snapshot()
	m.mu.Unlock()
	defer snap.Close()
	return snap.Scan(prefix, prefixEnd(prefix), fn)
}

// Each is Scan with an error: it calls fn for every key starting with
// prefix, in order, until fn fails, and returns fn's error or the scan's.
func (m *Map) Each(prefix []byte, fn func(k, v []byte) error) error {
	var ferr error
	err := m.Scan(prefix, func(k, v []byte) bool {
		ferr = fn(k, v)
		return ferr == nil
	})
	if err != nil {
		return fmt.Errorf("spill: %w", err)
	}
	return ferr
}

// Close releases the map and removes its directory.
func (m *Map) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	err := m.db.Close()
	if m.dir != "" {
		err = errors.Join(err, os.RemoveAll(m.dir))
	}
	m.db = nil
	return err
}

func (m *Map) flushLocked() error {
	if len(m.pending) == 0 {
		return nil
	}
	b := m.db.NewBatch()
	defer b.Close()
	for k, w := range m.pending {
		var err error
		if w.del {
			err = b.Delete([]byte(k))
		} else {
			err = b.Set([]byte(k), w.v)
		}
		if err != nil {
			return err
		}
	}
	if err := b.Commit(false); err != nil {
		return err
	}
	clear(m.pending)
	m.pendingBytes = 0
	return nil
}

// spillLocked moves the map into a Pebble database on disk.
func (m *Map) spillLocked() error {
	if err := m.flushLocked(); err != nil {
		return err
	}
	dir, err := os.MkdirTemp(m.opts.Dir, "cairn-spill-")
	if err != nil {
		return fmt.Errorf("spill: %w", err)
	}
	db, err := kv.OpenPebble(dir, kv.PebbleConfig{CacheSize: cacheSize, MemTableSize: memTableSize,
		BloomBitsPerKey: 10, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		os.RemoveAll(dir)
		return fmt.Errorf("spill: %w", err)
	}
	b, size := db.NewBatch(), 0
	var werr error
	err = m.db.Scan(nil, nil, func(k, v []byte) bool {
		if werr = b.Set(k, v); werr != nil {
			return false
		}
		if size += len(k) + len(v); size >= batchBytes {
			if werr = b.Commit(false); werr != nil {
				return false
			}
			b, size = db.NewBatch(), 0
		}
		return true
	})
	if err == nil {
		err = werr
	}
	if err == nil {
		err = b.Commit(false)
	}
	if err != nil {
		db.Close()
		os.RemoveAll(dir)
		return fmt.Errorf("spill: %w", err)
	}
	m.db.Close()
	m.db, m.dir = db, dir
	return nil
}

// prefixEnd is the least key above every key starting with prefix (nil:
// none).
func prefixEnd(prefix []byte) []byte {
	end := bytes.Clone(prefix)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}
