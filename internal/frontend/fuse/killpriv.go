package fuse

import (
	"context"
	"sync"
	"syscall"

	"github.com/cairn-fs/cairn/internal/store"
	gofuse "github.com/hanwen/go-fuse/v2/fuse"
)

// Clearing suid and sgid (FUSE_HANDLE_KILLPRIV_V2). Without it, the kernel
// asks the mount for a file's security.capability xattr before every
// WRITE (one more round trip per write call: 4,731 for a 620 MB cp) and
// clears the bits itself with a SETATTR. With it, the kernel asks once per
// inode, and the mount clears the bits where Linux would:
//   - a WRITE flagged WRITE_KILL_SUIDGID, and an OPEN flagged
//     OPEN_KILL_SUIDGID (O_TRUNC), by a caller without CAP_FSETID: the
//     kernel decides, the flags say so;
//   - a SETATTR flagged FATTR_KILL_SUIDGID (a truncation by such a
//     caller);
//   - a chown (a new uid or gid) of a file that is not a directory,
//     whoever makes it, and a SETATTR with nothing in it (what the kernel
//     sends for chown(f, -1, -1) and for its own privilege removal).
//
// S_ISUID is cleared; S_ISGID only with S_IXGRP (without it, sgid means
// mandatory locking, which a write keeps), as Linux's
// setattr_should_drop_sgid does for a caller in the file's group.

// killPrivFS wraps the go-fuse raw file system and tells the node methods
// which WRITE and OPEN requests carry a kill flag: go-fuse's fs API passes
// neither WriteIn.WriteFlags nor OpenIn's open flags on. The request is
// known by its cancel channel, which the fs API passes on as the
// gofuse.Context's Cancel and which no two requests in flight share.
type killPrivFS struct {
	gofuse.RawFileSystem
	kill sync.Map // <-chan struct{} → struct{}: requests flagged
}

func (f *killPrivFS) String() string { return f.RawFileSystem.String() }

func (f *killPrivFS) Write(cancel <-chan struct{}, in *gofuse.WriteIn, data []byte) (uint32, gofuse.Status) {
	if in.WriteFlags&gofuse.WRITE_KILL_SUIDGID != 0 {
		f.kill.Store(cancel, struct{}{})
		defer f.kill.Delete(cancel)
	}
	return f.RawFileSystem.Write(cancel, in, data)
}

func (f *killPrivFS) Writev(cancel <-chan struct{}, in *gofuse.WriteIn, data [][]byte) (uint32, gofuse.Status) {
	if in.WriteFlags&gofuse.WRITE_KILL_SUIDGID != 0 {
		f.kill.Store(cancel, struct{}{})
		defer f.kill.Delete(cancel)
	}
	return f.RawFileSystem.Writev(cancel, in, data)
}

func (f *killPrivFS) Open(cancel <-chan struct{}, in *gofuse.OpenIn, out *gofuse.OpenOut) gofuse.Status {
	if in.Mode&gofuse.OPEN_KILL_SUIDGID != 0 {
		f.kill.Store(cancel, struct{}{})
		defer f.kill.Delete(cancel)
	}
	return f.RawFileSystem.Open(cancel, in, out)
}

// killFlagged reports whether the request behind ctx (the gofuse.Context
// go-fuse made for it, not wrapped) asks to clear suid and sgid.
func (m *Mount) killFlagged(ctx context.Context) bool {
	c, ok := ctx.(*gofuse.Context)
	if !ok || m.kp == nil {
		return false
	}
	_, ok = m.kp.kill.Load(c.Cancel)
	return ok
}

// withoutPrivs is mode without the bits a write, truncation or chown
// clears.
func withoutPrivs(mode uint32) uint32 {
	mode &^= syscall.S_ISUID
	if mode&syscall.S_IXGRP != 0 {
		mode &^= syscall.S_ISGID
	}
	return mode
}

// dropPrivs clears file n's suid and sgid bits (withoutPrivs), through
// its uncommitted attributes like a chmod, and drops the kernel's cached
// attributes of it (a WRITE's answer carries none).
func (n *node) dropPrivs(ctx context.Context) error {
	if n.IsDir() {
		return nil
	}
	a, _ := n.attrsNow()
	mode := a.mode
	if n.unlocalAttrs() {
		info, err := n.stat(ctx)
		if err != nil {
			return err
		}
		mode = info.Mode & 0o7777
	}
	if withoutPrivs(mode) == mode {
		return nil
	}
	m := withoutPrivs(mode)
	if err := n.setLocal(ctx, store.SetAttrs{Mode: &m}); err != nil {
		return err
	}
	n.m.queue(inval{child: n.EmbeddedInode()})
	return nil
}

// unlocalAttrs reports whether n has no uncommitted attributes.
func (n *node) unlocalAttrs() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.local == nil
}

// setattrDropsPrivs reports whether SETATTR in clears suid and sgid: it
// says so (a truncation by a caller without CAP_FSETID), or it is a chown
// (a uid or gid, or nothing at all: chown(f, -1, -1), the kernel's own
// privilege removal) that sets no mode itself.
func setattrDropsPrivs(in *gofuse.SetAttrIn) bool {
	if in.Valid&gofuse.FATTR_KILL_SUIDGID != 0 {
		return true
	}
	if in.Valid&gofuse.FATTR_MODE != 0 {
		return false
	}
	if in.Valid&(gofuse.FATTR_UID|gofuse.FATTR_GID) != 0 {
		return true
	}
	return in.Valid&^(gofuse.FATTR_FH|gofuse.FATTR_LOCKOWNER) == 0
}
