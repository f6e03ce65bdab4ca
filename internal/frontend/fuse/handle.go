package fuse

import (
	"context"
	"errors"
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
	obj      store.Object // read-only: the version opened, read once the inode is gone (unlinked while open); kept until release
	noOpen   bool         // made for one call in no-open mode: the node's content, started when missing
	// lockOwners took locks through the handle (locks.go); under n.mu.
	lockOwners map[uint64]bool
}

// In no-open mode (Config.NoOpen) the kernel sends READ, WRITE, FLUSH and
// FALLOCATE with no handle (f nil): they go to the node, through a handle
// made for the call (writable: whatever the descriptor, the kernel
// checked its access mode).
var (
	_ fs.NodeReader    = (*node)(nil)
	_ fs.NodeWriter    = (*node)(nil)
	_ fs.NodeFlusher   = (*node)(nil)
	_ fs.NodeAllocater = (*node)(nil)
)

// fileHandle is f, or the node's own handle in no-open mode.
func (n *node) fileHandle(f fs.FileHandle) *handle {
	if h, ok := f.(*handle); ok {
		return h
	}
	return &handle{n: n, writable: true, noOpen: true}
}

func (n *node) Read(ctx context.Context, f fs.FileHandle, dest []byte, off int64) (gofuse.ReadResult, syscall.Errno) {
	return n.fileHandle(f).Read(ctx, dest, off)
}

func (n *node) Write(ctx context.Context, f fs.FileHandle, data []byte, off int64) (uint32, syscall.Errno) {
	return n.fileHandle(f).Write(ctx, data, off)
}

func (n *node) Flush(ctx context.Context, f fs.FileHandle) syscall.Errno {
	e := n.fileHandle(f).Flush(ctx)
	if n.m.cfg.NoFlush && e == 0 {
		// This close is served; the kernel sends no FLUSH after this
		// answer (fc->no_flush), and the idle publisher takes over.
		return syscall.ENOSYS
	}
	if owner, ok := n.m.lockOwner(ctx); ok {
		// A close releases the process's POSIX locks on the file.
		if le := n.releaseLocks(ctx, owner); e == 0 {
			e = le
		}
	}
	return e
}

func (n *node) Allocate(ctx context.Context, f fs.FileHandle, off uint64, size uint64, mode uint32) syscall.Errno {
	return n.fileHandle(f).Allocate(ctx, off, size, mode)
}

// handleOut is the handle an open or create returns to go-fuse: none in
// no-open mode (the kernel sends no RELEASE that would free it).
func (m *Mount) handleOut(h *handle) fs.FileHandle {
	if m.cfg.NoOpen {
		return nil
	}
	return h
}

var (
	_ fs.FileReader    = (*handle)(nil)
	_ fs.FileWriter    = (*handle)(nil)
	_ fs.FileFlusher   = (*handle)(nil)
	_ fs.FileReleaser  = (*handle)(nil)
	_ fs.FileAllocater = (*handle)(nil)
)

// Read reads from the content being written or queued, or from the
// committed file.
func (h *handle) Read(ctx context.Context, dest []byte, off int64) (gofuse.ReadResult, syscall.Errno) {
	n := h.n
	n.mu.Lock()
	var local io.ReaderAt
	var size int64
	if w := n.write; w != nil && w.f != nil {
		local, size = w.f, w.size()
	} else if p := n.pend; p != nil {
		local, size = p.f, p.size
	}
	if local != nil {
		defer n.mu.Unlock() // the queue closes a published version's file under it
		if off >= size {
			return gofuse.ReadResultData(nil), 0
		}
		k, err := local.ReadAt(dest[:min(int64(len(dest)), size-off)], off)
		if err != nil && err != io.EOF {
			return nil, errno(err)
		}
		return gofuse.ReadResultData(dest[:k]), 0
	}
	n.mu.Unlock()
	// The inode's current version (a rewrite keeps the inode: this handle
	// sees it, as on a local file system; a writer's own version is
	// published under it). A file unlinked or replaced while open keeps
	// the version it was opened with (h.obj, pinned at open).
	obj, err := n.open(ctx)
	switch {
	case err == nil:
		defer obj.Close()
		if h.noOpen {
			n.keep(obj)
		}
	case errors.Is(err, store.ErrNotFound) && h.obj != nil:
		obj = h.obj
	case errors.Is(err, store.ErrNotFound) && h.noOpen && n.pinned() != nil:
		obj = n.pinned() // no-open mode: unlinked or replaced while open
	default:
		return nil, errno(err)
	}
	size = obj.Info().Size
	if off >= size {
		return gofuse.ReadResultData(nil), 0
	}
	if r, ok := n.m.localRead(obj, off, int(min(int64(len(dest)), size-off))); ok {
		return r, 0 // zero-copy: spliced from the volume file
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
	if n.lockLost() {
		return 0, syscall.EIO
	}
	if n.m.killFlagged(ctx) {
		if err := n.dropPrivs(ctx); err != nil {
			return 0, errno(err)
		}
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	w := h.content()
	if w == nil {
		return 0, syscall.EBADF
	}
	if err := n.ensureFile(ctx, w); err != nil {
		return 0, errno(err)
	}
	k, err := w.f.WriteAt(data, off)
	n.changed(w)
	if err != nil {
		return uint32(k), errno(err)
	}
	return uint32(k), 0
}

// Flush queues what was written for publishing (close(2) returns at once)
// and reports a failed earlier publish of the file.
func (h *handle) Flush(ctx context.Context) syscall.Errno {
	if !h.writable {
		return 0
	}
	h.n.queueDirty()
	if err := h.n.takeErr(); err != nil {
		return errno(err)
	}
	if h.n.lockLost() {
		return syscall.EIO
	}
	return 0
}

// Release queues what is left and drops the handle.
func (h *handle) Release(ctx context.Context) syscall.Errno {
	if h.n.m.lk != nil {
		h.releaseHandleLocks(ctx)
	}
	if h.obj != nil {
		h.obj.Close()
	}
	if !h.writable {
		return 0
	}
	return errno(h.n.release())
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
	w := h.content()
	if w == nil {
		return syscall.EBADF
	}
	if err := n.ensureFile(ctx, w); err != nil {
		return errno(err)
	}
	if end := int64(off + size); end > w.size() {
		if err := w.truncate(end); err != nil {
			return errno(err)
		}
		n.changed(w)
	}
	return 0
}

// content is the content h writes (n.mu held): the node's, started in
// no-open mode when there is none (the node keeps it: no RELEASE drops
// it).
func (h *handle) content() *content {
	n := h.n
	if h.noOpen {
		if n.write == nil {
			n.write = &content{}
		}
		if !n.write.dirty { // clean until this write: not in the idle set
			n.m.idle.add(n)
		}
	}
	return n.write
}
