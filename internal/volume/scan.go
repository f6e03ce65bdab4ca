package volume

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
)

// ScanFunc receives each valid needle found by Scan. data aliases a buffer
// that is reused after the call returns. A non-nil error stops the scan and
// is returned by Scan.
type ScanFunc func(off int64, h Header, data []byte) error

// Scan walks the needles from offset from (a needle boundary >= SuperblockSize)
// up to Size(), verifying each needle's CRC, calling fn for each valid one.
// It stops at the first invalid or incomplete needle (see the recovery rule
// in the package documentation) and returns the offset just past the last
// valid needle. It reads sequentially through a 1 MiB buffer. The error is
// non-nil only for read errors and errors from fn. Recovery uses
// ScanRecover, which goes on past mid-volume corruption.
func (v *Volume) Scan(from int64, fn ScanFunc) (int64, error) {
	if from < SuperblockSize {
		from = SuperblockSize
	}
	size := v.size.Load()
	if from >= size {
		return from, nil
	}
	r := bufio.NewReaderSize(io.NewSectionReader(v.f, from, size-from), 1<<20)
	var hdr [HeaderSize]byte
	var data []byte
	off := from
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				return off, nil
			}
			return off, fmt.Errorf("scan volume %d at %d: %w", v.id, off, err)
		}
		h, err := DecodeHeader(hdr[:])
		if err != nil {
			return off, nil
		}
		need := NeedleSize(int(h.Len))
		if off+need > size {
			return off, nil
		}
		rest := int(need) - HeaderSize
		if cap(data) < rest {
			data = make([]byte, rest)
		}
		data = data[:rest]
		if _, err := io.ReadFull(r, data); err != nil {
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				return off, nil
			}
			return off, fmt.Errorf("scan volume %d at %d: %w", v.id, off, err)
		}
		if !CheckCRC(hdr[:], data[:h.Len]) {
			return off, nil
		}
		if fn != nil {
			if err := fn(off, h, data[:h.Len]); err != nil {
				return off, err
			}
		}
		off += need
	}
}

// ScanHeaders walks the needles from offset from (a needle boundary >=
// SuperblockSize) up to Size() by their headers alone, one pread of
// HeaderSize bytes each, calling fn for each: with nil data for a live
// blob's needle, whose data is neither read nor CRC-checked, and with empty
// data for a tombstone, whose CRC (it covers the whole needle) is checked.
// It stops at the first needle whose header is invalid, that does not fit
// in the file, or a tombstone whose CRC fails, and returns the offset just
// past the last needle walked. It costs a read of the headers only, where
// Scan reads every byte: for callers that only need the tombstones and the
// hashes of a volume whose blobs are all dead (compaction of an entirely
// dead volume). The error is non-nil only for read errors and errors from
// fn.
func (v *Volume) ScanHeaders(from int64, fn ScanFunc) (int64, error) {
	if from < SuperblockSize {
		from = SuperblockSize
	}
	size := v.size.Load()
	var hdr [HeaderSize]byte
	off := from
	for off+HeaderSize <= size {
		if _, err := v.f.ReadAt(hdr[:], off); err != nil {
			return off, fmt.Errorf("scan volume %d headers at %d: %w", v.id, off, err)
		}
		h, err := DecodeHeader(hdr[:])
		if err != nil {
			return off, nil
		}
		need := NeedleSize(int(h.Len))
		if off+need > size {
			return off, nil
		}
		var data []byte
		if h.Tombstone() {
			if !CheckCRC(hdr[:], nil) {
				return off, nil
			}
			data = []byte{}
		}
		if fn != nil {
			if err := fn(off, h, data); err != nil {
				return off, err
			}
		}
		off += need
	}
	return off, nil
}

// Region is the byte range [Start, End) of a volume file.
type Region struct{ Start, End int64 }

