package store

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/cairn-fs/cairn/internal/blob"
	"github.com/cairn-fs/cairn/internal/meta"
	"github.com/cairn-fs/cairn/internal/minindex"
	"github.com/cairn-fs/cairn/internal/replica"
)

// These tests drive one store by hand, on its fake clock, with the GC
// passes called directly: the steps of issue 18, where the orphan sweep
// deleted a copy that a peer's upload had just put through the guarded
// blob server and then committed. Each checks the one invariant that
// matters: a commit the log accepts names blobs this node still holds.

// orphanEnv is a store, its guarded blob server (what a peer's upload
// reaches) and the GC pass's first-seen map carried between passes.
type orphanEnv struct {
	*env
	t       *testing.T
	server  replica.GuardedBlobServer
	orphans map[blob.Hash]time.Time
}

func newOrphanEnv(t *testing.T) *orphanEnv {
	e := newEnv(t)
	return &orphanEnv{env: e, t: t, orphans: map[blob.Hash]time.Time{},
		server: replica.GuardedBlobServer{BlobServer: replica.BlobServer{Store: e.blobs}, Guard: e.s.GuardReplicaPut}}
}

// pass runs one periodic GC pass (the gcLoop's, with its first-seen map).
func (o *orphanEnv) pass() GCStats {
	o.t.Helper()
	st, err := o.s.gc(context.Background(), o.orphans)
	if err != nil {
		o.t.Fatalf("gc pass: %v", err)
	}
	return st
}

// replicaPut stores data as a peer's upload that started at index start
// does: through the guarded blob server.
func (o *orphanEnv) replicaPut(start uint64, data []byte) {
	o.t.Helper()
	ctx := minindex.With(context.Background(), start)
	if err := o.server.PutBlob(ctx, 2, blob.Sum(data), data); err != nil {
		o.t.Fatalf("replica put: %v", err)
	}
}

// commit proposes the peer's OpPutFile for path with data's one blob,
// started at index start, as the peer's store would.
func (o *orphanEnv) commit(path string, start uint64, data []byte) error {
	o.t.Helper()
	h := blob.Sum(data)
	cmd := o.s.putFileCommand("bkt", path, PutOptions{Size: int64(len(data))}, int64(len(data)),
		"etag", hex.EncodeToString(h[:]), []meta.Extent{{Hash: h, Length: int64(len(data))}}, start)
	res, err := o.s.log.Propose(context.Background(), cmd)
	if err != nil {
		o.t.Fatalf("propose: %v", err)
	}
	return res.Err
}

// acknowledgedReadable fails the test if path, acknowledged, cannot be
// read back whole now and after later GC passes.
func (o *orphanEnv) acknowledgedReadable(path string, data []byte) {
	o.t.Helper()
	for i := range 3 {
		obj, err := o.s.Open(context.Background(), "bkt", path)
		if err != nil {
			o.t.Fatalf("acknowledged %s: open: %v", path, err)
		}
		got, err := io.ReadAll(io.NewSectionReader(obj, 0, obj.Info().Size))
		obj.Close()
		if err != nil || !bytes.Equal(got, data) {
			o.t.Fatalf("acknowledged %s (pass %d): read %d bytes, err %v: its only copy is gone", path, i, len(got), err)
		}
		o.clock.Add(2 * o.s.cfg.GCGrace)
		o.pass()
	}
}

