package store

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/cairn-fs/cairn/internal/meta"
)

// inoFlushes is a Holder and LockFlusher that records the inodes it was
// asked to publish.
type inoFlushes struct {
	flushes
	inos []uint64
}

func (f *inoFlushes) FlushIno(ctx context.Context, ino uint64) {
	f.mu.Lock()
	f.inos = append(f.inos, ino)
	f.mu.Unlock()
}

// TestLockRightLocal: the first lock of a free inode takes its lock right,
// and from then on the node's lock and unlock pairs, refusals and flock
// waits cost no commit.
func TestLockRightLocal(t *testing.T) {
	n1, _ := twoNodes(t)
	ctx := context.Background()
	req := LockRequest{Ino: 40, Owner: 1, Kind: LockPOSIX, Type: LockWrite, End: LockEOF}
	unlock := req
	unlock.Type = LockUnlock
	for range 100 {
		if _, err := n1.Lock(ctx, req); err != nil {
			t.Fatal(err)
		}
		if _, err := n1.Lock(ctx, unlock); err != nil {
			t.Fatal(err)
		}
	}
	if !n1.HoldsLockRight(40) {
		t.Fatal("no lock right after the first lock")
	}
	s := n1.LockStats()
	if s.Commits != 1 || s.Grants != 100 || s.LocalGrants != 99 || s.Rights != 1 {
		t.Fatalf("after 100 pairs: %+v, want 1 commit, 99 local grants", s)
	}
	// A refusal and a flock wait, decided here.
	if _, err := n1.Lock(ctx, req); err != nil {
		t.Fatal(err)
	}
	other := req
	other.Owner = 2
	if c, err := n1.Lock(ctx, other); !errors.Is(err, ErrWouldBlock) || c == nil || c.Owner != 1 {
		t.Fatalf("conflicting lock: %v %+v", err, c)
	}
	if c, _ := n1.TestLock(ctx, other); c == nil || c.Owner != 1 {
		t.Fatalf("F_GETLK under the right: %+v", c)
	}
	f1 := LockRequest{Ino: 40, Owner: 3, Kind: LockFlock, Type: LockWrite}
	if _, err := n1.Lock(ctx, f1); err != nil {
		t.Fatal(err)
	}
	f2 := f1
	f2.Owner, f2.Wait = 4, true
	done := make(chan error, 1)
	go func() { _, err := n1.Lock(ctx, f2); done <- err }()
	time.Sleep(20 * time.Millisecond)
	if err := n1.ReleaseOwner(ctx, 40, 3); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("local flock wait: %v", err)
	}
	if s := n1.LockStats(); s.Commits != 1 {
		t.Fatalf("commits after a refusal and a local flock wait: %+v", s)
	}
	lks, err := n1.Locks(ctx)
	if err != nil || len(lks) != 2 {
		t.Fatalf("Locks under the right: %+v %v", lks, err)
	}
}

