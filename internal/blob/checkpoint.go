package blob

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"

	"github.com/cairn-fs/cairn/internal/volume"
)

// Index checkpoint file layout (little-endian), written by Close and in the
// background every Config.CheckpointInterval appended bytes:
//
//	header, 24 bytes:
//	  0  4 magic "CRNI"
//	  4  4 version (1)
//	  8  4 number of volume records V
//	 12  4 reserved
//	 16  8 number of entry records E
//	V volume records, 24 bytes each:
//	  0  4 volume id
//	  4  4 reserved
//	  8  8 valid offset: the volume is durable and fully indexed up to here
//	       (the entries are the index as it was when the volumes had these sizes)
//	 16  8 tombstone bytes in the volume
//	E entry records, 24 bytes each:
//	  0  8 key: hash bytes 0..8 as a little-endian uint64
//	  8  4 volume id
//	 12  4 needle offset / 8
//	 16  4 data length
//	 20  1 hash byte 8 (the index shard)
//	 21  3 reserved
//	trailer: 4 bytes CRC32C of everything before it.
//
// It is written to index.ckpt.tmp, fsynced, renamed over index.ckpt, and the
// directory fsynced. A checkpoint that fails its CRC or does not match the
// volumes on disk (a volume shorter than its valid offset) is ignored and
// every volume is rescanned. Entries of a volume that no longer exists are
// dropped: compaction copied their live needles into a newer volume's tail,
// beyond its checkpointed offset, where the tail scan finds them.
const (
	checkpointName    = "index.ckpt"
	checkpointVersion = 1
	ckHeaderSize      = 24
	ckVolSize         = 24
	ckEntrySize       = 24
)

var (
	ckMagic      = [4]byte{'C', 'R', 'N', 'I'}
	castagnoli   = crc32.MakeTable(crc32.Castagnoli)
	errCkCorrupt = errors.New("checkpoint corrupt")
)

type ckVol struct {
	validOff int64
	tomb     int64
}

type ckEntry struct {
	key uint64
	sb  uint8
	l   loc
}

type checkpoint struct {
	vols    map[uint32]ckVol
	entries []ckEntry
	maxID   uint32
}

// snapVolsLocked returns, for every volume, the offset up to which it is
// fully indexed (its size, or where a recovery that gave up stopped) and its
// tombstone bytes. Must hold s.mu: appends and tombstone counts then stand
// still.
func (s *Store) snapVolsLocked() map[uint32]ckVol {
	vols := *s.vols.Load()
	m := make(map[uint32]ckVol, len(vols))
	for id, vr := range vols {
		end := vr.v.Size()
		if vr.scanEnd > 0 {
			end = vr.scanEnd
		}
		m[id] = ckVol{validOff: end, tomb: vr.tomb.Load()}
	}
	return m
}

// writeCheckpoint writes the index checkpoint of the current state. Must
// hold s.mu with every append durable (Close).
func (s *Store) writeCheckpoint() error {
	vols := s.snapVolsLocked()
	return s.writeCheckpointFile(vols, s.idx.len(), func(emit func(ckEntry)) {
		s.idx.forEach(func(key uint64, sb uint8, l loc) bool {
			emit(ckEntry{key: key, sb: sb, l: l})
			return true
		})
	})
}

