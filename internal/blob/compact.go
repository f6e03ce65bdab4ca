package blob

import (
	"fmt"
	"sort"

	"github.com/cairn-fs/cairn/internal/volume"
)

// garbage returns the bytes of vr that hold neither live needles nor
// tombstones.
func garbage(vr *volRef) int64 {
	return vr.v.Size() - volume.SuperblockSize - vr.live.Load() - vr.tomb.Load()
}

// Compact runs one compaction pass: every sealed (not active) volume whose
// garbage exceeds CompactGarbageRatio of its size is rewritten. Its live
// needles are appended to the active volume (durably, with group commit),
// then each index entry that still points at the old location is switched
// to the copy, and the old volume is retired: readers that hold it keep
// reading, and its file is closed and removed when the last one lets go.
// Tombstones are carried over while an older volume exists (it might hold
// the blob they delete) unless the hash has been stored again since. Reads and writes continue during compaction; only
// one Compact or Range runs at a time. It returns the number of volumes
// compacted. Errors: ErrReadOnly, ErrNoSpace, ErrClosed, ErrCorrupt (a
// sealed volume does not scan to its end; it is left alone).
func (s *Store) Compact() (int, error) {
	s.compactMu.Lock()
	defer s.compactMu.Unlock()
	if s.closed.Load() {
		return 0, ErrClosed
	}
	// Read the active volume and the table together under s.mu: a roll in
	// between could otherwise make the new active volume a candidate.
	s.mu.Lock()
	active := s.active.Load()
	vols := *s.vols.Load()
	s.mu.Unlock()
	var cands []*volRef
	for _, vr := range vols {
		if vr == active || vr.damaged {
			continue // a damaged volume does not scan to its end; keep it for inspection
		}
		if size := vr.v.Size(); float64(garbage(vr)) > s.cfg.CompactGarbageRatio*float64(size) {
			cands = append(cands, vr)
		}
	}
	sort.Slice(cands, func(i, j int) bool { return cands[i].v.ID() < cands[j].v.ID() })
	done := 0
	for _, vr := range cands {
		if err := s.compactOne(vr); err != nil {
			return done, err
		}
		done++
		s.compactions.Add(1)
	}
	return done, nil
}

type move struct {
	h        Hash
	old, new loc
}

func (s *Store) compactOne(vr *volRef) error {
	id := vr.v.ID()
	hasOlder := false
	for oid := range *s.vols.Load() {
		if oid < id {
			hasOlder = true
		}
	}
	var moves []move
	var lastSeq uint64
	var copied, dropped int64
	end, err := vr.v.Scan(volume.SuperblockSize, func(off int64, hd volume.Header, data []byte) error {
		h := Hash(hd.Hash)
		old := loc{vol: id, off: uint32(off >> 3), n: hd.Len}
		s.mu.Lock()
		defer s.mu.Unlock()
		if err := s.checkWritable(); err != nil {
			return err
		}
		if hd.Tombstone() {
			// Carry a tombstone forward only while an older volume might hold
			// the blob it deletes, and only if the blob is not live again:
			// moved after a later Put of the same hash it would delete it
			// on the next recovery. (A live hash needs no tombstone: its
			// newer needle supersedes the older copies.)
			var scratch [volume.HeaderSize]byte
			if !hasOlder {
				dropped++
				return nil
			}
			if _, live := s.findVerified(&h, scratch[:]); live {
				dropped++
				return nil
			}
		} else if !s.idx.has(&h, old) {
			dropped++
			return nil // deleted or superseded
		}
		need := volume.NeedleSize(len(data))
		if err := s.checkSpace(need); err != nil {
			return err
		}
		if err := s.ensureRoom(need); err != nil {
			return err
		}
		a := s.active.Load()
		var noff int64
		var err error
		if hd.Tombstone() {
			noff, err = a.v.AppendTombstone(h)
		} else {
			noff, err = a.v.Append(h, data)
		}
		if err != nil {
			return s.appendFailed(err)
		}
		nl := loc{vol: a.v.ID(), off: uint32(noff >> 3), n: hd.Len}
		if hd.Tombstone() {
			a.tomb.Add(need)
			lastSeq = s.recordAppend(&h, nl, opTomb)
		} else {
			lastSeq = s.recordAppend(&h, nl, opCopy)
			moves = append(moves, move{h: h, old: old, new: nl})
		}
		s.noteAppend(need)
		copied++
		return nil
	})
	if err != nil {
		return fmt.Errorf("compact volume %d: %w", id, err)
	}
	if end != vr.v.Size() {
		return fmt.Errorf("compact volume %d: %w: valid needles end at %d of %d bytes", id, ErrCorrupt, end, vr.v.Size())
	}
	if lastSeq != 0 {
		if err := s.waitDurable(lastSeq); err != nil {
			return fmt.Errorf("compact volume %d: %w", id, err)
		}
	}
	s.mu.Lock()
	for _, m := range moves {
		if s.idx.replace(&m.h, m.old, m.new) {
			sz := volume.NeedleSize(int(m.new.n))
			vr.live.Add(-sz)
			s.volOf(m.new.vol).live.Add(sz)
		}
	}
	s.setVols(func(mp map[uint32]*volRef) { delete(mp, id) })
	s.mu.Unlock()
	vr.doomed.Store(true)
	vr.retired.Store(true)
	if vr.refs.Load() == 0 {
		vr.finalize()
	}
	s.log.Info("compacted volume", "volume", id, "size", vr.v.Size(), "copied", copied, "dropped", dropped)
	return nil
}
