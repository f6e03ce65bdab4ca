package replica

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairn-fs/cairn/internal/blob"
	"github.com/cairn-fs/cairn/internal/cas"
	"github.com/cairn-fs/cairn/internal/placement"
)

// memNode is one node's blob store in memory.
type memNode struct {
	mu    sync.Mutex
	blobs map[blob.Hash][]byte
}

func (n *memNode) Put(h blob.Hash, d []byte) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.blobs[h] = bytes.Clone(d)
	return nil
}

func (n *memNode) Has(h blob.Hash) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	_, ok := n.blobs[h]
	return ok
}

func (n *memNode) ReadAt(h blob.Hash, p []byte, off int64) (int, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	d, ok := n.blobs[h]
	if !ok {
		return 0, blob.ErrNotFound
	}
	if off >= int64(len(d)) {
		return 0, io.EOF
	}
	k := copy(p, d[off:])
	if k < len(p) {
		return k, io.EOF
	}
	return k, nil
}

// fakeNet routes Peers calls to memNodes, with per-node behaviour.
type fakeNet struct {
	nodes map[placement.NodeID]*memNode
	mu    sync.Mutex
	// hang makes a node never answer (until ctx ends); fail makes it error.
	hang, fail map[placement.NodeID]bool
	failAfter  map[placement.NodeID]time.Duration // fails after this long
	gets       map[placement.NodeID]int
	release    chan struct{} // closed: hung puts proceed
	getGate    chan struct{} // not nil: GetBlob waits for it to close
	crcs       []cas.CRC     // the CRC of every PutBlob, in order
}

func newFakeNet(ids ...placement.NodeID) *fakeNet {
	f := &fakeNet{nodes: map[placement.NodeID]*memNode{}, hang: map[placement.NodeID]bool{},
		fail: map[placement.NodeID]bool{}, failAfter: map[placement.NodeID]time.Duration{}, gets: map[placement.NodeID]int{}, release: make(chan struct{})}
	for _, id := range ids {
		f.nodes[id] = &memNode{blobs: map[blob.Hash][]byte{}}
	}
	return f
}

func (f *fakeNet) behaviour(id placement.NodeID) (hang, fail bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.hang[id], f.fail[id]
}

