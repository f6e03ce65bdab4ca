package meta

import (
	"errors"
	"testing"

	"github.com/cairn-fs/cairn/internal/cas"
	"github.com/cairn-fs/cairn/internal/kv"
)

// A fenced bucket takes no change from its fence's log position on
// (ErrMoved), whatever the command; other buckets and reads go on; the
// bucket can still be deleted, and a lifted fence lets changes in again.
func TestFenceBucket(t *testing.T) {
	db := kv.NewMem()
	r := NewReader(db)
	file := func(b string) *Inode {
		h := cas.Sum([]byte(b))
		return &Inode{Type: TypeFile, Size: 1, Extents: []Extent{{Hash: h, Length: 1}}}
	}
	idx := uint64(0)
	next := func() uint64 { idx++; return idx }
	for _, b := range []string{"moving", "other", "empty"} {
		mustApply(t, db, next(), Command{Op: OpCreateBucket, Bucket: &Bucket{Name: b}, TimeNs: 1})
	}
	mustApply(t, db, next(), Command{Op: OpPutFile, BucketName: "moving", Path: "d/f", File: file("a"), TimeNs: 2})

	if res := applyOne(t, db, next(), Command{Op: OpFenceBucket, BucketName: "nosuch", Count: 1}); !errors.Is(res.Err, ErrNoBucket) {
		t.Fatalf("fence of a missing bucket: %v", res.Err)
	}
	if res := applyOne(t, db, next(), Command{Op: OpFenceBucket, BucketName: "moving", Count: 2}); !errors.Is(res.Err, ErrInvalid) {
		t.Fatalf("fence count 2: %v", res.Err)
	}
	mustApply(t, db, next(), Command{Op: OpFenceBucket, BucketName: "moving", Count: 1})
	if f, err := r.Fenced("moving"); err != nil || !f {
		t.Fatalf("Fenced(moving) = %v, %v", f, err)
	}
	if f, err := r.Fenced("other"); err != nil || f {
		t.Fatalf("Fenced(other) = %v, %v", f, err)
	}
	mode := uint32(0o600)
	refused := []Command{
		{Op: OpPutFile, BucketName: "moving", Path: "d/g", File: file("b"), TimeNs: 3},
		{Op: OpPutFile, BucketName: "moving", Path: "d/f", File: file("c"), TimeNs: 3},
		{Op: OpMkdir, BucketName: "moving", Path: "e", TimeNs: 3},
		{Op: OpDelete, BucketName: "moving", Path: "d/f", TimeNs: 3},
		{Op: OpRename, BucketName: "moving", Path: "d/f", DstPath: "d/h", TimeNs: 3},
		{Op: OpLink, BucketName: "moving", Path: "d/f", DstPath: "d/l", TimeNs: 3},
		{Op: OpSetAttr, BucketName: "moving", Path: "d/f", File: &Inode{Mode: mode}, TimeNs: 3},
		{Op: OpUpdateBucket, Bucket: &Bucket{Name: "moving", Public: true}, TimeNs: 3},
		{Op: OpSnapshotCreate, BucketName: "moving", Snap: &SnapCmd{Name: "s"}, TimeNs: 3},
	}
	for _, c := range refused {
		// In one Apply call with a change to another bucket, before and
		// after it: the fence is found whatever came first in the call.
		b := db.NewBatch()
		res, err := Apply(b, next(), []Command{
			{Op: OpPutFile, BucketName: "other", Path: "x", File: file("x"), TimeNs: 3}, c,
			{Op: OpMkdir, BucketName: "other", Path: "y", TimeNs: 3}})
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Commit(false); err != nil {
			t.Fatal(err)
		}
		b.Close()
		if res[0].Err != nil || res[2].Err != nil {
			t.Fatalf("op %d: the other bucket's changes failed: %v, %v", c.Op, res[0].Err, res[2].Err)
		}
		if !errors.Is(res[1].Err, ErrMoved) {
			t.Fatalf("op %d on a fenced bucket: %v, want ErrMoved", c.Op, res[1].Err)
		}
	}
	if n, err := r.Lookup("moving", "d/f"); err != nil || n.Size != 1 || n.Extents[0].Hash != cas.Sum([]byte("a")) {
		t.Fatalf("the fenced bucket's file changed: %+v, %v", n, err)
	}
	if _, err := r.Lookup("moving", "d/g"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a refused create exists: %v", err)
	}

	// Lifted: changes apply again.
	mustApply(t, db, next(), Command{Op: OpFenceBucket, BucketName: "moving", Count: 0})
	mustApply(t, db, next(), Command{Op: OpPutFile, BucketName: "moving", Path: "d/g", File: file("b"), TimeNs: 4})

	// A fenced bucket can be deleted (the group it left drops its copy),
	// and its fence goes with it.
	mustApply(t, db, next(), Command{Op: OpFenceBucket, BucketName: "empty", Count: 1})
	mustApply(t, db, next(), Command{Op: OpDeleteBucket, Bucket: &Bucket{Name: "empty"}, TimeNs: 5})
	mustApply(t, db, next(), Command{Op: OpCreateBucket, Bucket: &Bucket{Name: "empty"}, TimeNs: 6})
	mustApply(t, db, next(), Command{Op: OpPutFile, BucketName: "empty", Path: "f", File: file("f"), TimeNs: 7})
}

