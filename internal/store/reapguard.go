package store

import (
	"context"
	"fmt"
	"sync"

	"github.com/cairn-fs/cairn/internal/clock"

	"github.com/cairn-fs/cairn/internal/blob"
	"github.com/cairn-fs/cairn/internal/consensus"
)

// reapGuard keeps a reap this node applies from deleting a copy of a blob
// that a peer's upload, accepted by the log, relies on.
//
// The race it closes, found by internal/sim: an upload that saw a reap of
// blob h at index X (it started from index S >= X, so the log accepts its
// reference to h) sends h to a replica that lags behind X. The replica
// stores h (or keeps the copy it has), then applies the reap and deletes
// h: the refcount is still 0 there, the upload's commit comes later in the
// log. The file is acknowledged with one copy fewer, or none.
//
// Each replica put carries the upload's start index S. The replica first
// waits until it has applied S (GuardReplicaPut), then cancels any
// deletion still queued for h (a reap applied here: doomed). Should the
// guard's view of the applied index still be behind S (it advances only
// with entries that carry commands), the put is also remembered (ahead[h]
// = S) until S is applied: a reap at X <= S applied meanwhile does not doom
// h. Sparing a copy is always safe: an
// upload that is then refused leaves an orphan, which the orphan sweep
// collects. The deleter takes a blob's approval only after startDelete has
// blocked pins, and puts hold a pin, so a put and a deletion never
// interleave.
type reapGuard struct {
	mu      sync.Mutex
	applied uint64                 // last index passed to applied
	doomed  map[blob.Hash]struct{} // approved for deletion, not yet deleted
	ahead   map[blob.Hash]uint64   // replica puts from start indexes > applied
	minAhd  uint64                 // smallest value in ahead (0: empty)
	// reapedAt: the index of the last reap of a blob applied since the KV
	// was last synced (at index synced). Applies are committed without
	// sync: a crash can undo them, and the log then replays the reap. A
	// put of such a blob syncs first, so the replay cannot happen after it.
	reapedAt map[blob.Hash]uint64
	synced   uint64
	// stored: blobs put by a replica put since the orphan sweep last
	// looked (takeStored); storedAll when more than maxStored were.
	stored    map[blob.Hash]struct{}
	storedAll bool
}

// maxStored bounds reapGuard.stored; past it the sweep treats every
// orphan as stored again (it only waits longer).
const maxStored = 1 << 16

func newReapGuard() *reapGuard {
	return &reapGuard{doomed: map[blob.Hash]struct{}{}, ahead: map[blob.Hash]uint64{}, reapedAt: map[blob.Hash]uint64{},
		stored: map[blob.Hash]struct{}{}}
}

// takeStored returns the blobs stored by replica puts since the last
// call (all: too many were to remember) and forgets them.
func (g *reapGuard) takeStored() (hs map[blob.Hash]struct{}, all bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	hs, all = g.stored, g.storedAll
	g.stored, g.storedAll = map[blob.Hash]struct{}{}, false
	return hs, all
}

// reaped records that the entry at index approved deleting hs; it returns
// those a replica put asks to keep are left out.
func (g *reapGuard) reaped(index uint64, hs []blob.Hash) []blob.Hash {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := hs[:0:0]
	for _, h := range hs {
		g.reapedAt[h] = index
		if s, ok := g.ahead[h]; ok && s >= index {
			continue
		}
		g.doomed[h] = struct{}{}
		out = append(out, h)
	}
	return out
}

// appliedTo records that index is applied, forgetting the puts it covers.
func (g *reapGuard) appliedTo(index uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.applied = max(g.applied, index)
	if g.minAhd == 0 || g.minAhd > g.applied {
		return
	}
	g.minAhd = 0
	for h, s := range g.ahead {
		if s <= g.applied {
			delete(g.ahead, h)
		} else if g.minAhd == 0 || s < g.minAhd {
			g.minAhd = s
		}
	}
}

