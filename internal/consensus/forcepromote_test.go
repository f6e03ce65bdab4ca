package consensus

import (
	"context"
	"slices"
	"testing"
)

// TestPromoteFirst: among caught-up learners, the leader promotes those
// RaftConfig.PromoteFirst marks (witnesses) before the others, even when
// another learner is further ahead.
func TestPromoteFirst(t *testing.T) {
	c := newCluster(t, 11, 1, func(cfg *RaftConfig) {
		cfg.DisableAutoPromote = true
		cfg.PromoteFirst = func(id uint64) bool { return id == 3 }
	})
	l := c.leader()
	c.mustPropose(l.id, bucketCmd)
	c.start(2, nil)
	c.start(3, nil)
	c.wait("add learner 2", 300, func() error { return l.r.AddLearner(context.Background(), 2) })
	c.wait("add learner 3", 300, func() error { return l.r.AddLearner(context.Background(), 3) })
	c.converge()
	var promoted uint64
	c.wait("promote one learner", 300, func() error {
		var err error
		promoted, err = l.r.EnsureVoters(context.Background(), 2)
		return err
	})
	if promoted != 3 {
		t.Fatalf("promoted %d, want the preferred learner 3", promoted)
	}
	if m := l.r.Members(); !slices.Equal(m.GetLearners(), []uint64{2}) {
		t.Fatalf("members: %v", m)
	}
}

// TestNeverPromote: a learner RaftConfig.NeverPromote marks (a client
// node) stays a learner, whoever asks for voters; the others are promoted.
func TestNeverPromote(t *testing.T) {
	c := newCluster(t, 11, 1, func(cfg *RaftConfig) {
		cfg.DisableAutoPromote = true
		cfg.NeverPromote = func(id uint64) bool { return id == 3 }
	})
	l := c.leader()
	c.mustPropose(l.id, bucketCmd)
	c.start(2, nil)
	c.start(3, nil)
	c.wait("add learner 2", 300, func() error { return l.r.AddLearner(context.Background(), 2) })
	c.wait("add learner 3", 300, func() error { return l.r.AddLearner(context.Background(), 3) })
	c.converge()
	var promoted uint64
	c.wait("promote a learner", 300, func() error {
		var err error
		promoted, err = l.r.EnsureVoters(context.Background(), 3)
		return err
	})
	if promoted != 2 {
		t.Fatalf("promoted %d, want learner 2", promoted)
	}
	c.converge()
	p, err := l.r.EnsureVoters(context.Background(), 3)
	if err == nil && p == 3 {
		t.Fatal("the learner marked never to be promoted was promoted")
	}
	if m := l.r.Members(); !slices.Equal(m.GetLearners(), []uint64{3}) {
		t.Fatalf("members: %v", m)
	}
}
