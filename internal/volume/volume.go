package volume

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"
	"sync/atomic"

	"github.com/cairn-fs/cairn/internal/vfs"
)

// Format constants; see the package documentation for the byte layouts.
const (
	SuperblockSize = 16
	HeaderSize     = 48
	Version        = 1
	// MaxDataLen bounds a needle's data length; longer lengths are invalid.
	MaxDataLen = 64 << 20
	// MaxVolumeSize is the largest volume file: offsets/8 must fit in a uint32.
	MaxVolumeSize = 32 << 30
)

// Needle flags.
const (
	FlagLive      uint8 = 0
	FlagTombstone uint8 = 1
)

var (
	superMagic  = [4]byte{'C', 'R', 'N', 'V'}
	needleMagic = [4]byte{'C', 'R', 'N', 'N'}
	castagnoli  = crc32.MakeTable(crc32.Castagnoli)
)

// Errors returned by this package; test them with errors.Is.
var (
	ErrCorrupt    = errors.New("volume: corrupt needle")
	ErrSuperblock = errors.New("volume: bad superblock")
	ErrTooLarge   = errors.New("volume: data longer than MaxDataLen")
	ErrFull       = errors.New("volume: volume would exceed MaxVolumeSize")
	ErrBroken     = errors.New("volume: failed append could not be undone; volume is read-only")
	ErrClosed     = errors.New("volume: closed")
	// ErrNotMapped is returned by ReadMapped when the read cannot be served
	// from a memory map (the volume is not mapped, or the bytes lie outside
	// the map or past Size()); the caller reads with ReadAt instead.
	ErrNotMapped = errors.New("volume: read not served from a memory map")
)

// Header is a decoded needle header.
type Header struct {
	Hash  [32]byte
	Flags uint8
	Len   uint32 // data length in bytes
}

// Tombstone reports whether the needle is a tombstone.
func (h Header) Tombstone() bool { return h.Flags == FlagTombstone }

// NeedleSize returns the bytes a needle with n data bytes occupies,
// padding included.
func NeedleSize(n int) int64 { return (int64(HeaderSize) + int64(n) + 7) &^ 7 }

// DataOffset returns the file offset of the data of the needle at off.
func DataOffset(off int64) int64 { return off + HeaderSize }

// AppendNeedle appends the encoded needle (header, data, padding) to dst.
// It is a pure function.
func AppendNeedle(dst []byte, h [32]byte, flags uint8, data []byte) []byte {
	hdr := needleHeader(h, flags, data)
	dst = append(dst, hdr[:]...)
	dst = append(dst, data...)
	return append(dst, padding[:padLen(len(data))]...)
}

// padding is the zeros that pad a needle to 8 bytes (NeedleSize).
var padding [8]byte

// padLen is the padding after n data bytes.
func padLen(n int) int64 { return NeedleSize(n) - HeaderSize - int64(n) }

// needleHeader encodes the header of the needle (h, flags, data), its CRC
// computed over the header's first 44 bytes and data.
func needleHeader(h [32]byte, flags uint8, data []byte) [HeaderSize]byte {
	var hdr [HeaderSize]byte
	copy(hdr[0:4], needleMagic[:])
	hdr[4] = Version
	hdr[5] = flags
	copy(hdr[8:40], h[:])
	binary.LittleEndian.PutUint32(hdr[40:44], uint32(len(data)))
	crc := crc32.Update(0, castagnoli, hdr[:44])
	crc = crc32.Update(crc, castagnoli, data)
	binary.LittleEndian.PutUint32(hdr[44:48], crc)
	return hdr
}

// vectorMin: a needle with at least this much data is written with one
// pwritev of its header, data and padding (vfs.VectorWriter) instead of
// being copied into one buffer first (a 4 MiB blob of a large file: one
// memory pass less on every node that stores it).
const vectorMin = 64 << 10

