package fuse

import (
	"time"

	gofuse "github.com/hanwen/go-fuse/v2/fuse"
)

// countingFS wraps the mount's go-fuse RawFileSystem and counts every call
// per opcode with its latency (stats.go). Every method passes the call on
// unchanged; Init and OnUnmount pass through the embedded value.
type countingFS struct {
	gofuse.RawFileSystem
	c *counters
}

// failed: a status other than OK (ENOENT included, as the kernel sees it).
func failed(st gofuse.Status) bool { return st != gofuse.OK }

// String names the file system as the embedded one does (go-fuse's debug
// output).
func (f *countingFS) String() string { return f.RawFileSystem.String() }

// Lookup counts a miss as an error: go-fuse answers it OK with node ID 0
// (a negative entry the kernel caches for NegativeTimeout).
func (f *countingFS) Lookup(cancel <-chan struct{}, header *gofuse.InHeader, name string, out *gofuse.EntryOut) gofuse.Status {
	t := time.Now()
	st := f.RawFileSystem.Lookup(cancel, header, name, out)
	f.c.observe(OpLookup, t, failed(st) || out.NodeId == 0)
	return st
}

func (f *countingFS) GetAttr(cancel <-chan struct{}, input *gofuse.GetAttrIn, out *gofuse.AttrOut) gofuse.Status {
	t := time.Now()
	st := f.RawFileSystem.GetAttr(cancel, input, out)
	f.c.observe(OpGetattr, t, failed(st))
	return st
}

func (f *countingFS) SetAttr(cancel <-chan struct{}, input *gofuse.SetAttrIn, out *gofuse.AttrOut) gofuse.Status {
	t := time.Now()
	st := f.RawFileSystem.SetAttr(cancel, input, out)
	f.c.observe(OpSetattr, t, failed(st))
	return st
}

func (f *countingFS) Mknod(cancel <-chan struct{}, input *gofuse.MknodIn, name string, out *gofuse.EntryOut) gofuse.Status {
	t := time.Now()
	st := f.RawFileSystem.Mknod(cancel, input, name, out)
	f.c.observe(OpMknod, t, failed(st))
	return st
}

func (f *countingFS) Mkdir(cancel <-chan struct{}, input *gofuse.MkdirIn, name string, out *gofuse.EntryOut) gofuse.Status {
	t := time.Now()
	st := f.RawFileSystem.Mkdir(cancel, input, name, out)
	f.c.observe(OpMkdir, t, failed(st))
	return st
}

func (f *countingFS) Unlink(cancel <-chan struct{}, header *gofuse.InHeader, name string) gofuse.Status {
	t := time.Now()
	st := f.RawFileSystem.Unlink(cancel, header, name)
	f.c.observe(OpUnlink, t, failed(st))
	return st
}

func (f *countingFS) Rmdir(cancel <-chan struct{}, header *gofuse.InHeader, name string) gofuse.Status {
	t := time.Now()
	st := f.RawFileSystem.Rmdir(cancel, header, name)
	f.c.observe(OpRmdir, t, failed(st))
	return st
}

func (f *countingFS) Rename(cancel <-chan struct{}, input *gofuse.RenameIn, oldName string, newName string) gofuse.Status {
	t := time.Now()
	st := f.RawFileSystem.Rename(cancel, input, oldName, newName)
	f.c.observe(OpRename, t, failed(st))
	return st
}

func (f *countingFS) Link(cancel <-chan struct{}, input *gofuse.LinkIn, filename string, out *gofuse.EntryOut) gofuse.Status {
	t := time.Now()
	st := f.RawFileSystem.Link(cancel, input, filename, out)
	f.c.observe(OpLink, t, failed(st))
	return st
}

func (f *countingFS) Symlink(cancel <-chan struct{}, header *gofuse.InHeader, pointedTo string, linkName string, out *gofuse.EntryOut) gofuse.Status {
	t := time.Now()
	st := f.RawFileSystem.Symlink(cancel, header, pointedTo, linkName, out)
	f.c.observe(OpSymlink, t, failed(st))
	return st
}

func (f *countingFS) Access(cancel <-chan struct{}, input *gofuse.AccessIn) gofuse.Status {
	t := time.Now()
	st := f.RawFileSystem.Access(cancel, input)
	f.c.observe(OpAccess, t, failed(st))
	return st
}

