package blob

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/cairn-fs/cairn/internal/vfs"
)

const (
	volSuffix = ".vol"
	// smallRead is the largest ReadAt (header + offset + length) served by
	// one pread into a pooled buffer; larger reads read the header first.
	smallRead = 64 << 10
	// spaceRecheck is how many appends may use a cached Statfs result.
	spaceRecheck = 16
	// maxRetries bounds lookups that raced with compaction retiring a volume.
	maxRetries = 16
)

// Store is a node-local blob store over volume files. All methods are safe
// for concurrent use. Reads (Has, Size, ReadAt, Get, Locate) take no store
// lock: an index shard read lock and an atomic volume reference. Writes
// (Put, Delete) append under one mutex and share fsyncs (group commit).
type Store struct {
	cfg Config
	fs  vfs.FS
	log *slog.Logger
	idx *index

	vols   atomic.Pointer[map[uint32]*volRef] // copy-on-write under mu
	active atomic.Pointer[volRef]             // written under mu

	mu          sync.Mutex // appends, volume roll, writer-side index changes
	nextID      uint32
	pending     []pendingOp
	freeEst     int64 // free bytes at the last Statfs, minus bytes appended since
	spaceChecks int   // appends left before the next Statfs

	appendSeq atomic.Uint64 // sequence of the last completed append, bumped under mu
	synced    atomic.Uint64 // mirror of syncedSeq for lock-free reads

	syncMu    sync.Mutex
	syncCond  *sync.Cond
	syncing   bool
	syncedSeq uint64
	failed    bool  // guarded by syncMu; mirrors readOnly
	failErr   error // guarded by syncMu

	compactMu sync.Mutex // one compaction (or Range) at a time

	readOnly    atomic.Bool
	closed      atomic.Bool
	fsyncs      atomic.Int64
	compactions atomic.Int64
	checkpoints atomic.Int64

	// Background checkpoints (checkpoint.go).
	sinceCk   int64     // bytes appended since the last checkpoint began; guarded by mu
	ckActive  bool      // a checkpoint is walking the index; guarded by mu
	ckRemoved []ckEntry // entries Delete removed while ckActive; guarded by mu
	ckTrigger chan struct{}
	ckStop    chan struct{}
	ckDone    chan struct{}
	ckOnce    sync.Once

	corruptRegions int64 // set by recover
	scannedBytes   int64 // set by recover

	corrupt atomic.Int64 // copies quarantined since Open (verify.go)
	scrub   *scrubber    // scrub.go

	bufs sync.Pool // *[]byte of smallRead bytes
}

func volName(id uint32) string { return fmt.Sprintf("%08d%s", id, volSuffix) }

func (s *Store) volPath(id uint32) string { return filepath.Join(s.cfg.Dir, volName(id)) }

func (s *Store) getBuf() *[]byte { return s.bufs.Get().(*[]byte) }

// Open opens (creating if needed) the store in cfg.Dir and recovers it: it
// loads the index checkpoint if valid, scans every volume from its
// checkpointed offset (the whole volume without a checkpoint), truncates
// torn tails (logged at Warn), skips mid-volume corruption without
// truncating (logged at Error) and applies tombstones. It then starts the
// background checkpointer, which Close stops. Zero fields of cfg get their
// defaults. It blocks for the whole recovery.
func Open(cfg Config) (*Store, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Store{cfg: cfg, fs: cfg.FS, log: cfg.Logger.With("component", "blob"), idx: newIndex()}
	s.syncCond = sync.NewCond(&s.syncMu)
	s.bufs.New = func() any { b := make([]byte, smallRead); return &b }
	empty := map[uint32]*volRef{}
	s.vols.Store(&empty)
	if err := s.fs.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("blob: open %s: %w", cfg.Dir, err)
	}
	if err := s.recover(); err != nil {
		s.closeVolumes()
		return nil, fmt.Errorf("blob: open %s: %w", cfg.Dir, err)
	}
	s.ckTrigger = make(chan struct{}, 1)
	s.ckStop = make(chan struct{})
	s.ckDone = make(chan struct{})
	go s.checkpointer()
	s.startScrub()
	if cfg.CheckpointInterval > 0 && s.scannedBytes >= cfg.CheckpointInterval {
		s.ckTrigger <- struct{}{} // spare the next recovery this scan
	}
	return s, nil
}

// stopBackground stops the background checkpointer and waits for it (tests
// use it to model a crashed process).
func (s *Store) stopBackground() {
	s.stopScrub()
	s.ckOnce.Do(func() { close(s.ckStop) })
	<-s.ckDone
}

// Stats returns a snapshot of the store's counters. It does not block on
// writers.
func (s *Store) Stats() Stats {
	st := Stats{
		Blobs:       s.idx.len(),
		IndexBytes:  s.idx.memBytes(),
		Fsyncs:      s.fsyncs.Load(),
		ReadOnly:    s.readOnly.Load(),
		Compactions: s.compactions.Load(),
		Checkpoints: s.checkpoints.Load(),

		RecoveryScannedBytes: s.scannedBytes,
		CorruptRegions:       s.corruptRegions,
		CorruptCopies:        s.corrupt.Load(),
	}
	for _, vr := range *s.vols.Load() {
		st.Volumes++
		if vr.v.Mapped() {
			st.MappedVolumes++
		}
		st.Bytes += vr.v.Size()
		st.LiveBytes += vr.live.Load()
	}
	return st
}

// Close stops the scrub (saving its progress) and the background checkpointer (waiting for a checkpoint in
// progress), fsyncs the active volume, writes the index checkpoint (unless
// the store is read-only) and closes every volume. Later calls return ErrClosed;
// calls racing with Close may fail. A volume still referenced by a Locate
// caller is closed when that caller releases it.
func (s *Store) Close() error {
	s.stopScrub() // saves the cursor of a pass in progress
	s.ckOnce.Do(func() { close(s.ckStop) })
	<-s.ckDone // a checkpoint in progress finishes first
	s.compactMu.Lock()
	defer s.compactMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Swap(true) {
		return ErrClosed
	}
	var err error
	if !s.readOnly.Load() {
		a := s.active.Load()
		if err = s.syncVolume(a.v); err == nil {
			s.markSynced(s.appendSeq.Load())
			err = s.writeCheckpoint()
		} else {
			err = s.failLocked(err)
		}
	}
	s.closeVolumes()
	if err != nil {
		return fmt.Errorf("blob: close: %w", err)
	}
	s.log.Info("blob store closed", "dir", s.cfg.Dir)
	return nil
}

func (s *Store) closeVolumes() {
	for _, vr := range *s.vols.Load() {
		vr.retired.Store(true)
		if vr.refs.Load() == 0 {
			vr.finalize()
		}
	}
}
