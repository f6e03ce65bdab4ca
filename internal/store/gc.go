package store

import (
	"context"
	"errors"
	"time"

	"github.com/cairn-fs/cairn/internal/blob"
	"github.com/cairn-fs/cairn/internal/meta"
)

// GCStats reports what one GC pass did.
type GCStats struct {
	Reaped    int // unreferenced blobs whose deletion the log approved
	Orphans   int // blobs with no namespace record deleted (failed uploads)
	Compacted int // volumes compacted
}

func (s *Local) gcLoop() {
	defer s.wg.Done()
	t := time.NewTicker(s.cfg.GCInterval)
	defer t.Stop()
	orphans := make(map[blob.Hash]time.Time)
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), s.cfg.GCInterval)
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
// GCGrace are reclaimed through the log, orphan blobs (written by uploads
// that never committed) are deleted once seen for GCGrace, then volumes
// with too much garbage are compacted. orphans carries first-seen times
// between passes; pass nil to treat every orphan as old (tests).
func (s *Local) GC(ctx context.Context) (GCStats, error) {
	return s.gc(ctx, nil)
}

func (s *Local) gc(ctx context.Context, orphans map[blob.Hash]time.Time) (GCStats, error) {
	var st GCStats
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

	// Orphans: present locally, no reference in the namespace, no upload
	// holding them.
	var cands []blob.Hash
	s.blobs.Range(func(h blob.Hash, size int64) bool {
		if !s.pins.isHeld(h) {
			if n, err := s.meta.RefCount(h); err == nil && n == 0 {
				cands = append(cands, h)
			}
		}
		return ctx.Err() == nil
	})
	seen := make(map[blob.Hash]bool, len(cands))
	for _, h := range cands {
		seen[h] = true
		if orphans != nil {
			first, ok := orphans[h]
			if !ok {
				orphans[h] = now
				continue
			}
			if now.Sub(first) < s.cfg.GCGrace {
				continue
			}
		}
		if !s.pins.startDelete(h) {
			continue
		}
		// Re-check under the deletion guard: an upload may have committed.
		if n, err := s.meta.RefCount(h); err == nil && n == 0 {
			if err := s.blobs.Delete(h); err == nil {
				st.Orphans++
			} else if !errors.Is(err, blob.ErrNotFound) {
				s.cfg.Logger.Warn("delete orphan blob", "hash", h.String(), "err", err)
			}
		}
		s.pins.endDelete(h)
		delete(orphans, h)
	}
	for h := range orphans {
		if !seen[h] {
			delete(orphans, h)
		}
	}

	n, err := s.blobs.Compact()
	st.Compacted = n
	if err != nil {
		return st, mapErr(err)
	}
	return st, nil
}
