package core

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	pvfs "github.com/cockroachdb/pebble/v2/vfs"

	"github.com/cairn-fs/cairn/internal/clock"
	"github.com/cairn-fs/cairn/internal/consensus"
	"github.com/cairn-fs/cairn/internal/meta"
	"github.com/cairn-fs/cairn/internal/store"
	"github.com/cairn-fs/cairn/internal/transport"
	"github.com/cairn-fs/cairn/internal/vfs"
)

func put(t *testing.T, st *store.Local, bucket, path, body string) {
	t.Helper()
	ctx := context.Background()
	if _, _, err := st.Put(ctx, bucket, path, bytes.NewReader([]byte(body)), store.PutOptions{Size: int64(len(body))}); err != nil {
		t.Fatalf("put %s/%s: %v", bucket, path, err)
	}
}

func read(t *testing.T, st *store.Local, bucket, path string) string {
	t.Helper()
	obj, err := st.Open(context.Background(), bucket, path)
	if err != nil {
		t.Fatalf("open %s/%s: %v", bucket, path, err)
	}
	defer obj.Close()
	b, err := io.ReadAll(io.NewSectionReader(obj, 0, obj.Info().Size))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestStandaloneReopen builds a standalone core over in-memory disks,
// writes, closes, and finds the file again in a second core over the same
// disks.
func TestStandaloneReopen(t *testing.T) {
	fs, kfs := vfs.NewMem(), pvfs.NewMem()
	cfg := Config{FS: fs, BlobDir: "/blobs", KVFS: kfs, KVDir: "/meta", Clock: clock.Real{}, Logger: slog.New(slog.DiscardHandler)}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if c.Raft != nil || c.Rep != nil || c.Map() != nil {
		t.Fatalf("standalone core has cluster parts: raft %v, rep %v, map %v", c.Raft, c.Rep, c.Map())
	}
	if err := c.Store.CreateBucket(context.Background(), store.BucketInfo{Name: "bkt"}); err != nil {
		t.Fatal(err)
	}
	put(t, c.Store, "bkt", "a.txt", "hello")
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c, err = New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := read(t, c.Store, "bkt", "a.txt"); got != "hello" {
		t.Fatalf("after reopen: %q", got)
	}
}

// TestClusterOfOne builds a one-voter cluster core over the in-memory
// network: Raft elects itself, the placement map holds the member once it
// is recorded, writes go through the replicator.
func TestClusterOfOne(t *testing.T) {
	net := transport.NewMemNetwork(transport.MemConfig{Seed: 1})
	client := net.Client(1, nil)
	defer client.Close()
	rcfg := consensus.DefaultRaftConfig()
	rcfg.InitialVoters = []uint64{1}
	rcfg.TickInterval = 10 * time.Millisecond
	c, err := New(Config{FS: vfs.NewMem(), BlobDir: "/blobs", KVFS: pvfs.NewMem(), KVDir: "/meta", Logger: slog.New(slog.DiscardHandler),
		Cluster: &ClusterConfig{ID: 1, Net: client, Raft: rcfg}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Raft == nil || c.Rep == nil || c.Repair == nil {
		t.Fatal("cluster core lacks Raft, replicator or repairer")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var res meta.Result
	for {
		res, err = c.Raft.Propose(ctx, meta.Command{Op: meta.OpSetNode, Node: &meta.Node{ID: 1, URL: "mem://1", Zone: "z1"}})
		if err == nil || ctx.Err() != nil {
			break
		}
		time.Sleep(10 * time.Millisecond) // no leader yet
	}
	if err != nil || res.Err != nil {
		t.Fatalf("record the member: %v %v", err, res.Err)
	}
	if m := c.Map(); m == nil || len(m.Nodes()) != 1 {
		t.Fatalf("placement map after recording the member: %v", m)
	}
	if err := c.Store.CreateBucket(ctx, store.BucketInfo{Name: "bkt", Replicas: 1}); err != nil {
		t.Fatal(err)
	}
	put(t, c.Store, "bkt", "x", "cluster")
	if got := read(t, c.Store, "bkt", "x"); got != "cluster" {
		t.Fatalf("read back %q", got)
	}
}
