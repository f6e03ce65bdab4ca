package vfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Op names a Mem operation for fault injection.
type Op int

// The operations a fault function can fail.
const (
	OpOpen     Op = iota + 1 // OpenFile
	OpRead                   // File.ReadAt
	OpWrite                  // File.WriteAt
	OpSync                   // File.Sync
	OpTruncate               // File.Truncate
	OpRemove                 // Remove
	OpRename                 // Rename (name is the old name)
	OpSyncDir                // SyncDir
	OpMkdir                  // MkdirAll
)

// String returns the operation's name.
func (o Op) String() string {
	switch o {
	case OpOpen:
		return "open"
	case OpRead:
		return "read"
	case OpWrite:
		return "write"
	case OpSync:
		return "sync"
	case OpTruncate:
		return "truncate"
	case OpRemove:
		return "remove"
	case OpRename:
		return "rename"
	case OpSyncDir:
		return "syncdir"
	case OpMkdir:
		return "mkdir"
	}
	return fmt.Sprintf("op(%d)", int(o))
}

// ErrCrashed is returned by every method of a File opened before Mem.Crash.
var ErrCrashed = errors.New("vfs: file handle from before a crash")

// ShortWriteError, returned by a fault function for OpWrite, makes Mem write
// the first N bytes of the buffer and then fail with Err (as a disk filling
// up mid-write does). Build it with ShortWrite.
type ShortWriteError struct {
	N   int
	Err error
}

func (e *ShortWriteError) Error() string {
	return fmt.Sprintf("short write of %d bytes: %v", e.N, e.Err)
}

// Unwrap returns Err.
func (e *ShortWriteError) Unwrap() error { return e.Err }

// ShortWrite returns a fault that writes n bytes and then fails with err.
func ShortWrite(n int, err error) error { return &ShortWriteError{N: n, Err: err} }

// FaultFunc decides whether an operation fails: a non-nil result is returned
// to the caller (wrapped in *os.PathError) and the operation has no effect,
// except for a *ShortWriteError on OpWrite.
type FaultFunc func(op Op, name string) error

// memNode is one file's content.
type memNode struct {
	data   []byte // current content
	synced []byte // durable content (as of the last Sync)
	mtime  time.Time
}

// Mem is an in-memory FS that can crash and inject faults (see the package
// documentation). All methods are safe for concurrent use; the fault function
// is called without Mem's lock held, so it may call Mem's methods.
type Mem struct {
	mu      sync.Mutex
	gen     int                 // incremented by Crash; handles of older gens are dead
	files   map[string]*memNode // current namespace
	durable map[string]*memNode // durable directory entries
	dirs    map[string]bool
	fault   FaultFunc
	free    uint64
	total   uint64
}

var (
	_ FS     = (*Mem)(nil)
	_ Mapper = (*Mem)(nil)
)

// NewMem returns an empty Mem whose Statfs reports 1 TiB free of 2 TiB.
func NewMem() *Mem {
	return &Mem{
		files:   map[string]*memNode{},
		durable: map[string]*memNode{},
		dirs:    map[string]bool{"/": true, ".": true},
		free:    1 << 40,
		total:   2 << 40,
	}
}

// Map does not map: Mem's file content moves when it grows, so a stable
// view cannot be handed out. It always returns an error wrapping
// errors.ErrUnsupported, which makes the blob store read with ReadAt; tests
// of the mapped read path use the OS file system in a temporary directory.
func (m *Mem) Map(f File, length int64) ([]byte, func() error, error) {
	return nil, nil, fmt.Errorf("vfs: map %s: in-memory file system: %w", f.Name(), errors.ErrUnsupported)
}

// SetFault installs f (nil removes it). f is called before every operation.
func (m *Mem) SetFault(f FaultFunc) {
	m.mu.Lock()
	m.fault = f
	m.mu.Unlock()
}

// SetFree sets the free bytes reported by Statfs.
func (m *Mem) SetFree(n uint64) {
	m.mu.Lock()
	m.free = n
	if m.total < n {
		m.total = n
	}
	m.mu.Unlock()
}

// Crash simulates a power loss: every file reverts to its last synced
// content, directory entries that were never made durable disappear (and
// removed ones whose removal was not durable come back), and every open File
// becomes unusable (ErrCrashed).
func (m *Mem) Crash() { m.crash(nil) }

// CrashTorn is Crash, except that a file whose current content extends its
// synced content keeps a random prefix of the unsynced tail; with
// probability 1/3 part of that kept tail is replaced by random garbage and
// with probability 1/3 by zeros. rng makes it reproducible.
func (m *Mem) CrashTorn(rng *rand.Rand) { m.crash(rng) }