// OpFenceBucket needs log version 14: an older binary knows neither the
// op nor the refusals it brings.
func TestFenceBucketVersion(t *testing.T) {
	cmds := []Command{{Op: OpFenceBucket, BucketName: "b", Count: 1}}
	p, err := EncodeCommands(cmds)
	if err != nil {
		t.Fatal(err)
	}
	if p[0] != fenceVersion {
		t.Fatalf("payload version %d, want %d", p[0], fenceVersion)
	}
	got, err := DecodeCommands(p)
	if err != nil || len(got) != 1 || got[0].Op != OpFenceBucket || got[0].BucketName != "b" || got[0].Count != 1 {
		t.Fatalf("decoded %+v, %v", got, err)
	}
	if err := Allowed(cmds, fenceVersion-1); !errors.Is(err, ErrLogVersion) {
		t.Fatalf("allowed at version %d: %v", fenceVersion-1, err)
	}
	if err := Allowed(cmds, fenceVersion); err != nil {
		t.Fatal(err)
	}
	// The group map and move intents are records an older binary refuses.
	for _, k := range []RecordKind{RecordGroup, RecordMove} {
		rec := []Command{{Op: OpPutRecord, Record: &Record{Kind: k, Name: "b", Value: []byte("2")}}}
		if err := Allowed(rec, fenceVersion-1); !errors.Is(err, ErrLogVersion) {
			t.Fatalf("record %q allowed at version %d: %v", k, fenceVersion-1, err)
		}
		db := kv.NewMem()
		mustApply(t, db, 1, rec[0])
	}
}

// A client node's record (state NodeClient) applies, and needs log
// version 15: an older binary refuses the state.
func TestClientNodeRecord(t *testing.T) {
	db := kv.NewMem()
	cmd := Command{Op: OpSetNode, Node: &Node{ID: 4, URL: "http://10.0.0.4:8080", State: NodeClient}, TimeNs: 1}
	mustApply(t, db, 1, cmd)
	n, err := NewReader(db).Node(4)
	if err != nil || n.State != NodeClient {
		t.Fatalf("node 4: %+v, %v", n, err)
	}
	if err := Allowed([]Command{cmd}, clientVersion-1); !errors.Is(err, ErrLogVersion) {
		t.Fatalf("a client node record allowed at version %d: %v", clientVersion-1, err)
	}
	if err := Allowed([]Command{cmd}, clientVersion); err != nil {
		t.Fatal(err)
	}
	if res := applyOne(t, db, 2, Command{Op: OpSetNode, Node: &Node{ID: 5, URL: "http://x", State: 4}, TimeNs: 1}); !errors.Is(res.Err, ErrInvalid) {
		t.Fatalf("state 4: %v", res.Err)
	}
}