// put records a replica put of h from an upload that started at index
// start (0: unknown, e.g. a repair copy: treated as applied).
func (g *reapGuard) put(h blob.Hash, start uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	// Whatever reap doomed h here is applied, so at an index up to
	// applied: cancel it (sparing is safe even for a reap past start,
	// whose upload the log refuses: the copy becomes an orphan).
	delete(g.doomed, h)
	if len(g.stored) < maxStored {
		g.stored[h] = struct{}{}
	} else {
		g.storedAll = true
	}
	if start <= g.applied {
		return
	}
	if s, ok := g.ahead[h]; !ok || start > s {
		g.ahead[h] = start
	}
	if g.minAhd == 0 || start < g.minAhd {
		g.minAhd = start
	}
}

// needSync reports whether a reap of one of hs was applied since the KV was
// last synced.
func (g *reapGuard) needSync(hs []blob.Hash) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, h := range hs {
		if x, ok := g.reapedAt[h]; ok && x > g.synced {
			return true
		}
	}
	return false
}

// maxUnsyncedReaps bounds reapGuard.reapedAt: past it, Applied syncs.
const maxUnsyncedReaps = 1 << 16

// unsyncedReaps returns the number of blobs in reapedAt.
func (g *reapGuard) unsyncedReaps() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.reapedAt)
}

// didSync records that the KV was synced with index applied.
func (g *reapGuard) didSync(index uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if index <= g.synced {
		return
	}
	g.synced = index
	for h, x := range g.reapedAt {
		if x <= index {
			delete(g.reapedAt, h)
		}
	}
}

// take reports whether h's deletion is still wanted, and forgets it.
func (g *reapGuard) take(h blob.Hash) bool {
	g.mu.Lock()
	_, ok := g.doomed[h]
	delete(g.doomed, h)
	g.mu.Unlock()
	return ok
}

// GuardReplicaPut readies this node to store blobs hs that a peer's upload
// sends it as a replica; call release once they are stored. minIndex is
// the index the upload started from (minindex.From; 0: none, e.g. a
// repair copy). It first waits until this node has applied minIndex
// (usually at once: a replica lags the uploader by milliseconds), so that
// every reap the upload saw is applied here and recorded as applied on
// disk: a crash after the put cannot replay such a reap over the copy.
// Then each blob is pinned (waiting out a deletion in progress, after
// which the put writes a fresh copy) and its queued deletion, if any, is
// cancelled (see reapGuard). A node that cannot apply minIndex in time
// refuses the put (ErrUnavailable): the uploader counts it as a failed
// replica, as it would a dead one.
func (s *Local) GuardReplicaPut(ctx context.Context, minIndex uint64, hs []blob.Hash) (release func(), err error) {
	if minIndex > s.log.AppliedIndex() {
		if ri, ok := s.log.(consensus.ReadIndexer); ok {
			wctx, cancel := clock.WithTimeout(ctx, s.cfg.Clock, s.cfg.ReplicaPutWait)
			err := ri.WaitApplied(wctx, minIndex)
			cancel()
			if err != nil {
				return nil, fmt.Errorf("%w: replica put: this node has applied index %d, not yet the upload's start %d: %v",
					ErrUnavailable, s.log.AppliedIndex(), minIndex, err)
			}
		}
	}
	if s.reap.needSync(hs) {
		// This node applied a reap of one of hs and has not made it
		// durable: a crash would undo it and replay it over the copy.
		s.syncMu.Lock()
		if s.reap.needSync(hs) {
			index := s.log.AppliedIndex()
			if err := s.kv.Sync(); err != nil {
				s.syncMu.Unlock()
				return nil, fmt.Errorf("%w: replica put: sync the namespace: %v", ErrUnavailable, err)
			}
			s.reap.didSync(index)
		}
		s.syncMu.Unlock()
	}
	for _, h := range hs {
		s.pins.pin(h)
		s.reap.put(h, minIndex)
	}
	return func() {
		for _, h := range hs {
			s.pins.unpin(h)
		}
	}, nil
}
