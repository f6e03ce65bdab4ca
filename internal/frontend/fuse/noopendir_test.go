package fuse

import (
	"testing"

	gofuse "github.com/hanwen/go-fuse/v2/fuse"
)

// fakeDirs is a raw file system of directories of n entries each, served
// 10 per page, that counts the handles opened and still open.
type fakeDirs struct {
	gofuse.RawFileSystem
	n          uint64
	next       uint64
	open       map[uint64]uint64 // fh → directory
	opened     int
	seeks      int
	lastOffset map[uint64]uint64 // fh → where its last page ended
}

func (f *fakeDirs) OpenDir(_ <-chan struct{}, in *gofuse.OpenIn, out *gofuse.OpenOut) gofuse.Status {
	f.next++
	f.open[f.next] = in.NodeId
	f.opened++
	out.Fh = f.next
	return gofuse.OK
}

func (f *fakeDirs) ReleaseDir(in *gofuse.ReleaseIn) {
	if f.open[in.Fh] != in.NodeId {
		panic("released a handle under another directory")
	}
	delete(f.open, in.Fh)
}

func (f *fakeDirs) ReadDirPlus(_ <-chan struct{}, in *gofuse.ReadIn, out *gofuse.DirEntryList) gofuse.Status {
	if _, ok := f.open[in.Fh]; !ok {
		return gofuse.EBADF
	}
	if in.Offset != f.lastOffset[in.Fh] {
		f.seeks++
	}
	for off := in.Offset; off < f.n && off < in.Offset+10; off++ {
		out.Offset = off + 1
	}
	f.lastOffset[in.Fh] = out.Offset
	return gofuse.OK
}

func TestNoOpendirCursors(t *testing.T) {
	fake := &fakeDirs{n: 35, open: map[uint64]uint64{}, lastOffset: map[uint64]uint64{}}
	f := &noOpendirFS{RawFileSystem: fake}
	if st := f.OpenDir(nil, &gofuse.OpenIn{}, &gofuse.OpenOut{}); st != gofuse.ENOSYS {
		t.Fatalf("OPENDIR: %v, want ENOSYS", st)
	}
	// One reader, page after page: one handle, no seek, released at the end.
	read := func(dir, off uint64) uint64 {
		t.Helper()
		out := gofuse.DirEntryList{Offset: off}
		if st := f.ReadDirPlus(nil, &gofuse.ReadIn{InHeader: gofuse.InHeader{NodeId: dir}, Offset: off}, &out); !st.Ok() {
			t.Fatalf("READDIRPLUS of %d at %d: %v", dir, off, st)
		}
		return out.Offset
	}
	off := uint64(0)
	for {
		next := read(7, off)
		if next == off {
			break
		}
		off = next
	}
	if off != 35 || fake.opened != 1 || fake.seeks != 0 || len(fake.open) != 0 {
		t.Fatalf("a listing read through: end %d, %d handles opened, %d seeks, %d left open", off, fake.opened, fake.seeks, len(fake.open))
	}
	// A reader that restarts gets a new handle; the one it left is released.
	read(7, 0)
	read(7, 0)
	if len(fake.open) != 1 {
		t.Fatalf("%d handles open after two restarted listings, want 1", len(fake.open))
	}
	// Readers that stop halfway hold at most maxCursors handles.
	for d := uint64(100); d < 100+2*maxCursors; d++ {
		read(d, 0)
	}
	if len(fake.open) > maxCursors {
		t.Fatalf("%d handles open, want at most %d", len(fake.open), maxCursors)
	}
}
