package transport

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/cairn-fs/cairn/internal/blob"
)

// queue is a deterministic Schedule: deliveries run when the test says,
// in order of their due time (then of scheduling).
type queue struct {
	mu    sync.Mutex
	items []queued
	seq   int
}

type queued struct {
	at  time.Duration
	seq int
	f   func()
}

func (q *queue) schedule(d time.Duration, f func()) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.seq++
	q.items = append(q.items, queued{d, q.seq, f})
}

// runAll runs every queued delivery in due order.
func (q *queue) runAll() int {
	n := 0
	for {
		q.mu.Lock()
		if len(q.items) == 0 {
			q.mu.Unlock()
			return n
		}
		best := 0
		for i, it := range q.items {
			if it.at < q.items[best].at || (it.at == q.items[best].at && it.seq < q.items[best].seq) {
				best = i
			}
		}
		it := q.items[best]
		q.items = append(q.items[:best], q.items[best+1:]...)
		q.mu.Unlock()
		it.f()
		n++
	}
}

func TestMemRoundTrip(t *testing.T) {
	q := &queue{}
	net := NewMemNetwork(MemConfig{Seed: 1, Schedule: q.schedule})
	h2 := newFakeHandler()
	net.Register(2, "http://node2", h2)
	var unreachable []NodeID
	c := net.Client(1, func(to NodeID, err error) { unreachable = append(unreachable, to) })
	ctx := context.Background()

	data := []byte("mem blob")
	h := blob.Sum(data)
	if err := c.PutBlob(ctx, 2, BlobPut{Hash: h, Data: data}); err != nil {
		t.Fatal(err)
	}
	if err := c.PutBlob(ctx, 2, BlobPut{Hash: blob.Sum([]byte("x")), Data: data}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("wrong hash: %v", err)
	}
	rc, err := c.GetBlob(ctx, 2, h, 4, -1)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(rc)
	if string(got) != "blob" {
		t.Fatalf("GetBlob = %q", got)
	}
	if _, err := c.GetBlob(ctx, 2, blob.Sum([]byte("nope")), 0, -1); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing blob: %v", err)
	}
	has, err := c.HasBlobs(ctx, 2, []blob.Hash{h, {}})
	if err != nil || !has[0] || has[1] {
		t.Fatalf("HasBlobs = %v, %v", has, err)
	}
	if resp, err := c.Join(ctx, "http://node2", JoinRequest{ID: 1}); err != nil || resp.ClusterID != 42 {
		t.Fatalf("Join = %v, %v", resp, err)
	}
	if err := c.SendSnapshot(ctx, 2, []byte("m"), strings.NewReader("snap")); err != nil || len(h2.snapshots) != 1 {
		t.Fatalf("SendSnapshot = %v", err)
	}

	m := raftMsg(1, 2, 5, []byte("e"))
	c.SendRaft(2, []*raftpb.Message{m})
	if len(h2.raft) != 0 {
		t.Fatal("delivered on the sender's goroutine")
	}
	q.runAll()
	gotm := recvRaft(t, h2, 1, time.Second)
	if gotm[0] == m || gotm[0].GetIndex() != 5 {
		t.Fatal("raft message not delivered as a copy")
	}

	net.Partition([]NodeID{1}, []NodeID{2})
	c.SendRaft(2, []*raftpb.Message{m})
	if len(unreachable) != 1 || unreachable[0] != 2 {
		t.Fatalf("unreachable = %v", unreachable)
	}
	if err := c.PutBlob(ctx, 2, BlobPut{Hash: h, Data: data}); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("PutBlob across a partition: %v", err)
	}
	net.Heal()
	if err := c.PutBlob(ctx, 2, BlobPut{Hash: h, Data: data}); err != nil {
		t.Fatal(err)
	}
	net.Unregister(2)
	if _, err := c.HasBlobs(ctx, 2, nil); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("HasBlobs to a crashed node: %v", err)
	}
}

// runSeed sends 200 messages through a lossy, delaying, duplicating network
// and returns the indexes in arrival order.
func runSeed(t *testing.T, seed uint64) []uint64 {
	q := &queue{}
	net := NewMemNetwork(MemConfig{Seed: seed, DropRate: 0.2, DuplicateRate: 0.1, MaxDelay: 50 * time.Millisecond, Schedule: q.schedule})
	h2 := newFakeHandler()
	h2.raft = make(chan []*raftpb.Message, 1000)
	net.Register(2, "", h2)
	c := net.Client(1, nil)
	for i := range 200 {
		c.SendRaft(2, []*raftpb.Message{raftMsg(1, 2, uint64(i), nil)})
	}
	q.runAll()
	var out []uint64
	for len(h2.raft) > 0 {
		out = append(out, (<-h2.raft)[0].GetIndex())
	}
	st := net.Stats()
	if st.Dropped == 0 || st.Duplicated == 0 || st.Delivered != int64(len(out)) {
		t.Fatalf("seed %d: stats %+v for %d arrivals", seed, st, len(out))
	}
	return out
}

func TestMemDeterministicFaults(t *testing.T) {
	a, b, other := runSeed(t, 7), runSeed(t, 7), runSeed(t, 8)
	if !slicesEqual(a, b) {
		t.Fatal("same seed, different deliveries")
	}
	if slicesEqual(a, other) {
		t.Fatal("different seeds, same deliveries")
	}
	reordered := false
	for i := 1; i < len(a); i++ {
		if a[i] < a[i-1] {
			reordered = true
		}
	}
	if !reordered || len(a) >= 220 || len(a) < 120 {
		t.Fatalf("%d arrivals, reordered %v", len(a), reordered)
	}
}

func slicesEqual(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestMemFaultHookAndDelay(t *testing.T) {
	q := &queue{}
	var calls int
	net := NewMemNetwork(MemConfig{Schedule: q.schedule, Fault: func(rng *rand.Rand, from, to NodeID, op Op) Fault {
		calls++
		if op == OpGetBlob {
			return Fault{Drop: true}
		}
		return Fault{Delay: time.Second}
	}})
	h2 := newFakeHandler()
	net.Register(2, "", h2)
	c := net.Client(1, nil)
	if _, err := c.GetBlob(context.Background(), 2, blob.Hash{}, 0, -1); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("dropped GetBlob: %v", err)
	}
	// A delayed call waits for the schedule, or for its ctx.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.PutBlob(ctx, 2, BlobPut{Hash: blob.Sum([]byte("d")), Data: []byte("d")}) }()
	for {
		q.mu.Lock()
		n := len(q.items)
		q.mu.Unlock()
		if n == 1 {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("delayed call returned early: %v", err)
		default:
		}
		time.Sleep(time.Millisecond) // polling the fake schedule, not waiting on time
	}
	q.runAll()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	go func() { done <- c.PutBlob(ctx, 2, BlobPut{Hash: blob.Sum([]byte("d")), Data: []byte("d")}) }()
	cancel()
	if err := <-done; !errors.Is(err, ErrUnavailable) || !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled delayed call: %v", err)
	}
	if calls != 3 || !bytes.Equal(h2.blobs[blob.Sum([]byte("d"))], []byte("d")) {
		t.Fatalf("%d hook calls", calls)
	}
}
