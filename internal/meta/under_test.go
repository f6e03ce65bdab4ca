package meta

import (
	"errors"
	"fmt"
	"testing"

	"github.com/cairn-fs/cairn/internal/cas"
	"github.com/cairn-fs/cairn/internal/kv"
)

// mustApply applies cmd as entry index and fails the test on any error.
func mustApply(t *testing.T, s kv.Store, index uint64, cmd Command) Result {
	t.Helper()
	res := applyOne(t, s, index, cmd)
	if res.Err != nil {
		t.Fatalf("entry %d: %v", index, res.Err)
	}
	return res
}

func underOf(t *testing.T, s kv.Store) (map[cas.Hash]int, int64) {
	t.Helper()
	r := NewReader(s)
	got := map[cas.Hash]int{}
	if err := r.UnderReplicated(func(h cas.Hash, replicas int, _ int64) bool {
		got[h] = replicas
		return true
	}); err != nil {
		t.Fatal(err)
	}
	n, err := r.UnderReplicatedCount()
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(got)) != n {
		t.Fatalf("count %d, records %d", n, len(got))
	}
	return got, n
}

// A put's under-replicated blobs are recorded with the bucket's R, only
// for blobs of the file; OpReplicated and a reap drop them.
func TestUnderReplicatedRecords(t *testing.T) {
	s := kv.NewMem()
	mustApply(t, s, 1, Command{Op: OpCreateBucket, Bucket: &Bucket{Name: "bkt", Replicas: 2, Strict: true}, TimeNs: 1})
	bk, err := NewReader(s).Bucket("bkt")
	if err != nil || !bk.Strict || bk.Replicas != 2 {
		t.Fatalf("bucket %+v, %v: want strict, R=2", bk, err)
	}
	h1, h2, stranger := cas.Sum([]byte("1")), cas.Sum([]byte("2")), cas.Sum([]byte("x"))
	file := func(hs ...cas.Hash) *Inode {
		f := &Inode{Type: TypeFile}
		for _, h := range hs {
			f.Extents = append(f.Extents, Extent{Hash: h, Offset: f.Size, Length: 1})
			f.Size++
		}
		return f
	}
	mustApply(t, s, 2, Command{Op: OpPutFile, BucketName: "bkt", Path: "f", File: file(h1, h2), TimeNs: 2,
		Under: []cas.Hash{h1, stranger}})
	got, n := underOf(t, s)
	if n != 1 || got[h1] != 2 {
		t.Fatalf("after put: %v (count %d), want only h1 with R=2", got, n)
	}
	// Again with the same blob: still one record.
	mustApply(t, s, 3, Command{Op: OpPutFile, BucketName: "bkt", Path: "g", File: file(h1), TimeNs: 3, Under: []cas.Hash{h1}})
	if _, n := underOf(t, s); n != 1 {
		t.Fatalf("after a second put of h1: count %d, want 1", n)
	}
	mustApply(t, s, 4, Command{Op: OpPutFile, BucketName: "bkt", Path: "h", File: file(h2), TimeNs: 4, Under: []cas.Hash{h2}})
	mustApply(t, s, 5, Command{Op: OpReplicated, Replicated: []cas.Hash{h1, stranger}, TimeNs: 5})
	if got, n := underOf(t, s); n != 1 || got[h2] != 2 {
		t.Fatalf("after OpReplicated(h1): %v (count %d), want only h2", got, n)
	}
	// Deleting the files and reaping h2 drops its record.
	for i, p := range []string{"f", "g", "h"} {
		mustApply(t, s, uint64(6+i), Command{Op: OpDelete, BucketName: "bkt", Path: p, TimeNs: 6})
	}
	res := mustApply(t, s, 10, Command{Op: OpReap, Reap: []cas.Hash{h1, h2}, ReapBefore: 100, TimeNs: 10})
	if len(res.Freed) != 2 {
		t.Fatalf("reap freed %d blobs, want 2", len(res.Freed))
	}
	if got, n := underOf(t, s); n != 0 {
		t.Fatalf("after the reap: %v (count %d), want none", got, n)
	}
}

