package volume

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/cairn-fs/cairn/internal/vfs"
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
