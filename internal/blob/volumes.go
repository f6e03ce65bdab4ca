package blob

import (
	"errors"
	"sync"
	"sync/atomic"

	"github.com/cairn-fs/cairn/internal/volume"
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
	// sealed is when the volume stopped taking appends (Unix ns; 0 while
	// it is the active volume): the age of its youngest data, which
	// compaction's cost-benefit weighs (compact.go). For a volume found
	// sealed at Open it is the file's modification time.
	sealed atomic.Int64
	s      *Store
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
	if old := s.active.Load(); old != nil {
		old.sealed.Store(s.cfg.Clock.Now().UnixNano())
	}
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