// Recovery is the result of ScanRecover.
type Recovery struct {
	// End is the offset just past the last valid needle found. Unless
	// GaveUp, the bytes from End to the end of the file hold no valid needle:
	// they are a torn tail, and recovery truncates the file at End.
	End int64
	// Corrupt lists the invalid regions that were followed by a valid needle
	// (mid-volume corruption), in file order. The scan skipped them; the
	// needles in them are lost, the ones after them were passed to fn.
	Corrupt []Region
	// GaveUp reports that the search for a valid needle after End ran out of
	// its budget (see ScanRecover). The bytes after End are then neither
	// indexed nor known to be a torn tail, and must not be truncated.
	GaveUp bool
}

// AcceptFunc is an extra check on a needle found by the resynchronizing
// search of ScanRecover, after its header and CRC were found valid. data
// aliases a scratch buffer. The blob store checks that a live needle's data
// hashes to its hash, so that a needle image stored inside another blob's
// data is less likely to be mistaken for the next real needle.
type AcceptFunc func(off int64, h Header, data []byte) bool

// resyncSlack is added to the CRC-check budget of ScanRecover, see there.
const resyncSlack = 64 << 20

// ScanRecover is Scan that survives mid-volume corruption. When it meets an
// invalid needle at offset X it searches forward, at 8-byte aligned offsets,
// for the first offset after X holding a needle whose header and CRC are
// valid (and which accept, if not nil, accepts). If it finds
// one at Y, [X, Y) is recorded in Corrupt and the scan continues at Y;
// otherwise the scan ends at X, a torn tail. fn is called for every valid
// needle in file order, as by Scan.
//
// A limit: if the damaged needle's data holds the image of a valid needle
// (a blob that is itself a piece of a volume file), the image is taken for
// a needle. accept narrows this: the blob store only takes a live needle
// whose data hashes to its hash, which makes the image harmless (it names
// its own content); a tombstone image could still delete a blob.
//
// Cost: the search reads the bytes after X once, sequentially, and CRC-checks
// the candidate offsets that carry a needle magic. The candidate checks of
// one call read at most 2*(Size()-from)+64 MiB in all; past that the call
// stops with GaveUp set (only adversarial data, such as blobs full of needle
// headers, gets there). Errors are read errors and errors from fn.
func (v *Volume) ScanRecover(from int64, fn ScanFunc, accept AcceptFunc) (Recovery, error) {
	if from < SuperblockSize {
		from = SuperblockSize
	}
	size := v.size.Load()
	budget := 2*max(size-from, 0) + resyncSlack
	var rec Recovery
	off := from
	for {
		end, err := v.Scan(off, fn)
		rec.End = end
		if err != nil || end >= size {
			return rec, err
		}
		next, found, err := v.resync(end, size, accept, &budget)
		if err != nil {
			if errors.Is(err, errBudget) {
				rec.GaveUp = true
				return rec, nil
			}
			return rec, err
		}
		if !found {
			return rec, nil
		}
		rec.Corrupt = append(rec.Corrupt, Region{end, next})
		off = next
	}
}

var errBudget = errors.New("volume: resync budget exhausted")

// resync finds the first offset after the invalid needle at x that holds a
// valid needle; see ScanRecover.
func (v *Volume) resync(x, size int64, accept AcceptFunc, budget *int64) (int64, bool, error) {
	// The header of the needle at x may decode, but it cannot be trusted:
	// the CRC failed, and it covers the header too. Jumping to where its
	// length points would skip real needles whenever the length is the
	// damaged part, so the search starts right after x and takes the first
	// valid needle.
	var scratch []byte
	const window = 1 << 20 // a multiple of 8
	buf := make([]byte, window)
	for base := x + 8; base+HeaderSize <= size; base += window {
		n, err := v.f.ReadAt(buf[:min(int64(window), size-base)], base)
		if err != nil && !errors.Is(err, io.EOF) {
			return 0, false, fmt.Errorf("resync volume %d at %d: %w", v.id, base, err)
		}
		for i := 0; i+4 <= n; i += 8 {
			if [4]byte(buf[i:i+4]) != needleMagic {
				continue
			}
			ok, err := v.validAt(base+int64(i), size, accept, budget, &scratch)
			if err != nil {
				return 0, false, err
			}
			if ok {
				return base + int64(i), true, nil
			}
		}
	}
	return 0, false, nil
}

