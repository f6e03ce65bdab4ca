package fuse

import (
	"sync"
	"time"

	gofuse "github.com/hanwen/go-fuse/v2/fuse"
)

// noOpendirFS wraps the raw file system of a noflush mount so that an
// open directory costs no call either: its first OPENDIR is answered
// ENOSYS, and the kernel then sends no OPENDIR and no RELEASEDIR again
// (fc->no_opendir), and keeps every directory's listing in its readdir
// cache (no-opendir's default, FOPEN_CACHE_DIR) until a change drops it
// (Mount.changed: NotifyContent of the directory). A READDIR or
// READDIRPLUS then comes with no handle (Fh 0): it is served through a
// handle this wrapper opens on go-fuse's side and keeps for the reader's
// next page (a cursor per directory), then releases at the end of the
// listing, or when idle.
type noOpendirFS struct {
	gofuse.RawFileSystem

	mu      sync.Mutex
	cursors map[uint64]*dirCursor // by directory node ID
}

// dirCursor is an open handle of a directory read without one: next is
// the offset its next page starts at.
type dirCursor struct {
	dir, fh uint64
	next    uint64
	used    time.Time
}

// cursorIdle and maxCursors bound the cursors of readers that stop
// before the end of a listing.
const (
	cursorIdle = 10 * time.Second
	maxCursors = 256
)

func (f *noOpendirFS) String() string { return f.RawFileSystem.String() }

func (f *noOpendirFS) OpenDir(cancel <-chan struct{}, in *gofuse.OpenIn, out *gofuse.OpenOut) gofuse.Status {
	return gofuse.ENOSYS
}

func (f *noOpendirFS) ReadDir(cancel <-chan struct{}, in *gofuse.ReadIn, out *gofuse.DirEntryList) gofuse.Status {
	if in.Fh != 0 {
		return f.RawFileSystem.ReadDir(cancel, in, out)
	}
	return f.read(cancel, in, out, f.RawFileSystem.ReadDir)
}

func (f *noOpendirFS) ReadDirPlus(cancel <-chan struct{}, in *gofuse.ReadIn, out *gofuse.DirEntryList) gofuse.Status {
	if in.Fh != 0 {
		return f.RawFileSystem.ReadDirPlus(cancel, in, out)
	}
	return f.read(cancel, in, out, f.RawFileSystem.ReadDirPlus)
}

// read serves one page of directory in.NodeId through a cursor: the one
// that ends where this page starts, or a new handle (go-fuse seeks it to
// the offset).
func (f *noOpendirFS) read(cancel <-chan struct{}, in *gofuse.ReadIn, out *gofuse.DirEntryList,
	page func(<-chan struct{}, *gofuse.ReadIn, *gofuse.DirEntryList) gofuse.Status) gofuse.Status {
	c := f.take(in.NodeId, in.Offset)
	if c == nil {
		var oo gofuse.OpenOut
		oin := gofuse.OpenIn{InHeader: in.InHeader, Flags: in.Flags}
		if st := f.RawFileSystem.OpenDir(cancel, &oin, &oo); !st.Ok() {
			return st
		}
		c = &dirCursor{dir: in.NodeId, fh: oo.Fh}
	}
	rin := *in
	rin.Fh = c.fh
	start := out.Offset
	st := page(cancel, &rin, out)
	if !st.Ok() || out.Offset == start {
		f.release(in.InHeader, c) // the end of the listing, or a failure
		return st
	}
	c.next, c.used = out.Offset, time.Now()
	f.put(in.InHeader, c)
	return st
}

// take removes and returns the cursor of dir that continues at off, if
// any.
func (f *noOpendirFS) take(dir, off uint64) *dirCursor {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.cursors[dir]
	if c == nil || c.next != off {
		return nil
	}
	delete(f.cursors, dir)
	return c
}

// put keeps c as its directory's cursor, releasing the one it replaces,
// those idle for cursorIdle, and the oldest past maxCursors.
func (f *noOpendirFS) put(h gofuse.InHeader, c *dirCursor) {
	f.mu.Lock()
	if f.cursors == nil {
		f.cursors = map[uint64]*dirCursor{}
	}
	var drop []*dirCursor
	if old := f.cursors[c.dir]; old != nil {
		drop = append(drop, old)
	}
	f.cursors[c.dir] = c
	var oldest *dirCursor
	for d, o := range f.cursors {
		switch {
		case o == c:
		case time.Since(o.used) > cursorIdle:
			drop = append(drop, o)
			delete(f.cursors, d)
		case oldest == nil || o.used.Before(oldest.used):
			oldest = o
		}
	}
	if len(f.cursors) > maxCursors && oldest != nil {
		drop = append(drop, oldest)
		delete(f.cursors, oldest.dir)
	}
	f.mu.Unlock()
	for _, o := range drop {
		f.release(h, o)
	}
}

// release closes c's handle on go-fuse's side.
func (f *noOpendirFS) release(h gofuse.InHeader, c *dirCursor) {
	h.NodeId = c.dir
	f.RawFileSystem.ReleaseDir(&gofuse.ReleaseIn{InHeader: h, Fh: c.fh})
}
