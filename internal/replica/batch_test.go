package replica

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/cairn-fs/cairn/internal/blob"
	"github.com/cairn-fs/cairn/internal/cas"
	"github.com/cairn-fs/cairn/internal/placement"
	"github.com/cairn-fs/cairn/internal/transport"
	"github.com/cairn-fs/cairn/internal/vfs"
)

// batchPeer is a BatchPeers (and Peers) that records every call; a call
// blocks while gate is set, until the gate is closed or its ctx ends.
type batchPeer struct {
	mu      sync.Mutex
	gate    chan struct{} // nil: no blocking
	entered chan int      // receives the size of each batch as it starts
	batches [][]blob.Hash
	singles []blob.Hash
	fail    map[blob.Hash]error // per-blob errors
	callErr error               // whole-call error
	ctxErrs []error             // the ctx error each batch saw when it ended
	stored  map[blob.Hash][]byte
}

func newBatchPeer() *batchPeer {
	return &batchPeer{entered: make(chan int, 1000), fail: map[blob.Hash]error{}, stored: map[blob.Hash][]byte{}}
}

func (p *batchPeer) PutBlobs(ctx context.Context, to placement.NodeID, blobs []cas.Blob) ([]error, error) {
	p.mu.Lock()
	gate := p.gate
	hs := make([]blob.Hash, len(blobs))
	for i := range blobs {
		hs[i] = blobs[i].Hash
	}
	p.batches = append(p.batches, hs)
	p.mu.Unlock()
	p.entered <- len(blobs)
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			p.mu.Lock()
			p.ctxErrs = append(p.ctxErrs, ctx.Err())
			p.mu.Unlock()
			return nil, fmt.Errorf("%w: %w", transport.ErrUnavailable, ctx.Err())
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.callErr != nil {
		return nil, p.callErr
	}
	errs := make([]error, len(blobs))
	for i, b := range blobs {
		if err := p.fail[b.Hash]; err != nil {
			errs[i] = err
			continue
		}
		p.stored[b.Hash] = bytes.Clone(b.Data)
	}
	return errs, nil
}

func (p *batchPeer) PutBlob(ctx context.Context, to placement.NodeID, b cas.Blob) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.singles = append(p.singles, b.Hash)
	p.stored[b.Hash] = bytes.Clone(b.Data)
	return nil
}

func (p *batchPeer) GetBlob(context.Context, placement.NodeID, blob.Hash, int64, int64) (io.ReadCloser, error) {
	return nil, errors.New("not here")
}

func (p *batchPeer) HasBlobs(context.Context, placement.NodeID, []blob.Hash) ([]bool, error) {
	return nil, errors.New("not here")
}

func (p *batchPeer) batchSizes() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []int
	for _, b := range p.batches {
		out = append(out, len(b))
	}
	return out
}

func testBlob(i, size int) (blob.Hash, []byte) {
	d := bytes.Repeat([]byte{byte(i), byte(i >> 8)}, size/2+1)[:size]
	copy(d, fmt.Sprint(i))
	return blob.Sum(d), d
}

// waitQueued waits until n calls are queued behind the in-flight batches
// of node to.
func waitQueued(t *testing.T, b *Batcher, to placement.NodeID, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		b.mu.Lock()
		q := 0
		if nq := b.nodes[to]; nq != nil {
			q = len(nq.q)
		}
		b.mu.Unlock()
		if q >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d calls queued, want %d", q, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// Calls made while a batch is in flight leave together in the next one;
// a call made with nothing in flight leaves at once, alone.
func TestBatcherCoalesces(t *testing.T) {
	p := newBatchPeer()
	p.gate = make(chan struct{})
	b := NewBatcher(p, p, BatchConfig{MaxInflight: 1})
	ctx := context.Background()
	const n = 20
	errs := make(chan error, n)
	h0, d0 := testBlob(0, 100)
	go func() { errs <- b.PutBlob(ctx, 2, cas.Blob{Hash: h0, Data: d0}) }()
	if got := <-p.entered; got != 1 {
		t.Fatalf("first batch has %d blobs, want 1", got)
	}
	for i := 1; i < n; i++ {
		h, d := testBlob(i, 100+i)
		go func() { errs <- b.PutBlob(ctx, 2, cas.Blob{Hash: h, Data: d}) }()
	}
	waitQueued(t, b, 2, n-1)
	close(p.gate)
	for i := 0; i < n; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if got := p.batchSizes(); fmt.Sprint(got) != fmt.Sprint([]int{1, n - 1}) {
		t.Fatalf("batches %v, want [1 %d]", got, n-1)
	}
	for i := 0; i < n; i++ {
		h, d := testBlob(i, 100+i)
		if !bytes.Equal(p.stored[h], d) {
			t.Fatalf("blob %d not stored intact", i)
		}
	}
	if st := b.Stats(); st.Batches != 2 || st.Blobs != n || st.Single != 0 {
		t.Fatalf("stats %+v", st)
	}
	b.mu.Lock()
	left := len(b.nodes)
	b.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d node queues left after the batches ended", left)
	}
}

