package replica

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/cairn-fs/cairn/internal/blob"
	"github.com/cairn-fs/cairn/internal/placement"
	"github.com/cairn-fs/cairn/internal/transport"
)

// WriteMany stores many blobs, each on its replicas exactly as Write would
// (same placement, same quorum), but sends each node all of its blobs
// together: this node's copies with one PutMany when the local store has
// it (blob.Store: one append, one fsync), every other node's in PutBlobs
// calls of up to the batch caps when the peers support them. It returns one
// error per blob (nil: w copies are durable) once every blob has reached
// its quorum or can no longer reach it, or ctx ends (then the undecided
// blobs fail with ctx's error).
//
// WriteMany takes ownership of the blobs' data: the sends to slower
// replicas go on after it returns (bounded by BackgroundTimeout), so the
// caller must not modify the slices afterwards. It is the bulk upload's
// path (store.Local.PutFiles): one call per group of small files instead
// of one Write per blob.
func (r *Replicator) WriteMany(ctx context.Context, blobs []transport.BlobPut, rf, w int) []error {
	m := r.cfg.Map()
	n := len(blobs)
	errs := make([]error, n)
	need := make([]int, n)
	left := make([]int, n) // targets that have not answered yet
	acked := make([]int, n)
	failures := make([][]error, n)
	decided := make([]bool, n)
	perNode := map[placement.NodeID][]int{}
	pending, sends := 0, 0
	for i, b := range blobs {
		targets := placement.Place(m, b.Hash, rf).Targets
		need[i] = writeQuorum(m, b.Hash, rf, w)
		if len(targets) < need[i] || len(targets) == 0 {
			errs[i] = fmt.Errorf("%w: %d live targets for %d required copies", ErrNoQuorum, len(targets), need[i])
			decided[i] = true
			continue
		}
		left[i] = len(targets)
		pending++
		sends += len(targets)
		for _, id := range targets {
			perNode[id] = append(perNode[id], i)
		}
	}
	if pending == 0 {
		return errs
	}
	type ack struct {
		i   int
		id  placement.NodeID
		err error
	}
	acks := make(chan ack, sends) // never blocks a sender
	bg, cancelBG := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.BackgroundTimeout)
	var wg sync.WaitGroup
	for id, idx := range perNode {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.sendMany(bg, id, blobs, idx, func(i int, err error) { acks <- ack{i, id, err} })
		}()
	}
	go func() { wg.Wait(); cancelBG() }()

	for pending > 0 {
		select {
		case a := <-acks:
			if decided[a.i] {
				continue
			}
			left[a.i]--
			if a.err == nil {
				acked[a.i]++
			} else {
				failures[a.i] = append(failures[a.i], fmt.Errorf("node %d: %w", a.id, a.err))
			}
			switch {
			case acked[a.i] >= need[a.i]:
				decided[a.i] = true
				pending--
			case acked[a.i]+left[a.i] < need[a.i]:
				errs[a.i] = fmt.Errorf("%w: %d of %d copies written, %d required: %w",
					ErrNoQuorum, acked[a.i], acked[a.i]+left[a.i]+len(failures[a.i]), need[a.i], errors.Join(failures[a.i]...))
				decided[a.i] = true
				pending--
			}
		case <-ctx.Done():
			cancelBG()
			for i := range errs {
				if !decided[i] {
					errs[i] = ctx.Err()
				}
			}
			return errs
		}
	}
	return errs
}

// sendMany stores blobs[idx...] on node id and reports each blob's outcome
// once through report.
func (r *Replicator) sendMany(ctx context.Context, id placement.NodeID, blobs []transport.BlobPut, idx []int, report func(i int, err error)) {
	if id == r.cfg.Self {
		if bp, ok := r.cfg.Local.(batchPutter); ok {
			hs := make([]blob.Hash, len(idx))
			data := make([][]byte, len(idx))
			for k, i := range idx {
				hs[k], data[k] = blobs[i].Hash, blobs[i].Data
			}
			for k, err := range bp.PutMany(hs, data) {
				report(idx[k], err)
			}
			return
		}
		r.putEach(ctx, id, blobs, idx, report)
		return
	}
	bp, ok := r.cfg.Peers.(BatchPeers)
	if !ok || r.batch == nil {
		r.putEach(ctx, id, blobs, idx, report)
		return
	}
	cfg := r.batch.cfg
	var (
		chunks [][]int
		cur    []int
		size   int
		single []int
	)
	for _, i := range idx {
		d := len(blobs[i].Data)
		if d > cfg.MaxBlobBytes {
			single = append(single, i)
			continue
		}
		if len(cur) > 0 && (len(cur) >= cfg.MaxBatchBlobs || size+d > cfg.MaxBatchBytes) {
			chunks = append(chunks, cur)
			cur, size = nil, 0
		}
		cur = append(cur, i)
		size += d
	}
	if len(cur) > 0 {
		chunks = append(chunks, cur)
	}
	var wg sync.WaitGroup
	if len(single) > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.putEach(ctx, id, blobs, single, report)
		}()
	}
	// At most MaxInflight batches to this node at once, as the Batcher.
	sem := make(chan struct{}, cfg.MaxInflight)
	for _, chunk := range chunks {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			put := make([]transport.BlobPut, len(chunk))
			for k, i := range chunk {
				put[k] = blobs[i]
			}
			cctx, cancel := context.WithTimeout(ctx, r.cfg.WriteTimeout)
			defer cancel()
			r.batch.batches.Add(1)
			r.batch.blobs.Add(int64(len(chunk)))
			errs, err := bp.PutBlobs(cctx, id, put)
			for k, e := range blobErrs(id, len(chunk), errs, err) {
				report(chunk[k], e)
			}
		}()
	}
	wg.Wait()
}

// putEach stores blobs[idx...] on node id one call per blob, concurrently.
func (r *Replicator) putEach(ctx context.Context, id placement.NodeID, blobs []transport.BlobPut, idx []int, report func(i int, err error)) {
	var wg sync.WaitGroup
	for _, i := range idx {
		wg.Add(1)
		go func() {
			defer wg.Done()
			report(i, r.put(ctx, id, blobs[i].Hash, blobs[i].Data))
		}()
	}
	wg.Wait()
}
