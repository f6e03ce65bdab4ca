package blob

import (
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/cairn-fs/cairn/internal/vfs"
	"github.com/cairn-fs/cairn/internal/volume"
)

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
				if s.cfg.OnRead != nil && (err == nil || err == io.EOF) {
					s.cfg.OnRead(h)
				}
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
			if s.cfg.OnRead != nil {
				s.cfg.OnRead(h)
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
	if s.cfg.OnRead != nil {
		s.cfg.OnRead(h)
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
	b, ref, ok = s.mappedData(&h, off, n)
	if ok && s.cfg.OnRead != nil {
		s.cfg.OnRead(h)
	}
	return b, ref, ok
}

// mappedData is MappedData without OnRead (Resident's look).
func (s *Store) mappedData(hp *Hash, off, n int64) (b []byte, ref Ref, ok bool) {
	h := *hp
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
	b, ref, ok := s.mappedData(&h, off, n)
	if !ok {
		return false
	}
	r := vfs.Resident(b)
	ref.Release()
	return r
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
