package replica

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sync"

	"github.com/cairn-fs/cairn/internal/blob"
	"github.com/cairn-fs/cairn/internal/transport"
)

// BlobStore is what BlobServer needs of the node's blob store
// (blob.Store implements it).
type BlobStore interface {
	Local
	Size(h blob.Hash) (int64, error)
	// HasDurable is Has that counts a copy only once it is durable.
	HasDurable(h blob.Hash) bool
}

// BlobServer answers the blob half of transport.Handler (PutBlob, GetBlob,
// HasBlobs) from the node's blob store. The node's handler embeds it next
// to the consensus and join handlers.
type BlobServer struct{ Store BlobStore }

// PutBlob stores a blob a peer sent (the transport checked its hash);
// it returns once the blob is durable (blob.Store.Put group-commits).
func (s BlobServer) PutBlob(ctx context.Context, from transport.NodeID, h blob.Hash, data []byte) error {
	return s.Store.Put(h, data)
}

// GetBlob returns n bytes (-1: to the end) of blob h from off.
func (s BlobServer) GetBlob(ctx context.Context, from transport.NodeID, h blob.Hash, off, n int64) (io.ReadCloser, int64, error) {
	size, err := s.Store.Size(h)
	if err != nil {
		return nil, 0, err
	}
	if off < 0 || off > size {
		return nil, 0, fmt.Errorf("blob %s: offset %d outside %d bytes: %w", h, off, size, blob.ErrNotFound)
	}
	if n < 0 || off+n > size {
		n = size - off
	}
	// Blobs are at most 4 MiB: one read into memory keeps the volume
	// unpinned while the peer reads slowly.
	p := make([]byte, n)
	k, err := s.Store.ReadAt(h, p, off)
	if err != nil && !(err == io.EOF && int64(k) == n) {
		return nil, 0, err
	}
	return io.NopCloser(bytes.NewReader(p)), n, nil
}

// HasBlobs reports which of hs this node holds.
func (s BlobServer) HasBlobs(ctx context.Context, from transport.NodeID, hs []blob.Hash) ([]bool, error) {
	out := make([]bool, len(hs))
	for i, h := range hs {
		// A hand-off drops its copy on this answer: only a copy a crash
		// cannot undo counts (docs/design/0004-blob-deletion.md).
		out[i] = s.Store.HasDurable(h)
	}
	return out, nil
}

// batchPutter is the batch write of blob.Store: every new blob of the
// batch appended under one lock with one write, then one group-committed
// fsync; one error per blob.
type batchPutter interface {
	PutMany(hs []blob.Hash, data [][]byte) []error
}

// PutBlobs implements transport.BatchHandler. With a store that has
// PutMany (blob.Store) the batch is one append and one fsync; otherwise
// the blobs are written concurrently, so they share the store's group
// commit. Either way each blob's error is nil only once it is durable.
func (s BlobServer) PutBlobs(ctx context.Context, from transport.NodeID, blobs []transport.BlobPut) []error {
	if len(blobs) == 1 {
		return []error{s.Store.Put(blobs[0].Hash, blobs[0].Data)}
	}
	if bp, ok := s.Store.(batchPutter); ok {
		hs := make([]blob.Hash, len(blobs))
		data := make([][]byte, len(blobs))
		for i := range blobs {
			hs[i], data[i] = blobs[i].Hash, blobs[i].Data
		}
		return bp.PutMany(hs, data)
	}
	errs := make([]error, len(blobs))
	var wg sync.WaitGroup
	for i := range blobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.Store.Put(blobs[i].Hash, blobs[i].Data)
		}()
	}
	wg.Wait()
	return errs
}
