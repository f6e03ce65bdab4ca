package kv

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	pvfs "github.com/cockroachdb/pebble/v2/vfs"
)

// ErrInvalidConfig is wrapped by PebbleConfig.Validate.
var ErrInvalidConfig = errors.New("kv: invalid config")

// PebbleConfig configures OpenPebble. A zero field takes its default, so the
// zero value is usable.
type PebbleConfig struct {
	// FS is the file system Pebble runs on. Default (nil): the real disk,
	// pvfs.Default. Tests pass vfs.NewMem() or vfs.NewCrashableMem().
	FS pvfs.FS
	// CacheSize is the block cache size in bytes. Default 64 MiB.
	CacheSize int64
	// MemTableSize is the size in bytes of one memtable. Default 16 MiB.
	MemTableSize uint64
	// BloomBitsPerKey sets the Bloom filter on every level (negative lookups
	// of dentries, e.g. "name" before "name/", skip the data blocks).
	// Default 10 (about 1% false positives); negative disables the filter.
	BloomBitsPerKey int
	// MaxOpenFiles bounds the table cache (open sstable descriptors).
	// Default 1000.
	MaxOpenFiles int
	// Logger receives Pebble's own log lines. Default: slog.Default().
	Logger *slog.Logger
}

// DefaultPebbleConfig returns the defaults with every field filled in.
func DefaultPebbleConfig() PebbleConfig {
	return PebbleConfig{
		FS:              pvfs.Default,
		CacheSize:       64 << 20,
		MemTableSize:    16 << 20,
		BloomBitsPerKey: 10,
		MaxOpenFiles:    1000,
		Logger:          slog.Default(),
	}
}

// withDefaults fills zero fields with DefaultPebbleConfig's values.
func (c PebbleConfig) withDefaults() PebbleConfig {
	d := DefaultPebbleConfig()
	if c.FS == nil {
		c.FS = d.FS
	}
	if c.CacheSize == 0 {
		c.CacheSize = d.CacheSize
	}
	if c.MemTableSize == 0 {
		c.MemTableSize = d.MemTableSize
	}
	if c.BloomBitsPerKey == 0 {
		c.BloomBitsPerKey = d.BloomBitsPerKey
	}
	if c.MaxOpenFiles == 0 {
		c.MaxOpenFiles = d.MaxOpenFiles
	}
	if c.Logger == nil {
		c.Logger = d.Logger
	}
	return c
}

// Validate reports a field out of range, wrapping ErrInvalidConfig. Zero
// fields are valid (they take defaults).
func (c PebbleConfig) Validate() error {
	switch {
	case c.CacheSize < 0:
		return fmt.Errorf("%w: CacheSize %d < 0", ErrInvalidConfig, c.CacheSize)
	case c.MemTableSize != 0 && c.MemTableSize < 1<<20:
		return fmt.Errorf("%w: MemTableSize %d < 1 MiB", ErrInvalidConfig, c.MemTableSize)
	case c.MemTableSize >= 4<<30:
		return fmt.Errorf("%w: MemTableSize %d >= 4 GiB", ErrInvalidConfig, c.MemTableSize)
	case c.BloomBitsPerKey > 64:
		return fmt.Errorf("%w: BloomBitsPerKey %d > 64", ErrInvalidConfig, c.BloomBitsPerKey)
	case c.MaxOpenFiles < 0:
		return fmt.Errorf("%w: MaxOpenFiles %d < 0", ErrInvalidConfig, c.MaxOpenFiles)
	}
	return nil
}

// pebbleStore is the Pebble-backed Store.
type pebbleStore struct {
	db   *pebble.DB
	opts *pebble.Options
	fs   pvfs.FS
	dir  string
	// started and finished count the batch commits begun and returned. A
	// batch caches a value it read from db only when no commit was in
	// flight around the read, and trusts the cache only while started is
	// unchanged (see pebbleBatch.Get).
	started, finished atomic.Uint64
}

