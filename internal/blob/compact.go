package blob

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/cairn-fs/cairn/internal/volume"
)

// compactMargin is free space a compaction keeps clear of: a volume is
// compacted only if the bytes it has to copy fit in the free space reported
// by Statfs less this margin (which also covers a new volume's superblock).
const compactMargin = 1 << 20

// errSkipped reports that a volume was left for a later pass because its
// live needles do not fit in the free space.
var errSkipped = errors.New("not enough free space to copy its live needles")

// garbage returns the bytes of vr that hold neither live needles nor
// tombstones.
func garbage(vr *volRef) int64 {
	return vr.v.Size() - volume.SuperblockSize - vr.live.Load() - vr.tomb.Load()
}

// copyBytes is an upper bound on the bytes compacting vr appends: its live
// needles, plus its tombstones if an older volume exists (otherwise they
// are dropped). Live bytes of a sealed volume only go down.
func copyBytes(vr *volRef, hasOlder bool) int64 {
	n := vr.live.Load()
	if hasOlder {
		n += vr.tomb.Load()
	}
	return n
}

// benefitCost is the LFS cleaner's ratio of benefit to cost for compacting
// a volume of which a fraction u must be copied, age after its youngest
// data was written: (1−u)·age/(1+u). The space freed is 1−u of the
// volume, and it stays free for longer the older the data left in it
// (data that has lived long is likely to live on, young data to die
// soon); the cost is reading the volume (1) and writing the copies (u).
func benefitCost(u float64, age time.Duration) float64 {
	return (1 - u) * max(age, 0).Seconds() / (1 + u)
}

// Compact runs one compaction pass. Which sealed (not active) volumes it
// rewrites is the LFS cleaner's cost-benefit policy:
//
//   - a volume with no live needle left (only garbage and tombstones) is
//     compacted at once: that frees the whole file, and costs a walk of its
//     needle headers (volume.ScanHeaders: the tombstones are copied, the
//     dead blobs' data is not read, so bit rot in it does not matter; a
//     needle found live after all sends it to the full scan);
//   - a volume whose garbage exceeds CompactGarbageRatio (r) of its size is
//     a candidate, compacted once its benefitCost (1−u)·age/(1+u) (u the
//     fraction of it to copy, age the time since it was sealed) reaches
//     that of a volume at the ratio aged CompactAge (A): r·A/(2−r). A
//     volume just past the ratio waits A; one with more garbage less (at
//     r = 0.5, one 90% garbage waits 0.41·A), and one whose live needles
//     are about to die is left until they have, and then costs nothing to
//     copy. So no sealed volume older than A holds more than r of garbage;
//   - when the garbage the candidates hold exceeds the free space
//     (Statfs), age is not waited for: every candidate is compacted.
//
// A negative CompactAge compacts every candidate at once. Candidates go in
// the order of their benefitCost, highest first (an entirely dead volume
// first).
//
// Each compacted volume's live needles are appended to the active volume
// (durably, with group commit), then each index entry that still points
// at the old location is switched to the copy, and the old volume is
// retired: readers that hold it keep reading, and its file is closed and
// removed when the last one lets go. Tombstones are carried over while an
// older volume exists (it might hold the blob they delete) unless the hash
// has been stored again since. Reads and writes continue during
// compaction; only one Compact or Range runs at a time.
//
// Compaction is what frees space, so like Delete it may use the
// MinFreeBytes reserve: its copies are not refused for going below it. A
// volume whose bytes to copy do not fit in the free space (Statfs) less a
// 1 MiB margin is skipped this pass, logged at Warn. If a copy fails
// (ENOSPC from the disk, a read error, a volume that does not scan to its
// end) the volume's compaction is abandoned: the old volume and the index
// entries pointing into it are left as they were, and the copies already
// appended are truncated away unless other appends have followed them
// (they are then garbage, reclaimed by a later pass).
//
// A volume that does not scan to its end (a needle fails its CRC) is left
// alone from then on, logged at Error, and the pass goes on.
//
// It returns the number of volumes compacted. Errors: ErrReadOnly,
// ErrNoSpace (the pass stops), ErrClosed.
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
	cands := s.compactCandidates(active, vols, s.cfg.Clock.Now())
	done := 0
	defer func() {
		if done > 0 {
			// Space was freed: let the next Put consult Statfs.
			s.mu.Lock()
			s.spaceChecks = 0
			s.mu.Unlock()
		}
	}()
	for _, vr := range cands {
		err := s.compactOne(vr)
		if errors.Is(err, errSkipped) {
			continue
		}
		if errors.Is(err, ErrCorrupt) {
			// A needle in it fails its CRC: the volume is left as it is,
			// like one found damaged at Open, and the pass goes on. Reads
			// and the scrub quarantine the copies in it that fail.
			vr.damaged.Store(true)
			s.log.Error("volume does not scan to its end; compaction leaves it alone", "volume", vr.v.ID(), "err", err)
			continue
		}
		if err != nil {
			return done, err
		}
		done++
		s.compactions.Add(1)
	}
	return done, nil
}

