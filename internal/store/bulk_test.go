package store

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/cairn-fs/cairn/internal/blob"
	"github.com/cairn-fs/cairn/internal/cas"
	"github.com/cairn-fs/cairn/internal/consensus"
	"github.com/cairn-fs/cairn/internal/kv"
	"github.com/cairn-fs/cairn/internal/meta"
	"github.com/cairn-fs/cairn/internal/minindex"
	"github.com/cairn-fs/cairn/internal/placement"
	"github.com/cairn-fs/cairn/internal/vfs"
)

// PutFiles stores every file as Put would: content, ETag (MD5), SHA-256,
// mode, mtime, parents; a shared content is stored once.
func TestPutFilesLikePut(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	rng := rand.New(rand.NewSource(7))
	mtime := time.Unix(1_600_000_000, 123456789)
	var files []FilePut
	want := map[string][]byte{}
	for i := range 40 {
		data := randBytes(rng, rng.Intn(20000))
		if i%10 == 9 {
			data = []byte("the same content") // deduplicated
		}
		p := fmt.Sprintf("d%d/sub/f%02d.bin", i%3, i)
		files = append(files, FilePut{Path: p, Data: data, Opts: PutOptions{Mode: 0o600, ModTime: mtime, ContentType: "x/y"}})
		want[p] = data
	}
	files = append(files, FilePut{Path: "empty", Data: nil})
	want["empty"] = nil
	res := e.s.PutFiles(ctx, "bkt", files)
	if len(res) != len(files) {
		t.Fatalf("%d results for %d files", len(res), len(files))
	}
	for i, r := range res {
		if r.Err != nil || !r.Created {
			t.Fatalf("file %s: err %v created %v", files[i].Path, r.Err, r.Created)
		}
	}
	for p, data := range want {
		if got := readAll(t, e.s, p); !bytes.Equal(got, data) {
			t.Fatalf("%s: content differs", p)
		}
		info, err := e.s.Stat(ctx, "bkt", p)
		if err != nil {
			t.Fatal(err)
		}
		m, s := md5.Sum(data), sha256.Sum256(data)
		if info.ETag != hex.EncodeToString(m[:]) || info.SHA256 != hex.EncodeToString(s[:]) || info.Size != int64(len(data)) {
			t.Fatalf("%s: info %+v", p, info)
		}
		if p != "empty" && (info.Mode != 0o600 || !info.ModTime.Equal(mtime) || info.ContentType != "x/y") {
			t.Fatalf("%s: mode/mtime/type not kept: %+v", p, info)
		}
		if p == "empty" && info.Mode != 0o644 {
			t.Fatalf("default mode: %o", info.Mode)
		}
	}
	if d, err := e.s.Stat(ctx, "bkt", "d1/sub"); err != nil || !d.IsDir {
		t.Fatalf("parent directories: %+v %v", d, err)
	}
	// 37 distinct contents + 1 shared; the empty file has no blob.
	if got := e.blobs.Stats().Blobs; got != 37 {
		t.Fatalf("%d blobs stored, want 37", got)
	}
	// Again: every file is replaced, none created.
	for i, r := range e.s.PutFiles(ctx, "bkt", files) {
		if r.Err != nil || r.Created {
			t.Fatalf("second put of %s: err %v created %v", files[i].Path, r.Err, r.Created)
		}
	}
}

