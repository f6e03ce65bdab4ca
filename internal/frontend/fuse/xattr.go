package fuse

import (
	"context"
	"strings"
	"syscall"

	"github.com/cairn-fs/cairn/internal/store"
)

// xattrAllowed: only the user namespace is kept (ACLs and security labels
// are not supported yet: ENOTSUP, so tools fall back).
func xattrAllowed(name string) bool {
	return strings.HasPrefix(name, "user.") || name == aclAccess || name == aclDefault
}

// Getxattr copies attribute attr into dest (or reports its size).
func (n *node) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	if !xattrAllowed(attr) {
		return 0, syscall.ENODATA
	}
	xs, err := n.xattrs(ctx)
	if err != nil {
		return 0, errno(err)
	}
	v, ok := xs[attr]
	if !ok {
		return 0, syscall.ENODATA
	}
	if len(dest) < len(v) {
		return uint32(len(v)), syscall.ERANGE
	}
	return uint32(copy(dest, v)), 0
}

// Setxattr sets attribute attr (XATTR_CREATE / XATTR_REPLACE honoured).
func (n *node) Setxattr(ctx context.Context, attr string, data []byte, flags uint32) syscall.Errno {
	ctx, cancel := bounded(ctx)
	defer cancel()
	if !xattrAllowed(attr) {
		return syscall.ENOTSUP
	}
	if len(attr) > 255 || len(data) > 64<<10 {
		return syscall.E2BIG
	}
	n.queueDirty() // the attribute goes on the file as written
	n.m.wb.drain()
	xs, err := n.m.cfg.Store.Xattrs(ctx, n.m.cfg.Bucket, n.storePath())
	if err != nil {
		return errno(err)
	}
	_, exists := xs[attr]
	switch {
	case flags&0x1 != 0 && exists: // XATTR_CREATE
		return syscall.EEXIST
	case flags&0x2 != 0 && !exists: // XATTR_REPLACE
		return syscall.ENODATA
	}
	v := append([]byte{}, data...) // never nil: nil removes
	set := store.SetAttrs{Xattrs: map[string][]byte{attr: v}}
	if attr == aclAccess {
		// The mode's permission bits follow the access ACL (owner, mask or
		// group, other), in the same change: the kernel consults an ACL
		// only when the mode's group bits allow something.
		info, err := n.stat(ctx)
		if err != nil {
			return errno(err)
		}
		mode, ok := aclMode(v, info.Mode)
		if !ok {
			return syscall.EINVAL
		}
		set.Mode = &mode
	}
	_, err = n.m.cfg.Store.SetAttrs(ctx, n.m.cfg.Bucket, n.storePath(), set)
	return errno(err)
}

// Listxattr lists the attribute names, NUL-terminated.
func (n *node) Listxattr(ctx context.Context, dest []byte) (uint32, syscall.Errno) {
	xs, err := n.xattrs(ctx)
	if err != nil {
		return 0, errno(err)
	}
	var names []byte
	for k := range xs {
		if xattrAllowed(k) {
			names = append(append(names, k...), 0)
		}
	}
	if len(dest) < len(names) {
		return uint32(len(names)), syscall.ERANGE
	}
	return uint32(copy(dest, names)), 0
}

// Removexattr removes attribute attr.
func (n *node) Removexattr(ctx context.Context, attr string) syscall.Errno {
	ctx, cancel := bounded(ctx)
	defer cancel()
	if !xattrAllowed(attr) {
		return syscall.ENOTSUP
	}
	n.queueDirty()
	n.m.wb.drain()
	xs, err := n.m.cfg.Store.Xattrs(ctx, n.m.cfg.Bucket, n.storePath())
	if err != nil {
		return errno(err)
	}
	if _, ok := xs[attr]; !ok {
		return syscall.ENODATA
	}
	_, err = n.m.cfg.Store.SetAttrs(ctx, n.m.cfg.Bucket, n.storePath(), store.SetAttrs{Xattrs: map[string][]byte{attr: nil}})
	return errno(err)
}

// xattrs returns n's extended attributes: none for a file created here
// and not published yet.
func (n *node) xattrs(ctx context.Context) (map[string][]byte, error) {
	xs, local, err := storeRead(n, func() (map[string][]byte, error) {
		return n.m.cfg.Store.Xattrs(ctx, n.m.cfg.Bucket, n.storePath())
	})
	if local {
		return nil, nil
	}
	return xs, err
}