// writeNeedle writes the needle (h, flags, data) at off: vectored when the
// file can and data is large, else encoded into v.buf first (v.mu held).
func (v *Volume) writeNeedle(h [32]byte, flags uint8, data []byte, off int64) error {
	if vw, ok := v.f.(vfs.VectorWriter); ok && len(data) >= vectorMin {
		hdr := needleHeader(h, flags, data)
		_, err := vw.WriteVAt([][]byte{hdr[:], data, padding[:padLen(len(data))]}, off)
		return err
	}
	v.buf = AppendNeedle(v.buf[:0], h, flags, data)
	_, err := v.f.WriteAt(v.buf, off)
	return err
}

// DecodeHeader decodes and checks the static fields of a needle header (b
// must hold at least HeaderSize bytes). It does not check the CRC, which
// covers the data too; see CheckCRC. Errors wrap ErrCorrupt.
func DecodeHeader(b []byte) (Header, error) {
	var h Header
	if len(b) < HeaderSize {
		return h, fmt.Errorf("%w: short header", ErrCorrupt)
	}
	if [4]byte(b[0:4]) != needleMagic {
		return h, fmt.Errorf("%w: bad magic", ErrCorrupt)
	}
	if b[4] != Version {
		return h, fmt.Errorf("%w: version %d", ErrCorrupt, b[4])
	}
	if b[5] > FlagTombstone {
		return h, fmt.Errorf("%w: flags %#x", ErrCorrupt, b[5])
	}
	if b[6] != 0 || b[7] != 0 {
		return h, fmt.Errorf("%w: reserved bytes set", ErrCorrupt)
	}
	h.Flags = b[5]
	copy(h.Hash[:], b[8:40])
	h.Len = binary.LittleEndian.Uint32(b[40:44])
	if h.Len > MaxDataLen || (h.Flags == FlagTombstone && h.Len != 0) {
		return h, fmt.Errorf("%w: length %d", ErrCorrupt, h.Len)
	}
	return h, nil
}

// CheckCRC reports whether the CRC in hdr (an encoded header) matches hdr
// and data.
func CheckCRC(hdr, data []byte) bool {
	crc := crc32.Update(0, castagnoli, hdr[:44])
	crc = crc32.Update(crc, castagnoli, data)
	return crc == binary.LittleEndian.Uint32(hdr[44:48])
}

func encodeSuperblock(id uint32) []byte {
	b := make([]byte, SuperblockSize)
	copy(b[0:4], superMagic[:])
	b[4] = Version
	binary.LittleEndian.PutUint32(b[8:12], id)
	binary.LittleEndian.PutUint32(b[12:16], crc32.Checksum(b[:12], castagnoli))
	return b
}

// Volume is one open volume file. Appends are serialized internally; reads
// (ReadAt, ReadHeader, ReadNeedle, ReadData, Scan) may run concurrently with
// each other and with appends.
type Volume struct {
	fs   vfs.FS
	f    vfs.File
	path string
	id   uint32

	size atomic.Int64 // end of the last complete needle

	mu     sync.Mutex // serializes appends and truncates
	buf    []byte     // encode buffer, guarded by mu
	broken bool       // guarded by mu
	closed atomic.Bool

	mapped atomic.Pointer[mapping] // set by Map, cleared by Close
}

// mapping is a read-only memory map of the volume file (vfs.Mapper).
type mapping struct {
	b     []byte
	unmap func() error
}

// Create creates a new volume file at path with the given id (> 0): it writes
// the superblock, fsyncs the file and fsyncs the parent directory, so the
// volume exists durably when Create returns. It fails if path exists.
func Create(fs vfs.FS, path string, id uint32) (*Volume, error) {
	if id == 0 {
		return nil, fmt.Errorf("create volume %s: id 0 is reserved", path)
	}
	f, err := fs.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("create volume %d: %w", id, err)
	}
	fail := func(err error) (*Volume, error) {
		f.Close()
		fs.Remove(path)
		return nil, fmt.Errorf("create volume %d: %w", id, err)
	}
	if _, err := f.WriteAt(encodeSuperblock(id), 0); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := fs.SyncDir(filepath.Dir(path)); err != nil {
		return fail(err)
	}
	v := &Volume{fs: fs, f: f, path: path, id: id}
	v.size.Store(SuperblockSize)
	return v, nil
}

