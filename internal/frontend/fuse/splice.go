package fuse

import (
	"syscall"

	"github.com/cairn-fs/cairn/internal/store"
	gofuse "github.com/hanwen/go-fuse/v2/fuse"
)

// spliceMin is the smallest READ answered by splicing the bytes from the
// volume file into /dev/fuse (go-fuse moves them through a pipe, never
// through this process's memory). Below it the pipe's extra system calls
// cost more than the copy they save.
const spliceMin = 64 << 10

// spliceRead is a READ's answer read straight from the local volume file
// holding the bytes (store.LocalAccess.LocalSpan). go-fuse splices it
// (Seekable), or calls Bytes when it cannot; Done, called once the answer
// is written, lets the volume go (until then compaction keeps it open).
type spliceRead struct {
	fd      uintptr
	off     int64
	sz      int
	release func()
}

// Seekable is what go-fuse splices from.
func (r *spliceRead) Seekable() (uintptr, int64, int) { return r.fd, r.off, r.sz }

// Bytes reads the bytes into buf when go-fuse does not splice.
func (r *spliceRead) Bytes(buf []byte) ([]byte, gofuse.Status) {
	n, err := syscall.Pread(int(r.fd), buf[:min(len(buf), r.sz)], r.off)
	if err != nil {
		return nil, gofuse.ToStatus(err)
	}
	return buf[:n], gofuse.OK
}

func (r *spliceRead) Size() int { return r.sz }
func (r *spliceRead) Done()     { r.release() }

// localRead answers a READ of n bytes at off of obj without copying them,
// when they are one piece of a local volume file (ok false otherwise: the
// caller reads them with ReadAt).
func (m *Mount) localRead(obj store.Object, off int64, n int) (gofuse.ReadResult, bool) {
	la, ok := obj.(store.LocalAccess)
	if !ok || n < spliceMin {
		return nil, false
	}
	f, fileOff, release, ok := la.LocalSpan(off, int64(n))
	if !ok {
		return nil, false
	}
	m.calls.zeroCopy.Add(uint64(n))
	return &spliceRead{fd: f.Fd(), off: fileOff, sz: n, release: release}, true
}