// Entries and buckets of the previous encoding (version 2) still decode.
func TestDecodeVersion2(t *testing.T) {
	b := &Bucket{Name: "old", Ino: 3, Replicas: 3, WriteQuorum: 2}
	e := encoder{}
	e.byte1(2)
	appendBucket(&e, b, bucketBodyVersion(b))
	e.b = e.b[:len(e.b)-2] // version 4 had no owner nor acl (empty strings: one byte each)
	v2 := e.b[:len(e.b)-5] // version 2 had no strict byte, no owner and modes (4 one-byte zeros)
	got, err := decodeBucket(v2)
	if err != nil || got.Name != "old" || got.Replicas != 3 || got.Strict {
		t.Fatalf("bucket v2: %+v, %v", got, err)
	}
	v3 := append([]byte{3}, e.b[1:len(e.b)-4]...) // version 3: strict, no owner and modes
	v3[len(v3)-1] = 1
	if got, err := decodeBucket(v3); err != nil || !got.Strict || got.UID != 0 {
		t.Fatalf("bucket v3: %+v, %v", got, err)
	}
	v4 := append([]byte{4}, e.b[1:]...)
	if got, err := decodeBucket(v4); err != nil || got.Replicas != 3 || got.Owner != "" {
		t.Fatalf("bucket v4: %+v, %v", got, err)
	}
	b.UID, b.FileMode, b.Owner = 33, 0o640, "CKOWNER"
	if got, err := decodeBucket(encodeBucket(b)); err != nil || got.UID != 33 || got.FileMode != 0o640 || got.Owner != "CKOWNER" {
		t.Fatalf("bucket v5: %+v, %v", got, err)
	}
	p, err := EncodeCommands([]Command{{Op: OpMkdir, BucketName: "old", Path: "d", TimeNs: 7}})
	if err != nil {
		t.Fatal(err)
	}
	p = p[:len(p)-2] // version 6 had no record nor xattrs flag
	p[0] = 6
	if cmds, err := DecodeCommands(p); err != nil || len(cmds) != 1 || cmds[0].Path != "d" {
		t.Fatalf("entry v6: %+v, %v", cmds, err)
	}
	p = p[:len(p)-1] // version 4 had no count
	p[0] = 4
	if cmds, err := DecodeCommands(p); err != nil || len(cmds) != 1 || cmds[0].Path != "d" {
		t.Fatalf("entry v4: %+v, %v", cmds, err)
	}
	p[0] = 2
	p = p[:len(p)-2] // version 2 had no under and replicated lists
	cmds, err := DecodeCommands(p)
	if err != nil || len(cmds) != 1 || cmds[0].Path != "d" || cmds[0].TimeNs != 7 {
		t.Fatalf("entry v2: %+v, %v", cmds, err)
	}
}

// OpReserveInos hands out inode numbers nothing else allocates; a file
// created with one (File.Ino) gets it, unless it is taken or was never
// handed out.
func TestReserveInos(t *testing.T) {
	s := kv.NewMem()
	mustApply(t, s, 1, Command{Op: OpCreateBucket, Bucket: &Bucket{Name: "bkt"}, TimeNs: 1})
	res := mustApply(t, s, 2, Command{Op: OpReserveInos, Count: 10, TimeNs: 2})
	first := res.Inode.Ino
	put := func(idx uint64, p string, ino Ino) Ino {
		t.Helper()
		r := mustApply(t, s, idx, Command{Op: OpPutFile, BucketName: "bkt", Path: p, TimeNs: 3,
			File: &Inode{Ino: ino, Mode: 0o644, MtimeNs: 3}})
		return r.Inode.Ino
	}
	if got := put(3, "a", first+3); got != first+3 {
		t.Fatalf("file made with reserved ino %d got %d", first+3, got)
	}
	// A directory made now gets a number after the reserved ones.
	if r := mustApply(t, s, 4, Command{Op: OpMkdir, BucketName: "bkt", Path: "d", TimeNs: 4}); r.Inode.Ino < first+10 {
		t.Fatalf("mkdir after a reservation got ino %d inside it [%d, %d)", r.Inode.Ino, first, first+10)
	}
	if r := mustApply(t, s, 40, Command{Op: OpMkdir, BucketName: "bkt", Path: "e", TimeNs: 4,
		File: &Inode{Type: TypeDir, Ino: first + 5}}); r.Inode.Ino != first+5 {
		t.Fatalf("mkdir with reserved ino %d got %d", first+5, r.Inode.Ino)
	}
	if got := put(5, "b", first+3); got == first+3 {
		t.Fatal("a taken reserved ino was given again")
	}
	if got := put(6, "c", first+1000); got == first+1000 {
		t.Fatal("an ino never handed out was used")
	}
	if got := put(7, "a", first+4); got != first+3 {
		t.Fatalf("a replaced file changed ino: %d, want %d", got, first+3)
	}
	for _, n := range []uint64{0, maxReserve + 1} {
		r := applyOne(t, s, 8, Command{Op: OpReserveInos, Count: n, TimeNs: 8})
		if !errors.Is(r.Err, ErrInvalid) {
			t.Fatalf("reserve %d: %v, want ErrInvalid", n, r.Err)
		}
	}
	p, err := EncodeCommands([]Command{{Op: OpReserveInos, Count: 4096}})
	if err != nil {
		t.Fatal(err)
	}
	if cmds, err := DecodeCommands(p); err != nil || cmds[0].Count != 4096 || cmds[0].Op != OpReserveInos {
		t.Fatalf("round trip: %+v, %v", cmds, err)
	}
}

