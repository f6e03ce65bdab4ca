package blob

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/cairn-fs/cairn/internal/vfs"
	"github.com/cairn-fs/cairn/internal/volume"
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

// volRef is an open volume plus the reader references that keep compaction
// from closing it. refs counts readers; once retired is set the volume is
// out of the store's table and is closed and removed when refs drops to 0.
type volRef struct {
	v       *volume.Volume
	refs    atomic.Int64
	retired atomic.Bool
	doomed  atomic.Bool // compacted: remove the file when finalized
	final   sync.Once
	live    atomic.Int64 // bytes of needles the index points at
	tomb    atomic.Int64 // bytes of tombstone needles
	s       *Store
	// damaged is set at Open when the volume has corrupt regions (it then
	// takes no more appends), and later when a needle in it fails a check
	// or a compaction finds it does not scan to its end: compaction leaves
	// it alone.
	damaged atomic.Bool
	// scanEnd, if not 0, is where a recovery scan that gave up stopped: the
	// volume is indexed only up to there. Read-only after Open.
	scanEnd int64
}

func (r *volRef) release() {
	if r.refs.Add(-1) == 0 && r.retired.Load() {
		r.finalize()
	}
}

// finalize closes a retired volume, and removes it if compaction doomed it.
// Called once no reader holds it.
func (r *volRef) finalize() {
	r.final.Do(func() {
		s := r.s
		if err := r.v.Close(); err != nil {
			s.log.Warn("close volume", "volume", r.v.ID(), "err", err)
		}
		if !r.doomed.Load() {
			return
		}
		if err := s.fs.Remove(r.v.Path()); err != nil {
			s.log.Warn("remove compacted volume", "volume", r.v.ID(), "err", err)
			return
		}
		if err := s.fs.SyncDir(s.cfg.Dir); err != nil {
			s.log.Warn("sync dir after removing compacted volume", "volume", r.v.ID(), "err", err)
		}
	})
}

type opKind uint8

const (
	opPut opKind = iota
	opTomb
	opCopy
)

// pendingOp is an append not yet known to be durable.
type pendingOp struct {
	h    Hash
	l    loc
	seq  uint64
	kind opKind
}

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

// checkpointer writes a checkpoint each time noteAppend asks for one, until
// Close.
func (s *Store) checkpointer() {
	defer close(s.ckDone)
	for {
		select {
		case <-s.ckStop:
			return
		case <-s.ckTrigger:
		}
		covered, err := s.checkpoint()
		if err != nil {
			// The previous checkpoint stays valid; recovery scans more.
			s.log.Warn("background checkpoint failed", "err", err)
			continue
		}
		if s.cfg.checkpointHook != nil && covered > 0 {
			s.cfg.checkpointHook(covered)
		}
	}
}

// noteAppend counts n appended bytes towards the next background
// checkpoint and asks for one, without blocking, once CheckpointInterval is
// reached. Must hold s.mu.
func (s *Store) noteAppend(n int64) {
	s.sinceCk += n
	if s.cfg.CheckpointInterval > 0 && s.sinceCk >= s.cfg.CheckpointInterval {
		select {
		case s.ckTrigger <- struct{}{}:
		default: // one is already pending
		}
	}
}

// syncVolume fsyncs v, counts it and reports its duration to OnFsync.
func (s *Store) syncVolume(v *volume.Volume) error {
	if s.cfg.OnFsync == nil {
		err := v.Sync()
		s.fsyncs.Add(1)
		return err
	}
	start := s.cfg.Now()
	err := v.Sync()
	s.fsyncs.Add(1)
	s.cfg.OnFsync(s.cfg.Now().Sub(start))
	return err
}

