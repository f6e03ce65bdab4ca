package node

import (
	"context"
	"errors"
	"testing"

	"github.com/cairn-fs/cairn/internal/blob"
	"github.com/cairn-fs/cairn/internal/transport"
)

// A witness refuses blob copies, one at a time or batched (the batch half
// of the handler must not slip past the check).
func TestWitnessRefusesBlobCopies(t *testing.T) {
	h := rpcHandler{witness: true}
	data := []byte("x")
	if err := h.PutBlob(context.Background(), 2, blob.Sum(data), data); !errors.Is(err, errWitnessBlob) {
		t.Fatalf("PutBlob on a witness: %v", err)
	}
	errs := h.PutBlobs(context.Background(), 2, []transport.BlobPut{{Hash: blob.Sum(data), Data: data}, {Hash: blob.Sum(nil)}})
	if len(errs) != 2 || !errors.Is(errs[0], errWitnessBlob) || !errors.Is(errs[1], errWitnessBlob) {
		t.Fatalf("PutBlobs on a witness: %v", errs)
	}
	var _ transport.BatchHandler = h
}