// OpLink adds a name for an inode; deleting one name keeps the other and
// the blob references until the last.
func TestLink(t *testing.T) {
	s := kv.NewMem()
	mustApply(t, s, 1, Command{Op: OpCreateBucket, Bucket: &Bucket{Name: "bkt"}, TimeNs: 1})
	h := cas.Sum([]byte("x"))
	mustApply(t, s, 2, Command{Op: OpPutFile, BucketName: "bkt", Path: "a/f", TimeNs: 2,
		File: &Inode{Type: TypeFile, Size: 1, Extents: []Extent{{Hash: h, Length: 1}}}})
	mustApply(t, s, 3, Command{Op: OpMkdir, BucketName: "bkt", Path: "b", TimeNs: 3})
	res := mustApply(t, s, 4, Command{Op: OpLink, BucketName: "bkt", Path: "a/f", DstPath: "b/g", TimeNs: 4})
	if res.Inode.Nlink != 2 {
		t.Fatalf("nlink after link: %d", res.Inode.Nlink)
	}
	r := NewReader(s)
	f, err1 := r.Lookup("bkt", "a/f")
	g, err2 := r.Lookup("bkt", "b/g")
	if err1 != nil || err2 != nil || f.Ino != g.Ino || g.Nlink != 2 {
		t.Fatalf("lookup: %+v %v / %+v %v", f, err1, g, err2)
	}
	for _, c := range []struct {
		cmd  Command
		want error
	}{
		{Command{Op: OpLink, BucketName: "bkt", Path: "a/f", DstPath: "b/g"}, ErrExists},
		{Command{Op: OpLink, BucketName: "bkt", Path: "a", DstPath: "b/d"}, ErrIsDir},
		{Command{Op: OpLink, BucketName: "bkt", Path: "a/nope", DstPath: "b/n"}, ErrNotFound},
		{Command{Op: OpLink, BucketName: "bkt", Path: "a/f", DstPath: "c/g"}, ErrNotFound},
	} {
		if res := applyOne(t, s, 5, c.cmd); !errors.Is(res.Err, c.want) {
			t.Fatalf("%s -> %s: %v, want %v", c.cmd.Path, c.cmd.DstPath, res.Err, c.want)
		}
	}
	mustApply(t, s, 6, Command{Op: OpDelete, BucketName: "bkt", Path: "a/f", TimeNs: 6})
	if g, err := r.Lookup("bkt", "b/g"); err != nil || g.Nlink != 1 {
		t.Fatalf("after deleting one name: %+v, %v", g, err)
	}
	if rc, _ := r.RefCount(h); rc != 1 {
		t.Fatalf("refcount %d after deleting one of two names, want 1", rc)
	}
	mustApply(t, s, 7, Command{Op: OpDelete, BucketName: "bkt", Path: "b/g", TimeNs: 7})
	if rc, _ := r.RefCount(h); rc != 0 {
		t.Fatalf("refcount %d after deleting both names, want 0", rc)
	}
}

// A mode the proposer gives explicitly is stored as given, 0 included; a
// 0 without ModeExplicit takes the default.
func TestModeExplicit(t *testing.T) {
	s := kv.NewMem()
	mustApply(t, s, 1, Command{Op: OpCreateBucket, Bucket: &Bucket{Name: "bkt"}, TimeNs: 1})
	for i, c := range []struct {
		op   Op
		typ  FileType
		mode uint32
		want uint32
	}{
		{OpPutFile, TypeFile, 0, defaultFileMode},
		{OpPutFile, TypeFile, ModeExplicit, 0},
		{OpPutFile, TypeFile, ModeExplicit | 0o600, 0o600},
		{OpMkdir, TypeDir, 0, defaultDirMode},
		{OpMkdir, TypeDir, ModeExplicit, 0},
	} {
		r := mustApply(t, s, uint64(2+i), Command{Op: c.op, BucketName: "bkt", Path: fmt.Sprint("p", i), TimeNs: 2,
			File: &Inode{Type: c.typ, Mode: c.mode, MtimeNs: 2}})
		if r.Inode.Mode != c.want {
			t.Fatalf("case %d: mode %#o, want %#o", i, r.Inode.Mode, c.want)
		}
	}
}

// Inodes of version 1 (no access time) still decode; version 2 keeps it.
func TestInodeVersion1(t *testing.T) {
	n := &Inode{Type: TypeFile, Mode: 0o640, Nlink: 1, Size: 3, MtimeNs: 5, CtimeNs: 6}
	v2 := EncodeInode(n)
	v1 := append([]byte{1}, v2[1:len(v2)-1]...) // no atime varint (0: one byte)
	got, err := DecodeInode(7, v1)
	if err != nil || got.Mode != 0o640 || got.MtimeNs != 5 || got.AtimeNs != 0 {
		t.Fatalf("inode v1: %+v, %v", got, err)
	}
	n.AtimeNs = 99
	if got, err := DecodeInode(7, EncodeInode(n)); err != nil || got.AtimeNs != 99 {
		t.Fatalf("inode v2 atime: %+v, %v", got, err)
	}
}