// Bad entries fail alone; a path given twice keeps the later content; a
// missing bucket fails every file.
func TestPutFilesPerFileErrors(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	mustPut(t, e.s, "dir/x", []byte("x"))
	files := []FilePut{
		{Path: "ok1", Data: []byte("one")},
		{Path: "bad/../name", Data: []byte("no")},
		{Path: "", Data: []byte("no")},
		{Path: "big", Data: make([]byte, blob.MaxSize+1)},
		{Path: "twice", Data: []byte("first")},
		{Path: "dir", Data: []byte("a file over a directory")},
		{Path: "twice", Data: []byte("second")},
		{Path: "cond", Data: []byte("c"), Opts: PutOptions{IfMatch: "nope"}},
		{Path: "ok2", Data: []byte("two")},
	}
	res := e.s.PutFiles(ctx, "bkt", files)
	wantErr := []error{nil, ErrInvalidName, ErrInvalidName, ErrTooLarge, nil, ErrIsDir, nil, ErrPrecondition, nil}
	for i, r := range res {
		if wantErr[i] == nil && r.Err != nil || wantErr[i] != nil && !errors.Is(r.Err, wantErr[i]) {
			t.Errorf("file %d (%q): err %v, want %v", i, files[i].Path, r.Err, wantErr[i])
		}
	}
	if got := readAll(t, e.s, "twice"); string(got) != "second" {
		t.Fatalf("twice = %q, want the later entry", got)
	}
	if !reflect.DeepEqual(res[4], res[6]) {
		t.Fatalf("both entries of a repeated path get the stored one's result: %+v vs %+v", res[4], res[6])
	}
	for _, p := range []string{"ok1", "ok2"} {
		if _, err := e.s.Stat(ctx, "bkt", p); err != nil {
			t.Fatalf("%s not stored beside the failures: %v", p, err)
		}
	}
	for _, r := range e.s.PutFiles(ctx, "nobucket", files[:2]) {
		if !errors.Is(r.Err, ErrNoBucket) {
			t.Fatalf("missing bucket: %v", r.Err)
		}
	}
}

// bulkReplication is a Replication with WriteMany: it records the calls
// and stores on a "remote" blob store; failing hashes fail.
type bulkReplication struct {
	fakeReplication
	mu2      sync.Mutex
	many     []int // blobs per WriteMany call
	fail     map[blob.Hash]bool
	minIndex []uint64
	kept     []cas.Blob // every blob handed over, as handed
}

func (b *bulkReplication) WriteMany(ctx context.Context, blobs []cas.Blob, pol placement.Policy) ([]placement.Copies, []error) {
	b.mu2.Lock()
	b.many = append(b.many, len(blobs))
	b.minIndex = append(b.minIndex, minindex.From(ctx))
	b.kept = append(b.kept, blobs...)
	b.mu2.Unlock()
	errs := make([]error, len(blobs))
	copies := make([]placement.Copies, len(blobs))
	for i, bp := range blobs {
		if b.fail[bp.Hash] {
			errs[i] = errors.New("replica down")
			continue
		}
		copies[i] = placement.Copies{Made: 3, Wanted: 3}
		if b.made > 0 {
			copies[i].Made = b.made
		}
		errs[i] = b.remote.Put(bp.Hash, bp.Data)
	}
	return copies, errs
}

// In a cluster the blobs of a PutFiles go out in one WriteMany carrying
// the upload's start index; a blob whose write fails fails its file only.
func TestPutFilesThroughReplication(t *testing.T) {
	bad := []byte("this blob's replicas are down")
	st, local, rep := newBulkEnv(t, map[blob.Hash]bool{blob.Sum(bad): true})
	ctx := context.Background()
	if err := st.CreateBucket(ctx, BucketInfo{Name: "bkt", Replicas: 2, WriteQuorum: 1}); err != nil {
		t.Fatal(err)
	}
	files := []FilePut{{Path: "a", Data: []byte("aaa")}, {Path: "bad", Data: bad}, {Path: "c", Data: []byte("ccc")}, {Path: "a2", Data: []byte("aaa")}}
	res := st.PutFiles(ctx, "bkt", files)
	if res[0].Err != nil || res[2].Err != nil || res[3].Err != nil {
		t.Fatalf("results: %+v", res)
	}
	if res[1].Err == nil {
		t.Fatal("a file whose blob could not be written was committed")
	}
	if _, err := st.Stat(ctx, "bkt", "bad"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("bad file visible: %v", err)
	}
	if len(rep.many) != 1 || rep.many[0] != 3 || len(rep.calls) != 0 {
		t.Fatalf("WriteMany calls %v (want one of 3 distinct blobs), WriteBlob calls %v", rep.many, rep.calls)
	}
	if rep.minIndex[0] == 0 {
		t.Fatal("WriteMany's context carries no start index (the replicas' reap guard needs it)")
	}
	if got := readAllB(t, st, "bkt", "c"); string(got) != "ccc" {
		t.Fatalf("c = %q", got)
	}
	if local.Stats().Blobs != 0 {
		t.Fatal("blobs written locally besides the replication")
	}
}

