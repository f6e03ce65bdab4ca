package meta

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/cairn-fs/cairn/internal/cas"
	"github.com/cairn-fs/cairn/internal/kv"
)

// TestVersions: in a versioned bucket (TrashForever) every overwrite is
// kept, repeated and empty bodies too; OpVersionDelete deletes the live
// version (promoting the one it replaced), a noncurrent one, or a delete
// marker (the undelete, or forgetting the deletion); OpTrashDrop drops
// one entry; references follow every step and reach zero at the end.
func TestVersions(t *testing.T) {
	db := kv.NewMem()
	r := NewReader(db)
	idx := uint64(0)
	apply := func(c Command) Result {
		t.Helper()
		idx++
		if c.TimeNs == 0 {
			c.TimeNs = int64(idx) * int64(time.Second)
		}
		return applyOne(t, db, idx, c)
	}
	must := func(res Result) Result {
		t.Helper()
		if res.Err != nil {
			t.Fatal(res.Err)
		}
		return res
	}
	h1, h2 := cas.Sum([]byte("one")), cas.Sum([]byte("two"))
	file := func(h cas.Hash, mtime int64) *Inode {
		return &Inode{Size: 3, MtimeNs: mtime, Extents: []Extent{{Hash: h, Offset: 0, Length: 3}}, ETag: h.String()[:8]}
	}
	refs := func(h cas.Hash) uint64 {
		t.Helper()
		n, err := r.RefCount(h)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	live := func(path string) *Inode {
		t.Helper()
		n, err := r.Lookup("ver", path)
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	entries := func(path string) []*TrashEntry {
		t.Helper()
		es, _, err := r.PathTrash("ver", path, nil, 100)
		if err != nil {
			t.Fatal(err)
		}
		return es
	}
	// versions describes a path newest first: L(mtime) for the file,
	// R(mtime) a replaced entry, D(mtime) a deleted one.
	versions := func(path string) string {
		t.Helper()
		s := ""
		if n := live(path); n != nil {
			s += fmt.Sprintf("L%d ", n.MtimeNs)
		}
		for _, e := range entries(path) {
			k := "R"
			if !e.Replaced {
				k = "D"
			}
			s += fmt.Sprintf("%s%d ", k, e.Inode.MtimeNs)
		}
		return s
	}
	delVersion := func(path string, n *Inode) Result {
		t.Helper()
		return apply(Command{Op: OpVersionDelete, BucketName: "ver", Path: path, File: &Inode{MtimeNs: n.MtimeNs, ETag: n.ETag}, Trash: &TrashCmd{}})
	}
	delMarker := func(path string, e *TrashEntry) Result {
		t.Helper()
		return apply(Command{Op: OpVersionDelete, BucketName: "ver", Path: path, File: &Inode{Ino: e.Inode.Ino}, Trash: &TrashCmd{At: e.DeletedNs}})
	}

	must(apply(Command{Op: OpCreateBucket, Bucket: &Bucket{Name: "ver", TrashNs: TrashForever}}))
	if b, _ := r.Bucket("ver"); !Versioned(b) {
		t.Fatalf("bucket not versioned: %+v", b)
	}
	must(apply(Command{Op: OpPutFile, BucketName: "ver", Path: "d/k", File: file(h1, 1)}))
	must(apply(Command{Op: OpPutFile, BucketName: "ver", Path: "d/k", File: file(h2, 2)}))
	// The same content again is a version of its own in a versioned bucket.
	must(apply(Command{Op: OpPutFile, BucketName: "ver", Path: "d/k", File: file(h2, 3)}))
	if got := versions("d/k"); got != "L3 R2 R1 " {
		t.Fatalf("versions %q", got)
	}
	if refs(h1) != 1 || refs(h2) != 2 {
		t.Fatalf("refs %d %d", refs(h1), refs(h2))
	}
	// Deleting the live version brings back the one it replaced, with its
	// name (mtime, ETag) and a new inode.
	res := must(delVersion("d/k", live("d/k")))
	if res.Count != 1 || res.Inode == nil || res.Inode.MtimeNs != 2 || versions("d/k") != "L2 R1 " || refs(h2) != 1 {
		t.Fatalf("after deleting the live version: %+v, %q, refs %d", res, versions("d/k"), refs(h2))
	}
	// A delete leaves a marker (the entry); deleting the marker undeletes.
	must(apply(Command{Op: OpDelete, BucketName: "ver", Path: "d/k"}))
	if got := versions("d/k"); got != "D2 R1 " {
		t.Fatalf("after a delete: %q", got)
	}
	res = must(delMarker("d/k", entries("d/k")[0]))
	if res.Count != 1 || res.Inode == nil || versions("d/k") != "L2 R1 " {
		t.Fatalf("undelete: %+v, %q", res, versions("d/k"))
	}
	// Deleting the live version when the newest entry is a deletion
	// promotes nothing: the delete marker is then the latest.
	must(apply(Command{Op: OpDelete, BucketName: "ver", Path: "d/k"}))
	must(apply(Command{Op: OpPutFile, BucketName: "ver", Path: "d/k", File: file(h1, 4)}))
	if got := versions("d/k"); got != "L4 D2 R1 " {
		t.Fatalf("delete then put: %q", got)
	}
	must(delVersion("d/k", live("d/k")))
	if got := versions("d/k"); got != "D2 R1 " {
		t.Fatalf("after deleting a version that followed a delete: %q", got)
	}
	// A marker that is not the latest is forgotten: its version stays, as
	// replaced.
	must(apply(Command{Op: OpPutFile, BucketName: "ver", Path: "d/k", File: file(h1, 5)}))
	must(delMarker("d/k", entries("d/k")[0]))
	if got := versions("d/k"); got != "L5 R2 R1 " {
		t.Fatalf("after forgetting a marker: %q", got)
	}
	// A noncurrent version goes with its references; again, nothing
	// happens.
	old := entries("d/k")[1].Inode
	if res := must(delVersion("d/k", old)); res.Count != 1 || versions("d/k") != "L5 R2 " {
		t.Fatalf("delete of a noncurrent version: %+v %q", res, versions("d/k"))
	}
	if res := must(delVersion("d/k", old)); res.Count != 0 {
		t.Fatalf("a second delete changed something: %+v", res)
	}
	if res := must(delMarker("d/k", entries("d/k")[0])); res.Count != 0 {
		t.Fatalf("a replaced entry has no marker: %+v", res)
	}
	// OpTrashDrop drops exactly one entry.
	e := entries("d/k")[0]
	if res := must(apply(Command{Op: OpTrashDrop, BucketName: "ver", Path: "d/k", Trash: &TrashCmd{At: e.DeletedNs}, File: &Inode{Ino: e.Inode.Ino}})); res.Count != 1 {
		t.Fatalf("drop: %+v", res)
	}
	if got := versions("d/k"); got != "L5 " {
		t.Fatalf("after the drop: %q", got)
	}
	// An undelete never replaces a directory that took the path.
	must(apply(Command{Op: OpDelete, BucketName: "ver", Path: "d/k"}))
	must(apply(Command{Op: OpPutFile, BucketName: "ver", Path: "d/k/inner", File: file(h2, 6)}))
	if res := delMarker("d/k", entries("d/k")[0]); !errors.Is(res.Err, ErrExists) {
		t.Fatalf("undelete over a directory: %v", res.Err)
	}
	must(apply(Command{Op: OpDelete, BucketName: "ver", Path: "d/k/inner"}))
	must(apply(Command{Op: OpDelete, BucketName: "ver", Path: "d/k"}))
	if res := must(delMarker("d/k", entries("d/k")[0])); res.Inode == nil || live("d/k").MtimeNs != 5 {
		t.Fatalf("undelete once the directory went: %+v", res)
	}
	// Everything deleted by version: no reference is left.
	for _, p := range []string{"d/k", "d/k/inner"} {
		if n := live(p); n != nil {
			must(delVersion(p, n))
		}
		for _, e := range entries(p) {
			must(delVersion(p, e.Inode))
		}
	}
	if refs(h1) != 0 || refs(h2) != 0 {
		t.Fatalf("refs left: %d %d", refs(h1), refs(h2))
	}
	if n, b, _ := r.TrashUsage("ver"); n != 0 || b != 0 {
		t.Fatalf("trash usage %d %d", n, b)
	}
	// A bucket with a plain trash still skips empty and repeated bodies.
	must(apply(Command{Op: OpCreateBucket, Bucket: &Bucket{Name: "tra", TrashNs: int64(time.Hour)}}))
	must(apply(Command{Op: OpPutFile, BucketName: "tra", Path: "k", File: file(h1, 1)}))
	must(apply(Command{Op: OpPutFile, BucketName: "tra", Path: "k", File: file(h1, 2)}))
	if n, _, _ := r.TrashUsage("tra"); n != 0 {
		t.Fatalf("a plain trash kept a repeated body: %d entries", n)
	}
	// Bad commands.
	if res := apply(Command{Op: OpVersionDelete, BucketName: "ver", Path: "k"}); !errors.Is(res.Err, ErrInvalid) {
		t.Fatalf("OpVersionDelete without arguments: %v", res.Err)
	}
	if res := apply(Command{Op: OpTrashDrop, BucketName: "ver", Path: "k"}); !errors.Is(res.Err, ErrInvalid) {
		t.Fatalf("OpTrashDrop without arguments: %v", res.Err)
	}
}

// TestPathTrashPages: PathTrash pages a path's entries newest first with
// bounded memory; TrashPathAfter finds the next path with entries.
func TestPathTrashPages(t *testing.T) {
	db := kv.NewMem()
	r := NewReader(db)
	idx := uint64(0)
	apply := func(c Command) {
		t.Helper()
		idx++
		c.TimeNs = int64(idx) * int64(time.Second)
		if res := applyOne(t, db, idx, c); res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	apply(Command{Op: OpCreateBucket, Bucket: &Bucket{Name: "ver", TrashNs: TrashForever}})
	for _, p := range []string{"a", "a/b", "ab"} {
		for i := range 7 {
			h := cas.Sum([]byte(p + fmt.Sprint(i)))
			apply(Command{Op: OpPutFile, BucketName: "ver", Path: p, File: &Inode{Size: 1, MtimeNs: int64(i + 1), Extents: []Extent{{Hash: h, Length: 1}}}})
		}
		if p == "a" {
			apply(Command{Op: OpDelete, BucketName: "ver", Path: "a"}) // "a/b" needs a directory
		}
	}
	var got []int64
	var before *TrashPos
	for pages := 0; ; pages++ {
		if pages > 10 {
			t.Fatal("no end")
		}
		es, more, err := r.PathTrash("ver", "a", before, 3)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			got = append(got, e.Inode.MtimeNs)
		}
		if !more {
			break
		}
		p := es[len(es)-1].Pos()
		before = &p
	}
	if fmt.Sprint(got) != "[7 6 5 4 3 2 1]" {
		t.Fatalf("pages of a: %v", got)
	}
	var paths []string
	for after := ""; ; {
		p, ok, err := r.TrashPathAfter("ver", "a", after)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		paths = append(paths, p)
		after = p
	}
	if fmt.Sprint(paths) != "[a a/b ab]" {
		t.Fatalf("paths: %v", paths)
	}
	if p, ok, _ := r.TrashPathAfter("ver", "a/", ""); !ok || p != "a/b" {
		t.Fatalf("paths under a/: %q %v", p, ok)
	}
}