func (f *fakeNet) PutBlob(ctx context.Context, to placement.NodeID, b cas.Blob) error {
	h, d := b.Hash, b.Data
	f.mu.Lock()
	f.crcs = append(f.crcs, b.CRC)
	f.mu.Unlock()
	hang, fail := f.behaviour(to)
	if fail {
		return errors.New("injected failure")
	}
	f.mu.Lock()
	after := f.failAfter[to]
	f.mu.Unlock()
	if after > 0 {
		time.Sleep(after)
		return errors.New("injected late failure")
	}
	if hang {
		select {
		case <-f.release:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return f.nodes[to].Put(h, d)
}

func (f *fakeNet) GetBlob(ctx context.Context, to placement.NodeID, h blob.Hash, off, n int64) (io.ReadCloser, error) {
	f.mu.Lock()
	f.gets[to]++
	gate := f.getGate
	f.mu.Unlock()
	if gate != nil {
		<-gate
	}
	hang, fail := f.behaviour(to)
	if fail {
		return nil, errors.New("injected failure")
	}
	if hang {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if size := f.nodes[to].size(h); n < 0 || off+n > size { // to the end, as BlobServer clamps
		n = size - off
		if size < 0 || n < 0 {
			return nil, blob.ErrNotFound
		}
	}
	p := make([]byte, n)
	k, err := f.nodes[to].ReadAt(h, p, off)
	if err != nil && !(errors.Is(err, io.EOF) && int64(k) == n) {
		return nil, err
	}
	return io.NopCloser(bytes.NewReader(p[:k])), nil
}

func (f *fakeNet) HasBlobs(ctx context.Context, to placement.NodeID, hs []blob.Hash) ([]bool, error) {
	hang, fail := f.behaviour(to)
	if fail {
		return nil, errors.New("injected failure")
	}
	if hang {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	out := make([]bool, len(hs))
	for i, h := range hs {
		out[i] = f.nodes[to].Has(h)
	}
	return out, nil
}

// size is the length of blob h, -1 if absent.
func (n *memNode) size(h blob.Hash) int64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	d, ok := n.blobs[h]
	if !ok {
		return -1
	}
	return int64(len(d))
}

func mapOf(t *testing.T, dead ...placement.NodeID) *placement.Map {
	var nodes []placement.Node
	for id := placement.NodeID(1); id <= 5; id++ {
		st := placement.Live
		for _, d := range dead {
			if d == id {
				st = placement.Dead
			}
		}
		nodes = append(nodes, placement.Node{ID: id, Zone: "z", Weight: 1, State: st})
	}
	m, err := placement.NewMap(nodes)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func newRep(t *testing.T, self placement.NodeID, f *fakeNet, m *placement.Map) *Replicator {
	r, err := New(Config{Self: self, Local: f.nodes[self], Peers: f, Map: func() *placement.Map { return m },
		HedgeAfter: 20 * time.Millisecond, ReadTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func holders(f *fakeNet, h blob.Hash) []placement.NodeID {
	var out []placement.NodeID
	for id := placement.NodeID(1); id <= 5; id++ {
		if f.nodes[id].Has(h) {
			out = append(out, id)
		}
	}
	return out
}

func TestWriteReachesRankedReplicas(t *testing.T) {
	f := newFakeNet(1, 2, 3, 4, 5)
	m := mapOf(t)
	r := newRep(t, 1, f, m)
	for i := 0; i < 50; i++ {
		data := []byte(fmt.Sprint("blob ", i))
		h := blob.Sum(data)
		res, err := r.Write(context.Background(), h, data, placement.Policy{Replicas: 3, WriteQuorum: 0})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Acked) < 2 {
			t.Fatalf("returned with %d acks, want >= 2", len(res.Acked))
		}
		want := placement.Replicas(m, h, 3)
		// Stragglers finish in the background; wait for them (bounded).
		deadline := time.Now().Add(5 * time.Second)
		for len(holders(f, h)) < 3 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		if got := holders(f, h); fmt.Sprint(sorted(got)) != fmt.Sprint(sorted(want)) {
			t.Fatalf("blob %d on %v, want its ranked nodes %v", i, got, want)
		}
	}
}

func sorted(ids []placement.NodeID) []placement.NodeID {
	out := append([]placement.NodeID(nil), ids...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

// A hung replica does not hold up a write that has its quorum.
func TestWriteDoesNotWaitForStraggler(t *testing.T) {
	f := newFakeNet(1, 2, 3, 4, 5)
	m := mapOf(t)
	data := []byte("straggler")
	h := blob.Sum(data)
	targets := placement.Replicas(m, h, 3)
	self := targets[0]
	f.hang[targets[2]] = true
	r := newRep(t, self, f, m)
	start := time.Now()
	res, err := r.Write(context.Background(), h, data, placement.Policy{Replicas: 3, WriteQuorum: 2})
	if err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el > time.Second {
		t.Fatalf("write waited %v for a hung replica", el)
	}
	if len(res.Acked) != 2 {
		t.Fatalf("acked %v", res.Acked)
	}
	close(f.release)
}

// A target that fails just after the quorum's acks (a node killed a moment
// ago, whose refusal comes late under load) is counted: the write says 2
// copies of 3, for Write and WriteMany. One that hangs costs StragglerWait.
func TestWriteCountsLateFailure(t *testing.T) {
	f := newFakeNet(1, 2, 3, 4, 5)
	m := mapOf(t)
	data := []byte("late failure")
	h := blob.Sum(data)
	targets := placement.Replicas(m, h, 3)
	f.failAfter[targets[2]] = 30 * time.Millisecond
	r := newRep(t, targets[0], f, m)
	pol := placement.Policy{Replicas: 3, WriteQuorum: 2}
	res, err := r.Write(context.Background(), h, data, pol)
	if err != nil || res.Copies != (placement.Copies{Made: 2, Wanted: 3}) {
		t.Fatalf("Write with a target failing late: %v, copies %+v; want 2 of 3", err, res.Copies)
	}
	copies, errs := r.WriteMany(context.Background(), []cas.Blob{{Hash: h, Data: data}}, pol)
	if errs[0] != nil || copies[0] != (placement.Copies{Made: 2, Wanted: 3}) {
		t.Fatalf("WriteMany with a target failing late: %v, copies %+v; want 2 of 3", errs[0], copies[0])
	}
	if st := r.WriteStats(); st.Under != 2 {
		t.Fatalf("under-replicated writes counted: %d, want 2", st.Under)
	}
	f.failAfter[targets[2]] = 0
	f.hang[targets[2]] = true
	start := time.Now()
	res, err = r.Write(context.Background(), h, data, pol)
	if el := time.Since(start); err != nil || el > time.Second || res.Copies != (placement.Copies{Made: 3, Wanted: 3}) {
		t.Fatalf("Write with a hung target: %v after %v, copies %+v; want success within the straggler wait, 3 in flight", err, el, res.Copies)
	}
	close(f.release)
}

func TestWriteQuorumFailure(t *testing.T) {
	f := newFakeNet(1, 2, 3, 4, 5)
	m := mapOf(t)
	data := []byte("quorum")
	h := blob.Sum(data)
	targets := placement.Replicas(m, h, 3)
	var self placement.NodeID
	for id := placement.NodeID(1); id <= 5; id++ {
		if !contains(targets, id) {
			self = id
		}
	}
	f.fail[targets[0]], f.fail[targets[1]] = true, true
	r := newRep(t, self, f, m)
	_, err := r.Write(context.Background(), h, data, placement.Policy{Replicas: 3, Strict: true})
	var qe *placement.QuorumError
	if !errors.Is(err, placement.ErrNoQuorum) || !errors.As(err, &qe) || qe.Reachable != 1 || qe.Required != 2 {
		t.Fatalf("strict, two of three replicas failing: %v, want placement.ErrNoQuorum with 1 reachable of 2", err)
	}
	if !strings.Contains(err.Error(), "1 copies reachable, 2 required") {
		t.Fatalf("error %q does not say the counts", err)
	}
	// Not strict (the default): the write succeeds on the one target that
	// could take it, and says it is under-replicated.
	res, err := r.Write(context.Background(), h, data, placement.Policy{Replicas: 3})
	if err != nil || res.Copies != (placement.Copies{Made: 1, Wanted: 3}) || !res.Copies.Under() {
		t.Fatalf("not strict: %v, copies %+v; want success with 1 of 3", err, res.Copies)
	}
	// Every target failing fails even when not strict.
	f.fail[targets[2]] = true
	if _, err := r.Write(context.Background(), h, data, placement.Policy{Replicas: 3}); !errors.Is(err, placement.ErrNoQuorum) {
		t.Fatalf("no copy at all: %v, want placement.ErrNoQuorum", err)
	}
	f.fail[targets[2]] = false
	// W=1 succeeds with one good replica.
	if _, err := r.Write(context.Background(), h, data, placement.Policy{Replicas: 3, WriteQuorum: 1}); err != nil {
		t.Fatalf("W=1: %v", err)
	}
}

func contains(ids []placement.NodeID, id placement.NodeID) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// A dead home node's copy goes to the next live node in the ranking.
func TestWriteStandInForDeadNode(t *testing.T) {
	f := newFakeNet(1, 2, 3, 4, 5)
	data := []byte("stand-in")
	h := blob.Sum(data)
	home := placement.Replicas(mapOf(t), h, 3)
	m := mapOf(t, home[1])
	r := newRep(t, 1, f, m)
	res, err := r.Write(context.Background(), h, data, placement.Policy{Replicas: 3, WriteQuorum: 3})
	if err != nil {
		t.Fatal(err)
	}
	if contains(res.Targets, home[1]) || len(res.Targets) != 3 {
		t.Fatalf("targets %v include the dead node %d", res.Targets, home[1])
	}
	if f.nodes[home[1]].Has(h) {
		t.Fatal("dead node was written")
	}
}

func TestReadLocalFirst(t *testing.T) {
	f := newFakeNet(1, 2, 3, 4, 5)
	m := mapOf(t)
	data := []byte("local data")
	h := blob.Sum(data)
	f.nodes[1].Put(h, data)
	r := newRep(t, 1, f, m)
	p := make([]byte, 4)
	if _, err := r.ReadAt(context.Background(), h, p, 6); err != nil || string(p) != "data" {
		t.Fatalf("read %q %v", p, err)
	}
	for id, n := range f.gets {
		if n > 0 {
			t.Fatalf("remote read from %d for a local blob", id)
		}
	}
}

// A hung replica costs a hedge delay, not a timeout.
func TestReadHedgesAroundHungReplica(t *testing.T) {
	f := newFakeNet(1, 2, 3, 4, 5)
	m := mapOf(t)
	data := []byte("remote data")
	h := blob.Sum(data)
	src := placement.Sources(m, h)
	var self placement.NodeID
	var others []placement.NodeID
	for _, id := range src {
		if self == 0 && id != src[0] && id != src[1] && id != src[2] {
			self = id
		} else {
			others = append(others, id)
		}
	}
	for _, id := range others {
		f.nodes[id].Put(h, data)
	}
	f.hang[src[0]] = true
	r := newRep(t, self, f, m)
	start := time.Now()
	p := make([]byte, len(data))
	if _, err := r.ReadAt(context.Background(), h, p, 0); err != nil || !bytes.Equal(p, data) {
		t.Fatalf("read %q %v", p, err)
	}
	if el := time.Since(start); el > 500*time.Millisecond {
		t.Fatalf("read took %v with one hung replica (hedge after 20ms)", el)
	}
	// Failing sources are skipped at once.
	f.mu.Lock()
	f.hang[src[0]] = false
	f.fail[src[0]], f.fail[src[1]] = true, true
	f.mu.Unlock()
	if _, err := r.ReadAt(context.Background(), h, p, 0); err != nil {
		t.Fatalf("read with two failing replicas: %v", err)
	}
	f.mu.Lock()
	for _, id := range src {
		f.fail[id] = true
	}
	f.mu.Unlock()
	if _, err := r.ReadAt(context.Background(), h, p, 0); !errors.Is(err, placement.ErrUnavailable) {
		t.Fatalf("all replicas failing: %v, want placement.ErrUnavailable", err)
	}
}

// A node that keeps no copies of its own (a client, a witness) and is
// still ranked (its record not yet updated) fails that target: the write
// is under-replicated, and nothing lands in its local store.
func TestWriteNoLocalCopies(t *testing.T) {
	f := newFakeNet(1, 2, 3, 4, 5)
	m := mapOf(t)
	r, err := New(Config{Self: 1, Local: f.nodes[1], Peers: f, Map: func() *placement.Map { return m },
		NoLocalCopies: true, StragglerWait: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ranked := 0
	for i := 0; ranked < 5 && i < 500; i++ {
		data := []byte(fmt.Sprint("blob ", i))
		h := blob.Sum(data)
		if !contains(placement.Replicas(m, h, 3), 1) {
			continue
		}
		ranked++
		res, err := r.Write(context.Background(), h, data, placement.Policy{Replicas: 3})
		if err != nil {
			t.Fatal(err)
		}
		if res.Copies.Made != 2 || !res.Copies.Under() {
			t.Fatalf("blob %d: copies %+v, want 2 of 3", i, res.Copies)
		}
		if f.nodes[1].Has(h) {
			t.Fatalf("blob %d stored on the node that keeps no copies", i)
		}
	}
	if ranked < 5 {
		t.Fatal("too few blobs ranked node 1")
	}
}

// sizedReader is a fetched body that announces its length, as
// transport's does.
type sizedReader struct {
	io.Reader
	size int64
}

func (s sizedReader) Size() int64 { return s.size }

// readBody sizes its buffer from the announced length (no spare capacity
// for the cache to carry), fails a body shorter than announced, and falls
// back to reading up to n when the length is unknown or over n.
func TestReadBody(t *testing.T) {
	data := bytes.Repeat([]byte("blob "), 1000)
	for _, c := range []struct {
		name  string
		r     io.Reader
		n     int64
		want  []byte
		fails bool
	}{
		{"announced", sizedReader{bytes.NewReader(data), int64(len(data))}, 1 << 20, data, false},
		{"announced, empty", sizedReader{bytes.NewReader(nil), 0}, 1 << 20, []byte{}, false},
		{"cut short", sizedReader{bytes.NewReader(data[:100]), int64(len(data))}, 1 << 20, nil, true},
		{"unknown", sizedReader{bytes.NewReader(data), -1}, 1 << 20, data, false},
		{"over n", sizedReader{bytes.NewReader(data), int64(len(data))}, 10, data[:10], false},
		{"plain reader", bytes.NewReader(data), 1 << 20, data, false},
	} {
		got, err := readBody(c.r, c.n, false)
		if c.fails {
			if err == nil {
				t.Errorf("%s: no error", c.name)
			}
			continue
		}
		if err != nil || !bytes.Equal(got, c.want) {
			t.Errorf("%s: %d bytes, %v", c.name, len(got), err)
		}
		if _, ok := c.r.(sizedReader); ok && c.r.(sizedReader).size >= 0 && c.r.(sizedReader).size <= c.n && cap(got) != len(got) {
			t.Errorf("%s: capacity %d for %d bytes", c.name, cap(got), len(got))
		}
	}
}