// Open opens an existing volume file and checks its superblock against id
// (errors wrap ErrSuperblock). Size() is the file size, which may end in a
// torn needle: run Scan and Truncate before appending.
func Open(fs vfs.FS, path string, id uint32) (*Volume, error) {
	f, err := fs.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("open volume %d: %w", id, err)
	}
	size, err := f.Size()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("open volume %d: %w", id, err)
	}
	var sb [SuperblockSize]byte
	if _, err := f.ReadAt(sb[:], 0); err != nil {
		f.Close()
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("open volume %d: %w: file is %d bytes", id, ErrSuperblock, size)
		}
		return nil, fmt.Errorf("open volume %d: %w", id, err)
	}
	if string(sb[:]) != string(encodeSuperblock(id)) {
		f.Close()
		return nil, fmt.Errorf("open volume %d: %w", id, ErrSuperblock)
	}
	v := &Volume{fs: fs, f: f, path: path, id: id}
	v.size.Store(size)
	return v, nil
}

// ID returns the volume id.
func (v *Volume) ID() uint32 { return v.id }

// Path returns the file path.
func (v *Volume) Path() string { return v.path }

// File returns the underlying file, for zero-copy reads (sendfile) of data at
// DataOffset(off). The caller must not write to it or close it.
func (v *Volume) File() vfs.File { return v.f }

// Size returns the offset at which the next needle will be appended. It is
// safe to call concurrently.
func (v *Volume) Size() int64 { return v.size.Load() }

// Append writes a live needle for (h, data) at the end of the volume with one
// pwrite and returns its offset. It does not fsync. On a write error the
// partial needle is truncated away and the error returned wraps the cause
// (e.g. syscall.ENOSPC); if that truncate fails the volume is broken and
// every later append fails with ErrBroken.
func (v *Volume) Append(h [32]byte, data []byte) (int64, error) {
	return v.append(h, FlagLive, data)
}

