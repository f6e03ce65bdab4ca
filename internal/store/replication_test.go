package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand"
	"sync"
	"testing"

	"github.com/cairn-fs/cairn/internal/blob"
	"github.com/cairn-fs/cairn/internal/consensus"
	"github.com/cairn-fs/cairn/internal/kv"
	"github.com/cairn-fs/cairn/internal/meta"
	"github.com/cairn-fs/cairn/internal/placement"
	"github.com/cairn-fs/cairn/internal/vfs"
)

// fakeReplication keeps blobs on a "remote" blob store and records the
// replication settings it was asked for.
type fakeReplication struct {
	remote *blob.Store
	mu     sync.Mutex
	calls  [][2]int
	reads  int
	// made, if > 0, is the copies every write reports making, of 3 wanted.
	made int
}

func (f *fakeReplication) WriteBlob(ctx context.Context, h blob.Hash, data []byte, pol placement.Policy) (placement.Copies, error) {
	f.mu.Lock()
	f.calls = append(f.calls, [2]int{pol.Replicas, pol.WriteQuorum})
	copies := placement.Copies{Made: 3, Wanted: 3}
	if f.made > 0 {
		copies.Made = f.made
	}
	f.mu.Unlock()
	return copies, f.remote.Put(h, data)
}

func (f *fakeReplication) ReadAt(ctx context.Context, h blob.Hash, p []byte, off int64) (int, error) {
	f.mu.Lock()
	f.reads++
	f.mu.Unlock()
	return f.remote.ReadAt(h, p, off)
}

// newReplicatedStore returns a store over an in-memory namespace and
// local blob store whose Replication is rep; rep.remote (set here) is the
// "replicas'" blob store. Everything is closed when the test ends.
func newReplicatedStore(t *testing.T, rep interface {
	Replication
	setRemote(*blob.Store)
}) (*Local, *blob.Store, kv.Store) {
	t.Helper()
	local, err := blob.Open(blob.Config{Dir: "/l", FS: vfs.NewMem(), MinFreeBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	remote, err := blob.Open(blob.Config{Dir: "/r", FS: vfs.NewMem(), MinFreeBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	rep.setRemote(remote)
	db := kv.NewMem()
	var st *Local
	lg, _ := consensus.NewLocal(consensus.LocalConfig{KV: db, OnApply: func(i uint64, c []meta.Command, r []meta.Result) { st.Applied(i, c, r) }})
	st, err = New(Config{Blobs: local, KV: db, Log: lg, Replication: rep})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close(); lg.Close(); local.Close(); remote.Close() })
	return st, local, db
}

func (f *fakeReplication) setRemote(b *blob.Store) { f.remote = b }

func TestPutAndGetThroughReplication(t *testing.T) {
	rep := &fakeReplication{}
	st, local, _ := newReplicatedStore(t, rep)
	ctx := context.Background()
	st.CreateBucket(ctx, BucketInfo{Name: "dflt"})
	st.CreateBucket(ctx, BucketInfo{Name: "mirr", Replicas: -1, WriteQuorum: 2})

	data := make([]byte, blob.MaxSize+5000)
	rand.New(rand.NewSource(1)).Read(data)
	if _, _, err := st.Put(ctx, "dflt", "a.bin", bytes.NewReader(data), PutOptions{Size: int64(len(data))}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.Put(ctx, "mirr", "b.txt", bytes.NewReader([]byte("mirror me")), PutOptions{Size: 9}); err != nil {
		t.Fatal(err)
	}
	if got := rep.calls; len(got) != 3 || got[0] != [2]int{3, 0} || got[2] != [2]int{-1, 2} {
		t.Fatalf("replication settings passed: %v (want R=3,W=0 for the default bucket and R=-1,W=2 for mirror)", got)
	}
	if local.Stats().Blobs != 0 {
		t.Fatal("blobs written locally despite replication")
	}
	// Reads of blobs this node lacks go to the replicas: whole file and a
	// range across the blob boundary.
	if got := readAllB(t, st, "dflt", "a.bin"); !bytes.Equal(got, data) {
		t.Fatal("remote read differs")
	}
	o, _ := st.Open(ctx, "dflt", "a.bin")
	p := make([]byte, 10000)
	if _, err := o.ReadAt(p, blob.MaxSize-5000); err != nil || !bytes.Equal(p, data[blob.MaxSize-5000:blob.MaxSize+5000]) {
		t.Fatalf("range across blobs: %v", err)
	}
	if rep.reads == 0 {
		t.Fatal("no read went to the replicas")
	}
}

func readAllB(t *testing.T, s *Local, bucket, path string) []byte {
	t.Helper()
	o, err := s.Open(context.Background(), bucket, path)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := o.WriteRangeTo(&buf, 0, o.Info().Size); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// A write the replication made with fewer copies than wanted says so in
// its answer and is recorded in the namespace as under-replicated; a
// strict bucket's quorum failure keeps its counts.
func TestPutUnderReplicated(t *testing.T) {
	rep := &bulkReplication{fakeReplication: fakeReplication{made: 1}}
	st, _, db := newReplicatedStore(t, rep)
	ctx := context.Background()
	if err := st.CreateBucket(ctx, BucketInfo{Name: "dflt"}); err != nil {
		t.Fatal(err)
	}
	info, _, err := st.Put(ctx, "dflt", "a.txt", bytes.NewReader([]byte("one copy")), PutOptions{Size: 8})
	if err != nil {
		t.Fatal(err)
	}
	if info.Copies != 1 || info.CopiesWanted != 3 {
		t.Fatalf("put answer copies %d of %d, want 1 of 3", info.Copies, info.CopiesWanted)
	}
	res := st.PutFiles(ctx, "dflt", []FilePut{{Path: "b.txt", Data: []byte("bulk, one copy")}})
	if res[0].Err != nil || res[0].Info.Copies != 1 || res[0].Info.CopiesWanted != 3 {
		t.Fatalf("bulk put: %+v", res[0])
	}
	if n, err := meta.NewReader(db).UnderReplicatedCount(); err != nil || n != 2 {
		t.Fatalf("under-replicated blobs recorded: %d, %v; want 2", n, err)
	}
	// Fully replicated writes are not annotated nor recorded.
	rep.made = 0
	info, _, err = st.Put(ctx, "dflt", "c.txt", bytes.NewReader([]byte("three")), PutOptions{Size: 5})
	if err != nil || info.Copies != 0 || info.CopiesWanted != 0 {
		t.Fatalf("full write: %+v, %v", info, err)
	}
	if n, _ := meta.NewReader(db).UnderReplicatedCount(); n != 2 {
		t.Fatalf("under-replicated blobs recorded: %d, want still 2", n)
	}
	// A strict failure from the replication keeps its counts, and is a 503
	// kind of error.
	qe := &placement.QuorumError{Reachable: 1, Required: 2, Strict: true, Err: errors.New("node 2: connection refused")}
	err = mapErr(fmt.Errorf("write blob: %w", qe))
	var sq *QuorumError
	if !errors.Is(err, ErrUnavailable) || !errors.As(err, &sq) || sq.Reachable != 1 || sq.Required != 2 {
		t.Fatalf("mapped %v", err)
	}
	if msg := err.Error(); msg != "write quorum not reached: 1 copies reachable, 2 required (the bucket is strict)" {
		t.Fatalf("message %q", msg)
	}
}
