package meta

import (
	"cmp"
	"encoding/binary"
)

// --- readers ---

func (r *Reader) lockState(ino Ino) (*lockState, error) {
	v, ok, err := r.get(lockKey(ino))
	if err != nil || !ok {
		return &lockState{}, err
	}
	return decodeLockState(v)
}

// Locks returns the granted locks and the waiters of ino, in order.
func (r *Reader) Locks(ino Ino) (held, waiting []Lock, err error) {
	s, err := r.lockState(ino)
	if err != nil {
		return nil, nil, err
	}
	return s.Held, s.Waiting, nil
}

// LockTable is the table of one inode (Reader.AllLocks).
type LockTable struct {
	Ino     Ino
	Path    string // "bucket/path" as the last requester knew it
	Held    []Lock
	Waiting []Lock
}

// LockConflict returns the first granted lock of ino that conflicts with
// l (F_GETLK), or nil.
func (r *Reader) LockConflict(ino Ino, l Lock) (*Lock, error) {
	s, err := r.lockState(ino)
	if err != nil {
		return nil, err
	}
	return s.conflict(&l), nil
}

// AllLocks calls fn for every inode with locks or waiters, in inode order,
// until it returns false.
func (r *Reader) AllLocks(fn func(LockTable) bool) error {
	var derr error
	err := r.r.Scan([]byte{pLock}, []byte{pLock + 1}, func(k, v []byte) bool {
		if len(k) != 9 {
			derr = errCorrupt("lock key of %d bytes", len(k))
			return false
		}
		s, err := decodeLockState(v)
		if err != nil {
			derr = err
			return false
		}
		return fn(LockTable{Ino: Ino(binary.BigEndian.Uint64(k[1:])), Path: s.Path, Held: s.Held, Waiting: s.Waiting})
	})
	return cmp.Or(err, derr)
}

// LockSession returns node's lock session, or nil if it has none.
func (r *Reader) LockSession(node uint64) (*LockSession, error) {
	v, ok, err := r.get(lockSessionKey(node))
	if err != nil || !ok {
		return nil, err
	}
	return decodeLockSession(node, v)
}

// LockSessions returns every node's lock session, by node.
func (r *Reader) LockSessions() ([]*LockSession, error) {
	var out []*LockSession
	var derr error
	err := r.r.Scan([]byte{pLockSess}, []byte{pLockSess + 1}, func(k, v []byte) bool {
		if len(k) != 9 {
			derr = errCorrupt("lock session key of %d bytes", len(k))
			return false
		}
		s, err := decodeLockSession(binary.BigEndian.Uint64(k[1:]), v)
		if err != nil {
			derr = err
			return false
		}
		out = append(out, s)
		return true
	})
	return out, cmp.Or(err, derr)
}
