package replica

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cairn-fs/cairn/internal/cas"
	"github.com/cairn-fs/cairn/internal/placement"
)

// WriteMany over the in-memory transport and real blob stores: every blob
// lands intact on its ranked nodes; each node gets its small blobs in a
// few PutBlobs calls (not one per blob), large ones alone.
func TestWriteManyOverTransport(t *testing.T) {
	stores, writer, m := memCluster(t, 2)
	const n, large = 300, 3
	var blobs []cas.Blob
	for i := range n {
		size := 100 + i*7
		if i < large {
			size = 300 << 10 // over the batch's MaxBlobBytes: sent alone
		}
		h, d := testBlob(i, size)
		blobs = append(blobs, cas.Blob{Hash: h, Data: d})
	}
	_, errs := writer.WriteMany(context.Background(), blobs, placement.Policy{Replicas: 3})
	for i, err := range errs {
		if err != nil {
			t.Fatalf("blob %d: %v", i, err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for i, b := range blobs {
		for _, id := range placement.Replicas(m, b.Hash, 3) {
			for !stores[id].Has(b.Hash) && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond) // a straggler (W=2 of 3)
			}
			p := make([]byte, len(b.Data))
			if _, err := stores[id].ReadAt(b.Hash, p, 0); err != nil || !bytes.Equal(p, b.Data) {
				t.Fatalf("blob %d on node %d: %v", i, id, err)
			}
		}
	}
	st := writer.BatchStats()
	// About 2 of every 3 copies are remote; each of the 4 other nodes gets
	// its ~150 small blobs in one call.
	if st.Batches > 8 || st.Blobs < 2*(n-large)/2 {
		t.Fatalf("batch stats %+v: want a few batches carrying the small blobs", st)
	}
	if st.Single == 0 {
		t.Fatalf("batch stats %+v: the large blobs should go alone", st)
	}
	if stores[1].Stats().Blobs == 0 {
		t.Fatal("the writer holds none of the blobs it ranks for itself")
	}
}

// A blob is acknowledged once W copies are durable; in a strict bucket,
// with two of its targets failing and W=2 of R=3 it fails with
// placement.ErrNoQuorum, the others succeed; no result waits for a hung
// node once the quorum is in. Without Strict, a blob whose answering targets all
// answered succeeds with the copies made, under-replicated.
func TestWriteManyQuorum(t *testing.T) {
	f := newFakeNet(1, 2, 3, 4, 5)
	m := mapOf(t)
	r := newRep(t, 1, f, m)
	f.fail[4], f.fail[5] = true, true
	f.hang[3] = true
	var blobs []cas.Blob
	for i := range 60 {
		h, d := testBlob(i, 64)
		blobs = append(blobs, cas.Blob{Hash: h, Data: d})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, errs := r.WriteMany(ctx, blobs, placement.Policy{Replicas: 3, WriteQuorum: 2, Strict: true})
	ok, failed := 0, 0
	for i, b := range blobs {
		targets := placement.Place(m, b.Hash, 3).Targets
		good := 0 // targets that answer: 1 and 2 (3 hangs, 4 and 5 fail)
		for _, id := range targets {
			if id == 1 || id == 2 {
				good++
			}
		}
		switch {
		case good >= 2 && errs[i] != nil:
			t.Fatalf("blob %d (targets %v): %v, want success", i, targets, errs[i])
		case good >= 2:
			ok++
		case !contains(targets, 3) && !errors.Is(errs[i], placement.ErrNoQuorum):
			t.Fatalf("blob %d (targets %v): %v, want placement.ErrNoQuorum", i, targets, errs[i])
		case errs[i] == nil:
			t.Fatalf("blob %d (targets %v) succeeded with one good copy", i, targets)
		default:
			failed++
		}
	}
	if ok == 0 || failed == 0 {
		t.Fatalf("%d ok, %d failed: the test needs both kinds", ok, failed)
	}
	t.Logf("%d ok, %d failed in %v", ok, failed, time.Since(start))

	// Not strict: a blob whose targets are 1 and two failing nodes is
	// written on 1 alone, and says so.
	ctx2, cancel2 := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel2()
	copies, errs := r.WriteMany(ctx2, blobs, placement.Policy{Replicas: 3, WriteQuorum: 2})
	degraded := 0
	for i, b := range blobs {
		targets := placement.Place(m, b.Hash, 3).Targets
		if contains(targets, 3) || contains(targets, 2) {
			continue // 3 hangs; 2 may make a quorum
		}
		if errs[i] != nil || copies[i] != (placement.Copies{Made: 1, Wanted: 3}) {
			t.Fatalf("blob %d (targets %v): %v %+v, want success with 1 of 3 copies", i, targets, errs[i], copies[i])
		}
		degraded++
	}
	if degraded == 0 {
		t.Fatal("no blob had targets 1, 4 and 5: the test needs one")
	}
	if r.WriteStats().Under < int64(degraded) {
		t.Fatalf("under-replicated writes counted %d, want >= %d", r.WriteStats().Under, degraded)
	}
}

// A blob's CRC32C, computed by the writer with its name, reaches every
// remote replica's PutBlob (which checks it instead of re-hashing); a blob
// written without one (Write) carries none.
func TestWriteManyCarriesCRC(t *testing.T) {
	f := newFakeNet(1, 2, 3, 4, 5)
	m := mapOf(t)
	r := newRep(t, 1, f, m)
	h, d := testBlob(1, 300<<10)
	_, crc := cas.Sums(d)
	_, errs := r.WriteMany(context.Background(), []cas.Blob{{Hash: h, Data: d, CRC: crc}}, placement.Policy{Replicas: 3, WriteQuorum: 3})
	if errs[0] != nil {
		t.Fatal(errs[0])
	}
	h2, d2 := testBlob(2, 300<<10)
	if _, err := r.Write(context.Background(), h2, d2, placement.Policy{Replicas: 3, WriteQuorum: 3}); err != nil {
		t.Fatal(err)
	}
	remote := func(h cas.Hash) int {
		n := 0
		for _, id := range placement.Replicas(m, h, 3) {
			if id != 1 {
				n++
			}
		}
		return n
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.crcs) != remote(h)+remote(h2) {
		t.Fatalf("%d remote puts, want %d", len(f.crcs), remote(h)+remote(h2))
	}
	var with int
	for _, c := range f.crcs {
		if c == crc {
			with++
		} else if _, ok := c.Value(); ok {
			t.Fatalf("a remote put carried CRC %v, want %v or none", c, crc)
		}
	}
	if with != remote(h) {
		t.Fatalf("%d remote puts carried the CRC, want the %d of WriteMany", with, remote(h))
	}
}
