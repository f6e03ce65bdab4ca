package vfs

import (
	"io"
	"os"
)

// FS is the file-system seam. OS is the real one; Mem is an in-memory,
// crashable, fault-injecting one for tests. Implementations are safe for
// concurrent use.
type FS interface {
	// OpenFile opens name with os.O_* flags, like os.OpenFile.
	OpenFile(name string, flag int, perm os.FileMode) (File, error)
	// Remove removes a file or an empty directory.
	Remove(name string) error
	// Rename atomically renames old to new (replacing new).
	Rename(oldname, newname string) error
	// MkdirAll creates dir and its parents.
	MkdirAll(dir string, perm os.FileMode) error
	// ReadDir lists the names (not paths) in dir, sorted.
	ReadDir(dir string) ([]string, error)
	// Stat describes name.
	Stat(name string) (os.FileInfo, error)
	// SyncDir makes the directory entries of dir durable (creates, renames, removes).
	SyncDir(dir string) error
	// Statfs reports the free and total bytes of the file system that holds dir.
	Statfs(dir string) (free, total uint64, err error)
}

// File is an open file. ReadAt and WriteAt may be called concurrently.
type File interface {
	io.ReaderAt
	io.WriterAt
	io.Closer
	// Sync makes the file's written bytes durable.
	Sync() error
	// Truncate changes the size of the file.
	Truncate(size int64) error
	// Size returns the current size of the file.
	Size() (int64, error)
	// Name returns the name the file was opened with.
	Name() string
}

// OSFile is implemented by files of the real file system; it exposes the
// *os.File for zero-copy paths (sendfile).
type OSFile interface {
	OSFile() *os.File
}

// VectorWriter is implemented by files that write several buffers at an
// offset in one call (pwritev): the blob store writes a large needle's
// header, data and padding without first copying them into one buffer.
// Like WriteAt, a short write returns an error.
type VectorWriter interface {
	WriteVAt(bufs [][]byte, off int64) (int, error)
}

// Mapper is implemented by file systems that can map a file into memory
// read-only. The blob store maps volume files so that a small read is a
// copy from the page cache rather than a pread; without a Mapper (or when
// Map fails) it reads with ReadAt.
type Mapper interface {
	// Map maps the first length bytes of f, a File opened by this FS,
	// read-only and shared: bytes written to f later with WriteAt are
	// visible through the mapping without remapping. length may exceed the
	// file's size; touching a page that lies wholly beyond the file's end
	// faults (SIGBUS), so callers only read bytes they know were written
	// and guard against the file being truncated under them (see
	// runtime/debug.SetPanicOnFault). unmap releases the mapping; it must
	// be called exactly once, after the last read through b, and may be
	// called before or after f is closed. An FS that cannot map returns an
	// error wrapping errors.ErrUnsupported. Safe for concurrent use.
	Map(f File, length int64) (b []byte, unmap func() error, err error)
}
