package fuse

import (
	"encoding/binary"
	"testing"
)

// acl builds an xattr ACL of (tag, perm) entries (ids 0).
func acl(entries ...[2]uint16) []byte {
	b := binary.LittleEndian.AppendUint32(nil, 2)
	for _, e := range entries {
		b = binary.LittleEndian.AppendUint16(b, e[0])
		b = binary.LittleEndian.AppendUint16(b, e[1])
		b = binary.LittleEndian.AppendUint32(b, 0)
	}
	return b
}

func TestACLMode(t *testing.T) {
	withMask := acl([2]uint16{aclUserObj, 6}, [2]uint16{0x02, 7}, [2]uint16{aclGroupObj, 0}, [2]uint16{aclMask, 5}, [2]uint16{aclOther, 4})
	noMask := acl([2]uint16{aclUserObj, 7}, [2]uint16{aclGroupObj, 5}, [2]uint16{aclOther, 0})
	for _, c := range []struct {
		acl  []byte
		mode uint32
		want uint32
		ok   bool
	}{
		{withMask, 0o4000, 0o4654, true}, // the mask gives the group bits; setuid kept
		{noMask, 0o644, 0o750, true},
		{[]byte{1, 0, 0, 0}, 0, 0, false},         // version 1
		{withMask[:len(withMask)-3], 0, 0, false}, // cut
	} {
		got, ok := aclMode(c.acl, c.mode)
		if ok != c.ok || (ok && got != c.want) {
			t.Errorf("aclMode(%x, %o) = %o, %v; want %o, %v", c.acl, c.mode, got, ok, c.want, c.ok)
		}
	}
	// Narrowed by a create mode of 0640: owner rw, mask r, other none; the
	// named user's entry is left (the mask limits it).
	n := aclNarrow(withMask, 0o640)
	if m, _ := aclMode(n, 0); m != 0o640 {
		t.Errorf("narrowed ACL's mode %o, want 0640", m)
	}
	if p := binary.LittleEndian.Uint16(n[4+8+2:]); p != 7 {
		t.Errorf("named user's perm %d, want 7 (kept)", p)
	}
}
