package meta

import (
	"errors"
	"testing"
)

// cached asks for a lock with the right (RightCmd.Cache).
func (lt *lockTester) cached(ino Ino, o LockOwner, typ LockType) Result {
	lt.t.Helper()
	lt.now++
	return lt.apply(Command{Op: OpLock, TimeNs: lt.now, Right: &RightCmd{Cache: true},
		Lock: &LockCmd{Ino: ino, LeaseNs: 5e9, Lock: Lock{Owner: o, Kind: LockPOSIX, Type: typ, End: LockEOF}}})
}

// stamped is a write made under right seq of node o.
func (lt *lockTester) stamped(ino Ino, o LockOwner, seq uint64) error {
	lt.t.Helper()
	lt.now++
	return lt.apply(Command{Op: OpPutRecord, TimeNs: lt.now, Record: &Record{Kind: RecordRule, Name: "r", Value: []byte("v")},
		Right: &RightCmd{Seq: seq, Ino: ino, Node: o.Node, Session: o.Epoch}}).Err
}

func (lt *lockTester) giveBack(ino Ino, o LockOwner, seq uint64, held, waiting []Lock) Result {
	lt.t.Helper()
	lt.now++
	return lt.apply(Command{Op: OpLockReturn, TimeNs: lt.now, Lock: &LockCmd{Ino: ino, Lock: Lock{Owner: o}},
		Right: &RightCmd{Seq: seq, Held: held, Waiting: waiting}})
}