// checkpoint writes a checkpoint while reads and writes go on; the
// background checkpointer calls it. It describes the store as it was at
// one instant T0, taken under s.mu: the volumes' sizes then (made durable
// before anything is written, so only fsynced offsets are recorded) and the
// index then. The index is walked without s.mu, so the walk is corrected to
// T0: entries at or past a volume's T0 size, or in volumes created since,
// are dropped (recovery finds them in the tails), and entries Delete removed
// during the walk are put back (their tombstones lie in the tails too).
// Compaction, which moves entries between volumes, is held off by compactMu.
// It returns the bytes of volume files the checkpoint covers.
func (s *Store) checkpoint() (int64, error) {
	s.compactMu.Lock()
	defer s.compactMu.Unlock()
	s.mu.Lock()
	if s.closed.Load() || s.readOnly.Load() {
		s.mu.Unlock()
		return 0, nil
	}
	vols := s.snapVolsLocked()
	seq := s.appendSeq.Load()
	s.sinceCk = 0
	s.ckActive = true
	s.ckRemoved = nil
	s.mu.Unlock()
	endWalk := func() []ckEntry {
		s.mu.Lock()
		defer s.mu.Unlock()
		removed := s.ckRemoved
		s.ckActive, s.ckRemoved = false, nil
		return removed
	}
	// Every append up to seq is in the sizes taken above (sealed volumes
	// were fsynced when they were sealed); make them durable.
	if err := s.waitDurable(seq); err != nil {
		endWalk()
		return 0, fmt.Errorf("write checkpoint: %w", err)
	}
	at := func(l loc) bool {
		cv, ok := vols[l.vol]
		return ok && l.offset() < cv.validOff
	}
	entries := make([]ckEntry, 0, s.idx.len())
	s.idx.forEach(func(key uint64, sb uint8, l loc) bool {
		if at(l) {
			entries = append(entries, ckEntry{key: key, sb: sb, l: l})
		}
		return true
	})
	if removed := endWalk(); len(removed) > 0 {
		gone := make(map[ckEntry]bool, len(removed))
		for _, e := range removed {
			gone[e] = true
		}
		kept := entries[:0]
		for _, e := range entries {
			if !gone[e] {
				kept = append(kept, e)
			}
		}
		entries = kept
		for _, e := range removed {
			if at(e.l) {
				entries = append(entries, e)
			}
		}
	}
	err := s.writeCheckpointFile(vols, int64(len(entries)), func(emit func(ckEntry)) {
		for _, e := range entries {
			emit(e)
		}
	})
	if err != nil {
		return 0, err
	}
	var covered int64
	for _, cv := range vols {
		covered += cv.validOff
	}
	return covered, nil
}

// writeCheckpointFile encodes and durably writes a checkpoint of vols and
// the entries each emits (about n of them).
func (s *Store) writeCheckpointFile(vols map[uint32]ckVol, n int64, each func(emit func(ckEntry))) error {
	buf := make([]byte, ckHeaderSize, ckHeaderSize+len(vols)*ckVolSize+int(n)*ckEntrySize+4)
	copy(buf[0:4], ckMagic[:])
	binary.LittleEndian.PutUint32(buf[4:8], checkpointVersion)
	binary.LittleEndian.PutUint32(buf[8:12], uint32(len(vols)))
	for id, cv := range vols {
		var r [ckVolSize]byte
		binary.LittleEndian.PutUint32(r[0:4], id)
		binary.LittleEndian.PutUint64(r[8:16], uint64(cv.validOff))
		binary.LittleEndian.PutUint64(r[16:24], uint64(cv.tomb))
		buf = append(buf, r[:]...)
	}
	var count uint64
	each(func(e ckEntry) {
		var r [ckEntrySize]byte
		binary.LittleEndian.PutUint64(r[0:8], e.key)
		binary.LittleEndian.PutUint32(r[8:12], e.l.vol)
		binary.LittleEndian.PutUint32(r[12:16], e.l.off)
		binary.LittleEndian.PutUint32(r[16:20], e.l.n)
		r[20] = e.sb
		buf = append(buf, r[:]...)
		count++
	})
	binary.LittleEndian.PutUint64(buf[16:24], count)
	buf = binary.LittleEndian.AppendUint32(buf, crc32.Checksum(buf, castagnoli))

	if err := s.writeFileDurable(checkpointName, buf); err != nil {
		return fmt.Errorf("write checkpoint: %w", err)
	}
	s.checkpoints.Add(1)
	return nil
}

