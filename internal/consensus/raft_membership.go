package consensus

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// ErrBadMembership is returned by a membership change that makes no sense
// in the current configuration (promote a node that is not a learner,
// demote a voter through AddLearner, remove the last voter).
var ErrBadMembership = errors.New("consensus: invalid membership change")

// errRetry wakes a membership change whose proposal may have been dropped.
var errRetry = errors.New("consensus: retry")

// Members returns the configuration as of the applied index (a copy).
func (r *Raft) Members() *pb.ConfState {
	r.amu.Lock()
	defer r.amu.Unlock()
	return proto.Clone(r.members).(*pb.ConfState)
}

// AddVoter adds id as a voter (or promotes it if it is a learner) and
// blocks until the change is applied locally. Prefer AddLearner then
// Promote for a new node, so it catches up before it counts for quorum.
// Membership changes are idempotent and re-proposed every RetryTicks until
// applied or ctx ends (ErrUnavailable).
func (r *Raft) AddVoter(ctx context.Context, id uint64) error {
	return r.changeConf(ctx, pb.ConfChangeAddNode, id, func(cs *pb.ConfState) (bool, error) {
		return slices.Contains(cs.GetVoters(), id), nil
	})
}

// AddLearner adds id as a non-voting learner that receives the whole log.
// It fails with ErrBadMembership if id is a voter. See AddVoter.
func (r *Raft) AddLearner(ctx context.Context, id uint64) error {
	return r.changeConf(ctx, pb.ConfChangeAddLearnerNode, id, func(cs *pb.ConfState) (bool, error) {
		if slices.Contains(cs.GetVoters(), id) {
			return false, fmt.Errorf("%w: %d is a voter", ErrBadMembership, id)
		}
		return slices.Contains(cs.GetLearners(), id), nil
	})
}

// Promote turns learner id into a voter. ErrBadMembership if id is not a
// member. See AddVoter.
func (r *Raft) Promote(ctx context.Context, id uint64) error {
	return r.changeConf(ctx, pb.ConfChangeAddNode, id, func(cs *pb.ConfState) (bool, error) {
		if slices.Contains(cs.GetVoters(), id) {
			return true, nil
		}
		if !slices.Contains(cs.GetLearners(), id) {
			return false, fmt.Errorf("%w: %d is not a learner", ErrBadMembership, id)
		}
		return false, nil
	})
}

// Remove removes voter or learner id. Removing the last voter fails with
// ErrBadMembership. A removed leader steps down. See AddVoter.
func (r *Raft) Remove(ctx context.Context, id uint64) error {
	return r.changeConf(ctx, pb.ConfChangeRemoveNode, id, func(cs *pb.ConfState) (bool, error) {
		isVoter := slices.Contains(cs.GetVoters(), id)
		if isVoter && len(cs.GetVoters()) == 1 {
			return false, fmt.Errorf("%w: %d is the last voter", ErrBadMembership, id)
		}
		return !isVoter && !slices.Contains(cs.GetLearners(), id), nil
	})
}

// EnsureVoters is the promotion policy: if this node is the leader and the
// group has fewer than target voters, it promotes the most caught-up,
// learner heard from within an election timeout (lagging at most PromoteMaxLag entries) and
// returns its ID. It returns 0 when there is nothing to do or this node is
// not the leader. It never demotes. The leader runs it on its own every
// ElectionTicks with target = Voters unless DisableAutoPromote.
func (r *Raft) EnsureVoters(ctx context.Context, target int) (uint64, error) {
	res := make(chan uint64, 1)
	if err := r.do(ctx, func() { res <- r.promotionCandidate(target) }); err != nil {
		return 0, err
	}
	var cand uint64
	select {
	case cand = <-res:
	case <-ctx.Done():
		return 0, fmt.Errorf("%w: %w", ErrUnavailable, ctx.Err())
	case <-r.done:
		return 0, r.stopErr()
	}
	if cand == 0 {
		return 0, nil
	}
	return cand, r.Promote(ctx, cand)
}

func (r *Raft) changeConf(ctx context.Context, t pb.ConfChangeType, id uint64, satisfied func(*pb.ConfState) (bool, error)) error {
	for {
		if ok, err := satisfied(r.Members()); err != nil || ok {
			return err
		}
		w := r.newWaiter()
		cc := &pb.ConfChangeV2{
			Changes: []*pb.ConfChangeSingle{{Type: t.Enum(), NodeId: new(id)}},
			Context: encodeConfContext(r.id, w.id),
		}
		if err := r.do(ctx, func() {
			w.issued = r.ticks
			r.confWait = append(r.confWait, w)
			if err := r.rn.ProposeConfChange(cc); err != nil {
				r.log.Debug("membership change not proposed; will retry", "change", t.String(), "peer", id, "err", err)
			}
		}); err != nil {
			r.forget(w.id)
			return err
		}
		o, err := r.wait(ctx, w)
		if err != nil {
			return err
		}
		if o.err != nil && !errors.Is(o.err, errRetry) {
			return o.err
		}
	}
}

// promotionCandidate returns the learner to promote, or 0 (see
// EnsureVoters). Loop goroutine only.
func (r *Raft) promotionCandidate(target int) uint64 {
	cs := r.st.cs
	if r.rn.BasicStatus().RaftState != raft.StateLeader || len(cs.GetVoters()) >= target ||
		len(cs.GetVotersOutgoing()) > 0 || len(cs.GetLearners()) == 0 {
		return 0
	}
	st := r.rn.Status()
	var best, bestMatch uint64
	bestFirst := false
	for _, id := range cs.GetLearners() {
		pr, ok := st.Progress[id]
		// Heard from within an election timeout (raft's RecentActive is
		// reset at every CheckQuorum round, so it is often false).
		heard, seen := r.heard[id]
		if !ok || !seen || r.ticks-heard > int64(r.cfg.ElectionTicks) || pr.Match+r.cfg.PromoteMaxLag < r.st.last {
			continue
		}
		if r.cfg.NeverPromote != nil && r.cfg.NeverPromote(id) {
			continue
		}
		first := r.cfg.PromoteFirst != nil && r.cfg.PromoteFirst(id)
		if best == 0 || (first && !bestFirst) || (first == bestFirst && pr.Match > bestMatch) {
			best, bestMatch, bestFirst = id, pr.Match, first
		}
	}
	return best
}
