package volume

import (
	"errors"
	"fmt"
	"runtime/debug"
	"sync/atomic"

	"github.com/cairn-fs/cairn/internal/vfs"
)

// mapping is a read-only memory map of the volume file (vfs.Mapper).
type mapping struct {
	b     []byte
	unmap func() error
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
