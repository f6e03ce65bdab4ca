package meta

import (
	"errors"
	"fmt"
	"testing"

	"github.com/cairn-fs/cairn/internal/cas"
	"github.com/cairn-fs/cairn/internal/kv"
)

func TestSnapshots(t *testing.T) {
	db := kv.NewMem()
	r := NewReader(db)
	idx := uint64(0)
	apply := func(c Command) Result {
		t.Helper()
		idx++
		c.TimeNs = int64(idx)
		return applyOne(t, db, idx, c)
	}
	must := func(res Result) Result {
		t.Helper()
		if res.Err != nil {
			t.Fatal(res.Err)
		}
		return res
	}
	h := func(s string) cas.Hash { return cas.Sum([]byte(s)) }
	put := func(path, content string) {
		t.Helper()
		must(apply(Command{Op: OpPutFile, BucketName: "web", Path: path,
			File: &Inode{Size: int64(len(content)), Extents: []Extent{{Hash: h(content), Length: int64(len(content))}}}}))
	}
	// view returns path → content hash prefix of a reader's bucket tree.
	view := func(rd *Reader) map[string]string {
		t.Helper()
		out := map[string]string{}
		var walk func(dir Ino, prefix string)
		walk = func(dir Ino, prefix string) {
			ents, err := rd.ReadDir(dir, "", 1000)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range ents {
				if e.Type == TypeDir {
					out[prefix+e.Name+"/"] = ""
					walk(e.Ino, prefix+e.Name+"/")
					continue
				}
				n, err := rd.Inode(e.Ino)
				if err != nil {
					t.Fatal(err)
				}
				out[prefix+e.Name] = n.Extents[0].Hash.String()[:8]
			}
		}
		b, err := rd.Bucket("web")
		if err != nil {
			t.Fatal(err)
		}
		walk(b.Ino, "")
		return out
	}
	refs := func(s string) uint64 {
		n, err := r.RefCount(h(s))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	snapView := func(name string) map[string]string {
		t.Helper()
		s, err := r.Snapshot("web", name)
		if err != nil {
			t.Fatal(err)
		}
		sr, err := r.SnapshotReader(s)
		if err != nil {
			t.Fatal(err)
		}
		return view(sr)
	}
	hp := func(s string) string { return h(s).String()[:8] }

	must(apply(Command{Op: OpCreateBucket, Bucket: &Bucket{Name: "web"}}))
	put("a.php", "a1")
	put("d/b.php", "b1")
	must(apply(Command{Op: OpSnapshotCreate, BucketName: "web", Snap: &SnapCmd{Name: "s1"}}))
	want1 := map[string]string{"a.php": hp("a1"), "d/": "", "d/b.php": hp("b1")}
	if got := snapView("s1"); fmt.Sprint(got) != fmt.Sprint(want1) {
		t.Fatalf("s1 at once: %v", got)
	}
	if res := apply(Command{Op: OpSnapshotCreate, BucketName: "web", Snap: &SnapCmd{Name: "s1"}}); !errors.Is(res.Err, ErrExists) {
		t.Fatalf("a second s1: %v", res.Err)
	}
	// The live tree changes: an overwrite, a delete, a new file and dir.
	put("a.php", "a2")
	must(apply(Command{Op: OpDelete, BucketName: "web", Path: "d/b.php"}))
	put("c.php", "c1")
	must(apply(Command{Op: OpMkdir, BucketName: "web", Path: "e"}))
	if got := snapView("s1"); fmt.Sprint(got) != fmt.Sprint(want1) {
		t.Fatalf("s1 after changes: %v, want %v", got, want1)
	}
	live := view(r)
	if fmt.Sprint(live) != fmt.Sprint(map[string]string{"a.php": hp("a2"), "c.php": hp("c1"), "d/": "", "e/": ""}) {
		t.Fatalf("live: %v", live)
	}
	if refs("a1") != 1 || refs("b1") != 1 || refs("a2") != 1 {
		t.Fatalf("refcounts: a1 %d b1 %d a2 %d (the snapshot holds a1 and b1)", refs("a1"), refs("b1"), refs("a2"))
	}
	// A second snapshot, more changes: each keeps its own point in time.
	must(apply(Command{Op: OpSnapshotCreate, BucketName: "web", Snap: &SnapCmd{Name: "s2"}}))
	want2 := live
	must(apply(Command{Op: OpDelete, BucketName: "web", Path: "a.php"}))
	must(apply(Command{Op: OpRename, BucketName: "web", Path: "c.php", DstPath: "e/c.php"}))
	put("d/b.php", "b3")
	if got := snapView("s1"); fmt.Sprint(got) != fmt.Sprint(want1) {
		t.Fatalf("s1 after s2: %v", got)
	}
	if got := snapView("s2"); fmt.Sprint(got) != fmt.Sprint(want2) {
		t.Fatalf("s2: %v, want %v", got, want2)
	}
	if res := apply(Command{Op: OpDeleteBucket, BucketName: "web"}); !errors.Is(res.Err, ErrBucketNotEmpty) {
		t.Fatalf("delete a bucket with snapshots: %v", res.Err)
	}
	// Deleting s1 hands its keys to nobody older: a1 and b1 lose their
	// last reference; s2 is untouched.
	must(apply(Command{Op: OpSnapshotDelete, BucketName: "web", Snap: &SnapCmd{Name: "s1"}}))
	if _, err := r.Snapshot("web", "s1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deleted s1 still named: %v", err)
	}
	snaps, _ := r.Snapshots("web")
	for {
		res := must(apply(Command{Op: OpSnapshotDrain, BucketName: "web", Snap: &SnapCmd{ID: snaps[0].ID, Limit: 2}}))
		if res.Count < 2 {
			break
		}
	}
	if snaps, _ := r.Snapshots("web"); len(snaps) != 1 || snaps[0].Name != "s2" {
		t.Fatalf("snapshots after draining s1: %+v", snaps)
	}
	if got := snapView("s2"); fmt.Sprint(got) != fmt.Sprint(want2) {
		t.Fatalf("s2 after s1's drain: %v", got)
	}
	if refs("a1") != 0 || refs("b1") != 0 || refs("a2") != 1 || refs("c1") != 2 { // c1: live, and s2's copy of its inode before the rename
		t.Fatalf("refcounts after s1: a1 %d b1 %d a2 %d c1 %d", refs("a1"), refs("b1"), refs("a2"), refs("c1"))
	}
	// Deleting a newer snapshot: the older one keeps its own values (the
	// newer copy is dropped) and takes the keys it lacks.
	must(apply(Command{Op: OpSnapshotCreate, BucketName: "web", Snap: &SnapCmd{Name: "s3"}}))
	put("e/c.php", "c4")
	must(apply(Command{Op: OpSnapshotDelete, BucketName: "web", Snap: &SnapCmd{Name: "s3"}}))
	snaps, _ = r.Snapshots("web")
	must(apply(Command{Op: OpSnapshotDrain, BucketName: "web", Snap: &SnapCmd{ID: snaps[1].ID, Limit: 100}}))
	if got := snapView("s2"); fmt.Sprint(got) != fmt.Sprint(want2) {
		t.Fatalf("s2 after s3's drain: %v", got)
	}
	must(apply(Command{Op: OpSnapshotDelete, BucketName: "web", Snap: &SnapCmd{Name: "s2"}}))
	snaps, _ = r.Snapshots("web")
	must(apply(Command{Op: OpSnapshotDrain, BucketName: "web", Snap: &SnapCmd{ID: snaps[0].ID, Limit: 100}}))
	if snaps, _ := r.Snapshots("web"); len(snaps) != 0 {
		t.Fatalf("snapshots left: %+v", snaps)
	}
	// Only live files hold references now; the overlay keys are gone.
	for _, s := range []string{"a1", "b1", "a2", "c1"} {
		if refs(s) != 0 {
			t.Fatalf("%s still referenced %d times", s, refs(s))
		}
	}
	if refs("b3") != 1 || refs("c4") != 1 {
		t.Fatalf("live blobs: b3 %d c4 %d", refs("b3"), refs("c4"))
	}
	var left []string
	db.Scan([]byte{pOverlay}, []byte{pOverlay + 1}, func(k, _ []byte) bool { left = append(left, string(k)); return true })
	if len(left) != 0 {
		t.Fatalf("overlay keys left: %d", len(left))
	}
}

