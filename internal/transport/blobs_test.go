package transport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"testing"

	"github.com/cairn-fs/cairn/internal/blob"
)

// batchFake is a fakeHandler that also takes whole batches, failing the
// blobs listed in fail.
type batchFake struct {
	*fakeHandler
	batches [][]blob.Hash
	fail    map[blob.Hash]error
}

func (b *batchFake) PutBlobs(ctx context.Context, from NodeID, blobs []BlobPut) []error {
	errs := make([]error, len(blobs))
	var hs []blob.Hash
	for i, bp := range blobs {
		hs = append(hs, bp.Hash)
		if err := b.fail[bp.Hash]; err != nil {
			errs[i] = err
			continue
		}
		errs[i] = b.fakeHandler.PutBlob(ctx, from, bp.Hash, bp.Data)
	}
	b.mu.Lock()
	b.batches = append(b.batches, hs)
	b.mu.Unlock()
	return errs
}

func batchOf(n int) []BlobPut {
	var out []BlobPut
	for i := 0; i < n; i++ {
		d := bytes.Repeat([]byte(fmt.Sprint("blob", i, " ")), 100*i) // blob 0 is empty
		out = append(out, BlobPut{Hash: blob.Sum(d), Data: d})
	}
	return out
}

// checkBatch runs the common PutBlobs checks against c (node 2 serving fh).
func checkBatch(t *testing.T, c Client, fh *fakeHandler) {
	t.Helper()
	ctx := context.Background()
	blobs := batchOf(6)
	blobs[3].Hash = blob.Sum([]byte("not these bytes"))
	errs, err := c.PutBlobs(ctx, 2, blobs)
	if err != nil || len(errs) != len(blobs) {
		t.Fatalf("PutBlobs: %v, %d answers", err, len(errs))
	}
	for i, e := range errs {
		switch {
		case i == 3 && !errors.Is(e, ErrCorrupt):
			t.Fatalf("blob with a wrong hash: %v, want ErrCorrupt", e)
		case i != 3 && e != nil:
			t.Fatalf("blob %d: %v", i, e)
		}
	}
	fh.mu.Lock()
	for i, bp := range blobs {
		got, ok := fh.blobs[bp.Hash]
		if i == 3 && ok {
			t.Fatal("a blob that does not match its hash was stored")
		}
		if i != 3 && (!ok || !bytes.Equal(got, bp.Data)) {
			t.Fatalf("blob %d not stored intact", i)
		}
	}
	fh.mu.Unlock()
	if errs, err := c.PutBlobs(ctx, 2, nil); err != nil || len(errs) != 0 {
		t.Fatalf("empty batch: %v %v", errs, err)
	}
}

func TestPutBlobsHTTP(t *testing.T) {
	n2 := startNode(t, 2, nil) // fakeHandler: no BatchHandler, one PutBlob per blob
	c := newClient(t, 1, nil, n2)
	checkBatch(t, c, n2.h)
	if got := n2.h.calls.Load(); got != 5 {
		t.Fatalf("handler called %d times, want 5 PutBlob calls", got)
	}

	// A BatchHandler gets the batch whole; its per-blob errors come back
	// through the status table.
	cfg := DefaultConfig()
	cfg.NodeID, cfg.Secret = 3, testSecret
	bf := &batchFake{fakeHandler: newFakeHandler(), fail: map[blob.Hash]error{}}
	blobs := batchOf(4)
	bf.fail[blobs[1].Hash] = fmt.Errorf("volume: %w", blob.ErrNoSpace)
	bf.fail[blobs[2].Hash] = errors.New("something else")
	srv, err := NewServer(cfg, bf)
	if err != nil {
		t.Fatal(err)
	}
	n3 := startNode(t, 3, nil)
	n3.srv.Config.Handler = srv
	c3 := newClient(t, 1, nil, n3)
	errs, err := c3.PutBlobs(context.Background(), 3, blobs)
	if err != nil {
		t.Fatal(err)
	}
	if errs[0] != nil || !errors.Is(errs[1], ErrNoSpace) || !errors.Is(errs[2], ErrRemote) || errs[3] != nil {
		t.Fatalf("per-blob errors %v", errs)
	}
	if len(bf.batches) != 1 || len(bf.batches[0]) != 4 {
		t.Fatalf("batch handler saw %v", bf.batches)
	}

	// Too large a body fails the call as a whole.
	n4 := startNode(t, 4, func(c *Config) { c.MaxBodyBytes = 1000 })
	c4 := newClient(t, 1, nil, n4)
	if _, err := c4.PutBlobs(context.Background(), 4, batchOf(5)); !errors.Is(err, ErrBadRequest) {
		t.Fatalf("oversized batch: %v, want ErrBadRequest", err)
	}
	if _, err := c.PutBlobs(context.Background(), 99, batchOf(2)); !errors.Is(err, ErrUnknownPeer) {
		t.Fatalf("unknown peer: %v", err)
	}
}

