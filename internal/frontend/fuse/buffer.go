package fuse

import (
	"io"
	"os"
)

// memMax is the largest content a buffer keeps in memory; a larger one
// moves to a temporary file. Small files (an untar's, a PHP cache's) then
// cost no file creation, and the queue's byte bound (queueBytes) bounds
// the memory of what is queued.
const memMax = 1 << 20

// buffer is a file's content being written or queued: in memory up to
// memMax bytes, then in an anonymous temporary file in dir (so a large
// copy does not use RAM). Not safe for concurrent use (the node's lock
// guards it).
type buffer struct {
	dir string
	mem []byte   // the content while f is nil
	f   *os.File // the content once spilled
}

func newBuffer(dir string) *buffer { return &buffer{dir: dir} }

// Size is the content's length.
func (b *buffer) Size() int64 {
	if b.f == nil {
		return int64(len(b.mem))
	}
	st, err := b.f.Stat()
	if err != nil {
		return 0
	}
	return st.Size()
}

// ReadAt reads like io.ReaderAt.
func (b *buffer) ReadAt(p []byte, off int64) (int, error) {
	if b.f != nil {
		return b.f.ReadAt(p, off)
	}
	if off >= int64(len(b.mem)) {
		return 0, io.EOF
	}
	n := copy(p, b.mem[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// WriteAt writes like io.WriterAt; a gap before off reads as zeros.
func (b *buffer) WriteAt(p []byte, off int64) (int, error) {
	end := off + int64(len(p))
	if b.f == nil && end > memMax {
		if err := b.spill(); err != nil {
			return 0, err
		}
	}
	if b.f != nil {
		return b.f.WriteAt(p, off)
	}
	if end > int64(len(b.mem)) {
		b.grow(end)
	}
	return copy(b.mem[off:], p), nil
}

// Truncate sets the content's length (zeros when it grows).
func (b *buffer) Truncate(size int64) error {
	if b.f == nil && size > memMax {
		if err := b.spill(); err != nil {
			return err
		}
	}
	if b.f != nil {
		return b.f.Truncate(size)
	}
	if size <= int64(len(b.mem)) {
		clear(b.mem[size:])
		b.mem = b.mem[:size]
		return nil
	}
	b.grow(size)
	return nil
}

// grow extends mem to size bytes of which the new ones are zero.
func (b *buffer) grow(size int64) {
	if size <= int64(cap(b.mem)) {
		old := len(b.mem)
		b.mem = b.mem[:size]
		clear(b.mem[old:])
		return
	}
	m := make([]byte, size, max(size, min(2*int64(cap(b.mem)), memMax)))
	copy(m, b.mem)
	b.mem = m
}

// spill moves the content to a temporary file.
func (b *buffer) spill() error {
	f, err := tempFile(b.dir)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(b.mem, 0); err != nil {
		f.Close()
		return err
	}
	b.f, b.mem = f, nil
	return nil
}

// Bytes returns the content when it is in memory (ok false once spilled).
func (b *buffer) Bytes() ([]byte, bool) { return b.mem, b.f == nil }

// Close frees the content.
func (b *buffer) Close() error {
	b.mem = nil
	if b.f != nil {
		return b.f.Close()
	}
	return nil
}

// oTmpfile is Linux's O_TMPFILE (with O_DIRECTORY).
const oTmpfile = 0x410000

// tempFile is an anonymous temporary file in dir (O_TMPFILE: one call).
func tempFile(dir string) (*os.File, error) {
	if f, err := os.OpenFile(dir, os.O_RDWR|oTmpfile, 0o600); err == nil {
		return f, nil
	}
	f, err := os.CreateTemp(dir, "cairn-mount-*")
	if err != nil {
		return nil, err
	}
	os.Remove(f.Name()) // anonymous: gone with the last descriptor
	return f, nil
}
