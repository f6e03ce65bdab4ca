package replica

import (
	"context"
	"fmt"
	"slices"

	"github.com/cairn-fs/cairn/internal/clock"

	"github.com/cairn-fs/cairn/internal/blob"
	"github.com/cairn-fs/cairn/internal/placement"
)

// RunUnder runs one under pass (see "Under-replicated blobs" at the top of
// repair.go). It returns an error when UnderReplicated or MarkReplicated
// fails or ctx ends.
func (r *Repairer) RunUnder(ctx context.Context) (RepairStats, error) {
	var st RepairStats
	if r.cfg.UnderReplicated == nil {
		return st, nil
	}
	r.pass.Lock()
	defer r.pass.Unlock()
	r.begin()
	start := r.cfg.Clock.Now()
	defer func() { st.Duration = clock.Since(r.cfg.Clock, start); r.end(st, true) }()
	m := r.cfg.Map()
	if n, ok := m.Node(r.cfg.Self); ok && n.State == placement.Dead {
		return st, nil
	}
	p := newPacer(r.cfg.Clock, r.cfg.BlobsPerSec, r.cfg.BytesPerSec)
	type check struct {
		h       blob.Hash
		targets []placement.NodeID
	}
	var checks, pulled []check
	pl := r.newPullers(m, p)
	err := r.cfg.UnderReplicated(func(h blob.Hash, rf int) bool {
		if ctx.Err() != nil {
			return false
		}
		st.UnderChecked++
		plan := placement.Place(m, h, r.normalize(rf))
		if !slices.Contains(plan.Targets, r.cfg.Self) {
			return true
		}
		complete := len(plan.Targets) >= len(plan.Home)
		switch {
		case r.cfg.Local.Has(h):
			if complete {
				checks = append(checks, check{h, plan.Targets})
			}
		case r.owed(plan):
			pl.pull(ctx, h)
			if complete {
				pulled = append(pulled, check{h, plan.Targets})
			}
		}
		return ctx.Err() == nil
	})
	pst := pl.wait()
	st.Pulled, st.PulledBytes, st.PullFailed = pst.Pulled, pst.PulledBytes, pst.PullFailed
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		return st, err
	}
	for _, c := range pulled {
		if r.cfg.Local.Has(c.h) {
			checks = append(checks, c)
		}
	}
	// Confirm the copies on the other targets.
	missing := make([]bool, len(checks))
	byTarget := map[placement.NodeID][]int{}
	for i, c := range checks {
		for _, t := range c.targets {
			if t != r.cfg.Self {
				byTarget[t] = append(byTarget[t], i)
			}
		}
	}
	if err := r.askTargets(ctx, byTarget, func(i int) blob.Hash { return checks[i].h },
		func(_ placement.NodeID, part []int, has []bool, err error) {
			for k, i := range part {
				missing[i] = missing[i] || err != nil || !has[k]
			}
		}); err != nil {
		return st, err
	}
	var done []blob.Hash
	for i, c := range checks {
		if missing[i] {
			st.UnderPending++
		} else {
			done = append(done, c.h)
		}
	}
	for lo := 0; lo < len(done); lo += markChunk {
		part := done[lo:min(lo+markChunk, len(done))]
		if err := r.cfg.MarkReplicated(ctx, part); err != nil {
			return st, fmt.Errorf("mark %d blobs replicated: %w", len(part), err)
		}
		st.UnderCleared += int64(len(part))
	}
	return st, nil
}

// markChunk is the most blobs one MarkReplicated call (one log command)
// carries.
const markChunk = 4096
