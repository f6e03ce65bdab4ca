package fuse

import (
	"context"
	"io"
	"syscall"

	"github.com/cairn-fs/cairn/internal/store"
	"github.com/hanwen/go-fuse/v2/fs"
	gofuse "github.com/hanwen/go-fuse/v2/fuse"
)

// handle is an open file. A writable one shares the node's content being
// written; a read-only one reads the node's content being written when
// there is one, else the committed version.
type handle struct {
	n        *node
	writable bool
	obj      store.Object // the committed version read, opened at the first read; kept until release
}

var (
	_ fs.FileReader    = (*handle)(nil)
	_ fs.FileWriter    = (*handle)(nil)
	_ fs.FileFlusher   = (*handle)(nil)
	_ fs.FileFsyncer   = (*handle)(nil)
	_ fs.FileReleaser  = (*handle)(nil)
	_ fs.FileAllocater = (*handle)(nil)
)

// Read reads from the content being written, or from the committed file.
func (h *handle) Read(ctx context.Context, dest []byte, off int64) (gofuse.ReadResult, syscall.Errno) {
	n := h.n
	n.mu.Lock()
	if w := n.write; w != nil {
		k, err := w.f.ReadAt(dest, off)
		n.mu.Unlock()
		if err != nil && err != io.EOF {
			return nil, errno(err)
		}
		return gofuse.ReadResultData(dest[:k]), 0
	}
	n.mu.Unlock()
	// The version opened first is read until the handle is released: a
	// file unlinked or replaced while open keeps its data for it.
	if h.obj == nil {
		obj, err := n.open(ctx)
		if err != nil {
			return nil, errno(err)
		}
		h.obj = obj
	}
	obj := h.obj
	if off >= obj.Info().Size {
		return gofuse.ReadResultData(nil), 0
	}
	k, err := obj.ReadAt(dest, off)
	if err != nil && err != io.EOF {
		return nil, errno(err)
	}
	return gofuse.ReadResultData(dest[:k]), 0
}

// Write writes into the content being written.
func (h *handle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	if !h.writable {
		return 0, syscall.EBADF
	}
	n := h.n
	n.mu.Lock()
	defer n.mu.Unlock()
	w := n.write
	if w == nil {
		return 0, syscall.EBADF
	}
	k, err := w.f.WriteAt(data, off)
	w.dirty = true
	if err != nil {
		return uint32(k), errno(err)
	}
	return uint32(k), 0
}

// Flush publishes what was written (close(2) reports its failure).
func (h *handle) Flush(ctx context.Context) syscall.Errno {
	ctx, cancel := bounded(ctx)
	defer cancel()
	if !h.writable {
		return 0
	}
	return errno(h.n.publish(ctx))
}

// Fsync publishes what was written: when it returns the data is durable
// on W replicas and committed.
func (h *handle) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	ctx, cancel := bounded(ctx)
	defer cancel()
	if !h.writable {
		return 0
	}
	return errno(h.n.publish(ctx))
}

// Release publishes what is left and drops the handle.
func (h *handle) Release(ctx context.Context) syscall.Errno {
	ctx, cancel := bounded(ctx)
	defer cancel()
	if h.obj != nil {
		h.obj.Close()
	}
	if !h.writable {
		return 0
	}
	return errno(h.n.release(ctx))
}

// Allocate (posix_fallocate, mode 0) extends the content being written to
// off+size bytes; punching holes and other modes are not supported.
func (h *handle) Allocate(ctx context.Context, off uint64, size uint64, mode uint32) syscall.Errno {
	if mode != 0 {
		return syscall.EOPNOTSUPP
	}
	if !h.writable {
		return syscall.EBADF
	}
	n := h.n
	n.mu.Lock()
	defer n.mu.Unlock()
	w := n.write
	if w == nil {
		return syscall.EBADF
	}
	if end := int64(off + size); end > w.size() {
		if err := w.truncate(end); err != nil {
			return errno(err)
		}
	}
	return 0
}
