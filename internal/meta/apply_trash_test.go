package meta

import (
	"errors"
	"testing"
	"time"

	"github.com/cairn-fs/cairn/internal/cas"
	"github.com/cairn-fs/cairn/internal/kv"
)

func TestTrash(t *testing.T) {
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
	file := func(h cas.Hash, size int64) *Inode {
		return &Inode{Size: size, Extents: []Extent{{Hash: h, Offset: 0, Length: size}}, ETag: h.String()[:8]}
	}
	refs := func(h cas.Hash) uint64 {
		n, err := r.RefCount(h)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	week := int64(7 * 24 * time.Hour)
	must(apply(Command{Op: OpCreateBucket, Bucket: &Bucket{Name: "web", TrashNs: week}}))
	must(apply(Command{Op: OpCreateBucket, Bucket: &Bucket{Name: "plain"}}))
	if b, _ := r.Bucket("web"); b.TrashNs != week {
		t.Fatalf("trash retention %d", b.TrashNs)
	}
	must(apply(Command{Op: OpPutFile, BucketName: "web", Path: "up/a.jpg", File: file(h1, 3)}))
	origin := &Origin{Node: 7, Frontend: "s3", Key: "AK1"}
	// An overwrite keeps the old body, a delete the last one.
	must(apply(Command{Op: OpPutFile, BucketName: "web", Path: "up/a.jpg", File: file(h2, 3), Origin: origin}))
	delAt := int64(idx+1) * int64(time.Second)
	must(apply(Command{Op: OpDelete, BucketName: "web", Path: "up/a.jpg", Origin: origin}))
	if refs(h1) != 1 || refs(h2) != 1 {
		t.Fatalf("refcounts %d %d: the trash holds both bodies", refs(h1), refs(h2))
	}
	var got []*TrashEntry
	if err := r.Trash("web", "up/", func(e *TrashEntry) bool { got = append(got, e); return true }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || !got[0].Replaced || got[1].Replaced || got[1].DeletedNs != delAt || got[1].Origin != *origin ||
		got[0].Inode.Extents[0].Hash != h1 || got[1].Inode.Extents[0].Hash != h2 {
		t.Fatalf("trash entries: %+v", got)
	}
	if n, b, _ := r.TrashUsage("web"); n != 2 || b != 6 {
		t.Fatalf("trash usage %d entries, %d bytes", n, b)
	}
	// Restore: the newest, then the older one at its time to another
	// path; never over an existing file.
	must(apply(Command{Op: OpTrashRestore, BucketName: "web", Path: "up/a.jpg"}))
	if n, err := r.Lookup("web", "up/a.jpg"); err != nil || n.Extents[0].Hash != h2 {
		t.Fatalf("restored file: %+v, %v", n, err)
	}
	if res := apply(Command{Op: OpTrashRestore, BucketName: "web", Path: "up/a.jpg"}); !errors.Is(res.Err, ErrExists) {
		t.Fatalf("restore over a file: %v", res.Err)
	}
	must(apply(Command{Op: OpTrashRestore, BucketName: "web", Path: "up/a.jpg", DstPath: "old/a.jpg", Trash: &TrashCmd{At: delAt}}))
	if n, err := r.Lookup("web", "old/a.jpg"); err != nil || n.Extents[0].Hash != h1 {
		t.Fatalf("restored older version: %+v, %v", n, err)
	}
	if res := apply(Command{Op: OpTrashRestore, BucketName: "web", Path: "up/a.jpg", DstPath: "x"}); !errors.Is(res.Err, ErrNotFound) {
		t.Fatalf("restore of an empty history: %v", res.Err)
	}
	if refs(h1) != 1 || refs(h2) != 1 {
		t.Fatalf("refcounts after restores %d %d", refs(h1), refs(h2))
	}
	// Expiry: the purge drops what is older than Before, and the blobs
	// only the trash held lose their references.
	must(apply(Command{Op: OpDelete, BucketName: "web", Path: "old/a.jpg"}))
	must(apply(Command{Op: OpDelete, BucketName: "web", Path: "up/a.jpg"}))
	if res := apply(Command{Op: OpDeleteBucket, BucketName: "web"}); !errors.Is(res.Err, ErrBucketNotEmpty) {
		t.Fatalf("delete a bucket whose trash holds files: %v", res.Err)
	}
	res := must(apply(Command{Op: OpTrashPurge, BucketName: "web", Trash: &TrashCmd{Before: 1 << 62, Limit: 1}}))
	if res.Count != 1 || refs(h1) != 0 || refs(h2) != 1 {
		t.Fatalf("purge of one: count %d, refcounts %d %d", res.Count, refs(h1), refs(h2))
	}
	res = must(apply(Command{Op: OpTrashPurge, BucketName: "web", Trash: &TrashCmd{Before: 1 << 62, Limit: 100}}))
	if res.Count != 1 || refs(h2) != 0 {
		t.Fatalf("purge: count %d, refcount %d", res.Count, refs(h2))
	}
	if n, _, _ := r.TrashUsage("web"); n != 0 {
		t.Fatalf("%d entries left", n)
	}
	if g, err := r.Garbage(1<<62, 10); err != nil || len(g) != 2 {
		t.Fatalf("garbage after the purge: %v %v", g, err)
	}
	must(apply(Command{Op: OpDelete, BucketName: "web", Path: "up"}))
	must(apply(Command{Op: OpDelete, BucketName: "web", Path: "old"}))
	must(apply(Command{Op: OpDeleteBucket, BucketName: "web"}))
	// A bucket without a trash keeps nothing.
	must(apply(Command{Op: OpPutFile, BucketName: "plain", Path: "f", File: file(h1, 3)}))
	must(apply(Command{Op: OpDelete, BucketName: "plain", Path: "f"}))
	if n, _, _ := r.TrashUsage("plain"); n != 0 || refs(h1) != 0 {
		t.Fatalf("plain bucket: %d entries, refcount %d", n, refs(h1))
	}
	if res := apply(Command{Op: OpTrashPurge, BucketName: "plain", Trash: &TrashCmd{Limit: 0}}); !errors.Is(res.Err, ErrInvalid) {
		t.Fatalf("purge without a limit: %v", res.Err)
	}
}

// A bucket without a trash is stored, and carried in commands, in the
// encodings older binaries read.
func TestTrashEncodings(t *testing.T) {
	if v := encodeBucket(&Bucket{Name: "b"})[0]; v != 5 {
		t.Fatalf("bucket without a trash stored as version %d", v)
	}
	b, err := decodeBucket(encodeBucket(&Bucket{Name: "b", TrashNs: 9}))
	if err != nil || b.TrashNs != 9 {
		t.Fatalf("bucket with a trash: %+v, %v", b, err)
	}
	for _, tc := range []struct {
		c    Command
		want byte
	}{
		{Command{Op: OpCreateBucket, Bucket: &Bucket{Name: "b"}}, 7},
		{Command{Op: OpCreateBucket, Bucket: &Bucket{Name: "b", TrashNs: 5}}, 10},
		{Command{Op: OpDelete, BucketName: "b", Path: "p", Origin: &Origin{Node: 1, Frontend: "mount"}}, 10},
		{Command{Op: OpTrashRestore, BucketName: "b", Path: "p", Trash: &TrashCmd{At: 4}}, 10},
	} {
		p := mustEncodeCmds(t, tc.c)
		if p[0] != tc.want {
			t.Errorf("%v: payload version %d, want %d", tc.c.Op, p[0], tc.want)
		}
		got, err := DecodeCommands(p)
		if err != nil {
			t.Fatal(err)
		}
		if g := got[0]; (g.Bucket != nil && g.Bucket.TrashNs != tc.c.Bucket.TrashNs) ||
			(tc.c.Origin != nil && *g.Origin != *tc.c.Origin) || (tc.c.Trash != nil && *g.Trash != *tc.c.Trash) {
			t.Errorf("%v: round trip %+v", tc.c.Op, g)
		}
	}
	// Below log version 10 the origin is dropped, not the command.
	c := Fit(Command{Op: OpDelete, Origin: &Origin{Node: 1}}, 9)
	if c.Origin != nil || Allowed([]Command{c}, 9) != nil {
		t.Fatalf("Fit at 9: %+v", c)
	}
	if err := Allowed([]Command{{Op: OpTrashRestore, Trash: &TrashCmd{}}}, 9); !errors.Is(err, ErrLogVersion) {
		t.Fatalf("a trash restore at log version 9: %v", err)
	}
}

func mustEncodeCmds(t *testing.T, cmds ...Command) []byte {
	t.Helper()
	p, err := EncodeCommands(cmds)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