// compactCandidates returns the sealed volumes of vols that Compact should
// rewrite now, in order (see Compact for the policy).
func (s *Store) compactCandidates(active *volRef, vols map[uint32]*volRef, now time.Time) []*volRef {
	minID := ^uint32(0)
	for id := range vols {
		minID = min(minID, id)
	}
	type cand struct {
		vr    *volRef
		score float64
	}
	var cands, waiting []cand
	var held int64 // garbage of the candidates that wait
	r, age := s.cfg.CompactGarbageRatio, s.cfg.CompactAge
	due := benefitCost(1-r, age)
	for _, vr := range vols {
		if vr == active || vr.damaged.Load() {
			continue // a damaged volume does not scan to its end; keep it for inspection
		}
		size, g := vr.v.Size(), garbage(vr)
		switch {
		case vr.live.Load() == 0 && g > 0:
			cands = append(cands, cand{vr, math.Inf(1)})
		case float64(g) > r*float64(size):
			u := float64(copyBytes(vr, vr.v.ID() > minID)) / float64(size)
			c := cand{vr, benefitCost(u, now.Sub(time.Unix(0, vr.sealed.Load())))}
			if age < 0 || c.score >= due {
				cands = append(cands, c)
			} else {
				waiting = append(waiting, c)
				held += g
			}
		}
	}
	if len(waiting) > 0 {
		// Space is short when the garbage held back exceeds what is free:
		// then nothing waits.
		free, _, err := s.fs.Statfs(s.cfg.Dir)
		if err != nil || held > int64(min(free, 1<<62)) {
			cands = append(cands, waiting...)
		}
	}
	sort.Slice(cands, func(i, j int) bool {
		a, b := cands[i], cands[j]
		if a.score != b.score {
			return a.score > b.score
		}
		return a.vr.v.ID() < b.vr.v.ID()
	})
	out := make([]*volRef, len(cands))
	for i, c := range cands {
		out[i] = c.vr
	}
	return out
}

type move struct {
	h        Hash
	old, new loc
}

// copies records the appends one compactOne made, so that an abandoned
// compaction can take them back.
type copies struct {
	n         uint64 // appends made
	firstSeq  uint64
	lastSeq   uint64
	firstVol  uint32
	firstOff  int64
	tombBytes int64 // tombstone bytes added to the volume's count
}

func (s *Store) compactOne(vr *volRef) error {
	id := vr.v.ID()
	hasOlder := false
	for oid := range *s.vols.Load() {
		if oid < id {
			hasOlder = true
		}
	}
	if need := copyBytes(vr, hasOlder); need > 0 {
		free, _, err := s.fs.Statfs(s.cfg.Dir)
		if err != nil {
			return fmt.Errorf("compact volume %d: statfs %s: %w", id, s.cfg.Dir, err)
		}
		if avail := int64(min(free, 1<<62)) - compactMargin; need > avail {
			s.log.Warn("not enough free space to compact volume; skipped this pass",
				"volume", id, "copy_bytes", need, "free", free, "margin", compactMargin)
			return fmt.Errorf("compact volume %d: %w", id, errSkipped)
		}
	}
	// A volume with no live needle left has nothing to copy but its
	// tombstones: walk it by its headers alone (volume.ScanHeaders), not
	// reading the data of its dead blobs. Should a needle of it still be
	// live after all, or the walk not reach the end, the full scan
	// decides.
	if vr.live.Load() == 0 {
		err := s.compactScan(vr, hasOlder, true)
		if !errors.Is(err, errNeedsData) {
			return err
		}
	}
	return s.compactScan(vr, hasOlder, false)
}

