package replica

import (
	"context"
	"slices"

	"github.com/cairn-fs/cairn/internal/clock"

	"github.com/cairn-fs/cairn/internal/blob"
	"github.com/cairn-fs/cairn/internal/placement"
)

// handoff is a local copy that belongs elsewhere.
type handoff struct {
	h       blob.Hash
	rf      int
	home    int // copies required before dropping
	targets []placement.NodeID
}

// RunOnce runs one pass (see the comment at the top of repair.go). It
// returns an error only when Referenced fails or ctx ends; blobs that
// could not be moved are counted in the stats and retried next pass.
func (r *Repairer) RunOnce(ctx context.Context) (RepairStats, error) {
	r.pass.Lock()
	defer r.pass.Unlock()
	r.begin()
	start := r.cfg.Clock.Now()
	var st RepairStats
	m := r.cfg.Map()
	if n, ok := m.Node(r.cfg.Self); ok && n.State == placement.Dead {
		r.cfg.Logger.Debug("repair skipped: the map says this node is dead")
		r.end(st, false)
		return st, nil
	}
	p := newPacer(r.cfg.Clock, r.cfg.BlobsPerSec, r.cfg.BytesPerSec)
	var batch []handoff
	var perr error // a pacing wait cut by ctx
	pl := r.newPullers(m, p)
	err := r.cfg.Referenced(ctx, func(h blob.Hash, rf int) bool {
		if ctx.Err() != nil {
			return false
		}
		st.Checked++
		rf = r.normalize(rf)
		plan := placement.Place(m, h, rf)
		target := slices.Contains(plan.Targets, r.cfg.Self)
		has := r.cfg.Local.Has(h)
		switch {
		case target && !has && r.owed(plan):
			pl.pull(ctx, h)
			perr = ctx.Err()
		case has && !target && !plan.IsHome(r.cfg.Self):
			batch = append(batch, handoff{h: h, rf: rf, home: len(plan.Home), targets: plan.Targets})
			if len(batch) >= r.cfg.BatchSize {
				perr = r.handOff(ctx, p, batch, &st)
				batch = batch[:0]
			}
		}
		return perr == nil
	})
	if err == nil && perr == nil && len(batch) > 0 {
		perr = r.handOff(ctx, p, batch, &st)
	}
	pst := pl.wait()
	st.Pulled, st.PulledBytes, st.PullFailed = pst.Pulled, pst.PulledBytes, pst.PullFailed
	st.Duration = clock.Since(r.cfg.Clock, start)
	r.end(st, false)
	if err == nil {
		err = perr
	}
	if err == nil {
		err = ctx.Err()
	}
	return st, err
}

// owed reports whether this node, a target of plan, should hold its copy
// now: always as a home node; as a stand-in once an absent home node has
// been dead past the grace period.
func (r *Repairer) owed(plan placement.Plan) bool {
	if r.cfg.DeadPastGrace == nil || plan.IsHome(r.cfg.Self) {
		return true
	}
	for _, id := range plan.Absent() {
		if r.cfg.DeadPastGrace(id) {
			return true
		}
	}
	return false
}

// normalize turns a reported replication factor into one Place accepts.
func (r *Repairer) normalize(rf int) int {
	if rf == placement.Mirror || rf >= 1 {
		return rf
	}
	return r.cfg.DefaultReplicas
}
