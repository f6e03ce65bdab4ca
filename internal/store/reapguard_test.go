package store

import (
	"context"
	"errors"
	"testing"

	"github.com/cairn-fs/cairn/internal/blob"
)

// The race internal/sim found (see reapGuard): a replica stores, or keeps,
// a blob for a peer's upload that started after a reap of it, then applies
// that reap (refcount still 0 here) and deletes the copy the upload relies
// on. The reap's approval and the deleter are driven by hand here, in each
// order that matters.
func TestReapGuardSparesReplicaPut(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	data := []byte("a blob shared by an old, deleted file and a new upload")
	h := blob.Sum(data)
	hs := []blob.Hash{h}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	// put is GuardReplicaPut after its wait for the start index (which a
	// single-node log cannot show: it never runs ahead of its applied
	// index; see TestGuardReplicaPutWaitsForStartIndex).
	put := func(start uint64) {
		t.Helper()
		e.s.pins.pin(h)
		e.s.reap.put(h, start)
		must(e.blobs.Put(h, data))
		e.s.pins.unpin(h)
	}
	deleteIfApproved := func(approved []blob.Hash) {
		for _, h := range approved {
			e.s.deleteBlob(h)
		}
	}
	e.s.reap.appliedTo(100)

	// Unguarded: an approved deletion runs (for blobs nobody wrote again).
	must(e.blobs.Put(h, data))
	deleteIfApproved(e.s.reap.reaped(101, hs))
	e.s.reap.appliedTo(101)
	if e.blobs.Has(h) {
		t.Fatal("an approved deletion with no replica put since did not run")
	}

	// The reap is applied here, then the upload (start 102 >= 101) puts
	// the blob before the deleter reaches it: the deletion is cancelled.
	must(e.blobs.Put(h, data))
	approved := e.s.reap.reaped(102, hs)
	e.s.reap.appliedTo(102)
	put(102)
	deleteIfApproved(approved)
	if !e.blobs.Has(h) {
		t.Fatal("the deleter removed a copy a replica put relied on")
	}

	// The reap is applied here (queued), this node lags behind the
	// upload's start (104 > 103): the queued deletion is cancelled too
	// (found by internal/sim, seeds 1116 and 1158, R=1).
	approved = e.s.reap.reaped(103, hs)
	e.s.reap.appliedTo(103)
	put(104)
	deleteIfApproved(approved)
	if !e.blobs.Has(h) {
		t.Fatal("the deleter removed a copy put by an upload from ahead of this node")
	}
	e.s.reap.appliedTo(104)

	// This node lags: the upload (start 110) puts the blob before this
	// node applies the reap at 105 that the upload saw: not approved here.
	put(110)
	if got := e.s.reap.reaped(105, hs); len(got) != 0 {
		t.Fatalf("a reap the upload saw approved deleting %v here", got)
	}
	e.s.reap.appliedTo(105)
	// A later reap (at 111, after the upload's start: the log refuses
	// the upload's reference) is approved again.
	e.s.reap.appliedTo(110)
	if got := e.s.reap.reaped(111, hs); len(got) != 1 {
		t.Fatal("a reap after the upload's start was not approved")
	}
	e.s.reap.appliedTo(111)
	if len(e.s.reap.ahead) != 0 {
		t.Fatalf("puts covered by the applied index still remembered: %v", e.s.reap.ahead)
	}

	// The deleter reaches an approved blob while a put holds it (pinned):
	// the deletion is skipped and forgotten.
	must(e.blobs.Put(h, data))
	release, err := e.s.GuardReplicaPut(ctx, 0, hs)
	must(err)
	e.s.deleteBlob(h)
	release()
	if !e.blobs.Has(h) {
		t.Fatal("the deleter removed a pinned copy")
	}
	e.s.deleteBlob(h) // a second pass finds nothing approved
	if !e.blobs.Has(h) {
		t.Fatal("a stale approval deleted the copy later")
	}
	if n := len(e.s.reap.doomed); n != 0 {
		t.Fatalf("%d approvals left behind", n)
	}
}

// A replica put that names a start index past what this node applied
// waits for it, and fails cleanly (503-class) when it cannot be reached.
func TestGuardReplicaPutWaitsForStartIndex(t *testing.T) {
	e := newEnv(t)
	applied := e.s.log.AppliedIndex()
	release, err := e.s.GuardReplicaPut(context.Background(), applied, nil)
	if err != nil {
		t.Fatalf("start index already applied: %v", err)
	}
	release()
	// consensus.Local never runs ahead of its applied index: a later one
	// fails at once.
	if _, err := e.s.GuardReplicaPut(context.Background(), applied+5, nil); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("start index beyond the log: %v, want ErrUnavailable", err)
	}
}

// Applies are committed without sync: a put of a blob whose reap this node
// applied since the last sync makes the namespace durable first, so that a
// crash cannot undo the reap and replay it over the copy (sim seeds 1025,
// 1159). A put of any other blob does not sync.
func TestGuardReplicaPutSyncsAppliedReap(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	h, other := blob.Sum([]byte("reaped")), blob.Sum([]byte("other"))
	applied := e.s.log.AppliedIndex()
	e.s.reap.reaped(applied, []blob.Hash{h})
	e.s.reap.appliedTo(applied)
	if !e.s.reap.needSync([]blob.Hash{h}) || e.s.reap.needSync([]blob.Hash{other}) {
		t.Fatal("needSync wrong before the put")
	}
	release, err := e.s.GuardReplicaPut(ctx, applied, []blob.Hash{other})
	if err != nil {
		t.Fatal(err)
	}
	release()
	if e.s.reap.synced != 0 {
		t.Fatal("a put of an unreaped blob synced")
	}
	release, err = e.s.GuardReplicaPut(ctx, applied, []blob.Hash{h})
	if err != nil {
		t.Fatal(err)
	}
	release()
	if e.s.reap.synced != applied || e.s.reap.needSync([]blob.Hash{h}) || e.s.reap.unsyncedReaps() != 0 {
		t.Fatalf("after the put: synced %d (applied %d), %d unsynced reaps", e.s.reap.synced, applied, e.s.reap.unsyncedReaps())
	}
}
