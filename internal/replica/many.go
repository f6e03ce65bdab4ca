package replica

import (
	"context"
	"sync"
	"time"

	"github.com/cairn-fs/cairn/internal/clock"

	"github.com/cairn-fs/cairn/internal/blob"
	"github.com/cairn-fs/cairn/internal/cas"
	"github.com/cairn-fs/cairn/internal/placement"
)

// WriteMany stores many blobs, each on its replicas exactly as Write would
// (same placement, same quorum rules), but sends each node all of its
// blobs together: this node's copies with one PutMany when the local store
// has it (blob.Store: one append, one fsync), every other node's in
// PutBlobs calls of up to the batch caps when the peers support them. It
// returns one outcome and one error per blob (nil: the blob is written as
// Write would have acknowledged it) once every blob is decided, or ctx
// ends (then the undecided blobs fail with ctx's error).
//
// WriteMany takes ownership of the blobs' data: the sends to slower
// replicas go on after it returns (bounded by BackgroundTimeout), so the
// caller must not modify the slices afterwards. It is the bulk upload's
// path (store.Local.PutFiles): one call per group of small files instead
// of one Write per blob.
func (r *Replicator) WriteMany(ctx context.Context, blobs []cas.Blob, pol placement.Policy) ([]placement.Copies, []error) {
	m := r.cfg.Map()
	n := len(blobs)
	errs := make([]error, n)
	copies := make([]placement.Copies, n)
	tallies := make([]tally, n)
	decided := make([]bool, n)
	perNode := map[placement.NodeID][]int{}
	pending, sends := 0, 0
	decide := func(i int, err error) {
		decided[i] = true
		copies[i], errs[i] = tallies[i].copies(), err
	}
	// result counts the decided writes (once their stragglers are in) and
	// returns.
	result := func() ([]placement.Copies, []error) {
		for i := range copies {
			if decided[i] {
				copies[i] = tallies[i].copies()
				r.countWrite(copies[i], errs[i])
			}
		}
		return copies, errs
	}
	for i, b := range blobs {
		targets, t, err := newTally(m, b.Hash, pol)
		tallies[i] = t
		if err != nil {
			decide(i, err)
			continue
		}
		pending++
		sends += len(targets)
		for _, id := range targets {
			perNode[id] = append(perNode[id], i)
		}
	}
	if pending == 0 {
		return result()
	}
	type ack struct {
		i   int
		id  placement.NodeID
		err error
	}
	acks := make(chan ack, sends) // never blocks a sender
	bg, cancelBG := clock.WithTimeout(context.WithoutCancel(ctx), r.cfg.Clock, r.cfg.BackgroundTimeout)
	var wg sync.WaitGroup
	for id, idx := range perNode {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.sendMany(bg, id, blobs, idx, func(i int, err error) { acks <- ack{i, id, err} })
		}()
	}
	go func() { wg.Wait(); cancelBG() }()

	// Once every blob is decided, the targets that have not answered get
	// StragglerWait more (see Config.StragglerWait).
	var late <-chan time.Time
	straggling := func() int {
		n := 0
		for i := range tallies {
			if decided[i] && errs[i] == nil {
				n += tallies[i].left()
			}
		}
		return n
	}
	for pending > 0 || late != nil {
		select {
		case a := <-acks:
			if decided[a.i] {
				if errs[a.i] == nil && tallies[a.i].left() > 0 {
					tallies[a.i].add(a.id, a.err)
				}
				if late != nil && straggling() == 0 {
					return result()
				}
				continue
			}
			if done, err := tallies[a.i].add(a.id, a.err); done {
				decide(a.i, err)
				pending--
			}
			if pending == 0 && late == nil && straggling() > 0 {
				timer := clock.NewTimer(r.cfg.Clock, r.cfg.StragglerWait)
				defer timer.Stop()
				late = timer.C
			}
		case <-late:
			return result()
		case <-ctx.Done():
			if pending == 0 {
				return result()
			}
			cancelBG()
			for i := range errs {
				if !decided[i] {
					copies[i], errs[i] = tallies[i].copies(), ctx.Err()
				}
			}
			return result()
		}
	}
	return result()
}

// sendMany stores blobs[idx...] on node id and reports each blob's outcome
// once through report.
func (r *Replicator) sendMany(ctx context.Context, id placement.NodeID, blobs []cas.Blob, idx []int, report func(i int, err error)) {
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
			put := make([]cas.Blob, len(chunk))
			for k, i := range chunk {
				put[k] = blobs[i]
			}
			cctx, cancel := clock.WithTimeout(ctx, r.cfg.Clock, r.cfg.WriteTimeout)
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
func (r *Replicator) putEach(ctx context.Context, id placement.NodeID, blobs []cas.Blob, idx []int, report func(i int, err error)) {
	var wg sync.WaitGroup
	for _, i := range idx {
		wg.Add(1)
		go func() {
			defer wg.Done()
			report(i, r.put(ctx, id, blobs[i]))
		}()
	}
	wg.Wait()
}