// A blob that only a trash entry or only a snapshot holds keeps its
// bucket's replication factor (ReferencedBlobs).
func TestKeptBlobsReferenced(t *testing.T) {
	for _, keeper := range []string{"trash", "snapshot"} {
		db := kv.NewMem()
		h := cas.Sum([]byte("kept"))
		five := &Bucket{Name: "five", Replicas: 5}
		if keeper == "trash" {
			five.TrashNs = 1e12
		}
		cmds := []Command{
			{Op: OpCreateBucket, Bucket: five},
			{Op: OpCreateBucket, Bucket: &Bucket{Name: "plain"}},
			{Op: OpPutFile, BucketName: "five", Path: "f", File: &Inode{Size: 4, Extents: []Extent{{Hash: h, Length: 4}}}},
		}
		if keeper == "snapshot" {
			cmds = append(cmds, Command{Op: OpSnapshotCreate, BucketName: "five", Snap: &SnapCmd{Name: "s"}})
		}
		cmds = append(cmds, Command{Op: OpDelete, BucketName: "five", Path: "f"})
		for i, c := range cmds {
			c.TimeNs = int64(i + 1)
			if res := applyOne(t, db, uint64(i+1), c); res.Err != nil {
				t.Fatal(res.Err)
			}
		}
		got := map[cas.Hash]int{}
		if err := NewReader(db).ReferencedBlobs(3, nil, func(h cas.Hash, rf int) bool { got[h] = rf; return true }); err != nil {
			t.Fatal(err)
		}
		if got[h] != 5 || len(got) != 1 {
			t.Fatalf("%s: referenced blobs %v, want its blob at R=5", keeper, got)
		}
	}
}
