package blob

import (
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-fs/cairn/internal/vfs"
	"github.com/cairn-fs/cairn/internal/volume"
)

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
	now := s.cfg.Clock.Now()
	for _, id := range ids {
		vr := vols[id]
		active := vr == s.active.Load()
		s.mapVolume(vr, active)
		if !active {
			vr.sealed.Store(sealedAt(s.fs, vr.v.Path(), now).UnixNano())
		}
	}
	s.log.Info("blob store opened", "dir", s.cfg.Dir, "volumes", len(*s.vols.Load()),
		"blobs", s.idx.len(), "checkpoint", ck != nil, "scanned_needles", scanned,
		"scanned_bytes", s.scannedBytes, "corrupt_regions", s.corruptRegions)
	return nil
}

// sealedAt estimates when a volume found sealed at Open took its last
// append: its file's modification time, or now if that cannot be read or
// lies ahead (a clock set back), so an unknown age never hurries a
// compaction.
func sealedAt(fs vfs.FS, path string, now time.Time) time.Time {
	fi, err := fs.Stat(path)
	if err != nil || fi.ModTime().IsZero() || fi.ModTime().After(now) {
		return now
	}
	return fi.ModTime()
}