// AppendMany appends one live needle per blob (hs[i], data[i]) with a
// single write, in order, and stores each needle's offset in offs (len(offs)
// >= len(hs)). It is all or nothing like Append: on a failed write the
// file is truncated back (or the volume marked broken) and no needle is
// appended. Not durable until Sync.
func (v *Volume) AppendMany(hs [][32]byte, data [][]byte, offs []int64) error {
	for _, d := range data {
		if len(d) > MaxDataLen {
			return ErrTooLarge
		}
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.closed.Load() {
		return ErrClosed
	}
	if v.broken {
		return ErrBroken
	}
	off := v.size.Load()
	var need int64
	for _, d := range data {
		need += NeedleSize(len(d))
	}
	if off+need > MaxVolumeSize {
		return ErrFull
	}
	if len(hs) == 1 {
		offs[0] = off
		if err := v.writeNeedle(hs[0], FlagLive, data[0], off); err != nil {
			if terr := v.f.Truncate(off); terr != nil {
				v.broken = true
				return fmt.Errorf("append to volume %d: %w (undo: %v): %w", v.id, err, terr, ErrBroken)
			}
			return fmt.Errorf("append to volume %d at %d: %w", v.id, off, err)
		}
		v.size.Store(off + need)
		return nil
	}
	buf := v.buf[:0]
	if int64(cap(buf)) < need {
		buf = make([]byte, 0, need) // one allocation, not a growing append
	}
	for i := range hs {
		offs[i] = off + int64(len(buf))
		buf = AppendNeedle(buf, hs[i], FlagLive, data[i])
	}
	v.buf = buf
	if _, err := v.f.WriteAt(buf, off); err != nil {
		if terr := v.f.Truncate(off); terr != nil {
			v.broken = true
			return fmt.Errorf("append to volume %d: %w (undo: %v): %w", v.id, err, terr, ErrBroken)
		}
		return fmt.Errorf("append to volume %d at %d: %w", v.id, off, err)
	}
	if cap(v.buf) > 8<<20 {
		v.buf = nil // do not pin huge buffers
	}
	v.size.Store(off + need)
	return nil
}

// AppendTombstone appends a tombstone needle for h, like Append.
func (v *Volume) AppendTombstone(h [32]byte) (int64, error) {
	return v.append(h, FlagTombstone, nil)
}

func (v *Volume) append(h [32]byte, flags uint8, data []byte) (int64, error) {
	if len(data) > MaxDataLen {
		return 0, ErrTooLarge
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.closed.Load() {
		return 0, ErrClosed
	}
	if v.broken {
		return 0, ErrBroken
	}
	off := v.size.Load()
	need := NeedleSize(len(data))
	if off+need > MaxVolumeSize {
		return 0, ErrFull
	}
	if err := v.writeNeedle(h, flags, data, off); err != nil {
		if terr := v.f.Truncate(off); terr != nil {
			v.broken = true
			return 0, fmt.Errorf("append to volume %d: %w (undo: %v): %w", v.id, err, terr, ErrBroken)
		}
		return 0, fmt.Errorf("append to volume %d at %d: %w", v.id, off, err)
	}
	if cap(v.buf) > 8<<20 {
		v.buf = nil // do not pin huge buffers
	}
	v.size.Store(off + need)
	return off, nil
}

// Sync fsyncs the volume file. It blocks for the fsync; the error is
// returned as is (the caller decides to go read-only).
func (v *Volume) Sync() error {
	if err := v.f.Sync(); err != nil {
		return fmt.Errorf("fsync volume %d: %w", v.id, err)
	}
	return nil
}

// ReadAt reads raw bytes of the volume file at pos with one pread.
func (v *Volume) ReadAt(p []byte, pos int64) (int, error) { return v.f.ReadAt(p, pos) }

// ReadHeader reads and decodes the header of the needle at off, using buf
// (len >= HeaderSize) as scratch to avoid allocation. Errors wrap ErrCorrupt
// for a bad header.
func (v *Volume) ReadHeader(off int64, buf []byte) (Header, error) {
	if _, err := v.f.ReadAt(buf[:HeaderSize], off); err != nil {
		return Header{}, fmt.Errorf("read needle header %d@%d: %w", v.id, off, err)
	}
	h, err := DecodeHeader(buf)
	if err != nil {
		return h, fmt.Errorf("needle %d@%d: %w", v.id, off, err)
	}
	return h, nil
}

// ReadNeedle reads the whole needle at off with one pread into buf (grown if
// its capacity is below NeedleSize(n); n must be the needle's data length,
// as recorded in an index), checks header and CRC, and returns the header and
// the data, which aliases the returned buffer. Errors wrap ErrCorrupt.
func (v *Volume) ReadNeedle(off int64, n int, buf []byte) (Header, []byte, error) {
	total := HeaderSize + n
	if cap(buf) < total {
		buf = make([]byte, total)
	}
	buf = buf[:total]
	if _, err := v.f.ReadAt(buf, off); err != nil {
		if errors.Is(err, io.EOF) {
			return Header{}, nil, fmt.Errorf("needle %d@%d: %w: truncated", v.id, off, ErrCorrupt)
		}
		return Header{}, nil, fmt.Errorf("read needle %d@%d: %w", v.id, off, err)
	}
	h, err := DecodeHeader(buf)
	if err != nil {
		return h, nil, fmt.Errorf("needle %d@%d: %w", v.id, off, err)
	}
	if int(h.Len) != n {
		return h, nil, fmt.Errorf("needle %d@%d: %w: length %d, expected %d", v.id, off, ErrCorrupt, h.Len, n)
	}
	if !CheckCRC(buf[:HeaderSize], buf[HeaderSize:]) {
		return h, nil, fmt.Errorf("needle %d@%d: %w: CRC mismatch", v.id, off, ErrCorrupt)
	}
	return h, buf[HeaderSize:], nil
}

// ReadData reads len(p) data bytes of the needle at off, starting dataOff
// bytes into its data, with one pread and no CRC check. The caller bounds p
// by the needle's length.
func (v *Volume) ReadData(off int64, p []byte, dataOff int64) (int, error) {
	return v.f.ReadAt(p, off+HeaderSize+dataOff)
}

// Truncate cuts the volume file to size (recovery of a torn tail, or undoing
// appends). It must not race with appends of the caller's own making.
func (v *Volume) Truncate(size int64) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if size < SuperblockSize {
		return fmt.Errorf("truncate volume %d to %d: below superblock", v.id, size)
	}
	if err := v.f.Truncate(size); err != nil {
		return fmt.Errorf("truncate volume %d: %w", v.id, err)
	}
	v.size.Store(size)
	return nil
}

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

// checkNeedle reports whether an encoded header records length n and its
// CRC matches header and data.
func checkNeedle(hdr, data []byte, n int) bool {
	return binary.LittleEndian.Uint32(hdr[40:44]) == uint32(n) && CheckCRC(hdr, data)
}

// Close closes the file and releases its memory map, if any. Later appends
// fail with ErrClosed; reads fail. The caller guarantees that no ReadMapped
// is running or will run (the blob store closes a volume only once its last
// reader reference is gone).
func (v *Volume) Close() error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.closed.Swap(true) {
		return nil
	}
	var uerr error
	if m := v.mapped.Swap(nil); m != nil {
		uerr = m.unmap()
	}
	return errors.Join(uerr, v.f.Close())
}