// OpenPebble opens (creating if needed) the Pebble database in dir. It
// blocks while Pebble replays its WAL. Errors: ErrInvalidConfig, or Pebble's
// own open error wrapped with dir. The returned Store is safe for concurrent
// use; Close it to release files and the cache.
func OpenPebble(dir string, cfg PebbleConfig) (Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	opts := &pebble.Options{
		FS:                 cfg.FS,
		CacheSize:          cfg.CacheSize,
		MemTableSize:       cfg.MemTableSize,
		MaxOpenFiles:       cfg.MaxOpenFiles,
		Logger:             slogLogger{cfg.Logger},
		FormatMajorVersion: pebble.FormatNewest,
	}
	if cfg.BloomBitsPerKey > 0 {
		// Setting L0 is enough: each level inherits the previous one's policy.
		opts.Levels[0].FilterPolicy = bloom.FilterPolicy(cfg.BloomBitsPerKey)
	}
	opts.EnsureDefaults() // what Open uses; ingest.go makes sstables with it
	db, err := pebble.Open(dir, opts)
	if err != nil {
		return nil, fmt.Errorf("kv: open pebble %s: %w", dir, err)
	}
	s := &pebbleStore{db: db, opts: opts, fs: cfg.FS, dir: dir}
	clearIngests(s) // ingest.go
	return s, nil
}

// slogLogger adapts slog to Pebble's Logger.
type slogLogger struct{ l *slog.Logger }

func (s slogLogger) Infof(format string, args ...any) {
	s.l.Info(fmt.Sprintf(format, args...), "component", "pebble")
}

func (s slogLogger) Errorf(format string, args ...any) {
	s.l.Error(fmt.Sprintf(format, args...), "component", "pebble")
}

// Fatalf must not return (Pebble's contract): the process state is
// unknown, so it panics after logging.
func (s slogLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	s.l.Error(msg, "component", "pebble", "fatal", true)
	panic("pebble: " + msg)
}

type getter interface {
	Get(key []byte) ([]byte, io.Closer, error)
}

func pebbleGet(g getter, key []byte) ([]byte, error) {
	v, closer, err := g.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("kv: get: %w", err)
	}
	out := make([]byte, len(v))
	copy(out, v)
	if err := closer.Close(); err != nil {
		return nil, fmt.Errorf("kv: get: %w", err)
	}
	return out, nil
}

type iterMaker interface {
	NewIter(o *pebble.IterOptions) (*pebble.Iterator, error)
}

func pebbleScan(m iterMaker, lower, upper []byte, fn func(k, v []byte) bool) (err error) {
	it, err := m.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return fmt.Errorf("kv: scan: %w", err)
	}
	defer func() {
		if cerr := it.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("kv: scan: %w", cerr)
		}
	}()
	for ok := it.First(); ok; ok = it.Next() {
		v, verr := it.ValueAndErr()
		if verr != nil {
			return fmt.Errorf("kv: scan: %w", verr)
		}
		if !fn(it.Key(), v) {
			return nil
		}
	}
	return nil
}

// Get implements Reader.
func (s *pebbleStore) Get(key []byte) ([]byte, error) { return pebbleGet(s.db, key) }

// Scan implements Reader.
func (s *pebbleStore) Scan(lower, upper []byte, fn func(k, v []byte) bool) error {
	return pebbleScan(s.db, lower, upper, fn)
}

// NewBatch implements Store.
func (s *pebbleStore) NewBatch() Batch {
	return &pebbleBatch{s: s, b: s.db.NewIndexedBatch(), w: map[string][]byte{}}
}

// Snapshot implements Store.
func (s *pebbleStore) Snapshot() Snapshot { return &pebbleSnapshot{s: s.db.NewSnapshot()} }

// Sync implements Store: an empty WAL record written with sync makes the
// whole WAL before it durable.
func (s *pebbleStore) Sync() error {
	if err := s.db.LogData(nil, pebble.Sync); err != nil {
		return fmt.Errorf("kv: sync: %w", err)
	}
	return nil
}

// Close implements Store.
func (s *pebbleStore) Close() error {
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("kv: close pebble: %w", err)
	}
	return nil
}

