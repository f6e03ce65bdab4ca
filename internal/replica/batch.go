package replica

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/cairn-fs/cairn/internal/blob"
	"github.com/cairn-fs/cairn/internal/cas"
	"github.com/cairn-fs/cairn/internal/minindex"
	"github.com/cairn-fs/cairn/internal/placement"
	"github.com/cairn-fs/cairn/internal/transport"
)

// BatchPeers is implemented by Peers that can carry many blobs to one node
// in one call (TransportPeers does). The Replicator then coalesces
// concurrent small writes to the same node (see Batcher).
type BatchPeers interface {
	// PutBlobs stores blobs on node to; errs has one entry per blob (nil:
	// durable there), or err says the whole call failed.
	PutBlobs(ctx context.Context, to placement.NodeID, blobs []cas.Blob) (errs []error, err error)
}

// BatchConfig tunes a Batcher. Zero fields take DefaultBatchConfig's value.
type BatchConfig struct {
	// MaxBlobBytes: blobs larger than this are not batched (sent alone by
	// PutBlob). Default 256 KiB.
	MaxBlobBytes int
	// MaxBatchBytes caps the data of one batch. Default 4 MiB.
	MaxBatchBytes int
	// MaxBatchBlobs caps the blobs of one batch. Default 512.
	MaxBatchBlobs int
	// MaxInflight is the number of batches in flight to one node at once;
	// blobs arriving while that many are in flight wait and leave together
	// in the next. Default 2.
	MaxInflight int
}

// DefaultBatchConfig returns the defaults.
func DefaultBatchConfig() BatchConfig {
	return BatchConfig{MaxBlobBytes: 256 << 10, MaxBatchBytes: 4 << 20, MaxBatchBlobs: 512, MaxInflight: 2}
}

func (c BatchConfig) withDefaults() BatchConfig {
	d := DefaultBatchConfig()
	if c.MaxBlobBytes <= 0 {
		c.MaxBlobBytes = d.MaxBlobBytes
	}
	if c.MaxBatchBytes <= 0 {
		c.MaxBatchBytes = d.MaxBatchBytes
	}
	if c.MaxBatchBlobs <= 0 {
		c.MaxBatchBlobs = d.MaxBatchBlobs
	}
	if c.MaxInflight <= 0 {
		c.MaxInflight = d.MaxInflight
	}
	return c
}

// BatchStats counts a Batcher's work.
type BatchStats struct {
	// Batches is the number of PutBlobs calls sent, Blobs the blobs they
	// carried; Single counts blobs sent alone by PutBlob (too large).
	Batches, Blobs, Single int64
}

// Batcher coalesces concurrent PutBlob calls to the same node into PutBlobs
// calls ("natural" batching, as a group commit does: no timer, no added
// delay). A call is sent at once when fewer than MaxInflight batches are in
// flight to its node; otherwise it waits and leaves with whatever else
// queued meanwhile, as soon as a batch returns. Each caller still gets its
// own blob's outcome: nil only once that node acknowledged that blob
// (durable there). Callers see exactly Peers.PutBlob's contract.
//
// A caller whose ctx ends returns ctx's error at once; its blob is dropped
// if not yet sent, and a batch in flight is cancelled when the contexts of
// all its callers have ended. The data of a blob must stay unmodified until
// the batch carrying it is done, which may be after PutBlob returned on a
// cancelled ctx (the Replicator hands over a private copy).
type Batcher struct {
	peers Peers
	send  BatchPeers
	cfg   BatchConfig

	mu    sync.Mutex
	nodes map[placement.NodeID]*nodeQueue

	batches, blobs, single atomic.Int64
}

type nodeQueue struct {
	q        []*batchItem
	inflight int
}

type batchItem struct {
	ctx  context.Context
	h    blob.Hash
	data []byte
	done chan error // buffered 1
}

// NewBatcher returns a Batcher sending through send, and large blobs
// through peers.PutBlob.
func NewBatcher(peers Peers, send BatchPeers, cfg BatchConfig) *Batcher {
	return &Batcher{peers: peers, send: send, cfg: cfg.withDefaults(), nodes: map[placement.NodeID]*nodeQueue{}}
}

// Stats returns the counters.
func (b *Batcher) Stats() BatchStats {
	return BatchStats{Batches: b.batches.Load(), Blobs: b.blobs.Load(), Single: b.single.Load()}
}

