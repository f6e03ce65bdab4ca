package meta

import (
	"errors"
	"testing"

	"github.com/cairn-fs/cairn/internal/kv"
)

// applyVia returns a function that applies one command to db through the
// log's encoding, as a node does.
func applyVia(t *testing.T, db kv.Store) func(Command) Result {
	idx := uint64(0)
	return func(c Command) Result {
		t.Helper()
		idx++
		p, err := EncodeCommands([]Command{c})
		if err != nil {
			t.Fatal(err)
		}
		cmds, err := DecodeCommands(p)
		if err != nil {
			t.Fatal(err)
		}
		b := db.NewBatch()
		res, err := Apply(b, idx, cmds)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Commit(true); err != nil {
			t.Fatal(err)
		}
		return res[0]
	}
}

// TestPutXattrsThroughTheLog: a replacing put with an empty set of
// extended attributes clears the old ones (S3 PutObject without
// metadata); one without a set (nil) keeps them (a rewrite on the mount).
func TestPutXattrsThroughTheLog(t *testing.T) {
	db := kv.NewMem()
	apply := applyVia(t, db)
	if r := apply(Command{Op: OpCreateBucket, Bucket: &Bucket{Name: "bkt"}, TimeNs: 1}); r.Err != nil {
		t.Fatal(r.Err)
	}
	put := func(x map[string][]byte) {
		t.Helper()
		if r := apply(Command{Op: OpPutFile, BucketName: "bkt", Path: "f", TimeNs: 2, File: &Inode{Type: TypeFile, Mode: 0o644, Xattrs: x}}); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	get := func() map[string][]byte {
		t.Helper()
		n, err := NewReader(db).Lookup("bkt", "f")
		if err != nil {
			t.Fatal(err)
		}
		return n.Xattrs
	}
	put(map[string][]byte{"user.cairn.x-amz-meta-a": []byte("1")})
	put(nil)
	if string(get()["user.cairn.x-amz-meta-a"]) != "1" {
		t.Fatalf("a put without xattrs dropped them: %v", get())
	}
	put(map[string][]byte{})
	if len(get()) != 0 {
		t.Fatalf("a put with an empty set kept the old xattrs: %v", get())
	}
}

func TestRecords(t *testing.T) {
	db := kv.NewMem()
	apply := applyVia(t, db)
	put := func(k RecordKind, name, v string, excl bool) Result {
		return apply(Command{Op: OpPutRecord, Record: &Record{Kind: k, Name: name, Value: []byte(v)}, IfNoneMatchAny: excl})
	}
	if r := put(RecordRule, "", "a", false); r.Err != nil || r.Name != "1" {
		t.Fatalf("first sequenced rule: %+v", r)
	}
	if r := put(RecordRule, "", "b", false); r.Err != nil || r.Name != "2" {
		t.Fatalf("second sequenced rule: %+v", r)
	}
	if r := put(RecordKey, "AK1", "secret", true); r.Err != nil || r.Name != "AK1" {
		t.Fatalf("key: %+v", r)
	}
	if r := put(RecordKey, "AK1", "other", true); !errors.Is(r.Err, ErrExists) {
		t.Fatalf("exclusive put over an existing record: %v", r.Err)
	}
	if r := put(RecordKey, "AK1", "v2", false); r.Err != nil {
		t.Fatal(r.Err)
	}
	if r := put(RecordKind('?'), "x", "", false); !errors.Is(r.Err, ErrInvalid) {
		t.Fatalf("unknown kind: %v", r.Err)
	}
	if r := put(RecordKey, "big", string(make([]byte, MaxRecordValue+1)), false); !errors.Is(r.Err, ErrInvalid) {
		t.Fatalf("oversized value: %v", r.Err)
	}
	rd := NewReader(db)
	rules, err := rd.Records(RecordRule)
	if err != nil || len(rules) != 2 || rules[0].Name != "1" || string(rules[1].Value) != "b" {
		t.Fatalf("rules: %+v, %v", rules, err)
	}
	k, err := rd.Record(RecordKey, "AK1")
	if err != nil || string(k.Value) != "v2" {
		t.Fatalf("key: %+v, %v", k, err)
	}
	if r := apply(Command{Op: OpDeleteRecord, Record: &Record{Kind: RecordRule, Name: "1"}}); r.Err != nil {
		t.Fatal(r.Err)
	}
	if r := apply(Command{Op: OpDeleteRecord, Record: &Record{Kind: RecordRule, Name: "1"}}); !errors.Is(r.Err, ErrNotFound) {
		t.Fatalf("delete of a missing record: %v", r.Err)
	}
	// A deleted number is not handed out again.
	if r := put(RecordRule, "", "c", false); r.Name != "3" {
		t.Fatalf("sequence after delete: %+v", r)
	}
	if _, err := rd.Record(RecordRule, "1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deleted record: %v", err)
	}
	if keys, _ := rd.Records(RecordKey); len(keys) != 1 {
		t.Fatalf("kinds leak into each other: %+v", keys)
	}
}