// pebbleBatch is an indexed Pebble batch plus two maps that make point
// reads cheap. Pebble's Batch.Get builds a whole iterator stack (batch,
// memtables, levels) for every key; the namespace apply reads the same few
// keys (bucket, parent directories, counters) for every file of a batch.
//
//   - w mirrors the batch's own writes (nil value: deleted). A key in w is
//     answered from it: that is exactly what the indexed batch would return.
//   - r caches values read from the DB (nil value: absent) for keys the
//     batch has not written. A key not in w cannot be affected by the batch,
//     so a plain DB Get returns what Batch.Get would. r is filled only by a
//     read that no commit overlapped and is dropped as soon as any commit
//     of the store starts (rGen != s.started), so a cached answer is always
//     the one a fresh read would give: Batch semantics are unchanged.
//
// Scan still goes through the indexed batch (ranges, ordering).
type pebbleBatch struct {
	s      *pebbleStore
	b      *pebble.Batch
	w      map[string][]byte
	r      map[string][]byte
	rGen   uint64
	closed bool
}

// absent marks a cached DB miss in pebbleBatch.r.
var absent = []byte(nil)

func (b *pebbleBatch) Get(key []byte) ([]byte, error) {
	if v, ok := b.w[string(key)]; ok {
		if v == nil {
			return nil, ErrNotFound
		}
		return bytes.Clone(v), nil
	}
	if b.r != nil {
		if b.s.started.Load() != b.rGen {
			clear(b.r)
		} else if v, ok := b.r[string(key)]; ok {
			if v == nil {
				return nil, ErrNotFound
			}
			return bytes.Clone(v), nil
		}
	}
	s0 := b.s.started.Load()
	quiet := b.s.finished.Load() == s0
	v, err := pebbleGet(b.s.db, key)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return nil, err
	}
	if quiet && b.s.started.Load() == s0 {
		if b.r == nil {
			b.r = map[string][]byte{}
		}
		if b.rGen != s0 {
			clear(b.r)
			b.rGen = s0
		}
		if err != nil {
			b.r[string(key)] = absent
		} else {
			b.r[string(key)] = bytes.Clone(v) // non-nil: make([]byte, 0) for ""
		}
	}
	return v, err
}

func (b *pebbleBatch) Scan(lower, upper []byte, fn func(k, v []byte) bool) error {
	return pebbleScan(b.b, lower, upper, fn)
}

func (b *pebbleBatch) Set(key, value []byte) error {
	if err := b.b.Set(key, value, nil); err != nil {
		return fmt.Errorf("kv: batch set: %w", err)
	}
	v := make([]byte, len(value)) // non-nil even when empty: nil means deleted
	copy(v, value)
	b.w[string(key)] = v
	return nil
}

func (b *pebbleBatch) Delete(key []byte) error {
	if err := b.b.Delete(key, nil); err != nil {
		return fmt.Errorf("kv: batch delete: %w", err)
	}
	b.w[string(key)] = nil
	return nil
}

func (b *pebbleBatch) Commit(sync bool) error {
	wo := pebble.NoSync
	if sync {
		wo = pebble.Sync
	}
	b.s.started.Add(1)
	err := b.b.Commit(wo)
	b.s.finished.Add(1)
	if err != nil {
		return fmt.Errorf("kv: commit: %w", err)
	}
	b.closed = true
	b.w, b.r = nil, nil
	if err := b.b.Close(); err != nil {
		return fmt.Errorf("kv: close committed batch: %w", err)
	}
	return nil
}

func (b *pebbleBatch) Close() error {
	if b.closed {
		return nil
	}
	b.closed = true
	b.w, b.r = nil, nil
	if err := b.b.Close(); err != nil {
		return fmt.Errorf("kv: close batch: %w", err)
	}
	return nil
}

type pebbleSnapshot struct{ s *pebble.Snapshot }

func (s *pebbleSnapshot) Get(key []byte) ([]byte, error) { return pebbleGet(s.s, key) }

func (s *pebbleSnapshot) Scan(lower, upper []byte, fn func(k, v []byte) bool) error {
	return pebbleScan(s.s, lower, upper, fn)
}

func (s *pebbleSnapshot) Close() error {
	if err := s.s.Close(); err != nil {
		return fmt.Errorf("kv: close snapshot: %w", err)
	}
	return nil
}
