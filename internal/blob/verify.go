package blob

import (
	"errors"
	"fmt"

	"github.com/cairn-fs/cairn/internal/volume"
)

// verify checks the whole needle of h at l (volume.Verify: header, length,
// CRC over header and data) and records the result: a needle that passes
// is marked verified in the index, so later reads skip the check until the
// store is reopened; one that fails is quarantined. match is false, with a
// nil error, when the needle belongs to another hash sharing h's 72-bit
// prefix. The caller holds a reference on vr. Errors: ErrCorrupt (wrapping
// ErrNotFound too: the copy is gone), I/O errors (the copy is left alone).
func (s *Store) verify(vr *volRef, l loc, h *Hash) (match bool, err error) {
	bp := s.getBuf()
	match, err = vr.v.Verify(l.offset(), int(l.n), (*[32]byte)(h), *bp)
	s.bufs.Put(bp)
	switch {
	case err != nil:
		return true, s.readFailed(vr, l, h, err)
	case match:
		s.idx.markVerified(h, l)
	}
	return match, nil
}

// readFailed handles err, met while reading the needle of h at l: a
// failed check (volume.ErrCorrupt: a bad header, length or CRC, or a page
// of the map lost to a truncation or a disk error) quarantines the copy
// and returns an error wrapping ErrCorrupt and ErrNotFound; any other
// error (io.EOF, an I/O error) is returned as it is.
func (s *Store) readFailed(vr *volRef, l loc, h *Hash, err error) error {
	if !errors.Is(err, volume.ErrCorrupt) && !errors.Is(err, ErrCorrupt) {
		return err
	}
	key, sb := splitHash(h)
	s.quarantine(vr, key, sb, l, "read", err)
	if errors.Is(err, ErrCorrupt) { // named already
		return fmt.Errorf("%w (copy quarantined: %w here)", err, ErrNotFound)
	}
	return fmt.Errorf("blob %s: %w: %w (copy quarantined: %w here)", h.String(), ErrCorrupt, err, ErrNotFound)
}

// quarantine takes the copy at l (index key and shard key, sb) out of
// service after it failed a check (cause; source names who found it, for
// the log): it leaves the index at once, so no reader is handed its bytes
// again, Has is false and a replica Put of the same blob stores a good
// copy; its volume is left alone by compaction (it does not scan to its
// end). The removal is made durable with a tombstone for the hash the
// needle's header names, when the header decodes and names a blob of this
// key (an undecodable header cannot name what it held: a background
// checkpoint then records the index without it) and the store is
// writable. It counts the copy, logs it at Error and calls
// Config.OnCorrupt. A copy already removed (by a concurrent reader, a
// Delete, compaction) is left as it is. It blocks until the tombstone is
// durable; a failure there is logged (the store turns read-only) and the
// copy stays out of the index until the store is closed.
func (s *Store) quarantine(vr *volRef, key uint64, sb uint8, l loc, source string, cause error) {
	var scratch [volume.HeaderSize]byte
	var named *Hash
	if hd, err := vr.v.ReadHeader(l.offset(), scratch[:]); err == nil && !hd.Tombstone() {
		if k, b := splitHash((*Hash)(&hd.Hash)); k == key && b == sb {
			named = (*Hash)(&hd.Hash)
		}
	}
	s.mu.Lock()
	if !s.idx.removeKey(key, sb, l) {
		s.mu.Unlock()
		return
	}
	vr.live.Add(-volume.NeedleSize(int(l.n)))
	vr.damaged.Store(true)
	s.corrupt.Add(1)
	var seq uint64
	var terr error
	if named != nil {
		if terr = s.checkWritable(); terr == nil {
			seq, terr = s.appendTombLocked(named, l)
		}
	}
	if seq == 0 {
		select {
		case s.ckTrigger <- struct{}{}: // record the index without the copy
		default:
		}
	}
	s.mu.Unlock()
	var h Hash
	if named != nil {
		h = *named
		if s.cfg.OnDelete != nil {
			s.cfg.OnDelete(h)
		}
	}
	if seq != 0 {
		terr = s.waitDurable(seq)
	}
	s.log.Error("corrupt blob copy quarantined: it fails its checksum and will not be served; a cluster repairs it from a replica",
		"hash", h.String(), "key", fmt.Sprintf("%016x", key), "volume", l.vol, "offset", l.offset(), "size", l.n,
		"found_by", source, "cause", cause, "tombstone", seq != 0 && terr == nil, "tombstone_err", terr)
	if s.cfg.OnCorrupt != nil {
		s.cfg.OnCorrupt(h)
	}
}
