package store

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cairn-fs/cairn/internal/consensus"
	"github.com/cairn-fs/cairn/internal/meta"
)

func identity(l *consensus.Local) consensus.Log { return l }

// TestLockWaitAndRelease: a waiter is woken by the holder's release, and
// an interrupted wait leaves the queue (the next request is granted at
// once when the holder goes).
func TestLockWaitAndRelease(t *testing.T) {
	st, _ := newLogEnv(t, identity, nil, nil)
	ctx := context.Background()
	req := LockRequest{Ino: 9, Owner: 1, Kind: LockPOSIX, Type: LockWrite, End: LockEOF}
	if _, err := st.Lock(ctx, req); err != nil {
		t.Fatal(err)
	}
	other := req
	other.Owner = 2
	if c, err := st.Lock(ctx, other); !errors.Is(err, ErrWouldBlock) || c == nil || c.Owner != 1 {
		t.Fatalf("conflicting lock: %v %+v", err, c)
	}
	// An interrupted wait.
	ictx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	other.Wait = true
	if _, err := st.Lock(ictx, other); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("interrupted wait: %v", err)
	}
	cancel()
	if _, w, _ := st.meta.Locks(9); len(w) != 0 {
		t.Fatalf("the interrupted wait is still queued: %+v", w)
	}
	done := make(chan error, 1)
	go func() { _, err := st.Lock(ctx, other); done <- err }()
	time.Sleep(50 * time.Millisecond)
	if err := st.ReleaseOwner(ctx, 9, 1); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter was not woken by the release")
	}
	if !st.HasLocks(9, 2) || st.HasLocks(9, 1) {
		t.Fatal("HasLocks does not follow the table")
	}
	// The counters (cairn_locks_* metrics): two grants (one after its
	// wait), two waits (one interrupted), one refusal, one inode with
	// locks; commits: the first lock (which took the lock right, so the
	// refusal was decided here), then, the right given back ahead of the
	// POSIX wait (lockrights.go), the wait, its cancel, the second wait
	// and the release.
	if s := st.LockStats(); s.Grants != 2 || s.Waits != 2 || s.Refused != 1 || s.Commits != 5 || s.Held != 1 || s.Lost != 0 || s.Returned != 1 {
		t.Errorf("lock stats %+v, want 2 grants, 2 waits, 1 refusal, 5 commits, 1 right returned, 1 inode held, none lost", s)
	}
}

// TestLockLostSession: when the log expires this node's session (the
// leader saw it stop renewing), the node marks the files it held lost
// (the mount answers EIO to their writes), fails its waits, starts a new
// session, and a new lock on the file clears the mark.
func TestLockLostSession(t *testing.T) {
	st, lg := newLogEnv(t, identity, nil, nil)
	ctx := context.Background()
	req := LockRequest{Ino: 5, Owner: 1, Kind: LockFlock, Type: LockWrite}
	if _, err := st.Lock(ctx, req); err != nil {
		t.Fatal(err)
	}
	sess, err := st.meta.LockSession(st.locks.node)
	if err != nil || sess == nil {
		t.Fatalf("session %+v %v", sess, err)
	}
	old := st.locks.owner(0).Epoch
	// What the leader proposes for a session that stopped renewing.
	res, err := lg.Propose(ctx, meta.Command{Op: meta.OpLockExpire, TimeNs: time.Now().UnixNano(),
		Lock: &meta.LockCmd{Lock: meta.Lock{Owner: meta.LockOwner{Node: sess.Node, Epoch: sess.Epoch}}, RenewNs: sess.RenewNs}})
	if err != nil || res.Err != nil {
		t.Fatalf("expire: %v %v", err, res.Err)
	}
	if !st.LockLost(5) {
		t.Fatal("the file is not marked lost")
	}
	if s := st.LockStats(); s.Lost != 1 {
		t.Errorf("lock stats after the expiry: %+v, want 1 session lost", s)
	}
	if st.locks.owner(0).Epoch == old {
		t.Fatal("no new session after the loss")
	}
	if _, err := st.Lock(ctx, req); err != nil {
		t.Fatalf("lock in the new session: %v", err)
	}
	if st.LockLost(5) {
		t.Fatal("a new lock did not clear the mark")
	}
}

// TestLockSessionGivenUp: a node whose renewals do not commit for the
// lease less the margin gives its locks up by itself.
func TestLockSessionGivenUp(t *testing.T) {
	st, _ := newLogEnv(t, identity, nil, func(c *Config) {
		c.LockLease = 600 * time.Millisecond
		c.IsLeader = func() bool { return false } // nobody expires it
	})
	ctx := context.Background()
	if _, err := st.Lock(ctx, LockRequest{Ino: 3, Owner: 1, Kind: LockPOSIX, Type: LockRead, End: LockEOF}); err != nil {
		t.Fatal(err)
	}
	// Pretend the last renewal that committed started long ago, as on a
	// node cut off from the quorum.
	st.locks.mu.Lock()
	st.locks.renewed = time.Now().Add(-time.Second)
	st.locks.lastRenew = time.Now() // and no renewal is due
	st.locks.mu.Unlock()
	deadline := time.Now().Add(3 * time.Second)
	for !st.LockLost(3) {
		if time.Now().After(deadline) {
			t.Fatal("the node kept locks it could not renew")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
