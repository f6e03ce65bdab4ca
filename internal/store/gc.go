package store

import (
	"context"
	"time"

	"github.com/cairn-fs/cairn/internal/clock"

	"github.com/cairn-fs/cairn/internal/blob"
	"github.com/cairn-fs/cairn/internal/meta"
)

// GCStats reports what one GC pass did.
type GCStats struct {
	Reaped    int // unreferenced blobs whose deletion the log approved
	Orphans   int // copies nothing referenced whose deletion the log approved (OpReapOrphans)
	Compacted int // volumes compacted
}

func (s *Local) gcLoop() {
	defer s.wg.Done()
	t := clock.NewTicker(s.cfg.Clock, s.cfg.GCInterval)
	defer t.Stop()
	orphans := make(map[blob.Hash]time.Time)
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			ctx, cancel := clock.WithTimeout(context.Background(), s.cfg.Clock, s.cfg.GCInterval)
			st, err := s.gc(ctx, orphans)
			cancel()
			if err != nil {
				s.cfg.Logger.Warn("garbage collection pass failed", "err", err)
			} else if st.Reaped+st.Orphans+st.Compacted > 0 {
				s.cfg.Logger.Info("garbage collection", "reaped", st.Reaped, "orphans", st.Orphans, "compacted", st.Compacted)
			}
		}
	}
}

// GC runs one garbage-collection pass: blobs unreferenced for longer than
// GCGrace are reclaimed through the log (OpReap), orphan copies (written
// by uploads that never committed) seen for GCGrace are reclaimed
// through the log too (OpReapOrphans), then volumes with too much garbage
// are compacted. No copy is deleted but on an applied entry's word. orphans carries first-seen times
// between passes; pass nil to treat every orphan as old (tests).
func (s *Local) GC(ctx context.Context) (GCStats, error) {
	return s.gc(ctx, nil)
}

func (s *Local) gc(ctx context.Context, orphans map[blob.Hash]time.Time) (GCStats, error) {
	var st GCStats
	if err := s.expireTrash(ctx); err != nil { // trash.go: before the reap, which then frees their blobs
		s.cfg.Logger.Warn("trash expiry failed", "err", err)
	}
	if err := s.drainSnapshots(ctx); err != nil { // snapshot.go
		s.cfg.Logger.Warn("draining deleted snapshots failed", "err", err)
	}
	if err := s.runSchedules(ctx); err != nil { // snapschedule.go
		s.cfg.Logger.Warn("scheduled snapshots failed", "err", err)
	}
	now := s.cfg.Now()
	before := now.Add(-s.cfg.GCGrace).UnixNano()
	if orphans == nil {
		before = now.UnixNano() + 1
	}
	for {
		g, err := s.meta.Garbage(before, 1000)
		if err != nil {
			return st, mapErr(err)
		}
		if len(g) == 0 {
			break
		}
		hs := make([]blob.Hash, len(g))
		for i, e := range g {
			hs[i] = e.Hash
		}
		res, err := s.propose(ctx, meta.Command{Op: meta.OpReap, Reap: hs, ReapBefore: before,
			StartIndex: s.log.AppliedIndex()})
		if err != nil {
			return st, err
		}
		st.Reaped += len(res.Freed)
		// The entry's Applied queued the deletions; wait for them so that a
		// pass ends with the space reclaimable by compaction.
		s.del.wait()
		if len(res.Freed) == 0 || len(g) < 1000 {
			break
		}
	}

	// Orphans: local copies that no file references and no reap is
	// pending for (not tracked by meta), that no upload holds, seen for
	// GCGrace since this node last stored them. The sweep never deletes
	// one itself: it proposes OpReapOrphans, whose entry approves the
	// blobs still untracked when it applies and marks them reaped, so
	// the log refuses any upload that started before it and names one
	// (docs/design/0004-blob-deletion.md). The deletions then run where
	// every approved deletion runs: Applied, the reap guard, the deleter.
	var cands []blob.Hash
	s.blobs.Range(func(h blob.Hash, size int64) bool {
		if !s.pins.isHeld(h) {
			if tracked, err := s.meta.Tracked(h); err == nil && !tracked {
				cands = append(cands, h)
			}
		}
		return ctx.Err() == nil
	})
	// Copies stored again since the last pass (replica puts) start their
	// grace anew: an upload in flight is not refused needlessly.
	fresh, allFresh := s.reap.takeStored()
	if s.cfg.TestingLocalOrphanSweep {
		fresh, allFresh = nil, false // the old sweep: no grace restarted by a replica put
	}
	seen := make(map[blob.Hash]bool, len(cands))
	var due []blob.Hash
	for _, h := range cands {
		seen[h] = true
		if orphans != nil {
			first, ok := orphans[h]
			if _, again := fresh[h]; !ok || again || allFresh {
				orphans[h] = now
				continue
			}
			if now.Sub(first) < s.cfg.GCGrace {
				continue
			}
		}
		due = append(due, h)
	}
	for h := range orphans {
		if !seen[h] {
			delete(orphans, h)
		}
	}
	if s.cfg.TestingLocalOrphanSweep {
		// The sweep before issue 18, kept only for the simulator's proof
		// that it catches it (sim.TestSimCatchesLocalOrphanSweep): the
		// node deletes the copies on its own judgement, racing a peer's
		// upload that is about to name one.
		for _, h := range due {
			if s.blobs.Delete(h) == nil {
				st.Orphans++
			}
			delete(orphans, h)
		}
		due = nil
	}
	for len(due) > 0 {
		part := due[:min(len(due), 1000)]
		due = due[len(part):]
		res, err := s.propose(ctx, meta.Command{Op: meta.OpReapOrphans, Reap: part})
		if err != nil {
			return st, err
		}
		st.Orphans += len(res.Freed)
		for _, h := range part {
			delete(orphans, h)
		}
		s.del.wait()
	}

	n, err := s.blobs.Compact()
	st.Compacted = n
	if err != nil {
		return st, mapErr(err)
	}
	return st, nil
}
