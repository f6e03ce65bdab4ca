package replica

import (
	"context"
	"time"

	"github.com/cairn-fs/cairn/internal/clock"
)

// TriggerUnder asks Run for an under pass soon (see RunUnder). It never
// blocks.
func (r *Repairer) TriggerUnder() {
	select {
	case r.triggerUnder <- struct{}{}:
	default:
	}
}

// Trigger asks Run for a pass soon (a node came back, the map changed).
// It never blocks; triggers during a pass give one more pass after it.
func (r *Repairer) Trigger() {
	select {
	case r.trigger <- struct{}{}:
	default:
	}
}

// Run runs a full pass every Interval and soon after each Trigger, and an
// under pass after each full pass, soon after each TriggerUnder, and
// RetryUnder after one that made progress but left records pending, until
// ctx ends. Errors are logged; the next pass retries.
func (r *Repairer) Run(ctx context.Context) {
	t := clock.NewTimer(r.cfg.Clock, r.cfg.Interval)
	defer t.Stop()
	var retry <-chan time.Time // the next under pass's retry, if one is due
	var lastUnder time.Time
	for {
		full := false
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			full = true
		case <-r.trigger:
			full = true
		case <-r.triggerUnder:
		case <-retry:
		}
		if full {
			st, err := r.RunOnce(ctx)
			switch {
			case ctx.Err() != nil:
				return
			case err != nil:
				r.cfg.Logger.Warn("repair pass failed", "err", err)
			case !st.Settled():
				r.cfg.Logger.Info("repair pass", "checked", st.Checked, "pulled", st.Pulled,
					"pull_failed", st.PullFailed, "pushed", st.Pushed, "push_failed", st.PushFailed,
					"dropped", st.Dropped, "kept", st.Kept, "took", st.Duration)
			}
			if !t.Stop() {
				select {
				case <-t.C:
				default:
				}
			}
			t.Reset(r.cfg.Interval)
		}
		retry = nil
		if r.cfg.UnderReplicated == nil {
			continue
		}
		if wait := r.cfg.UnderGap - clock.Since(r.cfg.Clock, lastUnder); !full && wait > 0 {
			// A burst of triggers (every under-replicated write applied
			// while this node lacks its blob) runs one pass per gap.
			select {
			case <-ctx.Done():
				return
			case <-clock.After(r.cfg.Clock, wait):
			}
		}
		lastUnder = r.cfg.Clock.Now()
		st, err := r.RunUnder(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			r.cfg.Logger.Warn("under-replicated repair pass failed", "err", err)
		case st.Pulled+st.UnderCleared+st.PullFailed > 0:
			r.cfg.Logger.Info("under-replicated repair pass", "records", st.UnderChecked, "pulled", st.Pulled,
				"pull_failed", st.PullFailed, "cleared", st.UnderCleared, "pending", st.UnderPending, "took", st.Duration)
		}
		if err == nil && st.UnderPending > 0 && st.Pulled+st.UnderCleared > 0 {
			retry = clock.After(r.cfg.Clock, r.cfg.RetryUnder)
		}
	}
}