// errNeedsData: a header-only walk of a volume met a live needle, or did
// not reach the volume's end; the volume is compacted with a full scan.
var errNeedsData = errors.New("needs a scan of the data")

// compactScan is compactOne's copy of vr: through volume.Scan, or with
// headersOnly through volume.ScanHeaders, which gives live needles nil
// data: such a needle still live, or a walk that ends short, then fails
// with errNeedsData after its copies were abandoned.
func (s *Store) compactScan(vr *volRef, hasOlder, headersOnly bool) error {
	id := vr.v.ID()
	var moves []move
	var cp copies
	var copied, dropped int64
	scan := vr.v.Scan
	if headersOnly {
		scan = vr.v.ScanHeaders
	}
	end, err := scan(volume.SuperblockSize, func(off int64, hd volume.Header, data []byte) error {
		h := Hash(hd.Hash)
		old := loc{vol: id, off: uint32(off >> 3), n: hd.Len}
		s.mu.Lock()
		defer s.mu.Unlock()
		if err := s.checkWritable(); err != nil {
			return err
		}
		if data == nil {
			if s.idx.has(&h, old) {
				return errNeedsData
			}
			dropped++
			return nil
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
		// No MinFreeBytes check: compaction is what frees space, so it may
		// use the reserve (the free space was checked above). The bytes are
		// still charged to the estimate Put checks against.
		need := volume.NeedleSize(len(data))
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
		s.freeEst -= need
		nl := loc{vol: a.v.ID(), off: uint32(noff >> 3), n: hd.Len}
		var seq uint64
		if hd.Tombstone() {
			a.tomb.Add(need)
			seq = s.recordAppend(&h, nl, opTomb)
		} else {
			seq = s.recordAppend(&h, nl, opCopy)
			moves = append(moves, move{h: h, old: old, new: nl})
		}
		if cp.n == 0 {
			cp.firstSeq, cp.firstVol, cp.firstOff = seq, nl.vol, noff
		}
		if hd.Tombstone() && nl.vol == cp.firstVol {
			cp.tombBytes += need
		}
		cp.n++
		cp.lastSeq = seq
		s.noteAppend(need)
		copied++
		return nil
	})
	if err == nil && end != vr.v.Size() {
		err = fmt.Errorf("%w: valid needles end at %d of %d bytes", ErrCorrupt, end, vr.v.Size())
		if headersOnly {
			err = fmt.Errorf("%w: headers end at %d of %d bytes", errNeedsData, end, vr.v.Size())
		}
	}
	if err != nil {
		s.abandonCopies(id, &cp, err)
		if errors.Is(err, errNeedsData) {
			return err
		}
		return fmt.Errorf("compact volume %d: %w", id, err)
	}
	if cp.lastSeq != 0 {
		if err := s.waitDurable(cp.lastSeq); err != nil {
			// The store is read-only now; nothing more is written.
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

// abandonCopies gives up the compaction of volume id after cause: the index
// still points into the old volume, which stays. The copies already
// appended are truncated away if they are the last appends to the active
// volume (nothing else was appended after the first of them); otherwise
// they stay as garbage. A read-only store is left alone.
func (s *Store) abandonCopies(id uint32, cp *copies, cause error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	undone := false
	if cp.n > 0 && s.checkWritable() == nil {
		a := s.active.Load()
		if a.v.ID() == cp.firstVol && s.appendSeq.Load() == cp.lastSeq && cp.lastSeq-cp.firstSeq+1 == cp.n {
			if err := a.v.Truncate(cp.firstOff); err != nil {
				s.log.Warn("undo copies of abandoned compaction", "volume", a.v.ID(), "err", err)
			} else {
				undone = true
				a.tomb.Add(-cp.tombBytes)
				s.spaceChecks = 0
				i := len(s.pending)
				for i > 0 && s.pending[i-1].seq >= cp.firstSeq {
					i--
				}
				s.pending = s.pending[:i]
			}
		}
	}
	s.log.Warn("compaction of volume abandoned; it stays as it is",
		"volume", id, "copies", cp.n, "copies_truncated", undone, "err", cause)
}