// validAt reports whether a whole valid needle that accept accepts lies at
// off, below size. It charges the bytes it CRC-checks to budget.
func (v *Volume) validAt(off, size int64, accept AcceptFunc, budget *int64, scratch *[]byte) (bool, error) {
	if off+HeaderSize > size {
		return false, nil
	}
	var hdr [HeaderSize]byte
	if _, err := v.f.ReadAt(hdr[:], off); err != nil {
		return false, fmt.Errorf("resync volume %d at %d: %w", v.id, off, err)
	}
	h, err := DecodeHeader(hdr[:])
	if err != nil || off+NeedleSize(int(h.Len)) > size {
		return false, nil
	}
	total := HeaderSize + int64(h.Len)
	if *budget < total {
		return false, errBudget
	}
	*budget -= total
	if int64(cap(*scratch)) < total {
		*scratch = make([]byte, total)
	}
	b := (*scratch)[:total]
	if _, err := v.f.ReadAt(b, off); err != nil {
		return false, fmt.Errorf("resync volume %d at %d: %w", v.id, off, err)
	}
	if !CheckCRC(b[:HeaderSize], b[HeaderSize:]) {
		return false, nil
	}
	return accept == nil || accept(off, h, b[HeaderSize:]), nil
}

// Verify checks the whole needle at off against its checksum: the header
// (magic, version, flags, and that its hash is *want and its length n, the
// length an index recorded), then the CRC32C over header and data. match is
// false, with a nil error, when the needle belongs to another hash (want
// != nil). A needle that fails a check is an error wrapping ErrCorrupt;
// other errors are I/O errors. It reads through the memory map when the
// volume has one covering the needle (under the fault guard, which turns a
// page lost to a truncation or a disk read error into ErrCorrupt), else
// with pread through scratch (len >= HeaderSize; the data is read in
// len(scratch) pieces, so a 64 KiB scratch checks a 4 MiB needle in 64
// preads). It does not allocate unless it fails. Safe for concurrent use
// as ReadMapped is.
func (v *Volume) Verify(off int64, n int, want *[32]byte, scratch []byte) (match bool, err error) {
	if m := v.mapped.Load(); m != nil {
		end := off + HeaderSize + int64(n)
		if off >= SuperblockSize && end <= int64(len(m.b)) && end <= v.size.Load() {
			var good bool
			match, err = v.guardedNeedle(m.b, off, want, 0, int64(n), func(data []byte) {
				good = checkNeedle(m.b[off:off+HeaderSize], data, n)
			})
			if match && err == nil && !good {
				err = fmt.Errorf("needle %d@%d: %w: length or CRC mismatch", v.id, off, ErrCorrupt)
			}
			return match, err
		}
	}
	hd, err := v.ReadHeader(off, scratch)
	if err != nil {
		return true, err
	}
	if want != nil && hd.Hash != *want {
		return false, nil
	}
	if int(hd.Len) != n {
		return true, fmt.Errorf("needle %d@%d: %w: length %d, expected %d", v.id, off, ErrCorrupt, hd.Len, n)
	}
	crc := crc32.Update(0, castagnoli, scratch[:44])
	sum := binary.LittleEndian.Uint32(scratch[44:48])
	for done := 0; done < n; {
		k := min(n-done, len(scratch))
		if _, err := v.ReadData(off, scratch[:k], int64(done)); err != nil {
			if errors.Is(err, io.EOF) {
				return true, fmt.Errorf("needle %d@%d: %w: truncated", v.id, off, ErrCorrupt)
			}
			return true, fmt.Errorf("read needle %d@%d: %w", v.id, off, err)
		}
		crc = crc32.Update(crc, castagnoli, scratch[:k])
		done += k
	}
	if crc != sum {
		return true, fmt.Errorf("needle %d@%d: %w: CRC mismatch", v.id, off, ErrCorrupt)
	}
	return true, nil
}
