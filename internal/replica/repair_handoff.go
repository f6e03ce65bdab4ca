package replica

import (
	"context"
	"fmt"
	"slices"

	"github.com/cairn-fs/cairn/internal/cas"
	"github.com/cairn-fs/cairn/internal/clock"

	"github.com/cairn-fs/cairn/internal/blob"
	"github.com/cairn-fs/cairn/internal/minindex"
	"github.com/cairn-fs/cairn/internal/placement"
)

// copy states of one (blob, target) pair during a hand-off.
const (
	copyUnknown = iota
	copyConfirmed
	copyLacking
)

// handOff confirms (pushing where needed) the copies of a batch of
// hand-off candidates on their targets and drops the local copies that
// are fully confirmed. It returns an error only when ctx ended.
func (r *Repairer) handOff(ctx context.Context, p *pacer, batch []handoff, st *RepairStats) error {
	// state[i][j]: batch[i]'s copy on batch[i].targets[j].
	state := make([][]int, len(batch))
	byTarget := map[placement.NodeID][]int{}
	for i, c := range batch {
		state[i] = make([]int, len(c.targets))
		for _, t := range c.targets {
			byTarget[t] = append(byTarget[t], i)
		}
	}
	if err := r.askTargets(ctx, byTarget, func(i int) blob.Hash { return batch[i].h },
		func(t placement.NodeID, part []int, has []bool, err error) {
			if err != nil {
				// Unreachable: these copies stay unknown, so kept.
				r.cfg.Logger.Debug("repair: HasBlobs failed", "node", t, "err", err)
				return
			}
			for k, i := range part {
				j := slices.Index(batch[i].targets, t)
				if has[k] {
					state[i][j] = copyConfirmed
				} else {
					state[i][j] = copyLacking
				}
			}
		}); err != nil {
		return err
	}
	for i, c := range batch {
		var data []byte
		var rerr error
		for j, t := range c.targets {
			if state[i][j] != copyLacking {
				continue
			}
			if data == nil && rerr == nil {
				data, rerr = r.readLocal(c.h)
				if rerr != nil {
					r.cfg.Logger.Warn("repair: local copy unreadable; not handing it off", "hash", c.h.String(), "err", rerr)
				}
			}
			if rerr != nil {
				st.PushFailed++
				continue
			}
			if err := p.wait(ctx, len(data)); err != nil {
				return err
			}
			if err := r.putBlob(ctx, t, c.h, data); err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				st.PushFailed++
				r.cfg.Logger.Debug("repair: push failed", "hash", c.h.String(), "node", t, "err", err)
				continue
			}
			state[i][j] = copyConfirmed
			st.Pushed++
			st.PushedBytes += int64(len(data))
		}
	}
	// Drop what every target confirmed, if the map still agrees.
	var fresh *placement.Map
	for i, c := range batch {
		ok := len(c.targets) >= c.home && len(c.targets) > 0
		for j := range c.targets {
			ok = ok && state[i][j] == copyConfirmed
		}
		if ok {
			if fresh == nil {
				fresh = r.cfg.Map()
			}
			now := placement.Place(fresh, c.h, c.rf)
			ok = !slices.Contains(now.Targets, r.cfg.Self) && !now.IsHome(r.cfg.Self) &&
				len(now.Targets) >= len(now.Home)
			for _, t := range now.Targets {
				ok = ok && slices.Contains(c.targets, t)
			}
		}
		if !ok {
			st.Kept++
			continue
		}
		if err := r.cfg.Local.Delete(c.h); err != nil {
			st.Kept++
			r.cfg.Logger.Warn("repair: dropping a handed-off copy failed", "hash", c.h.String(), "err", err)
			continue
		}
		st.Dropped++
	}
	return nil
}

// askTargets asks every target t of byTarget (in ID order) which of the
// blobs hashOf(i), i in byTarget[t], it holds, BatchSize hashes a HasBlobs
// call, and hands each answer to fn with the indices it covers (err: the
// call failed, has is nil). It returns only ctx's error.
func (r *Repairer) askTargets(ctx context.Context, byTarget map[placement.NodeID][]int, hashOf func(i int) blob.Hash,
	fn func(t placement.NodeID, part []int, has []bool, err error)) error {
	targets := make([]placement.NodeID, 0, len(byTarget))
	for t := range byTarget {
		targets = append(targets, t)
	}
	slices.Sort(targets)
	for _, t := range targets {
		idx := byTarget[t]
		for lo := 0; lo < len(idx); lo += r.cfg.BatchSize {
			part := idx[lo:min(lo+r.cfg.BatchSize, len(idx))]
			hs := make([]blob.Hash, len(part))
			for k, i := range part {
				hs[k] = hashOf(i)
			}
			has, err := r.hasBlobs(ctx, t, hs)
			if err != nil && ctx.Err() != nil {
				return ctx.Err()
			}
			fn(t, part, has, err)
		}
	}
	return nil
}

func (r *Repairer) hasBlobs(ctx context.Context, to placement.NodeID, hs []blob.Hash) ([]bool, error) {
	ctx, cancel := clock.WithTimeout(r.withApplied(ctx), r.cfg.Clock, r.cfg.RequestTimeout)
	defer cancel()
	has, err := r.cfg.Peers.HasBlobs(ctx, to, hs)
	if err == nil && len(has) != len(hs) {
		err = fmt.Errorf("HasBlobs answered %d of %d hashes", len(has), len(hs))
	}
	return has, err
}

// withApplied returns ctx carrying this node's applied index as the
// minimum the target must have applied (see RepairConfig.AppliedIndex).
func (r *Repairer) withApplied(ctx context.Context) context.Context {
	if r.cfg.AppliedIndex == nil {
		return ctx
	}
	return minindex.With(ctx, r.cfg.AppliedIndex())
}

func (r *Repairer) putBlob(ctx context.Context, to placement.NodeID, h blob.Hash, data []byte) error {
	ctx = r.withApplied(ctx)
	ctx, cancel := clock.WithTimeout(ctx, r.cfg.Clock, r.cfg.RequestTimeout)
	defer cancel()
	return r.cfg.Peers.PutBlob(ctx, to, cas.Blob{Hash: h, Data: data})
}