func (f *countingFS) SetXAttr(cancel <-chan struct{}, input *gofuse.SetXAttrIn, attr string, data []byte) gofuse.Status {
	t := time.Now()
	st := f.RawFileSystem.SetXAttr(cancel, input, attr, data)
	f.c.observe(OpSetxattr, t, failed(st))
	return st
}

func (f *countingFS) RemoveXAttr(cancel <-chan struct{}, header *gofuse.InHeader, attr string) gofuse.Status {
	t := time.Now()
	st := f.RawFileSystem.RemoveXAttr(cancel, header, attr)
	f.c.observe(OpRemovexattr, t, failed(st))
	return st
}

func (f *countingFS) Create(cancel <-chan struct{}, input *gofuse.CreateIn, name string, out *gofuse.CreateOut) gofuse.Status {
	t := time.Now()
	st := f.RawFileSystem.Create(cancel, input, name, out)
	f.c.observe(OpCreate, t, failed(st))
	return st
}

func (f *countingFS) Open(cancel <-chan struct{}, input *gofuse.OpenIn, out *gofuse.OpenOut) gofuse.Status {
	t := time.Now()
	st := f.RawFileSystem.Open(cancel, input, out)
	f.c.observe(OpOpen, t, failed(st))
	return st
}

func (f *countingFS) Lseek(cancel <-chan struct{}, in *gofuse.LseekIn, out *gofuse.LseekOut) gofuse.Status {
	t := time.Now()
	st := f.RawFileSystem.Lseek(cancel, in, out)
	f.c.observe(OpLseek, t, failed(st))
	return st
}

func (f *countingFS) GetLk(cancel <-chan struct{}, input *gofuse.LkIn, out *gofuse.LkOut) gofuse.Status {
	t := time.Now()
	st := f.RawFileSystem.GetLk(cancel, input, out)
	f.c.observe(OpGetlk, t, failed(st))
	return st
}

func (f *countingFS) SetLk(cancel <-chan struct{}, input *gofuse.LkIn) gofuse.Status {
	t := time.Now()
	st := f.RawFileSystem.SetLk(cancel, input)
	f.c.observe(OpSetlk, t, failed(st))
	return st
}

func (f *countingFS) SetLkw(cancel <-chan struct{}, input *gofuse.LkIn) gofuse.Status {
	t := time.Now()
	st := f.RawFileSystem.SetLkw(cancel, input)
	f.c.observe(OpSetlkw, t, failed(st))
	return st
}

func (f *countingFS) Flush(cancel <-chan struct{}, input *gofuse.FlushIn) gofuse.Status {
	t := time.Now()
	st := f.RawFileSystem.Flush(cancel, input)
	f.c.observe(OpFlush, t, failed(st))
	return st
}

func (f *countingFS) Fsync(cancel <-chan struct{}, input *gofuse.FsyncIn) gofuse.Status {
	t := time.Now()
	st := f.RawFileSystem.Fsync(cancel, input)
	f.c.observe(OpFsync, t, failed(st))
	return st
}

func (f *countingFS) Fallocate(cancel <-chan struct{}, input *gofuse.FallocateIn) gofuse.Status {
	t := time.Now()
	st := f.RawFileSystem.Fallocate(cancel, input)
	f.c.observe(OpFallocate, t, failed(st))
	return st
}

func (f *countingFS) OpenDir(cancel <-chan struct{}, input *gofuse.OpenIn, out *gofuse.OpenOut) gofuse.Status {
	t := time.Now()
	st := f.RawFileSystem.OpenDir(cancel, input, out)
	f.c.observe(OpOpendir, t, failed(st))
	return st
}

func (f *countingFS) ReadDir(cancel <-chan struct{}, input *gofuse.ReadIn, out *gofuse.DirEntryList) gofuse.Status {
	t := time.Now()
	st := f.RawFileSystem.ReadDir(cancel, input, out)
	f.c.observe(OpReaddir, t, failed(st))
	return st
}

func (f *countingFS) ReadDirPlus(cancel <-chan struct{}, input *gofuse.ReadIn, out *gofuse.DirEntryList) gofuse.Status {
	t := time.Now()
	st := f.RawFileSystem.ReadDirPlus(cancel, input, out)
	f.c.observe(OpReaddirplus, t, failed(st))
	return st
}