// In a PutFiles, a blob large enough to travel alone to each replica
// carries its CRC32C (replicas check it instead of re-hashing); the small
// ones, which travel in batches checked by hash, carry none.
func TestPutFilesLargeBlobCarriesCRC(t *testing.T) {
	st, _, rep := newBulkEnv(t, nil)
	ctx := context.Background()
	if err := st.CreateBucket(ctx, BucketInfo{Name: "bkt"}); err != nil {
		t.Fatal(err)
	}
	large := randBytes(rand.New(rand.NewSource(5)), handOverBytes+1)
	res := st.PutFiles(ctx, "bkt", []FilePut{{Path: "small", Data: []byte("small")}, {Path: "large", Data: large}})
	if res[0].Err != nil || res[1].Err != nil {
		t.Fatalf("results: %+v", res)
	}
	if len(rep.kept) != 2 {
		t.Fatalf("%d blobs handed over, want 2", len(rep.kept))
	}
	for _, b := range rep.kept {
		c, ok := b.CRC.Value()
		switch {
		case len(b.Data) > handOverBytes && (!ok || c != cas.CRC32C(b.Data)):
			t.Errorf("large blob: CRC %08x (set %v), want %08x", c, ok, cas.CRC32C(b.Data))
		case len(b.Data) <= handOverBytes && ok:
			t.Errorf("small blob carries a CRC")
		}
	}
}

// A streamed upload in a cluster hands its large blobs to WriteMany with
// their buffers (no copy): those buffers are never reused by later
// uploads (WriteMany owns them; its sends may outlive the upload).
func TestPutHandsLargeBlobsOver(t *testing.T) {
	st, _, rep := newBulkEnv(t, nil)
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(st.CreateBucket(ctx, BucketInfo{Name: "bkt"}))
	rng := rand.New(rand.NewSource(3))
	var files [][]byte
	for i := range 4 {
		data := randBytes(rng, 2*blob.MaxSize+1000) // two full blobs and a small one
		_, _, err := st.Put(ctx, "bkt", fmt.Sprint("f", i), bytes.NewReader(data), PutOptions{Size: int64(len(data))})
		must(err)
		files = append(files, data)
	}
	if len(rep.kept) != 8 {
		t.Fatalf("%d blobs handed over, want the 8 full ones (the small tails go through WriteBlob: %d calls)", len(rep.kept), len(rep.calls))
	}
	if len(rep.calls) != 4 {
		t.Fatalf("%d WriteBlob calls, want the 4 small tails", len(rep.calls))
	}
	for _, b := range rep.kept {
		if blob.Sum(b.Data) != b.Hash {
			t.Fatal("a handed-over buffer was reused by a later upload")
		}
		// Its CRC32C, computed with its name, lets replicas skip SHA-256.
		if c, ok := b.CRC.Value(); !ok || c != cas.CRC32C(b.Data) {
			t.Fatalf("a handed-over blob carries CRC %08x (set %v), want %08x", c, ok, cas.CRC32C(b.Data))
		}
	}
	for i, data := range files {
		if got := readAllB(t, st, "bkt", fmt.Sprint("f", i)); !bytes.Equal(got, data) {
			t.Fatalf("f%d differs", i)
		}
	}
}

// newBulkEnv is a store whose replication is a bulkReplication failing
// the blobs of fail; it returns the store, its local blob store and the
// replication.
func newBulkEnv(t *testing.T, fail map[blob.Hash]bool) (*Local, *blob.Store, *bulkReplication) {
	t.Helper()
	local, _ := blob.Open(blob.Config{Dir: "/l", FS: vfs.NewMem(), MinFreeBytes: -1})
	remote, _ := blob.Open(blob.Config{Dir: "/r", FS: vfs.NewMem(), MinFreeBytes: -1})
	db := kv.NewMem()
	var st *Local
	lg, _ := consensus.NewLocal(consensus.LocalConfig{KV: db, OnApply: func(i uint64, c []meta.Command, r []meta.Result) { st.Applied(i, c, r) }})
	rep := &bulkReplication{fakeReplication: fakeReplication{remote: remote}, fail: fail}
	var err error
	st, err = New(Config{Blobs: local, KV: db, Log: lg, Replication: rep})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close(); lg.Close(); local.Close(); remote.Close() })
	return st, local, rep
}
