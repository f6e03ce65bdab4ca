package meta

import (
	"encoding/binary"
	"fmt"
)

// --- keys and encodings ---

// Lock keys: the table of an inode, a session, and the waits of an owner
// (for deadlock detection).
const (
	pLock      = 'l'
	pLockSess  = 's'
	pLockWaits = 'w'
)

func lockKey(ino Ino) []byte { return binary.BigEndian.AppendUint64([]byte{pLock}, uint64(ino)) }

func lockSessionKey(node uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{pLockSess}, node)
}

func ownerWaitsPrefix(o LockOwner) []byte {
	k := binary.BigEndian.AppendUint64([]byte{pLockWaits}, o.Node)
	k = binary.BigEndian.AppendUint64(k, o.Epoch)
	return binary.BigEndian.AppendUint64(k, o.ID)
}

func ownerWaitKey(o LockOwner, ino Ino) []byte {
	return binary.BigEndian.AppendUint64(ownerWaitsPrefix(o), uint64(ino))
}

func appendLock(e *encoder, l *Lock) {
	e.uvarint(l.Owner.Node)
	e.uvarint(l.Owner.Epoch)
	e.uvarint(l.Owner.ID)
	e.byte1(byte(l.Kind))
	e.byte1(byte(l.Type))
	e.uvarint(l.Start)
	e.uvarint(l.End)
	e.uvarint(uint64(l.Pid))
	e.uvarint(l.WaitID)
	e.varint(l.SinceNs)
}

func decodeLock(d *decoder) Lock {
	var l Lock
	l.Owner.Node = d.uvarint()
	l.Owner.Epoch = d.uvarint()
	l.Owner.ID = d.uvarint()
	l.Kind = LockKind(d.byte1())
	l.Type = LockType(d.byte1())
	l.Start = d.uvarint()
	l.End = d.uvarint()
	l.Pid = d.u32()
	l.WaitID = d.uvarint()
	l.SinceNs = d.varint()
	return l
}

func appendLockCmd(e *encoder, c *LockCmd) {
	e.uvarint(uint64(c.Ino))
	appendLock(e, &c.Lock)
	e.bool1(c.Wait)
	e.str(c.Path)
	e.varint(c.LeaseNs)
	e.varint(c.RenewNs)
}

func decodeLockCmd(d *decoder) *LockCmd {
	c := &LockCmd{Ino: Ino(d.uvarint())}
	c.Lock = decodeLock(d)
	c.Wait = d.bool1()
	c.Path = d.str()
	c.LeaseNs = d.varint()
	c.RenewNs = d.varint()
	return c
}

// encodeLockState writes version 1, or version 2 (lockrights.go) when
// the inode's lock right is held: a table without one reads on binaries
// from before rights, and none holds one before every node reads them.
func encodeLockState(s *lockState) []byte {
	e := encoder{}
	if s.Right != nil {
		e.byte1(lockRightTableVersion)
	} else {
		e.byte1(lockVersion)
	}
	e.str(s.Path)
	e.uvarint(uint64(len(s.Held)))
	for i := range s.Held {
		appendLock(&e, &s.Held[i])
	}
	e.uvarint(uint64(len(s.Waiting)))
	for i := range s.Waiting {
		appendLock(&e, &s.Waiting[i])
	}
	if s.Right != nil {
		e.uvarint(s.Right.Node)
		e.uvarint(s.Right.Session)
		e.uvarint(s.Right.Seq)
	}
	return e.b
}

func decodeLockState(p []byte) (*lockState, error) {
	d := decoder{b: p}
	v := d.byte1()
	if d.err == nil && v != lockVersion && v != lockRightTableVersion {
		return nil, errCorrupt("lock table version %d", v)
	}
	s := &lockState{Path: d.str()}
	for n := d.count(maxLockEntries); n > 0 && d.err == nil; n-- {
		s.Held = append(s.Held, decodeLock(&d))
	}
	for n := d.count(maxLockEntries); n > 0 && d.err == nil; n-- {
		s.Waiting = append(s.Waiting, decodeLock(&d))
	}
	if v == lockRightTableVersion {
		s.Right = &LockRight{Node: d.uvarint(), Session: d.uvarint(), Seq: d.uvarint()}
	}
	if err := d.done(); err != nil {
		return nil, fmt.Errorf("decode lock table: %w", err)
	}
	return s, nil
}

func encodeLockSession(s *LockSession) []byte {
	e := encoder{}
	e.byte1(lockVersion)
	e.uvarint(s.Epoch)
	e.varint(s.LeaseNs)
	e.varint(s.RenewNs)
	e.bool1(s.Expired)
	e.uvarint(uint64(len(s.Inos)))
	for _, ino := range s.Inos {
		e.uvarint(uint64(ino))
	}
	return e.b
}

func decodeLockSession(node uint64, p []byte) (*LockSession, error) {
	d := decoder{b: p}
	if v := d.byte1(); d.err == nil && v != lockVersion {
		return nil, errCorrupt("lock session version %d", v)
	}
	s := &LockSession{Node: node, Epoch: d.uvarint(), LeaseNs: d.varint(), RenewNs: d.varint(), Expired: d.bool1()}
	for n := d.count(maxLockInos); n > 0 && d.err == nil; n-- {
		s.Inos = append(s.Inos, Ino(d.uvarint()))
	}
	if err := d.done(); err != nil {
		return nil, fmt.Errorf("decode lock session: %w", err)
	}
	return s, nil
}
