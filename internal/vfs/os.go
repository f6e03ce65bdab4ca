package vfs

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"

	"golang.org/x/sys/unix"
)

// OS returns the real file system. The value is stateless and safe for
// concurrent use; every call returns an equivalent FS.
func OS() FS { return OSFS{} }

// OSFS is the real file system (see OS). Its zero value is ready to use and
// safe for concurrent use.
type OSFS struct{}

var (
	_ FS     = OSFS{}
	_ Mapper = OSFS{}
)

// OpenFile opens name like os.OpenFile. The returned File implements OSFile.
func (OSFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

// Remove removes a file or an empty directory.
func (OSFS) Remove(name string) error { return os.Remove(name) }

// Rename atomically renames oldname to newname, replacing newname.
func (OSFS) Rename(oldname, newname string) error { return os.Rename(oldname, newname) }

// MkdirAll creates dir and its parents.
func (OSFS) MkdirAll(dir string, perm os.FileMode) error { return os.MkdirAll(dir, perm) }

// ReadDir lists the names in dir, sorted.
func (OSFS) ReadDir(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(ents))
	for i, e := range ents {
		names[i] = e.Name()
	}
	sort.Strings(names)
	return names, nil
}

// Stat describes name.
func (OSFS) Stat(name string) (os.FileInfo, error) { return os.Stat(name) }

// SyncDir opens dir and fsyncs it, making creates, renames and removes of its
// entries durable. It blocks for the duration of the fsync.
func (OSFS) SyncDir(dir string) error {
	d, err := os.Open(filepath.Clean(dir))
	if err != nil {
		return err
	}
	serr := d.Sync()
	cerr := d.Close()
	if serr != nil {
		return fmt.Errorf("fsync dir %s: %w", dir, serr)
	}
	return cerr
}

// Statfs reports the bytes available to unprivileged users and the total
// bytes of the file system holding dir.
func (OSFS) Statfs(dir string) (free, total uint64, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, 0, &os.PathError{Op: "statfs", Path: dir, Err: err}
	}
	bs := uint64(st.Bsize)
	return st.Bavail * bs, st.Blocks * bs, nil
}

// Map maps the first length bytes of f (a File of this FS) with mmap(2),
// PROT_READ and MAP_SHARED, so the mapping sees the page cache: later
// pwrites to f are visible through it. Only 64-bit platforms map (a 32-bit
// address space cannot hold volume-sized mappings); elsewhere, and for files
// of other file systems, the error wraps errors.ErrUnsupported. The returned
// unmap calls munmap(2). It makes one system call and does not block on I/O.
func (OSFS) Map(f File, length int64) ([]byte, func() error, error) {
	of, ok := f.(OSFile)
	if !ok {
		return nil, nil, fmt.Errorf("vfs: map %s: not a file of the OS file system: %w", f.Name(), errors.ErrUnsupported)
	}
	if strconv.IntSize < 64 {
		return nil, nil, fmt.Errorf("vfs: map %s: %d-bit platform: %w", f.Name(), strconv.IntSize, errors.ErrUnsupported)
	}
	if length <= 0 || length > math.MaxInt {
		return nil, nil, &os.PathError{Op: "mmap", Path: f.Name(), Err: unix.EINVAL}
	}
	// SyscallConn, not Fd: Fd would switch the descriptor to blocking mode.
	rc, err := of.OSFile().SyscallConn()
	if err != nil {
		return nil, nil, &os.PathError{Op: "mmap", Path: f.Name(), Err: err}
	}
	var b []byte
	var merr error
	if err := rc.Control(func(fd uintptr) {
		b, merr = unix.Mmap(int(fd), 0, int(length), unix.PROT_READ, unix.MAP_SHARED)
	}); err != nil {
		return nil, nil, &os.PathError{Op: "mmap", Path: f.Name(), Err: err}
	}
	if merr != nil {
		return nil, nil, &os.PathError{Op: "mmap", Path: f.Name(), Err: merr}
	}
	name := f.Name()
	unmap := func() error {
		if err := unix.Munmap(b); err != nil {
			return &os.PathError{Op: "munmap", Path: name, Err: err}
		}
		return nil
	}
	return b, unmap, nil
}

// osFile is a File of the real file system. *os.File's ReadAt and WriteAt are
// pread and pwrite, so concurrent calls are safe and do not move the offset.
type osFile struct{ f *os.File }

var _ OSFile = osFile{}

func (o osFile) ReadAt(p []byte, off int64) (int, error)  { return o.f.ReadAt(p, off) }
func (o osFile) WriteAt(p []byte, off int64) (int, error) { return o.f.WriteAt(p, off) }
func (o osFile) Close() error                             { return o.f.Close() }
func (o osFile) Sync() error                              { return o.f.Sync() }
func (o osFile) Truncate(size int64) error                { return o.f.Truncate(size) }
func (o osFile) Name() string                             { return o.f.Name() }
func (o osFile) OSFile() *os.File                         { return o.f }

var _ VectorWriter = osFile{}

// WriteVAt is pwritev(2), repeated after a short write until every byte
// is written or an error occurs.
func (o osFile) WriteVAt(bufs [][]byte, off int64) (int, error) {
	rc, err := o.f.SyscallConn()
	if err != nil {
		return 0, err
	}
	total, left := 0, 0
	for _, b := range bufs {
		left += len(b)
	}
	for left > 0 {
		var n int
		var werr error
		if cerr := rc.Write(func(fd uintptr) bool {
			n, werr = unix.Pwritev(int(fd), bufs, off)
			return true
		}); cerr != nil {
			return total, cerr
		}
		if werr == unix.EINTR {
			continue
		}
		if werr != nil {
			return total, &os.PathError{Op: "pwritev", Path: o.f.Name(), Err: werr}
		}
		if n == 0 {
			return total, &os.PathError{Op: "pwritev", Path: o.f.Name(), Err: io.ErrShortWrite}
		}
		total += n
		left -= n
		off += int64(n)
		for len(bufs) > 0 && n >= len(bufs[0]) { // drop what was written
			n -= len(bufs[0])
			bufs = bufs[1:]
		}
		if n > 0 {
			bufs = append([][]byte{bufs[0][n:]}, bufs[1:]...)
		}
	}
	return total, nil
}

func (o osFile) Size() (int64, error) {
	fi, err := o.f.Stat()
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}