func (m *Mem) crash(rng *rand.Rand) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.gen++
	files := make(map[string]*memNode, len(m.durable))
	names := make([]string, 0, len(m.durable))
	for name := range m.durable {
		names = append(names, name)
	}
	sort.Strings(names) // deterministic use of rng
	seen := map[*memNode]*memNode{}
	for _, name := range names {
		n := m.durable[name]
		if nn, ok := seen[n]; ok {
			files[name] = nn
			continue
		}
		data := append([]byte(nil), n.synced...)
		if rng != nil && len(n.data) > len(n.synced) && string(n.data[:len(n.synced)]) == string(n.synced) {
			extra := n.data[len(n.synced):]
			k := rng.IntN(len(extra) + 1)
			tail := append([]byte(nil), extra[:k]...)
			if k > 0 {
				switch rng.IntN(3) {
				case 0: // garbage from some point on
					for i := rng.IntN(k); i < k; i++ {
						tail[i] = byte(rng.Uint32())
					}
				case 1: // zeros from some point on (block allocated, data not written)
					for i := rng.IntN(k); i < k; i++ {
						tail[i] = 0
					}
				}
			}
			data = append(data, tail...)
		}
		nn := &memNode{data: data, synced: append([]byte(nil), data...), mtime: n.mtime}
		seen[n] = nn
		files[name] = nn
	}
	m.files = files
	m.durable = make(map[string]*memNode, len(files))
	for k, v := range files {
		m.durable[k] = v
	}
}

func clean(name string) string { return filepath.Clean(name) }

func (m *Mem) check(op Op, name string) error {
	m.mu.Lock()
	f := m.fault
	m.mu.Unlock()
	if f == nil {
		return nil
	}
	return f(op, name)
}

func pathErr(op, name string, err error) error { return &os.PathError{Op: op, Path: name, Err: err} }

