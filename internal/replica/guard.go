package replica

import (
	"context"

	"github.com/cairn-fs/cairn/internal/blob"
	"github.com/cairn-fs/cairn/internal/minindex"
	"github.com/cairn-fs/cairn/internal/transport"
)

// PutGuard readies the node's store for blobs hs that a peer's upload
// sends, once the node has applied minIndex (minindex.From of the
// call); release is called once they are stored. store.Local's
// GuardReplicaPut is one: it keeps a reap this node applied from deleting
// a copy that the upload deduplicated against.
type PutGuard func(ctx context.Context, minIndex uint64, hs []blob.Hash) (release func(), err error)

// GuardedBlobServer is a BlobServer whose puts pass Guard first (nil: no
// guard).
type GuardedBlobServer struct {
	BlobServer
	Guard PutGuard
}

// PutBlob implements transport.Handler.
func (s GuardedBlobServer) PutBlob(ctx context.Context, from transport.NodeID, h blob.Hash, data []byte) error {
	if s.Guard != nil {
		release, err := s.Guard(ctx, minindex.From(ctx), []blob.Hash{h})
		if err != nil {
			return err
		}
		defer release()
	}
	return s.BlobServer.PutBlob(ctx, from, h, data)
}

// HasBlobs implements transport.Handler. A hand-off drops its copy of a
// blob once the new owner confirms one, so a confirmation is held to the
// put's rule: the copy is spared from the reaps the asker has applied.
func (s GuardedBlobServer) HasBlobs(ctx context.Context, from transport.NodeID, hs []blob.Hash) ([]bool, error) {
	if s.Guard != nil {
		release, err := s.Guard(ctx, minindex.From(ctx), hs)
		if err != nil {
			return nil, err
		}
		defer release()
	}
	return s.BlobServer.HasBlobs(ctx, from, hs)
}

// PutBlobs implements transport.BatchHandler.
func (s GuardedBlobServer) PutBlobs(ctx context.Context, from transport.NodeID, blobs []transport.BlobPut) []error {
	if s.Guard != nil {
		hs := make([]blob.Hash, len(blobs))
		for i := range blobs {
			hs[i] = blobs[i].Hash
		}
		release, err := s.Guard(ctx, minindex.From(ctx), hs)
		if err != nil {
			errs := make([]error, len(blobs))
			for i := range errs {
				errs[i] = err
			}
			return errs
		}
		defer release()
	}
	return s.BlobServer.PutBlobs(ctx, from, blobs)
}