// TestLockRightRecall: another node's request recalls the right: the
// holder publishes (FlushIno), gives its table back, and the asker's
// request is decided against it (a wait, granted by the holder's release
// through the log); a write stamped with the right applies while it is
// held and is refused after; F_GETLK of the other node sees the holder's
// lock.
func TestLockRightRecall(t *testing.T) {
	n1, n2 := twoNodes(t)
	ctx := context.Background()
	f := &inoFlushes{}
	defer n1.AddHolder(f)()
	req := LockRequest{Ino: 50, Owner: 1, Kind: LockFlock, Type: LockWrite}
	if _, err := n1.Lock(ctx, req); err != nil {
		t.Fatal(err)
	}
	rt, err := n1.meta.LockRight(50)
	if err != nil || rt == nil || rt.Node != 1 {
		t.Fatalf("right %+v %v", rt, err)
	}
	// A write stamped with it applies.
	cmd := meta.Command{Op: meta.OpPutRecord, TimeNs: 1, Record: &meta.Record{Kind: meta.RecordRule, Name: "x", Value: []byte("1")},
		Right: &meta.RightCmd{Ino: 50}}
	release := n1.stampRight(&cmd)
	if cmd.Right == nil || cmd.Right.Seq != rt.Seq {
		t.Fatalf("stamp: %+v", cmd.Right)
	}
	res, err := n1.log.Propose(ctx, cmd)
	release()
	if err != nil || res.Err != nil {
		t.Fatalf("stamped write under the right: %v %v", err, res.Err)
	}

	// F_GETLK on node 2: recalls, then reads the returned table.
	other := LockRequest{Ino: 50, Owner: 9, Kind: LockFlock, Type: LockWrite}
	c, err := n2.TestLock(ctx, other)
	if err != nil || c == nil || c.Node != 1 {
		t.Fatalf("F_GETLK on node 2: %+v %v", c, err)
	}
	if n1.HoldsLockRight(50) {
		t.Fatal("node 1 still holds the right after node 2's F_GETLK")
	}
	f.mu.Lock()
	flushed := len(f.inos) == 1 && f.inos[0] == 50
	f.mu.Unlock()
	if !flushed {
		t.Fatalf("FlushIno calls %v, want [50]", f.inos)
	}
	// The old stamp is refused now.
	res, err = n1.log.Propose(ctx, cmd)
	if err != nil || !errors.Is(res.Err, meta.ErrFenced) {
		t.Fatalf("write under the returned right: %v %v", err, res.Err)
	}

	// Node 2 waits in the log; node 1's release grants it.
	other.Wait = true
	var wg sync.WaitGroup
	wg.Add(1)
	var werr error
	go func() { defer wg.Done(); _, werr = n2.Lock(ctx, other) }()
	time.Sleep(50 * time.Millisecond)
	if err := n1.ReleaseOwner(ctx, 50, 1); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if werr != nil {
		t.Fatalf("node 2's wait: %v", werr)
	}
	if !n2.HasLocks(50, 9) || n1.HasLocks(50, 1) {
		t.Fatal("HasLocks after the hand-over")
	}
	if s := n1.LockStats(); s.Recalled < 1 || s.Returned != 1 {
		t.Fatalf("node 1's stats: %+v", s)
	}

	// Node 1 asks again while node 2 holds the lock: a non-blocking
	// request is refused; a recall of node 2's right, if it took one,
	// comes first.
	if _, err := n1.Lock(ctx, req); !errors.Is(err, ErrWouldBlock) {
		t.Fatalf("node 1's request over node 2's lock: %v", err)
	}
}

// TestLockRightLost: a right goes with its session: the node marks the
// file lost, forgets the right, and a write stamped with it is refused.
func TestLockRightLost(t *testing.T) {
	n1, n2 := twoNodes(t)
	ctx := context.Background()
	if _, err := n1.Lock(ctx, LockRequest{Ino: 60, Owner: 1, Kind: LockPOSIX, Type: LockWrite, End: LockEOF}); err != nil {
		t.Fatal(err)
	}
	sess, _ := n1.meta.LockSession(1)
	res, err := n2.log.Propose(ctx, meta.Command{Op: meta.OpLockExpire, TimeNs: time.Now().UnixNano(),
		Lock: &meta.LockCmd{Lock: meta.Lock{Owner: meta.LockOwner{Node: 1, Epoch: sess.Epoch}}, RenewNs: sess.RenewNs}})
	if err != nil || res.Err != nil {
		t.Fatalf("expire: %v %v", err, res.Err)
	}
	if n1.HoldsLockRight(60) || !n1.LockLost(60) {
		t.Fatal("the right outlived its session")
	}
	if _, err := n2.Lock(ctx, LockRequest{Ino: 60, Owner: 2, Kind: LockPOSIX, Type: LockWrite, End: LockEOF}); err != nil {
		t.Fatalf("node 2 after the expiry: %v", err)
	}
}

// TestLockRightStaleSession: a node whose session has not renewed for the
// lease less the margin grants nothing more under its rights: it gives
// its locks up first (the leader may expire the session at any moment),
// and the request goes to the log in a new session.
func TestLockRightStaleSession(t *testing.T) {
	n1, _ := twoNodes(t)
	ctx := context.Background()
	req := LockRequest{Ino: 70, Owner: 1, Kind: LockFlock, Type: LockWrite}
	if _, err := n1.Lock(ctx, req); err != nil {
		t.Fatal(err)
	}
	old := n1.LockSession()
	n1.locks.mu.Lock()
	n1.locks.renewed = time.Now().Add(-time.Hour)
	n1.locks.lastRenew = time.Now() // and no renewal is due
	n1.locks.mu.Unlock()
	other := req
	other.Owner = 2
	if _, err := n1.Lock(ctx, other); err != nil {
		t.Fatalf("request in the new session: %v", err)
	}
	if s := n1.LockStats(); s.Lost != 1 || s.LocalGrants != 0 || n1.LockSession() == old {
		t.Fatalf("after a request on a stale session: %+v, session %d (was %d)", s, n1.LockSession(), old)
	}
}
