package transport

import (
	"context"
	"slices"
	"testing"

	"github.com/cairn-fs/cairn/internal/blob"
	"github.com/cairn-fs/cairn/internal/minindex"
)

// The uploader's start index reaches the receiving handler's context, over
// HTTP (a signed query parameter) for single and batched puts and for
// HasBlobs (a hand-off's confirmation), and is absent when none was set.
func TestMinIndexTravels(t *testing.T) {
	n := startNode(t, 2, nil)
	c := newClient(t, 1, nil, n)
	a, b := []byte("first"), []byte("second")
	ctx := minindex.With(context.Background(), 4242)
	if err := c.PutBlob(ctx, 2, BlobPut{Hash: blob.Sum(a), Data: a}); err != nil {
		t.Fatal(err)
	}
	if err := c.PutBlob(context.Background(), 2, BlobPut{Hash: blob.Sum(b), Data: b}); err != nil {
		t.Fatal(err)
	}
	errs, err := c.PutBlobs(minindex.With(context.Background(), 77), 2, []BlobPut{{Hash: blob.Sum(a), Data: a}, {Hash: blob.Sum(b), Data: b}})
	if err != nil || errs[0] != nil || errs[1] != nil {
		t.Fatalf("PutBlobs: %v %v", err, errs)
	}
	if _, err := c.HasBlobs(minindex.With(context.Background(), 9), 2, []blob.Hash{blob.Sum(a)}); err != nil {
		t.Fatal(err)
	}
	n.h.mu.Lock()
	got := slices.Clone(n.h.minIdx)
	n.h.mu.Unlock()
	if want := []uint64{4242, 0, 77, 77, 9}; !slices.Equal(got, want) {
		t.Fatalf("handler saw min indexes %v, want %v", got, want)
	}
}