// The steps: a reap, then a re-put of the same bytes by an upload
// that saw the reap, then a GC pass before the upload's commit applies.
func TestOrphanSweepSparesReplicaPutAfterReap(t *testing.T) {
	o := newOrphanEnv(t)
	ctx := context.Background()
	data := []byte("the bytes of a deleted file, uploaded again")
	h := blob.Sum(data)

	mustPut(t, o.s, "old", data)
	if err := o.s.Delete(ctx, "bkt", "old", ""); err != nil {
		t.Fatal(err)
	}
	o.pass() // 1. the blob is unreferenced: seen, within the grace
	o.clock.Add(o.s.cfg.GCGrace + time.Second)
	// 2. a reap (any node's GC pass proposes them) at index X, applied
	// here: the deleter removes the copy.
	now := o.s.cfg.Now()
	if _, err := o.s.propose(ctx, meta.Command{Op: meta.OpReap, Reap: []blob.Hash{h},
		ReapBefore: now.Add(-o.s.cfg.GCGrace).UnixNano(), StartIndex: o.s.log.AppliedIndex()}); err != nil {
		t.Fatal(err)
	}
	o.s.del.wait()
	if o.blobs.Has(h) {
		t.Fatal("setup: the reap did not delete the copy")
	}
	// 3. a peer's upload of the same bytes, started at S >= X, puts the
	// blob here; the put is acknowledged.
	start := o.s.log.AppliedIndex()
	o.replicaPut(start, data)
	// 4. this node's next GC pass runs before the commit applies.
	o.pass()
	// 5. the commit.
	if err := o.commit("new", start, data); err != nil {
		if !errors.Is(err, meta.ErrBlobReaped) {
			t.Fatalf("commit refused with %v, want success or ErrBlobReaped", err)
		}
		return // refused: the writer retries; nothing acknowledged was lost
	}
	o.acknowledgedReadable("new", data)
}

// No reap at all: the blob is count-0 garbage (its file deleted, the reap
// not yet due) when an upload re-uses it.
func TestOrphanSweepSparesCountZeroGarbage(t *testing.T) {
	o := newOrphanEnv(t)
	ctx := context.Background()
	data := []byte("bytes first left behind by a failed upload")
	h := blob.Sum(data)

	// A failed upload left the blob: an orphan, first seen now.
	if err := o.blobs.Put(h, data); err != nil {
		t.Fatal(err)
	}
	o.pass()
	// Just before the grace ends, a file with those bytes is written and
	// deleted: the blob is count-0 garbage, its reap due a grace later.
	o.clock.Add(o.s.cfg.GCGrace - time.Second)
	mustPut(t, o.s, "brief", data)
	if err := o.s.Delete(ctx, "bkt", "brief", ""); err != nil {
		t.Fatal(err)
	}
	o.clock.Add(2 * time.Second)
	// A peer's upload of the same bytes puts them here, then this node's
	// GC pass runs before the commit.
	start := o.s.log.AppliedIndex()
	o.replicaPut(start, data)
	o.pass()
	if err := o.commit("again", start, data); err != nil {
		if !errors.Is(err, meta.ErrBlobReaped) {
			t.Fatalf("commit refused with %v, want success or ErrBlobReaped", err)
		}
		return
	}
	o.acknowledgedReadable("again", data)
}

// A replica put that the commit follows later than the grace (a replica
// behind a partition applies it late): the time the sweep waits cannot
// protect it, so the deletion must go through the log, and the log must
// refuse the late commit.
func TestOrphanReapRefusesLateCommit(t *testing.T) {
	o := newOrphanEnv(t)
	data := []byte("bytes put by an upload whose commit comes very late")
	h := blob.Sum(data)

	start := o.s.log.AppliedIndex()
	o.replicaPut(start, data)
	for range 3 {
		o.pass()
		o.clock.Add(o.s.cfg.GCGrace + time.Second)
	}
	o.pass()
	o.s.del.wait()
	if o.blobs.Has(h) {
		t.Fatal("an orphan left for three graces was not collected")
	}
	err := o.commit("late", start, data)
	if !errors.Is(err, meta.ErrBlobReaped) {
		t.Fatalf("a commit naming a blob deleted after its start index: %v, want ErrBlobReaped", err)
	}
	// A new upload (a later start index) of the same bytes commits.
	start = o.s.log.AppliedIndex()
	o.replicaPut(start, data)
	if err := o.commit("late", start, data); err != nil {
		t.Fatalf("the retried upload: %v", err)
	}
	o.acknowledgedReadable("late", data)
}