// TestLockRight: a request that finds the table free takes the inode's
// lock right; another node's requests are recalls that change nothing;
// the holder's own requests are refused (it decides them); a write
// stamped with the right applies while it is held and never after; the
// return installs the holder's table, and an expiry drops the right.
func TestLockRight(t *testing.T) {
	lt := newLockTester(t)
	a, b := owner(1, 10), owner(2, 20)
	r := lt.cached(7, a, LockWrite)
	if r.Err != nil || !r.Lock.Granted || r.Lock.RightSeq == 0 {
		t.Fatalf("first request with Cache: %+v %v", r.Lock, r.Err)
	}
	seq := r.Lock.RightSeq
	rd := NewReader(lt.db)
	if rt, _ := rd.LockRight(7); rt == nil || rt.Node != 1 || rt.Seq != seq {
		t.Fatalf("right after the grant: %+v", rt)
	}
	if s, _ := rd.LockSession(1); s == nil || len(s.Inos) != 1 || s.Inos[0] != 7 {
		t.Fatalf("holder's session: %+v", s)
	}

	// Another node: a recall, nothing queued or granted.
	got := lt.set(7, b, LockPOSIX, LockWrite, 0, LockEOF, 5)
	if got.Recall == nil || got.Recall.Node != 1 || got.RightSeq != seq || got.Granted || got.Queued {
		t.Fatalf("another node's request: %+v", got)
	}
	if got := lt.set(7, b, LockPOSIX, LockUnlock, 0, LockEOF, 0); !got.Granted || got.Recall != nil {
		t.Fatalf("another node's unlock: %+v", got)
	}
	if _, w, _ := rd.Locks(7); len(w) != 0 {
		t.Fatalf("waiters after a recall: %+v", w)
	}
	// The holder decides its own.
	if r := lt.do(OpLock, LockCmd{Ino: 7, Lock: Lock{Owner: a, Kind: LockFlock, Type: LockRead, End: LockEOF}}); !errors.Is(r.Err, ErrRightHeld) {
		t.Fatalf("the holder's request in the log: %v", r.Err)
	}

	// Fencing.
	if err := lt.stamped(7, a, seq); err != nil {
		t.Fatalf("a write under the held right: %v", err)
	}
	if err := lt.stamped(7, a, seq+1); !errors.Is(err, ErrFenced) {
		t.Fatalf("a write under another right: %v", err)
	}
	if err := lt.stamped(7, b, seq); !errors.Is(err, ErrFenced) {
		t.Fatalf("a write of another node: %v", err)
	}

	// Returns: the wrong right, a lock of another session, then the real one.
	if r := lt.giveBack(7, a, seq+1, nil, nil); !errors.Is(r.Err, ErrFenced) {
		t.Fatalf("return of another right: %v", r.Err)
	}
	held := []Lock{{Owner: a, Kind: LockPOSIX, Type: LockWrite, Start: 0, End: 99}}
	if r := lt.giveBack(7, a, seq, []Lock{{Owner: b, Kind: LockPOSIX, Type: LockWrite, End: 9}}, nil); !errors.Is(r.Err, ErrInvalid) {
		t.Fatalf("return with another session's lock: %v", r.Err)
	}
	waiting := []Lock{{Owner: owner(1, 11), Kind: LockPOSIX, Type: LockWrite, Start: 50, End: 60, WaitID: 3}}
	if r := lt.giveBack(7, a, seq, held, waiting); r.Err != nil {
		t.Fatalf("return: %v", r.Err)
	}
	if rt, _ := rd.LockRight(7); rt != nil {
		t.Fatalf("right after the return: %+v", rt)
	}
	if h, w, _ := rd.Locks(7); len(h) != 1 || h[0].End != 99 || len(w) != 1 || w[0].WaitID != 3 {
		t.Fatalf("table after the return: %+v %+v", h, w)
	}
	if err := lt.stamped(7, a, seq); !errors.Is(err, ErrFenced) {
		t.Fatalf("a write under the returned right: %v", err)
	}
	// Now node 2 queues in the log, and node 1's release grants it (after
	// the returned waiter, first in line).
	if got := lt.set(7, b, LockPOSIX, LockWrite, 0, 10, 6); !got.Queued || got.Recall != nil {
		t.Fatalf("request after the return: %+v", got)
	}
	if got := lt.set(7, a, LockPOSIX, LockUnlock, 0, LockEOF, 0); len(got.Grants) != 2 || got.Grants[1].Lock.Owner != b {
		t.Fatalf("release after the return: %+v", got)
	}
	// A table with another session's lock gives no right.
	if r := lt.cached(7, owner(1, 12), LockRead); r.Err != nil || r.Lock.Granted || r.Lock.RightSeq != 0 {
		t.Fatalf("request with Cache over another node's lock: %+v %v", r.Lock, r.Err)
	}
	if r := lt.cached(8, owner(1, 12), LockRead); r.Err != nil || r.Lock.RightSeq == 0 {
		t.Fatalf("request with Cache on a free inode: %+v %v", r.Lock, r.Err)
	}
	lt.set(9, b, LockPOSIX, LockRead, 0, 0, 0)
	if r := lt.cached(9, a, LockRead); r.Err != nil || !r.Lock.Granted || r.Lock.RightSeq != 0 {
		t.Fatalf("shared lock with Cache beside another node's: %+v %v", r.Lock, r.Err)
	}

	// Expiry: the right goes with the session, and so does fencing.
	c := owner(3, 30)
	r = lt.cached(11, c, LockWrite)
	if r.Lock.RightSeq == 0 {
		t.Fatalf("node 3's right: %+v", r.Lock)
	}
	s, _ := rd.LockSession(3)
	if e := lt.do(OpLockExpire, LockCmd{Lock: Lock{Owner: LockOwner{Node: 3, Epoch: 1}}, RenewNs: s.RenewNs}); e.Err != nil || len(e.Lock.Lost) != 1 {
		t.Fatalf("expire: %+v %v", e.Lock, e.Err)
	}
	if rt, _ := rd.LockRight(11); rt != nil {
		t.Fatalf("right after the expiry: %+v", rt)
	}
	if err := lt.stamped(11, c, r.Lock.RightSeq); !errors.Is(err, ErrFenced) {
		t.Fatalf("a write under an expired right: %v", err)
	}
	if r := lt.giveBack(11, c, r.Lock.RightSeq, nil, nil); !errors.Is(r.Err, ErrLockLost) {
		t.Fatalf("return after the expiry: %v", r.Err)
	}
	if got := lt.set(11, b, LockPOSIX, LockWrite, 0, LockEOF, 0); !got.Granted {
		t.Fatalf("request after the expiry: %+v", got)
	}
}

// TestLockRightFit: below log version 13 a command carries no right, and
// a return is refused.
func TestLockRightFit(t *testing.T) {
	c := Fit(Command{Op: OpLock, Lock: &LockCmd{}, Right: &RightCmd{Cache: true}}, 12)
	if c.Right != nil {
		t.Fatal("Fit kept a right below version 13")
	}
	if err := Allowed([]Command{{Op: OpLockReturn, Lock: &LockCmd{}, Right: &RightCmd{Seq: 1}}}, 12); !errors.Is(err, ErrLogVersion) {
		t.Fatalf("a return at version 12: %v", err)
	}
	if err := Allowed([]Command{{Op: OpLock, Lock: &LockCmd{}}}, 12); err != nil {
		t.Fatalf("a lock at version 12: %v", err)
	}
}