// listVolumes returns the ids of the volume files in Dir, sorted, and
// removes leftover temporary files.
func (s *Store) listVolumes() ([]uint32, error) {
	names, err := s.fs.ReadDir(s.cfg.Dir)
	if err != nil {
		return nil, err
	}
	var ids []uint32
	for _, n := range names {
		if strings.HasSuffix(n, ".tmp") {
			if err := s.fs.Remove(filepath.Join(s.cfg.Dir, n)); err != nil {
				return nil, err
			}
			continue
		}
		if !strings.HasSuffix(n, volSuffix) {
			continue
		}
		id, err := strconv.ParseUint(strings.TrimSuffix(n, volSuffix), 10, 32)
		if err != nil || id == 0 {
			continue
		}
		ids = append(ids, uint32(id))
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids, nil
}

func (s *Store) recover() error {
	ids, err := s.listVolumes()
	if err != nil {
		return err
	}
	vols := map[uint32]*volRef{}
	for i, id := range ids {
		v, err := volume.Open(s.fs, s.volPath(id), id)
		if err != nil {
			// A crash between creating the last volume file and writing its
			// superblock leaves a short file with nothing acknowledged in it.
			if errors.Is(err, volume.ErrSuperblock) && i == len(ids)-1 {
				if fi, serr := s.fs.Stat(s.volPath(id)); serr == nil && fi.Size() < volume.SuperblockSize {
					s.log.Warn("removing volume with incomplete superblock", "volume", id, "size", fi.Size())
					if err := s.fs.Remove(s.volPath(id)); err != nil {
						return err
					}
					ids = ids[:i]
					break
				}
			}
			if errors.Is(err, volume.ErrSuperblock) || errors.Is(err, volume.ErrCorrupt) {
				return fmt.Errorf("%w: %w", ErrCorrupt, err)
			}
			return err // an I/O error: the disk, not its content
		}
		vols[id] = &volRef{v: v, s: s}
	}
	s.vols.Store(&vols)

	ck, err := s.loadCheckpoint(vols)
	if err != nil {
		s.log.Warn("ignoring index checkpoint; rescanning all volumes", "err", err)
		ck = nil
	}
	if ck != nil {
		// A volume older than the checkpoint's newest that the checkpoint
		// does not list was compacted away before it was written: its live
		// needles were copied durably first. Its file survives only if a
		// reader held it when the node stopped, or its removal failed.
		// Scanning it after the checkpoint's entries would replay old
		// needles and tombstones over newer state (a tombstone there would
		// delete a blob stored again since), so finish its removal.
		kept := ids[:0]
		for _, id := range ids {
			if _, listed := ck.vols[id]; listed || id >= ck.maxID {
				kept = append(kept, id)
				continue
			}
			s.log.Warn("removing volume left over from a compaction", "volume", id)
			vr := vols[id]
			delete(vols, id)
			if err := vr.v.Close(); err != nil {
				return err
			}
			if err := s.fs.Remove(s.volPath(id)); err != nil {
				return err
			}
			if err := s.fs.SyncDir(s.cfg.Dir); err != nil {
				return err
			}
		}
		ids = kept
		s.vols.Store(&vols)
	}
	s.nextID = 1
	if len(ids) > 0 {
		s.nextID = ids[len(ids)-1] + 1
	}
	if ck != nil {
		if ck.maxID >= s.nextID {
			s.nextID = ck.maxID + 1
		}
		for _, e := range ck.entries {
			vr := vols[e.l.vol]
			if vr == nil {
				continue // volume compacted away after the checkpoint; its blobs are in a newer tail
			}
			s.idx.insertKey(e.key, e.sb, e.l)
			vr.live.Add(volume.NeedleSize(int(e.l.n)))
		}
	}
	var scanned int
	buf := make([]byte, volume.HeaderSize)
	// A needle found by the search past a damaged region must also be
	// what it claims: a live needle's data must hash to its hash. This keeps
	// the image of a needle inside a blob's data from being indexed as junk.
	accept := func(off int64, h volume.Header, data []byte) bool {
		return h.Tombstone() || Sum(data) == Hash(h.Hash)
	}
	for _, id := range ids {
		vr := vols[id]
		from := int64(volume.SuperblockSize)
		if ck != nil {
			if cv, ok := ck.vols[id]; ok {
				from = cv.validOff
				vr.tomb.Add(cv.tomb)
			}
		}
		size := vr.v.Size()
		s.scannedBytes += max(size-from, 0)
		rec, err := vr.v.ScanRecover(from, func(off int64, h volume.Header, data []byte) error {
			scanned++
			hash := Hash(h.Hash)
			if h.Tombstone() {
				vr.tomb.Add(volume.NeedleSize(0))
				if l, ok := s.findVerified(&hash, buf); ok {
					s.idx.remove(&hash, l)
					s.volOf(l.vol).live.Add(-volume.NeedleSize(int(l.n)))
				}
				return nil
			}
			nl := loc{vol: id, off: uint32(off >> 3), n: h.Len}
			if l, ok := s.findVerified(&hash, buf); ok {
				s.idx.replace(&hash, l, nl)
				s.volOf(l.vol).live.Add(-volume.NeedleSize(int(l.n)))
			} else {
				s.idx.insert(&hash, nl)
			}
			vr.live.Add(volume.NeedleSize(int(h.Len)))
			return nil
		}, accept)
		if err != nil {
			return err
		}
		for _, r := range rec.Corrupt {
			s.log.Error("skipping corrupt region in volume; blobs stored in it are lost",
				"volume", id, "from", r.Start, "to", r.End, "bytes", r.End-r.Start)
			s.corruptRegions++
			vr.damaged.Store(true)
		}
		switch {
		case rec.GaveUp:
			s.log.Error("volume is corrupt after this offset and no valid needle was found within the search budget; not truncating, not indexing the rest",
				"volume", id, "from", rec.End, "size", size, "bytes", size-rec.End)
			s.corruptRegions++
			vr.damaged.Store(true)
			vr.scanEnd = rec.End
		case rec.End < size:
			s.log.Warn("truncating torn volume tail", "volume", id, "valid", rec.End, "size", size, "dropped", size-rec.End)
			if err := vr.v.Truncate(rec.End); err != nil {
				return err
			}
			if err := s.syncVolume(vr.v); err != nil {
				return err
			}
		}
	}
	switch {
	case len(ids) == 0:
		if _, err := s.newVolume(); err != nil {
			return err
		}
	case vols[ids[len(ids)-1]].damaged.Load():
		// Do not extend a damaged file: later appends go to a new volume.
		if _, err := s.newVolume(); err != nil {
			return err
		}
	default:
		s.active.Store(vols[ids[len(ids)-1]])
	}
	// Map only now: torn tails were truncated above, and a mapped file must
	// not shrink under readers. A volume newVolume created is mapped already.
	for _, id := range ids {
		s.mapVolume(vols[id], vols[id] == s.active.Load())
	}
	s.log.Info("blob store opened", "dir", s.cfg.Dir, "volumes", len(*s.vols.Load()),
		"blobs", s.idx.len(), "checkpoint", ck != nil, "scanned_needles", scanned,
		"scanned_bytes", s.scannedBytes, "corrupt_regions", s.corruptRegions)
	return nil
}

// findVerified looks h up without taking volume references; for recovery
// and for writers holding s.mu (compaction cannot retire volumes then
// because retiring takes s.mu). buf is header scratch.
func (s *Store) findVerified(h *Hash, buf []byte) (loc, bool) {
	c, n := s.idx.lookup(h)
	for _, l := range c[:n] {
		vr := s.volOf(l.vol)
		if vr == nil {
			continue
		}
		hd, err := vr.v.ReadHeader(l.offset(), buf)
		if err == nil && hd.Hash == *h && !hd.Tombstone() {
			return l, true
		}
	}
	return loc{}, false
}

func (s *Store) volOf(id uint32) *volRef { return (*s.vols.Load())[id] }

// setVols replaces the volume table. Must hold s.mu (or be in Open).
func (s *Store) setVols(fn func(m map[uint32]*volRef)) {
	old := *s.vols.Load()
	m := make(map[uint32]*volRef, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	fn(m)
	s.vols.Store(&m)
}

// newVolume creates the next volume durably and makes it active. Must hold
// s.mu (or be in Open).
func (s *Store) newVolume() (*volRef, error) {
	id := s.nextID
	v, err := volume.Create(s.fs, s.volPath(id), id)
	s.fsyncs.Add(2) // file and directory
	if err != nil {
		return nil, err
	}
	s.nextID++
	vr := &volRef{v: v, s: s}
	s.mapVolume(vr, true)
	s.setVols(func(m map[uint32]*volRef) { m[id] = vr })
	s.active.Store(vr)
	s.log.Info("new volume", "volume", id)
	return vr, nil
}

// mapLen is the length to map a volume for: its size if it is sealed (it
// never grows again), or the most the active volume can grow to. ensureRoom
// rolls to a new volume before MaxVolumeSize is passed, except that an empty
// volume takes one blob of any size; an active volume from before a smaller
// MaxVolumeSize may already be larger. Reads past the map fall back to
// pread, so a short map costs speed, never correctness.
func (s *Store) mapLen(vr *volRef, active bool) int64 {
	size := vr.v.Size()
	if !active {
		return size
	}
	return min(max(s.cfg.MaxVolumeSize, size, volume.SuperblockSize+volume.NeedleSize(MaxSize)), volume.MaxVolumeSize)
}

// mapVolume maps vr read-only (volume.Map) unless DisableMmap is set;
// active says whether vr takes appends. If the file system cannot map,
// reads of vr use pread, silently; any other failure is logged at Warn and
// reads use pread too. Call it before vr is published in the volume table
// (or in Open, before readers exist).
func (s *Store) mapVolume(vr *volRef, active bool) {
	if s.cfg.DisableMmap || vr.v.Mapped() {
		return
	}
	if err := vr.v.Map(s.mapLen(vr, active)); err != nil && !errors.Is(err, errors.ErrUnsupported) {
		s.log.Warn("cannot map volume; reading it with pread", "volume", vr.v.ID(), "err", err)
	}
}

// checkFailed names blob h in err, met reading its needle: a failed check
// (volume.ErrCorrupt) wraps ErrCorrupt, which quarantines the copy; any
// other error (an I/O error: a disk that may well answer the next read)
// is returned as a read error, and the copy is left alone. Quarantining on
// an I/O error deleted the only copy of an R=1 file on a transient EIO
// (found by internal/sim's disk faults).
func checkFailed(h *Hash, err error) error {
	switch {
	case errors.Is(err, ErrCorrupt):
		return err
	case errors.Is(err, volume.ErrCorrupt):
		return fmt.Errorf("blob %s: %w: %w", h.String(), ErrCorrupt, err)
	}
	return fmt.Errorf("blob %s: read: %w", h.String(), err)
}

// acquire returns a reference to volume id, or nil if it is gone or retired.
func (s *Store) acquire(id uint32) *volRef {
	vr := (*s.vols.Load())[id]
	if vr == nil {
		return nil
	}
	vr.refs.Add(1)
	if vr.retired.Load() {
		vr.release()
		return nil
	}
	return vr
}

// lookupRef finds h and returns its location, a held reference to its
// volume (release it) and whether the needle was verified, or ErrNotFound.
// It checks the needle's header; a bad one quarantines the copy. scratch
// holds at least HeaderSize bytes.
func (s *Store) lookupRef(h *Hash, scratch []byte) (loc, *volRef, bool, error) {
	for try := 0; try < maxRetries; try++ {
		c, n, verified := s.idx.lookupVerified(h)
		raced := false
		for i, l := range c[:n] {
			vr := s.acquire(l.vol)
			if vr == nil {
				raced = true
				continue
			}
			match, err := vr.v.ReadMapped(l.offset(), (*[32]byte)(h), nil, 0)
			if err == volume.ErrNotMapped {
				var hd volume.Header
				hd, err = vr.v.ReadHeader(l.offset(), scratch)
				match = err == nil && hd.Hash == *h
			}
			if err != nil {
				err = s.readFailed(vr, l, h, err)
				vr.release()
				return loc{}, nil, false, checkFailed(h, err)
			}
			if match {
				return l, vr, verified&(1<<i) != 0, nil
			}
			vr.release() // a different blob sharing the 72-bit prefix
		}
		if !raced {
			break
		}
	}
	return loc{}, nil, false, ErrNotFound
}

// Has reports whether h is stored. It reads the needle header (one pread)
// to rule out a hash-prefix collision; I/O errors report false. A copy
// whose append still waits for its fsync counts: see HasDurable.
func (s *Store) Has(h Hash) bool {
	_, err := s.Size(h)
	return err == nil
}

// HasDurable reports whether h is stored durably: like Has, but a copy
// whose append still waits for its group-commit fsync is waited for, and
// does not count if that fsync fails. A peer that drops its own copy on
// this node's word (a repair hand-off) must not count a copy that a crash
// can still undo. It blocks at most one fsync.
func (s *Store) HasDurable(h Hash) bool {
	if s.closed.Load() {
		return false
	}
	var scratch [volume.HeaderSize]byte
	s.mu.Lock()
	s.trimPending()
	_, ok := s.findVerified(&h, scratch[:])
	wait := s.pendingPut(h)
	s.mu.Unlock()
	if !ok {
		return false
	}
	return wait == 0 || s.waitDurable(wait) == nil
}

// pendingPut returns the sequence number of the last append of h still
// waiting for its fsync (0: none). Must hold s.mu.
func (s *Store) pendingPut(h Hash) uint64 {
	var seq uint64
	for _, op := range s.pending {
		if op.kind == opPut && op.h == h {
			seq = op.seq
		}
	}
	return seq
}

// Size returns the length of blob h, or ErrNotFound. One pread of the header.
func (s *Store) Size(h Hash) (int64, error) {
	if s.closed.Load() {
		return 0, ErrClosed
	}
	bp := s.getBuf()
	defer s.bufs.Put(bp)
	l, vr, _, err := s.lookupRef(&h, *bp)
	if err != nil {
		return 0, err
	}
	vr.release()
	return int64(l.n), nil
}

// ReadAt reads len(p) bytes of blob h starting at off, like io.ReaderAt: it
// returns n < len(p) with io.EOF when the blob ends first. The first read of
// a needle since Open checks it whole (header and CRC, see "Verified reads"
// in the package documentation); later reads check the needle header's
// magic and full hash (the index matches on a hash prefix). If the volume
// is memory-mapped (see Config.DisableMmap) the header is checked and the
// data copied straight from the map into p: no system call. Otherwise, if
// header+off+len(p) <= 64 KiB, it is one pread into a pooled buffer (the
// header is checked in the same read) and a copy; larger reads are a header
// pread and a data pread straight into p. It does not allocate. Errors:
// ErrNotFound, ErrClosed, ErrCorrupt (the copy failed a check and was
// quarantined: the error wraps ErrNotFound too, and nothing was copied
// into p), I/O errors.
func (s *Store) ReadAt(h Hash, p []byte, off int64) (int, error) {
	if s.closed.Load() {
		return 0, ErrClosed
	}
	if off < 0 {
		return 0, fmt.Errorf("blob %s: negative offset %d", h, off)
	}
	for try := 0; try < maxRetries; try++ {
		c, nc, verified := s.idx.lookupVerified(&h)
		raced := false
		for i, l := range c[:nc] {
			vr := s.acquire(l.vol)
			if vr == nil {
				raced = true
				continue
			}
			if verified&(1<<i) == 0 {
				match, err := s.verify(vr, l, &h)
				if err != nil {
					vr.release()
					return 0, err
				}
				if !match {
					vr.release()
					continue
				}
			}
			n, match, err := s.readFrom(vr, l, &h, p, off)
			if match && err != nil {
				err = s.readFailed(vr, l, &h, err)
			}
			vr.release()
			if match {
				return n, err
			}
		}
		if !raced {
			break
		}
	}
	return 0, ErrNotFound
}

// readFrom serves ReadAt from one candidate location, through the volume's
// memory map if it has one, else with pread; match is false if the needle
// there belongs to another hash. The caller holds a reference on vr.
func (s *Store) readFrom(vr *volRef, l loc, h *Hash, p []byte, off int64) (n int, match bool, err error) {
	size := int64(l.n)
	want := int64(len(p))
	if off >= size {
		want = 0
	} else if off+want > size {
		want = size - off
	}
	base := l.offset()
	dataOff := min(off, size) // past the end: check the header, read nothing
	match, err = vr.v.ReadMapped(base, (*[32]byte)(h), p[:want], dataOff)
	switch {
	case err == volume.ErrNotMapped:
		return s.preadFrom(vr, l, h, p, off, want)
	case err != nil:
		return 0, true, checkFailed(h, err)
	case !match:
		return 0, false, nil
	}
	if off >= size || want < int64(len(p)) {
		return int(want), true, io.EOF
	}
	return int(want), true, nil
}

// preadFrom is readFrom without a memory map; want is len(p) clipped to the
// blob's end.
func (s *Store) preadFrom(vr *volRef, l loc, h *Hash, p []byte, off, want int64) (n int, match bool, err error) {
	size := int64(l.n)
	base := l.offset()
	bp := s.getBuf()
	defer s.bufs.Put(bp)
	buf := *bp
	if volume.HeaderSize+off+want <= int64(len(buf)) {
		total := volume.HeaderSize + off + want
		if off >= size {
			total = volume.HeaderSize
		}
		if _, err := vr.v.ReadAt(buf[:total], base); err != nil {
			return 0, true, fmt.Errorf("blob %s: read: %w", h.String(), err)
		}
		hd, err := volume.DecodeHeader(buf)
		if err != nil {
			return 0, true, fmt.Errorf("blob %s: %w: %w", h.String(), ErrCorrupt, err)
		}
		if hd.Hash != *h {
			return 0, false, nil
		}
		if off >= size {
			return 0, true, io.EOF
		}
		n = copy(p, buf[volume.HeaderSize+off:total])
	} else {
		hd, err := vr.v.ReadHeader(base, buf)
		if err != nil {
			return 0, true, checkFailed(h, err)
		}
		if hd.Hash != *h {
			return 0, false, nil
		}
		if off >= size {
			return 0, true, io.EOF
		}
		n, err = vr.v.ReadData(base, p[:want], off)
		if err != nil {
			return n, true, fmt.Errorf("blob %s: read: %w", h.String(), err)
		}
	}
	if int64(n) < int64(len(p)) {
		return n, true, io.EOF
	}
	return n, true, nil
}

// Get appends the whole blob h to dst[:len(dst)] and returns the result. The
// needle is read with one pread (into dst's spare capacity when it has room
// for the header and data, so a pre-sized dst avoids allocation) and its
// CRC is checked: a mismatch quarantines the copy and returns an error
// wrapping ErrCorrupt and ErrNotFound.
func (s *Store) Get(h Hash, dst []byte) ([]byte, error) {
	if s.closed.Load() {
		return dst, ErrClosed
	}
	for try := 0; try < maxRetries; try++ {
		c, nc := s.idx.lookup(&h)
		raced := false
		for _, l := range c[:nc] {
			vr := s.acquire(l.vol)
			if vr == nil {
				raced = true
				continue
			}
			hd, data, err := vr.v.ReadNeedle(l.offset(), int(l.n), dst[len(dst):cap(dst)])
			if err == nil && hd.Hash == h {
				s.idx.markVerified(&h, l)
			}
			if err != nil {
				err = s.readFailed(vr, l, &h, err)
			}
			vr.release()
			if err != nil {
				if !errors.Is(err, ErrCorrupt) {
					err = fmt.Errorf("blob %s: %w", h, err)
				}
				return dst, err
			}
			if hd.Hash != h {
				continue
			}
			return append(dst, data...), nil // memmove: data may alias dst's tail
		}
		if !raced {
			break
		}
	}
	return dst, ErrNotFound
}

// Locate returns the open file holding blob h, the file offset of its data
// and its length, for zero-copy reads (sendfile). The volume stays open (and
// is not removed by compaction) until release is called, which the caller
// must do exactly once. The file must not be closed or written. One pread of
// the header; the first Locate or read of a needle since Open also checks
// it whole (see "Verified reads" in the package documentation), so the
// bytes handed out passed their CRC. Errors: ErrNotFound, ErrClosed,
// ErrCorrupt (the copy was quarantined; the error wraps ErrNotFound too).
func (s *Store) Locate(h Hash) (f vfs.File, off, n int64, release func(), err error) {
	if s.closed.Load() {
		return nil, 0, 0, nil, ErrClosed
	}
	bp := s.getBuf()
	l, vr, verified, err := s.lookupRef(&h, *bp)
	s.bufs.Put(bp)
	if err == nil && !verified {
		// The header named h: the needle is h's, so match is true.
		if _, err = s.verify(vr, l, &h); err != nil {
			vr.release()
		}
	}
	if err != nil {
		return nil, 0, 0, nil, err
	}
	var once sync.Once
	return vr.v.File(), volume.DataOffset(l.offset()), int64(l.n), func() { once.Do(vr.release) }, nil
}

// Ref is a reader's hold on a volume, returned by MappedData: until
// Release the volume stays open and mapped (compaction and Close leave it
// for the last holder to close). The zero Ref holds nothing.
type Ref struct{ vr *volRef }

// Release lets the volume go. Call it exactly once per Ref from MappedData
// (a copy of a Ref is the same hold), after the last use of the bytes.
func (r Ref) Release() {
	if r.vr != nil {
		r.vr.release()
	}
}

// MappedData lends bytes [off, off+n) of blob h's data (n > 0) as a slice
// of its volume's read-only memory map, without copying them, for a caller
// that hands them to a system call (the fast path's sendmsg of a response:
// the kernel copies them from the page cache into the socket). The needle
// header (magic, full hash, length) is checked as ReadAt checks it, and
// the last byte of the range is read under the fault guard, so a volume
// truncated under the map is not lent. The first lend or read of a needle
// since Open checks it whole first (see "Verified reads" in the package
// documentation): bytes that fail their CRC are never lent, and the copy
// is quarantined. The volume is held until the
// caller calls ref.Release, exactly once; b must not be used after that,
// nor written, and a page lost in between (a truncation, a disk error) is
// an EFAULT to a system call but a fault to Go code that reads b. It
// allocates nothing.
//
// ok is false, and nothing is held, when the bytes cannot be lent: the
// blob is not stored here, the volume is not mapped or the range is not
// all below its mapped end, the header or the CRC does not check, the
// store is closed. The caller then reads with ReadAt, which reports any
// error.
func (s *Store) MappedData(h Hash, off, n int64) (b []byte, ref Ref, ok bool) {
	if s.closed.Load() || off < 0 || n <= 0 {
		return nil, Ref{}, false
	}
	for try := 0; try < maxRetries; try++ {
		c, nc, verified := s.idx.lookupVerified(&h)
		raced := false
		for i, l := range c[:nc] {
			vr := s.acquire(l.vol)
			if vr == nil {
				raced = true
				continue
			}
			if off+n > int64(l.n) {
				vr.release()
				continue // past the blob's end, or another blob's sharing the key
			}
			if verified&(1<<i) == 0 {
				match, err := s.verify(vr, l, &h)
				if err != nil {
					vr.release()
					return nil, Ref{}, false // quarantined: ReadAt tells
				}
				if !match {
					vr.release()
					continue
				}
			}
			b, match, err := vr.v.MappedData(l.offset(), (*[32]byte)(&h), off, n)
			if match && err == nil {
				return b, Ref{vr: vr}, true
			}
			if err != nil && err != volume.ErrNotMapped {
				s.readFailed(vr, l, &h, err)
			}
			vr.release()
			if match || err != nil {
				return nil, Ref{}, false // corrupt, not mapped: ReadAt tells
			}
		}
		if !raced {
			break
		}
	}
	return nil, Ref{}, false
}

// Resident reports whether bytes [off, off+n) of blob h's data are in
// the page cache, seen through its volume's memory map (vfs.Resident):
// a caller about to send them with a system call that may otherwise wait
// for the disk can then make it without handing its thread's scheduler
// slot off. False when unknown (no map, not stored here, n <= 0). A
// snapshot: a page may be evicted right after.
func (s *Store) Resident(h Hash, off, n int64) bool {
	b, ref, ok := s.MappedData(h, off, n)
	if !ok {
		return false
	}
	r := vfs.Resident(b)
	ref.Release()
	return r
}

// checkWritable returns ErrClosed or ErrReadOnly. Must hold s.mu.
func (s *Store) checkWritable() error {
	if s.closed.Load() {
		return ErrClosed
	}
	if s.readOnly.Load() {
		s.syncMu.Lock()
		cause := s.failErr
		s.syncMu.Unlock()
		return fmt.Errorf("%w (cause: %v)", ErrReadOnly, cause)
	}
	return nil
}

// checkSpace fails with ErrNoSpace if appending n bytes would leave less than
// MinFreeBytes free. Statfs is consulted every spaceRecheck appends, or at
// once when the cached estimate runs low. Must hold s.mu.
func (s *Store) checkSpace(n int64) error {
	if s.cfg.MinFreeBytes < 0 {
		return nil
	}
	if s.spaceChecks <= 0 || s.freeEst-n < s.cfg.MinFreeBytes {
		free, _, err := s.fs.Statfs(s.cfg.Dir)
		if err != nil {
			return fmt.Errorf("blob: statfs %s: %w", s.cfg.Dir, err)
		}
		s.freeEst = int64(min(free, 1<<62))
		s.spaceChecks = spaceRecheck
	}
	if s.freeEst-n < s.cfg.MinFreeBytes {
		s.spaceChecks = 0
		return fmt.Errorf("%w: %d bytes free, %d needed plus a reserve of %d", ErrNoSpace, s.freeEst, n, s.cfg.MinFreeBytes)
	}
	s.spaceChecks--
	s.freeEst -= n
	return nil
}

// ensureRoom rolls to a new volume if the active one cannot take need more
// bytes: the old volume is fsynced (sealing it) and the new one created
// durably. Must hold s.mu.
func (s *Store) ensureRoom(need int64) error {
	a := s.active.Load()
	size := a.v.Size()
	if size == volume.SuperblockSize || size+need <= s.cfg.MaxVolumeSize {
		return nil
	}
	if err := s.syncVolume(a.v); err != nil {
		return s.failLocked(err)
	}
	s.markSynced(s.appendSeq.Load())
	if _, err := s.newVolume(); err != nil {
		if errors.Is(err, syscall.ENOSPC) {
			s.spaceChecks = 0
			return fmt.Errorf("%w: %w", ErrNoSpace, err)
		}
		return s.failLocked(err)
	}
	return nil
}

// appendFailed classifies a failed append. Must hold s.mu.
func (s *Store) appendFailed(err error) error {
	if errors.Is(err, syscall.ENOSPC) && !errors.Is(err, volume.ErrBroken) {
		s.spaceChecks = 0 // the volume undid the partial append; stay writable
		return fmt.Errorf("%w: %w", ErrNoSpace, err)
	}
	return s.failLocked(err)
}

// failLocked makes the store read-only after a write or fsync failure: it is
// never retried. Appends not yet durable are taken out of the index so no
// unacknowledged blob is reported as stored. Must hold s.mu.
func (s *Store) failLocked(cause error) error {
	s.syncMu.Lock()
	first := !s.failed
	if first {
		s.failed = true
		s.failErr = cause
	}
	synced := s.syncedSeq
	s.syncCond.Broadcast()
	s.syncMu.Unlock()
	if first {
		s.readOnly.Store(true)
		s.log.Error("write or fsync failed; blob store is now read-only", "err", cause)
		for _, op := range s.pending {
			if op.seq > synced && op.kind == opPut {
				if s.idx.remove(&op.h, op.l) {
					if vr := s.volOf(op.l.vol); vr != nil {
						vr.live.Add(-volume.NeedleSize(int(op.l.n)))
					}
				}
			}
		}
		s.pending = nil
	}
	return fmt.Errorf("%w: %w", ErrReadOnly, cause)
}

// markSynced records that every append up to seq is durable.
func (s *Store) markSynced(seq uint64) {
	s.syncMu.Lock()
	if !s.failed && seq > s.syncedSeq {
		s.syncedSeq = seq
		s.synced.Store(seq)
	}
	s.syncCond.Broadcast()
	s.syncMu.Unlock()
}

// trimPending drops pending ops that are durable. Must hold s.mu.
func (s *Store) trimPending() {
	synced := s.synced.Load()
	i := 0
	for i < len(s.pending) && s.pending[i].seq <= synced {
		i++
	}
	if i > 0 {
		s.pending = append(s.pending[:0], s.pending[i:]...)
	}
}

// recordAppend assigns the next sequence number to an append. Must hold s.mu.
func (s *Store) recordAppend(h *Hash, l loc, kind opKind) uint64 {
	seq := s.appendSeq.Add(1)
	s.pending = append(s.pending, pendingOp{h: *h, l: l, seq: seq, kind: kind})
	return seq
}

// waitDurable blocks until the append with sequence seq is durable. The
// first waiter that finds no fsync in flight becomes the leader: it fsyncs
// the active volume on behalf of every append completed before the fsync
// started; the others wait for it (group commit). A failed fsync makes the
// store read-only and every waiter not yet covered gets ErrReadOnly.
func (s *Store) waitDurable(seq uint64) error {
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	for s.syncedSeq < seq {
		if s.failed {
			return fmt.Errorf("%w: %w", ErrReadOnly, s.failErr)
		}
		if s.syncing {
			s.syncCond.Wait()
			continue
		}
		s.syncing = true
		// Load the target before the volume: appends up to target are either
		// in this volume or in an older one that was fsynced when sealed.
		target := s.appendSeq.Load()
		vr := s.active.Load()
		s.syncMu.Unlock()
		err := s.syncVolume(vr.v)
		if err != nil {
			s.mu.Lock()
			s.failLocked(err)
			s.mu.Unlock()
		}
		s.syncMu.Lock()
		s.syncing = false
		if err == nil && !s.failed && target > s.syncedSeq {
			s.syncedSeq = target
			s.synced.Store(target)
		}
		s.syncCond.Broadcast()
	}
	return nil
}

// Put stores data under h and returns once it is durable. It is idempotent:
// if h is already stored it returns nil at once (or once the earlier,
// still pending Put of h is durable). The caller guarantees h == Sum(data).
// Concurrent Puts share fsyncs. Errors: ErrTooLarge, ErrNoSpace (nothing
// was stored; the store stays writable), ErrReadOnly (a write or fsync
// failed, now or before), ErrClosed.
func (s *Store) Put(h Hash, data []byte) error {
	if len(data) > MaxSize {
		return fmt.Errorf("blob %s: %d bytes: %w", h, len(data), ErrTooLarge)
	}
	var scratch [volume.HeaderSize]byte
	s.mu.Lock()
	if err := s.checkWritable(); err != nil {
		s.mu.Unlock()
		return err
	}
	s.trimPending()
	if _, ok := s.findVerified(&h, scratch[:]); ok {
		wait := s.pendingPut(h)
		s.mu.Unlock()
		if wait == 0 {
			return nil
		}
		return s.waitDurable(wait)
	}
	need := volume.NeedleSize(len(data))
	if err := s.checkSpace(need); err != nil {
		s.mu.Unlock()
		return err
	}
	if err := s.ensureRoom(need); err != nil {
		s.mu.Unlock()
		return err
	}
	a := s.active.Load()
	off, err := a.v.Append(h, data)
	if err != nil {
		err = s.appendFailed(err)
		s.mu.Unlock()
		return err
	}
	l := loc{vol: a.v.ID(), off: uint32(off >> 3), n: uint32(len(data))}
	s.idx.insert(&h, l)
	a.live.Add(need)
	seq := s.recordAppend(&h, l, opPut)
	s.noteAppend(need)
	s.mu.Unlock()
	return s.waitDurable(seq)
}

// PutMany stores blob data[i] under hs[i] for every i, like that many
// concurrent Puts, and returns one error per blob (nil: durable) once all
// are durable or failed. The blobs not yet stored are appended under one
// lock with one write per volume they land in (normally one), then share
// one group-committed fsync. The caller guarantees hs[i] == Sum(data[i]).
// Errors per blob are Put's; ErrNoSpace fails only the blobs that did not
// fit.
func (s *Store) PutMany(hs []Hash, data [][]byte) []error {
	errs := make([]error, len(hs))
	seqs := make([]uint64, len(hs)) // > 0: wait for this append
	var scratch [volume.HeaderSize]byte

	// A run of new blobs to append to the active volume with one write.
	var (
		runIdx  []int
		runH    [][32]byte
		runData [][]byte
		runNeed int64
		offs    []int64
	)
	flush := func() {
		if len(runIdx) == 0 {
			return
		}
		a := s.active.Load()
		offs = slices.Grow(offs[:0], len(runIdx))[:len(runIdx)]
		if err := a.v.AppendMany(runH, runData, offs); err != nil {
			err = s.appendFailed(err)
			for _, i := range runIdx {
				errs[i] = err
			}
		} else {
			for j, i := range runIdx {
				h := hs[i]
				need := volume.NeedleSize(len(data[i]))
				l := loc{vol: a.v.ID(), off: uint32(offs[j] >> 3), n: uint32(len(data[i]))}
				s.idx.insert(&h, l)
				a.live.Add(need)
				seqs[i] = s.recordAppend(&h, l, opPut)
				s.noteAppend(need)
			}
		}
		runIdx, runH, runData, runNeed = runIdx[:0], runH[:0], runData[:0], 0
	}

	s.mu.Lock()
	s.trimPending()
	var inRun map[Hash]int // blob → its index, for duplicates inside the batch
	var dups [][2]int      // (i, j): blob i is blob j's duplicate
	for i := range hs {
		h := hs[i]
		if len(data[i]) > MaxSize {
			errs[i] = fmt.Errorf("blob %s: %d bytes: %w", h, len(data[i]), ErrTooLarge)
			continue
		}
		if err := s.checkWritable(); err != nil {
			errs[i] = err
			continue
		}
		if j, ok := inRun[h]; ok { // same blob earlier in this batch
			dups = append(dups, [2]int{i, j}) // answered like j, below
			continue
		}
		if _, ok := s.findVerified(&h, scratch[:]); ok {
			seqs[i] = s.pendingPut(h)
			continue
		}
		need := volume.NeedleSize(len(data[i]))
		if err := s.checkSpace(need); err != nil {
			errs[i] = err
			continue
		}
		if len(runIdx) > 0 {
			a := s.active.Load()
			if a.v.Size()+runNeed+need > s.cfg.MaxVolumeSize {
				flush() // this blob goes to a new volume
			}
		}
		if len(runIdx) == 0 {
			if err := s.ensureRoom(need); err != nil {
				errs[i] = err
				continue
			}
		}
		if inRun == nil {
			inRun = make(map[Hash]int, len(hs))
		}
		inRun[h] = i
		runIdx = append(runIdx, i)
		runH = append(runH, h)
		runData = append(runData, data[i])
		runNeed += need
	}
	flush()
	s.mu.Unlock()
	for _, d := range dups {
		errs[d[0]], seqs[d[0]] = errs[d[1]], seqs[d[1]]
	}

	var last uint64
	for _, q := range seqs {
		last = max(last, q)
	}
	if last == 0 {
		return errs
	}
	if err := s.waitDurable(last); err != nil {
		// Appends made durable before the failure keep their nil.
		synced := s.synced.Load()
		for i, q := range seqs {
			if q > synced && errs[i] == nil {
				errs[i] = err
			}
		}
	}
	return errs
}

// Delete removes blob h: it appends a tombstone, takes h out of the index
// and returns once the tombstone is durable. Deleting an absent blob is a
// no-op returning nil. Errors: ErrNoSpace, ErrReadOnly, ErrClosed.
func (s *Store) Delete(h Hash) error {
	var scratch [volume.HeaderSize]byte
	s.mu.Lock()
	if err := s.checkWritable(); err != nil {
		s.mu.Unlock()
		return err
	}
	s.trimPending()
	l, ok := s.findVerified(&h, scratch[:])
	if !ok {
		s.mu.Unlock()
		return nil
	}
	seq, err := s.appendTombLocked(&h, l)
	if err != nil {
		s.mu.Unlock()
		return err
	}
	s.idx.remove(&h, l)
	s.volOf(l.vol).live.Add(-volume.NeedleSize(int(l.n)))
	s.mu.Unlock()
	return s.waitDurable(seq)
}

// appendTombLocked appends a tombstone for h, whose needle at l is (or
// was, until the caller's removal) in the index, and returns its sequence
// for waitDurable. A checkpoint walking the index keeps the entry (its
// tombstone is in the tail it does not cover). Must hold s.mu.
func (s *Store) appendTombLocked(h *Hash, l loc) (uint64, error) {
	// No MinFreeBytes check: deleting must work on a full disk.
	need := volume.NeedleSize(0)
	if err := s.ensureRoom(need); err != nil {
		return 0, err
	}
	a := s.active.Load()
	off, err := a.v.AppendTombstone(*h)
	if err != nil {
		return 0, s.appendFailed(err)
	}
	if s.ckActive {
		key, sb := splitHash(h)
		s.ckRemoved = append(s.ckRemoved, ckEntry{key: key, sb: sb, l: l})
	}
	a.tomb.Add(need)
	seq := s.recordAppend(h, loc{vol: a.v.ID(), off: uint32(off >> 3)}, opTomb)
	s.noteAppend(need)
	return seq, nil
}

// Range calls fn for every stored blob until fn returns false. It reads each
// needle's header to recover the full hash (one pread per blob), so it is
// meant for inventories, not hot paths. Blobs added or deleted during the
// walk may or may not be seen. It holds off compaction while it runs.
func (s *Store) Range(fn func(h Hash, size int64) bool) {
	if s.closed.Load() {
		return
	}
	s.compactMu.Lock()
	defer s.compactMu.Unlock()
	var buf [volume.HeaderSize]byte
	s.idx.forEach(func(key uint64, sb uint8, l loc) bool {
		vr := s.acquire(l.vol)
		if vr == nil {
			return true
		}
		hd, err := vr.v.ReadHeader(l.offset(), buf[:])
		vr.release()
		if err != nil || hd.Tombstone() {
			return true
		}
		return fn(Hash(hd.Hash), int64(l.n))
	})
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