func (f *countingFS) FsyncDir(cancel <-chan struct{}, input *gofuse.FsyncIn) gofuse.Status {
	t := time.Now()
	st := f.RawFileSystem.FsyncDir(cancel, input)
	f.c.observe(OpFsyncdir, t, failed(st))
	return st
}

func (f *countingFS) StatFs(cancel <-chan struct{}, input *gofuse.InHeader, out *gofuse.StatfsOut) gofuse.Status {
	t := time.Now()
	st := f.RawFileSystem.StatFs(cancel, input, out)
	f.c.observe(OpStatfs, t, failed(st))
	return st
}

func (f *countingFS) Statx(cancel <-chan struct{}, input *gofuse.StatxIn, out *gofuse.StatxOut) gofuse.Status {
	t := time.Now()
	st := f.RawFileSystem.Statx(cancel, input, out)
	f.c.observe(OpStatx, t, failed(st))
	return st
}

func (f *countingFS) Forget(nodeid, nlookup uint64) {
	t := time.Now()
	f.RawFileSystem.Forget(nodeid, nlookup)
	f.c.observe(OpForget, t, false)
}

func (f *countingFS) Readlink(cancel <-chan struct{}, header *gofuse.InHeader) ([]byte, gofuse.Status) {
	t := time.Now()
	b, st := f.RawFileSystem.Readlink(cancel, header)
	f.c.observe(OpReadlink, t, failed(st))
	return b, st
}

func (f *countingFS) GetXAttr(cancel <-chan struct{}, header *gofuse.InHeader, attr string, dest []byte) (uint32, gofuse.Status) {
	t := time.Now()
	n, st := f.RawFileSystem.GetXAttr(cancel, header, attr, dest)
	f.c.observe(OpGetxattr, t, failed(st))
	return n, st
}

func (f *countingFS) ListXAttr(cancel <-chan struct{}, header *gofuse.InHeader, dest []byte) (uint32, gofuse.Status) {
	t := time.Now()
	n, st := f.RawFileSystem.ListXAttr(cancel, header, dest)
	f.c.observe(OpListxattr, t, failed(st))
	return n, st
}

func (f *countingFS) Read(cancel <-chan struct{}, input *gofuse.ReadIn, buf []byte) (gofuse.ReadResult, gofuse.Status) {
	t := time.Now()
	r, st := f.RawFileSystem.Read(cancel, input, buf)
	f.c.observe(OpRead, t, failed(st))
	return r, st
}

func (f *countingFS) Release(cancel <-chan struct{}, input *gofuse.ReleaseIn) {
	t := time.Now()
	f.RawFileSystem.Release(cancel, input)
	f.c.observe(OpRelease, t, false)
}

func (f *countingFS) ReleaseDir(input *gofuse.ReleaseIn) {
	t := time.Now()
	f.RawFileSystem.ReleaseDir(input)
	f.c.observe(OpReleasedir, t, false)
}

func (f *countingFS) Write(cancel <-chan struct{}, input *gofuse.WriteIn, data []byte) (uint32, gofuse.Status) {
	t := time.Now()
	n, st := f.RawFileSystem.Write(cancel, input, data)
	f.c.observe(OpWrite, t, failed(st))
	return n, st
}

// Writev is how go-fuse delivers a WRITE first; on ENOSYS it calls Write,
// which counts it then.
func (f *countingFS) Writev(cancel <-chan struct{}, input *gofuse.WriteIn, data [][]byte) (uint32, gofuse.Status) {
	t := time.Now()
	n, st := f.RawFileSystem.Writev(cancel, input, data)
	if st != gofuse.ENOSYS {
		f.c.observe(OpWrite, t, failed(st))
	}
	return n, st
}

func (f *countingFS) CopyFileRange(cancel <-chan struct{}, input *gofuse.CopyFileRangeIn) (uint32, gofuse.Status) {
	t := time.Now()
	n, st := f.RawFileSystem.CopyFileRange(cancel, input)
	f.c.observe(OpCopyFileRange, t, failed(st))
	return n, st
}

func (f *countingFS) Ioctl(cancel <-chan struct{}, input *gofuse.IoctlIn, inbuf []byte, output *gofuse.IoctlOut, outbuf []byte) gofuse.Status {
	t := time.Now()
	st := f.RawFileSystem.Ioctl(cancel, input, inbuf, output, outbuf)
	f.c.observe(OpIoctl, t, failed(st))
	return st
}