// OpenFile opens name. Supported flags: O_RDONLY, O_WRONLY, O_RDWR, O_CREATE,
// O_EXCL, O_TRUNC. The parent directory must exist (MkdirAll).
func (m *Mem) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	name = clean(name)
	if err := m.check(OpOpen, name); err != nil {
		return nil, pathErr("open", name, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.dirs[name] {
		return nil, pathErr("open", name, syscall.EISDIR)
	}
	n, ok := m.files[name]
	switch {
	case !ok && flag&os.O_CREATE == 0:
		return nil, pathErr("open", name, fs.ErrNotExist)
	case ok && flag&os.O_CREATE != 0 && flag&os.O_EXCL != 0:
		return nil, pathErr("open", name, fs.ErrExist)
	case !ok:
		if !m.dirs[filepath.Dir(name)] {
			return nil, pathErr("open", name, fs.ErrNotExist)
		}
		n = &memNode{mtime: time.Unix(0, 0)}
		m.files[name] = n
	}
	if flag&os.O_TRUNC != 0 && flag&(os.O_WRONLY|os.O_RDWR) != 0 {
		n.data = n.data[:0:0]
	}
	return &memFile{m: m, n: n, name: name, gen: m.gen,
		rd: flag&os.O_WRONLY == 0, wr: flag&(os.O_WRONLY|os.O_RDWR) != 0}, nil
}

// Remove removes a file or an empty directory. The removal becomes durable
// with SyncDir of the parent.
func (m *Mem) Remove(name string) error {
	name = clean(name)
	if err := m.check(OpRemove, name); err != nil {
		return pathErr("remove", name, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.dirs[name] {
		prefix := name + string(filepath.Separator)
		for f := range m.files {
			if strings.HasPrefix(f, prefix) {
				return pathErr("remove", name, syscall.ENOTEMPTY)
			}
		}
		delete(m.dirs, name)
		return nil
	}
	if _, ok := m.files[name]; !ok {
		return pathErr("remove", name, fs.ErrNotExist)
	}
	delete(m.files, name)
	return nil
}

// Rename renames oldname to newname, replacing newname. It becomes durable
// with SyncDir of both parents.
func (m *Mem) Rename(oldname, newname string) error {
	oldname, newname = clean(oldname), clean(newname)
	if err := m.check(OpRename, oldname); err != nil {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: err}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	n, ok := m.files[oldname]
	if !ok {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: fs.ErrNotExist}
	}
	if !m.dirs[filepath.Dir(newname)] {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: fs.ErrNotExist}
	}
	delete(m.files, oldname)
	m.files[newname] = n
	return nil
}

// MkdirAll creates dir and its parents; directories are durable at once.
func (m *Mem) MkdirAll(dir string, perm os.FileMode) error {
	dir = clean(dir)
	if err := m.check(OpMkdir, dir); err != nil {
		return pathErr("mkdir", dir, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for d := dir; !m.dirs[d]; d = filepath.Dir(d) {
		if _, ok := m.files[d]; ok {
			return pathErr("mkdir", d, syscall.ENOTDIR)
		}
		m.dirs[d] = true
	}
	return nil
}

// ReadDir lists the names of the files and directories directly in dir, sorted.
func (m *Mem) ReadDir(dir string) ([]string, error) {
	dir = clean(dir)
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.dirs[dir] {
		return nil, pathErr("readdir", dir, fs.ErrNotExist)
	}
	var names []string
	for f := range m.files {
		if filepath.Dir(f) == dir {
			names = append(names, filepath.Base(f))
		}
	}
	for d := range m.dirs {
		if d != dir && filepath.Dir(d) == dir {
			names = append(names, filepath.Base(d))
		}
	}
	sort.Strings(names)
	return names, nil
}

// Stat describes name.
func (m *Mem) Stat(name string) (os.FileInfo, error) {
	name = clean(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.dirs[name] {
		return memInfo{name: filepath.Base(name), dir: true}, nil
	}
	n, ok := m.files[name]
	if !ok {
		return nil, pathErr("stat", name, fs.ErrNotExist)
	}
	return memInfo{name: filepath.Base(name), size: int64(len(n.data)), mtime: n.mtime}, nil
}

// SyncDir makes the current entries directly in dir durable, including
// removals and renames.
func (m *Mem) SyncDir(dir string) error {
	dir = clean(dir)
	if err := m.check(OpSyncDir, dir); err != nil {
		return pathErr("syncdir", dir, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.dirs[dir] {
		return pathErr("syncdir", dir, fs.ErrNotExist)
	}
	for f := range m.durable {
		if filepath.Dir(f) == dir {
			delete(m.durable, f)
		}
	}
	for f, n := range m.files {
		if filepath.Dir(f) == dir {
			m.durable[f] = n
		}
	}
	return nil
}

// Statfs reports the values set by SetFree (default 1 TiB free of 2 TiB).
func (m *Mem) Statfs(dir string) (free, total uint64, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.free, m.total, nil
}

type memInfo struct {
	name  string
	size  int64
	dir   bool
	mtime time.Time
}

func (i memInfo) Name() string       { return i.name }
func (i memInfo) Size() int64        { return i.size }
func (i memInfo) ModTime() time.Time { return i.mtime }
func (i memInfo) IsDir() bool        { return i.dir }
func (i memInfo) Sys() any           { return nil }
func (i memInfo) Mode() os.FileMode {
	if i.dir {
		return os.ModeDir | 0o755
	}
	return 0o644
}

// memFile is an open Mem file.
type memFile struct {
	m      *Mem
	n      *memNode
	name   string
	gen    int
	rd, wr bool
	closed bool // guarded by m.mu
}

// live reports an error if the handle is closed or from before a crash.
// Must hold m.mu.
func (f *memFile) live(op string) error {
	if f.closed {
		return pathErr(op, f.name, fs.ErrClosed)
	}
	if f.gen != f.m.gen {
		return pathErr(op, f.name, ErrCrashed)
	}
	return nil
}

func (f *memFile) Name() string { return f.name }

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	if err := f.m.check(OpRead, f.name); err != nil {
		return 0, pathErr("read", f.name, err)
	}
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if err := f.live("read"); err != nil {
		return 0, err
	}
	if !f.rd {
		return 0, pathErr("read", f.name, syscall.EBADF)
	}
	if off < 0 {
		return 0, pathErr("read", f.name, syscall.EINVAL)
	}
	if off >= int64(len(f.n.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.n.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	var short *ShortWriteError
	if err := f.m.check(OpWrite, f.name); err != nil {
		if !errors.As(err, &short) {
			return 0, pathErr("write", f.name, err)
		}
	}
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if err := f.live("write"); err != nil {
		return 0, err
	}
	if !f.wr {
		return 0, pathErr("write", f.name, syscall.EBADF)
	}
	if off < 0 {
		return 0, pathErr("write", f.name, syscall.EINVAL)
	}
	q := p
	if short != nil && short.N < len(q) {
		q = q[:max(short.N, 0)]
	}
	if end := off + int64(len(q)); end > int64(len(f.n.data)) {
		if end <= int64(cap(f.n.data)) {
			f.n.data = f.n.data[:end]
		} else {
			nd := make([]byte, end, max(end, 2*int64(cap(f.n.data))))
			copy(nd, f.n.data)
			f.n.data = nd
		}
	}
	copy(f.n.data[off:], q)
	if short != nil {
		return len(q), pathErr("write", f.name, short.Err)
	}
	return len(q), nil
}

func (f *memFile) Sync() error {
	if err := f.m.check(OpSync, f.name); err != nil {
		return pathErr("sync", f.name, err)
	}
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if err := f.live("sync"); err != nil {
		return err
	}
	f.n.synced = append(f.n.synced[:0:0], f.n.data...)
	return nil
}

func (f *memFile) Truncate(size int64) error {
	if err := f.m.check(OpTruncate, f.name); err != nil {
		return pathErr("truncate", f.name, err)
	}
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if err := f.live("truncate"); err != nil {
		return err
	}
	if !f.wr || size < 0 {
		return pathErr("truncate", f.name, syscall.EINVAL)
	}
	if size <= int64(len(f.n.data)) {
		// Copy so that a torn crash never sees stale bytes past the new end.
		f.n.data = append([]byte(nil), f.n.data[:size]...)
	} else {
		f.n.data = append(f.n.data, make([]byte, size-int64(len(f.n.data)))...)
	}
	return nil
}

func (f *memFile) Size() (int64, error) {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if err := f.live("stat"); err != nil {
		return 0, err
	}
	return int64(len(f.n.data)), nil
}

func (f *memFile) Close() error {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if f.closed {
		return pathErr("close", f.name, fs.ErrClosed)
	}
	f.closed = true
	return nil
}