// Each caller gets its own blob's outcome; a failed call fails them all.
func TestBatcherPerBlobErrors(t *testing.T) {
	p := newBatchPeer()
	p.gate = make(chan struct{})
	b := NewBatcher(p, p, BatchConfig{MaxInflight: 1})
	ctx := context.Background()
	hf, df := testBlob(0, 10)
	boom := fmt.Errorf("%w: disk full", transport.ErrNoSpace)
	p.fail[hf] = boom
	first := make(chan error, 1)
	hx, dx := testBlob(99, 10)
	go func() { first <- b.PutBlob(ctx, 3, cas.Blob{Hash: hx, Data: dx}) }()
	<-p.entered
	errs := make([]chan error, 5)
	for i := range errs {
		errs[i] = make(chan error, 1)
		h, d := hf, df
		if i > 0 {
			h, d = testBlob(i, 10)
		}
		go func() { errs[i] <- b.PutBlob(ctx, 3, cas.Blob{Hash: h, Data: d}) }()
	}
	waitQueued(t, b, 3, len(errs))
	close(p.gate)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	for i, c := range errs {
		err := <-c
		if i == 0 && !errors.Is(err, transport.ErrNoSpace) {
			t.Fatalf("failing blob: %v, want ErrNoSpace", err)
		}
		if i > 0 && err != nil {
			t.Fatalf("blob %d: %v", i, err)
		}
	}
	// A whole-call failure reaches every caller of the batch.
	p.gate = nil
	p.callErr = fmt.Errorf("%w: connection refused", transport.ErrUnavailable)
	h, d := testBlob(7, 10)
	if err := b.PutBlob(ctx, 3, cas.Blob{Hash: h, Data: d}); !errors.Is(err, transport.ErrUnavailable) {
		t.Fatalf("failed call: %v, want ErrUnavailable", err)
	}
}

// A queued caller whose ctx ends returns at once and its blob is not sent;
// a batch in flight is cancelled once every caller in it has given up.
func TestBatcherContextCancel(t *testing.T) {
	p := newBatchPeer()
	p.gate = make(chan struct{})
	b := NewBatcher(p, p, BatchConfig{MaxInflight: 1})
	ctx1, cancel1 := context.WithCancel(context.Background())
	h1, d1 := testBlob(1, 10)
	first := make(chan error, 1)
	go func() { first <- b.PutBlob(ctx1, 2, cas.Blob{Hash: h1, Data: d1}) }()
	<-p.entered

	ctx2, cancel2 := context.WithCancel(context.Background())
	h2, d2 := testBlob(2, 10)
	second := make(chan error, 1)
	go func() { second <- b.PutBlob(ctx2, 2, cas.Blob{Hash: h2, Data: d2}) }()
	h3, d3 := testBlob(3, 10)
	third := make(chan error, 1)
	go func() { third <- b.PutBlob(context.Background(), 2, cas.Blob{Hash: h3, Data: d3}) }()
	waitQueued(t, b, 2, 2)
	cancel2()
	select {
	case err := <-second:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled queued call: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a cancelled queued call did not return")
	}
	// The only caller of the batch in flight gives up: the call is cancelled.
	cancel1()
	if err := <-first; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled in-flight call: %v", err)
	}
	// The next batch carries blob 3 only (its gate is still closed, so let
	// it through).
	if got := <-p.entered; got != 1 {
		t.Fatalf("next batch has %d blobs, want 1 (the cancelled one dropped)", got)
	}
	close(p.gate)
	if err := <-third; err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.ctxErrs) != 1 || !errors.Is(p.ctxErrs[0], context.Canceled) {
		t.Fatalf("in-flight batch saw ctx errors %v, want one Canceled", p.ctxErrs)
	}
	if _, ok := p.stored[h2]; ok {
		t.Fatal("the blob of a caller that gave up before its batch left was sent")
	}
	if fmt.Sprint(p.batches[1]) != fmt.Sprint([]blob.Hash{h3}) {
		t.Fatalf("second batch %v", p.batches[1])
	}
}

