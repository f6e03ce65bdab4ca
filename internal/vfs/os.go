package vfs

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"golang.org/x/sys/unix"
)

// OS returns the real file system. The value is stateless and safe for
// concurrent use; every call returns an equivalent FS.
func OS() FS { return OSFS{} }

// OSFS is the real file system (see OS). Its zero value is ready to use and
// safe for concurrent use.
type OSFS struct{}

var _ FS = OSFS{}

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

func (o osFile) Size() (int64, error) {
	fi, err := o.f.Stat()
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}