// Map maps the volume file read-only for max(length, Size()) bytes, so that
// ReadMapped can serve reads with a copy instead of a pread. length may
// exceed the file: map an active volume for the size it may grow to, and
// appends (pwrites, which go through the page cache the map shares) become
// readable through the map without remapping. It needs an FS implementing
// vfs.Mapper; otherwise, or if the volume is already mapped or closed, it
// returns an error (wrapping errors.ErrUnsupported when the FS cannot map)
// and reads keep using pread. Call it before the volume is shared with
// readers or concurrently with them; it is one system call.
func (v *Volume) Map(length int64) error {
	mp, ok := v.fs.(vfs.Mapper)
	if !ok {
		return fmt.Errorf("map volume %d: %w", v.id, errors.ErrUnsupported)
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.closed.Load() {
		return fmt.Errorf("map volume %d: %w", v.id, ErrClosed)
	}
	if v.mapped.Load() != nil {
		return fmt.Errorf("map volume %d: already mapped", v.id)
	}
	b, unmap, err := mp.Map(v.f, max(length, v.size.Load()))
	if err != nil {
		return fmt.Errorf("map volume %d: %w", v.id, err)
	}
	v.mapped.Store(&mapping{b: b, unmap: unmap})
	return nil
}

// Mapped reports whether the volume has a memory map (see Map).
func (v *Volume) Mapped() bool { return v.mapped.Load() != nil }

// ReadMapped reads through the memory map: it checks the header of the
// needle at off (magic, version, flags, and that its length covers the
// read) and, if want is not nil, that the needle's hash is *want; then it
// copies len(p) data bytes starting dataOff bytes into the needle's data
// into p. It does not check the CRC. match is false, and p untouched, when
// the needle belongs to another hash. It makes no system call and does not
// allocate unless it fails.
//
// It returns ErrNotMapped, having done nothing, when the volume is not
// mapped or the needle's header and the bytes asked for are not all below
// both the end of the map and Size(); the caller then reads with pread. A
// bad header wraps ErrCorrupt. If the file was truncated under the map (or
// the page cannot be read from the disk), touching the page faults: the
// fault is turned into a panic with runtime/debug.SetPanicOnFault for the
// duration of the copy (the goroutine's previous setting is restored),
// recovered, and reported as an error wrapping ErrCorrupt.
//
// Safe for concurrent use with reads and appends; the caller guarantees
// that Close does not run concurrently (the blob store holds a volume
// reference).
func (v *Volume) ReadMapped(off int64, want *[32]byte, p []byte, dataOff int64) (match bool, err error) {
	m := v.mapped.Load()
	if m == nil {
		return false, ErrNotMapped
	}
	end := off + HeaderSize + dataOff + int64(len(p))
	// Bytes below Size() were written by a completed append and are never
	// rewritten; the store only truncates bytes no index entry points at.
	if off < SuperblockSize || dataOff < 0 || end > int64(len(m.b)) || end > v.size.Load() {
		return false, ErrNotMapped
	}
	return v.readMapped(m.b, off, want, p, dataOff)
}

// readMapped is ReadMapped once the bounds are checked: every access to the
// map happens here, under the fault guard.
func (v *Volume) readMapped(b []byte, off int64, want *[32]byte, p []byte, dataOff int64) (match bool, err error) {
	return v.guardedNeedle(b, off, want, dataOff, int64(len(p)), func(data []byte) { copy(p, data) })
}

// guardedNeedle checks the header of the needle at off in the map b (magic,
// version, flags, the hash if want is not nil, a length covering n bytes
// from dataOff) and calls use with those n data bytes, all under the fault
// guard: a page lost under the map (a truncated file, a disk read error)
// is ErrCorrupt, not a crash. match is false when the needle belongs to
// another hash (use is not called).
func (v *Volume) guardedNeedle(b []byte, off int64, want *[32]byte, dataOff, n int64, use func(data []byte)) (match bool, err error) {
	old := debug.SetPanicOnFault(true)
	defer func() {
		debug.SetPanicOnFault(old)
		if r := recover(); r != nil {
			if _, fault := r.(interface{ Addr() uintptr }); !fault {
				panic(r)
			}
			match, err = true, fmt.Errorf("needle %d@%d: %w: memory fault reading the mapped file (truncated under the map, or a disk read error)", v.id, off, ErrCorrupt)
		}
	}()
	h, err := DecodeHeader(b[off : off+HeaderSize])
	if err != nil {
		return true, fmt.Errorf("needle %d@%d: %w", v.id, off, err)
	}
	if want != nil && h.Hash != *want {
		return false, nil
	}
	if int64(h.Len) < dataOff+n {
		return true, fmt.Errorf("needle %d@%d: %w: length %d, read up to %d", v.id, off, ErrCorrupt, h.Len, dataOff+n)
	}
	start := off + HeaderSize + dataOff
	use(b[start : start+n])
	return true, nil
}

// MappedData lends n data bytes of the needle at off, starting dataOff
// bytes into its data, as a slice of the volume's read-only memory map: no
// copy is made. It checks the header as ReadMapped does (magic, version,
// flags, the hash if want is not nil, and that the length covers the
// range) and reads the last byte of the range, both under the fault guard,
// so that a file truncated under the map is reported (ErrCorrupt) before
// the bytes are lent rather than while they are used. match is false, and
// b nil, when the needle belongs to another hash. It returns ErrNotMapped,
// having done nothing, in the cases ReadMapped does, and when n <= 0.
//
// The slice is valid only while the volume stays open: the caller must
// hold the volume as for ReadMapped (the blob store's reference) until it
// is done with b. b must not be written (the map is read-only) and is
// meant for system calls (write, sendmsg), to which a page lost since the
// check is an EFAULT error; reading it directly in Go is not guarded
// against such a fault.
func (v *Volume) MappedData(off int64, want *[32]byte, dataOff, n int64) (b []byte, match bool, err error) {
	m := v.mapped.Load()
	if m == nil {
		return nil, false, ErrNotMapped
	}
	end := off + HeaderSize + dataOff + n
	if off < SuperblockSize || dataOff < 0 || n <= 0 || end > int64(len(m.b)) || end > v.size.Load() {
		return nil, false, ErrNotMapped
	}
	match, err = v.checkMapped(m.b, off, want, dataOff, n)
	if !match || err != nil {
		return nil, match, err
	}
	start := off + HeaderSize + dataOff
	return m.b[start:end:end], true, nil
}

// mappedSink keeps the byte checkMapped reads from being optimised away.
var mappedSink atomic.Uint32

// checkMapped is MappedData's check, under the fault guard: the header,
// and the last byte lent (a truncation removes a suffix of the file, so
// if it is there the whole range is).
func (v *Volume) checkMapped(b []byte, off int64, want *[32]byte, dataOff, n int64) (match bool, err error) {
	return v.guardedNeedle(b, off, want, dataOff, n, func(data []byte) {
		if data[len(data)-1] == 0xff {
			mappedSink.Store(1)
		}
	})
}