// PutBlob stores bl on node to, in a batch with other calls to the same
// node when it is small (a batch carries no CRC: its receiver hashes each
// blob), alone otherwise.
func (b *Batcher) PutBlob(ctx context.Context, to placement.NodeID, bl cas.Blob) error {
	if len(bl.Data) > b.cfg.MaxBlobBytes {
		b.single.Add(1)
		return b.peers.PutBlob(ctx, to, bl)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	it := &batchItem{ctx: ctx, h: bl.Hash, data: bl.Data, done: make(chan error, 1)}
	b.mu.Lock()
	nq := b.nodes[to]
	if nq == nil {
		nq = &nodeQueue{}
		b.nodes[to] = nq
	}
	nq.q = append(nq.q, it)
	var batch []*batchItem
	if nq.inflight < b.cfg.MaxInflight {
		batch = b.takeLocked(nq)
		nq.inflight++
	}
	b.mu.Unlock()
	if batch != nil {
		go b.run(to, nq, batch)
	}
	select {
	case err := <-it.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// takeLocked removes the next batch from nq's queue: callers that already
// gave up are answered and skipped; at least one blob, then up to the caps.
func (b *Batcher) takeLocked(nq *nodeQueue) []*batchItem {
	var out []*batchItem
	size, i := 0, 0
	for ; i < len(nq.q); i++ {
		it := nq.q[i]
		if err := it.ctx.Err(); err != nil {
			it.done <- err
			continue
		}
		if len(out) > 0 && (len(out) >= b.cfg.MaxBatchBlobs || size+len(it.data) > b.cfg.MaxBatchBytes) {
			break
		}
		out = append(out, it)
		size += len(it.data)
	}
	rest := copy(nq.q, nq.q[i:])
	clear(nq.q[rest:])
	nq.q = nq.q[:rest]
	return out
}

// run sends batch, then the batches queued behind it, until the queue is
// empty; it holds one of the node's in-flight slots.
func (b *Batcher) run(to placement.NodeID, nq *nodeQueue, batch []*batchItem) {
	for {
		if len(batch) > 0 {
			b.sendBatch(to, batch)
		}
		b.mu.Lock()
		batch = b.takeLocked(nq)
		if len(batch) == 0 && len(nq.q) == 0 {
			nq.inflight--
			if nq.inflight == 0 && len(nq.q) == 0 {
				delete(b.nodes, to)
			}
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()
	}
}

// sendBatch makes one PutBlobs call and answers its callers. The call's
// context ends when every caller's has (each caller's deadline bounds it).
func (b *Batcher) sendBatch(to placement.NodeID, batch []*batchItem) {
	// The batch's minimum applied index is the highest of its callers'
	// (waiting for a later index is safe for the others).
	var minIndex uint64
	for _, it := range batch {
		minIndex = max(minIndex, minindex.From(it.ctx))
	}
	ctx, cancel := context.WithCancel(minindex.With(context.Background(), minIndex))
	defer cancel()
	var left atomic.Int64
	left.Store(int64(len(batch)))
	stops := make([]func() bool, len(batch))
	blobs := make([]cas.Blob, len(batch))
	for i, it := range batch {
		blobs[i] = cas.Blob{Hash: it.h, Data: it.data}
		stops[i] = context.AfterFunc(it.ctx, func() {
			if left.Add(-1) == 0 {
				cancel()
			}
		})
	}
	b.batches.Add(1)
	b.blobs.Add(int64(len(batch)))
	errs, err := b.send.PutBlobs(ctx, to, blobs)
	for _, stop := range stops {
		stop()
	}
	for i, e := range blobErrs(to, len(batch), errs, err) {
		batch[i].done <- e
	}
}

// blobErrs turns a PutBlobs answer for n blobs into one error per blob:
// the call's error for all when it failed (or answered for a different
// number of blobs), else each blob's own.
func blobErrs(to placement.NodeID, n int, errs []error, err error) []error {
	if err == nil && len(errs) != n {
		err = fmt.Errorf("%w: PutBlobs to node %d answered %d of %d blobs", transport.ErrRemote, to, len(errs), n)
	}
	if err == nil {
		return errs
	}
	out := make([]error, n)
	for i := range out {
		out[i] = err
	}
	return out
}
