package blob

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/cairn-fs/cairn/internal/volume"
)

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