// Batches respect the blob and byte caps; large blobs go alone.
func TestBatcherSizeCaps(t *testing.T) {
	p := newBatchPeer()
	p.gate = make(chan struct{})
	b := NewBatcher(p, p, BatchConfig{MaxInflight: 1, MaxBatchBlobs: 4, MaxBatchBytes: 1000, MaxBlobBytes: 400})
	ctx := context.Background()
	hb, db := testBlob(1000, 401)
	if err := b.PutBlob(ctx, 2, cas.Blob{Hash: hb, Data: db}); err != nil {
		t.Fatal(err)
	}
	if len(p.singles) != 1 || len(p.batches) != 0 {
		t.Fatalf("a blob above MaxBlobBytes: singles %d batches %d", len(p.singles), len(p.batches))
	}
	h0, d0 := testBlob(0, 10)
	errs := make(chan error, 100)
	go func() { errs <- b.PutBlob(ctx, 2, cas.Blob{Hash: h0, Data: d0}) }()
	<-p.entered
	// 10 blobs of 10 bytes, then 6 of 300 bytes, queued in that order: at
	// most 4 blobs and 1000 bytes per batch, in queue order.
	n := 0
	for i := 1; i <= 10; i++ {
		h, d := testBlob(i, 10)
		go func() { errs <- b.PutBlob(ctx, 2, cas.Blob{Hash: h, Data: d}) }()
		n++
		waitQueued(t, b, 2, n)
	}
	for i := 11; i <= 16; i++ {
		h, d := testBlob(i, 300)
		go func() { errs <- b.PutBlob(ctx, 2, cas.Blob{Hash: h, Data: d}) }()
		n++
		waitQueued(t, b, 2, n)
	}
	close(p.gate)
	for i := 0; i <= n; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if got := p.batchSizes(); fmt.Sprint(got) != fmt.Sprint([]int{1, 4, 4, 4, 3, 1}) {
		t.Fatalf("batch sizes %v, want [1 4 4 4 3 1] (the fourth: 2×10 + 2×300 bytes; the fifth: 3×300)", got)
	}
	if st := b.Stats(); st.Single != 1 || st.Blobs != 17 {
		t.Fatalf("stats %+v", st)
	}
}

// Many concurrent writes through the Replicator over the in-memory
// transport and real blob stores: every blob lands intact on its ranked
// nodes, in fewer calls than blobs; under -race this also checks that the
// sends never read a caller's buffer after Write returned.
func TestReplicatorBatchesOverTransport(t *testing.T) {
	stores, writer, m := memCluster(t, 1)
	const n = 200
	var wg sync.WaitGroup
	errs := make(chan error, n)
	sem := make(chan struct{}, 32)
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			_, d := testBlob(i, 500+i)
			buf := bytes.Clone(d)
			// W=2 of 3: the third copy is often still on its way when
			// Write returns.
			_, err := writer.Write(context.Background(), blob.Sum(buf), buf, placement.Policy{Replicas: 3, WriteQuorum: 2})
			for j := range buf { // the caller reuses its buffer at once
				buf[j] = 0xff
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; i < n; i++ {
		h, d := testBlob(i, 500+i)
		for _, id := range placement.Replicas(m, h, 3) {
			for !stores[id].Has(h) && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond) // a straggler
			}
			p := make([]byte, len(d))
			if _, err := stores[id].ReadAt(h, p, 0); err != nil || !bytes.Equal(p, d) {
				t.Fatalf("blob %d on node %d: %v", i, id, err)
			}
		}
	}
	st := writer.BatchStats()
	if st.Blobs == 0 || st.Batches > st.Blobs {
		t.Fatalf("batch stats %+v", st)
	}
	t.Logf("%d remote blob writes in %d calls", st.Blobs, st.Batches)
}

// memCluster is five nodes with real blob stores on the in-memory
// transport, and the Replicator of node 1 writing to them.
func memCluster(t *testing.T, seed uint64) (map[placement.NodeID]*blob.Store, *Replicator, *placement.Map) {
	t.Helper()
	net := transport.NewMemNetwork(transport.MemConfig{Seed: seed})
	m := mapOf(t)
	stores := map[placement.NodeID]*blob.Store{}
	var writer *Replicator
	for id := placement.NodeID(1); id <= 5; id++ {
		bs, err := blob.Open(blob.Config{Dir: "/b", FS: vfs.NewMem(), MinFreeBytes: -1,
			Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { bs.Close() })
		stores[id] = bs
		net.Register(transport.NodeID(id), fmt.Sprintf("mem://%d", id), nodeHandler{BlobServer{bs}})
		if id == 1 {
			writer, err = New(Config{Self: id, Local: bs, Peers: TransportPeers{net.Client(transport.NodeID(id), nil)},
				Map: func() *placement.Map { return m }})
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	return stores, writer, m
}
