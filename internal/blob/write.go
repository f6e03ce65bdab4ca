package blob

import (
	"errors"
	"fmt"
	"slices"
	"syscall"

	"github.com/cairn-fs/cairn/internal/volume"
)

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
	if s.cfg.OnDelete != nil {
		s.cfg.OnDelete(h)
	}
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