// writeFileDurable replaces file name in Dir with b durably: it writes
// name.tmp (removed at Open if a crash leaves it), fsyncs it, renames it
// over name and fsyncs the directory.
func (s *Store) writeFileDurable(name string, b []byte) error {
	path := filepath.Join(s.cfg.Dir, name)
	tmp := path + ".tmp"
	f, err := s.fs.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(b, 0); err != nil {
		f.Close()
		return err
	}
	err = f.Sync()
	s.fsyncs.Add(1)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := s.fs.Rename(tmp, path); err != nil {
		return err
	}
	s.fsyncs.Add(1)
	return s.fs.SyncDir(s.cfg.Dir)
}

// loadCheckpoint reads and checks the checkpoint against the open volumes.
// It returns (nil, nil) if there is none, and an error if it must be ignored.
func (s *Store) loadCheckpoint(vols map[uint32]*volRef) (*checkpoint, error) {
	f, err := s.fs.OpenFile(filepath.Join(s.cfg.Dir, checkpointName), os.O_RDONLY, 0)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil, err
	}
	if size < ckHeaderSize+4 || size > 1<<40 {
		return nil, fmt.Errorf("%w: size %d", errCkCorrupt, size)
	}
	buf := make([]byte, size)
	if _, err := f.ReadAt(buf, 0); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	body := buf[:size-4]
	if crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(buf[size-4:]) {
		return nil, fmt.Errorf("%w: CRC mismatch", errCkCorrupt)
	}
	if [4]byte(body[0:4]) != ckMagic || binary.LittleEndian.Uint32(body[4:8]) != checkpointVersion {
		return nil, fmt.Errorf("%w: bad magic or version", errCkCorrupt)
	}
	nv := int64(binary.LittleEndian.Uint32(body[8:12]))
	ne := int64(binary.LittleEndian.Uint64(body[16:24]))
	if ckHeaderSize+nv*ckVolSize+ne*ckEntrySize != int64(len(body)) {
		return nil, fmt.Errorf("%w: record counts do not match size", errCkCorrupt)
	}
	ck := &checkpoint{vols: make(map[uint32]ckVol, nv), entries: make([]ckEntry, 0, ne)}
	p := body[ckHeaderSize:]
	for i := int64(0); i < nv; i++ {
		r := p[:ckVolSize]
		p = p[ckVolSize:]
		id := binary.LittleEndian.Uint32(r[0:4])
		cv := ckVol{validOff: int64(binary.LittleEndian.Uint64(r[8:16])), tomb: int64(binary.LittleEndian.Uint64(r[16:24]))}
		ck.maxID = max(ck.maxID, id)
		vr := vols[id]
		if vr == nil {
			continue // compacted away since
		}
		if cv.validOff < volume.SuperblockSize || cv.validOff%8 != 0 || cv.validOff > vr.v.Size() {
			return nil, fmt.Errorf("%w: volume %d valid to %d but is %d bytes", errCkCorrupt, id, cv.validOff, vr.v.Size())
		}
		ck.vols[id] = cv
	}
	for i := int64(0); i < ne; i++ {
		r := p[:ckEntrySize]
		p = p[ckEntrySize:]
		e := ckEntry{
			key: binary.LittleEndian.Uint64(r[0:8]),
			l:   loc{vol: binary.LittleEndian.Uint32(r[8:12]), off: binary.LittleEndian.Uint32(r[12:16]), n: binary.LittleEndian.Uint32(r[16:20])},
			sb:  r[20],
		}
		if e.l.vol == 0 {
			return nil, fmt.Errorf("%w: entry with volume 0", errCkCorrupt)
		}
		if _, ok := vols[e.l.vol]; ok {
			if _, ok := ck.vols[e.l.vol]; !ok {
				return nil, fmt.Errorf("%w: entry in unlisted volume %d", errCkCorrupt, e.l.vol)
			}
		}
		ck.entries = append(ck.entries, e)
	}
	return ck, nil
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
