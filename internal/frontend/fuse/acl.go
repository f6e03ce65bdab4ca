package fuse

import (
	"context"
	"encoding/binary"

	"github.com/cairn-fs/cairn/internal/store"
)

// The POSIX ACL xattrs (the kernel checks them, CAP_POSIX_ACL), kept on
// the inode like any xattr.
const (
	aclAccess  = "system.posix_acl_access"
	aclDefault = "system.posix_acl_default"
)

// POSIX ACL entry tags of the xattr format: version 2 (4 bytes), then
// entries of tag (2), perm (2), id (4), little-endian.
const (
	aclUserObj  = 0x01
	aclGroupObj = 0x04
	aclMask     = 0x10
	aclOther    = 0x20
)

// aclMode returns mode with its permission bits taken from the access ACL
// acl: owner from USER_OBJ, group from MASK (or GROUP_OBJ without one),
// other from OTHER; setuid, setgid and sticky bits are kept. ok is false
// for a malformed ACL.
func aclMode(acl []byte, mode uint32) (uint32, bool) {
	if len(acl) < 4 || (len(acl)-4)%8 != 0 || binary.LittleEndian.Uint32(acl) != 2 {
		return 0, false
	}
	var owner, group, mask, other uint32
	hasMask := false
	for e := acl[4:]; len(e) > 0; e = e[8:] {
		tag, perm := binary.LittleEndian.Uint16(e), uint32(binary.LittleEndian.Uint16(e[2:]))&7
		switch tag {
		case aclUserObj:
			owner = perm
		case aclGroupObj:
			group = perm
		case aclMask:
			mask, hasMask = perm, true
		case aclOther:
			other = perm
		}
	}
	if hasMask {
		group = mask
	}
	return mode&0o7000 | owner<<6 | group<<3 | other, true
}

// aclNarrow returns a copy of acl whose owner, mask (or group, without a
// mask) and other entries allow no more than mode's bits (POSIX's
// posix_acl_create).
func aclNarrow(acl []byte, mode uint32) []byte {
	out := append([]byte{}, acl...)
	hasMask := false
	for e := out[4:]; len(e) >= 8; e = e[8:] {
		hasMask = hasMask || binary.LittleEndian.Uint16(e) == aclMask
	}
	for e := out[4:]; len(e) >= 8; e = e[8:] {
		var bits uint32
		switch tag := binary.LittleEndian.Uint16(e); {
		case tag == aclUserObj:
			bits = mode >> 6 & 7
		case tag == aclMask, tag == aclGroupObj && !hasMask:
			bits = mode >> 3 & 7
		case tag == aclOther:
			bits = mode & 7
		default:
			continue
		}
		binary.LittleEndian.PutUint16(e[2:], binary.LittleEndian.Uint16(e[2:])&uint16(bits))
	}
	return out
}

// inheritACL gives a new file or directory at p, made in directory n, the
// default ACL of n, as the kernel would on a local file system: its access
// ACL is the default (a directory also keeps it as its default), and its
// mode is narrowed by it. Without a default ACL nothing changes.
func (n *node) inheritACL(ctx context.Context, p string, dir bool, mode uint32) {
	xs, err := n.m.cfg.Store.Xattrs(ctx, n.m.cfg.Bucket, n.storePath())
	def := xs[aclDefault]
	if err != nil || len(def) == 0 {
		return
	}
	m, ok := aclMode(def, mode)
	if !ok {
		return
	}
	m &= mode | 0o7000 // the mode asked for bounds the ACL's (the umask is not applied under a default ACL)
	set := store.SetAttrs{Mode: &m, Xattrs: map[string][]byte{aclAccess: aclNarrow(def, m)}}
	if dir {
		set.Xattrs[aclDefault] = def
	}
	if _, err := n.m.cfg.Store.SetAttrs(ctx, n.m.cfg.Bucket, p, set); err != nil {
		n.m.cfg.Logger.Warn("mount: inheriting a default ACL failed", "path", p, "err", err)
	}
}