// The manifest is signed; the data are checked blob by blob.
func TestPutBlobsTampered(t *testing.T) {
	n2 := startNode(t, 2, nil)
	c := newClient(t, 1, nil, n2)
	blobs := batchOf(3)
	manifest, _ := encodeManifest(blobs)
	tamper := func(at int) {
		c.rt = rtFunc(func(r *http.Request) (*http.Response, error) {
			b, _ := io.ReadAll(r.Body)
			b[at] ^= 1
			r.Body = io.NopCloser(bytes.NewReader(b))
			return c.tr.RoundTrip(r)
		})
	}
	tamper(len(manifest) - 1) // the last blob's length
	if _, err := c.PutBlobs(context.Background(), 2, blobs); !errors.Is(err, ErrUnauthorized) && !errors.Is(err, ErrBadRequest) {
		t.Fatalf("tampered manifest: %v, want ErrUnauthorized or ErrBadRequest", err)
	}
	tamper(2) // a byte of the first hash
	if _, err := c.PutBlobs(context.Background(), 2, blobs); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("tampered hash: %v, want ErrUnauthorized", err)
	}
	tamper(len(manifest) + 5) // data of blob 1
	errs, err := c.PutBlobs(context.Background(), 2, blobs)
	if err != nil || errs[0] != nil || !errors.Is(errs[1], ErrCorrupt) || errs[2] != nil {
		t.Fatalf("tampered data: %v %v, want ErrCorrupt for blob 1 only", errs, err)
	}
}

func TestPutBlobsMem(t *testing.T) {
	q := &queue{}
	net := NewMemNetwork(MemConfig{Seed: 1, Schedule: q.schedule})
	h2 := newFakeHandler()
	net.Register(2, "http://node2", h2)
	c := net.Client(1, nil)
	checkBatch(t, c, h2)

	bf := &batchFake{fakeHandler: newFakeHandler(), fail: map[blob.Hash]error{}}
	net.Register(3, "http://node3", bf)
	blobs := batchOf(3)
	bf.fail[blobs[2].Hash] = blob.ErrReadOnly
	errs, err := c.PutBlobs(context.Background(), 3, blobs)
	if err != nil || errs[0] != nil || errs[1] != nil || !errors.Is(errs[2], ErrNoSpace) {
		t.Fatalf("mem batch: %v %v", errs, err)
	}
	net.Partition([]NodeID{1}, []NodeID{2, 3})
	if _, err := c.PutBlobs(context.Background(), 3, blobs); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("across a partition: %v", err)
	}
	net.Heal()

	// One fault decision per batch, under its own op.
	var ops []Op
	net2 := NewMemNetwork(MemConfig{Seed: 1, Fault: func(rng *rand.Rand, from, to NodeID, op Op) Fault {
		ops = append(ops, op)
		return Fault{Drop: true}
	}})
	net2.Register(2, "", newFakeHandler())
	if _, err := net2.Client(1, nil).PutBlobs(context.Background(), 2, blobs); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("dropped batch: %v", err)
	}
	if len(ops) != 1 || ops[0] != OpPutBlobs || ops[0].String() != "putblobs" {
		t.Fatalf("fault hook saw %v", ops)
	}
}

func BenchmarkPutBlobs64x16K(b *testing.B) {
	n := startNodeB(b)
	c := newClientB(b, n)
	var blobs []BlobPut
	for i := 0; i < 64; i++ {
		d := bytes.Repeat([]byte{byte(i)}, 16<<10)
		blobs = append(blobs, BlobPut{Hash: blob.Sum(d), Data: d})
	}
	b.SetBytes(64 * 16 << 10)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := c.PutBlobs(context.Background(), 2, blobs); err != nil {
			b.Fatal(err)
		}
	}
}
