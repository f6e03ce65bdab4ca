package replica

import (
	"context"
	"io"

	"github.com/cairn-fs/cairn/internal/blob"
	"github.com/cairn-fs/cairn/internal/cas"
	"github.com/cairn-fs/cairn/internal/placement"
	"github.com/cairn-fs/cairn/internal/transport"
)

// TransportPeers adapts a transport.Client (HTTP or in-memory) to Peers.
// Node IDs are the Raft IDs in both packages.
type TransportPeers struct{ C transport.Client }

// PutBlob implements Peers.
func (p TransportPeers) PutBlob(ctx context.Context, to placement.NodeID, b cas.Blob) error {
	return p.C.PutBlob(ctx, transport.NodeID(to), b)
}

// GetBlob implements Peers.
func (p TransportPeers) GetBlob(ctx context.Context, to placement.NodeID, h blob.Hash, off, n int64) (io.ReadCloser, error) {
	return p.C.GetBlob(ctx, transport.NodeID(to), h, off, n)
}

// HasBlobs implements Peers.
func (p TransportPeers) HasBlobs(ctx context.Context, to placement.NodeID, hs []blob.Hash) ([]bool, error) {
	return p.C.HasBlobs(ctx, transport.NodeID(to), hs)
}

// PutBlobs implements BatchPeers.
func (p TransportPeers) PutBlobs(ctx context.Context, to placement.NodeID, blobs []cas.Blob) ([]error, error) {
	return p.C.PutBlobs(ctx, transport.NodeID(to), blobs)
}