// TestSpecialFiles: FIFOs, sockets and devices are names with no content,
// made once (If-None-Match: *, as mknod(2) is exclusive), a device with
// its number; what is not a special file's shape is refused.
func TestSpecialFiles(t *testing.T) {
	db := kv.NewMem()
	apply := applyVia(t, db)
	if r := apply(Command{Op: OpCreateBucket, Bucket: &Bucket{Name: "bkt"}, TimeNs: 1}); r.Err != nil {
		t.Fatal(r.Err)
	}
	mk := func(p string, n *Inode) Result {
		return apply(Command{Op: OpPutFile, BucketName: "bkt", Path: p, TimeNs: 2, File: n, IfNoneMatchAny: true})
	}
	for _, c := range []struct {
		path string
		n    Inode
	}{
		{"d/fifo", Inode{Type: TypeFIFO, Mode: 0o640 | ModeExplicit}},
		{"d/sock", Inode{Type: TypeSocket, Mode: 0o755 | ModeExplicit}},
		{"d/null", Inode{Type: TypeCharDev, Mode: 0o666 | ModeExplicit, Rdev: 0x0103}},
		{"d/loop", Inode{Type: TypeBlockDev, Mode: 0o660 | ModeExplicit, Rdev: 0x0700}},
	} {
		if r := mk(c.path, &c.n); r.Err != nil {
			t.Fatalf("%s: %v", c.path, r.Err)
		}
		got, err := NewReader(db).Lookup("bkt", c.path)
		if err != nil {
			t.Fatal(err)
		}
		if got.Type != c.n.Type || got.Mode != c.n.Mode&^ModeExplicit || got.Rdev != c.n.Rdev || got.Size != 0 || got.Nlink != 1 {
			t.Fatalf("%s: got %+v, want type %d mode %o rdev %#x", c.path, got, c.n.Type, c.n.Mode&^ModeExplicit, c.n.Rdev)
		}
		if r := mk(c.path, &Inode{Type: TypeFIFO}); !errors.Is(r.Err, ErrPrecondition) {
			t.Fatalf("%s made twice: %v, want ErrPrecondition", c.path, r.Err)
		}
	}
	ents, err := NewReader(db).ReadDir(mustLookupIno(t, db, "bkt", "d"), "", 10)
	if err != nil || len(ents) != 4 {
		t.Fatalf("listing: %+v, %v", ents, err)
	}
	for _, bad := range []Inode{
		{Type: TypeFIFO, Size: 3},
		{Type: TypeSocket, Target: "x"},
		{Type: TypeCharDev, Extents: []Extent{{Length: 1}}},
		{Type: TypeBlockDev + 1},
	} {
		if r := mk("d/bad", &bad); !errors.Is(r.Err, ErrInvalid) {
			t.Fatalf("%+v: %v, want ErrInvalid", bad, r.Err)
		}
	}
}

func mustLookupIno(t *testing.T, db kv.Store, bucket, path string) Ino {
	t.Helper()
	n, err := NewReader(db).Lookup(bucket, path)
	if err != nil {
		t.Fatal(err)
	}
	return n.Ino
}
