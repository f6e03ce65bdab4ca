package consensus

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"

	"github.com/cairn-fs/cairn/internal/consensus/memnet"
)

// TestRaftRandomized runs a 3-node cluster (plus a learner) under message
// drops, duplicates, delays and reorders, random partitions and restarts,
// with proposals through random nodes. After healing it checks that every
// acknowledged proposal is applied on every node and that all nodes hold
// byte-identical namespaces at the same applied index. A failure prints
// the seed; CAIRN_RAFT_SEED=n replays one seed.
func TestRaftRandomized(t *testing.T) {
	seeds := []uint64{11, 22, 33, 44, 55}
	if s := os.Getenv("CAIRN_RAFT_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		seeds = []uint64{v}
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { randomRun(t, seed) })
	}
}

func randomRun(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	mod := func(cfg *RaftConfig) { cfg.CompactAfter, cfg.CompactMargin = 40, 10 }
	c := newCluster(t, seed, 3, mod)
	l := c.leader()
	c.mustPropose(l.id, bucketCmd)
	c.start(4, nil)
	c.wait("add learner", 300, func() error { return l.r.AddLearner(context.Background(), 4) })
	c.net.SetFaults(memnet.Faults{Drop: 0.1, Duplicate: 0.05, Delay: 0.1, MaxDelay: 4, Reorder: 0.1})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type pend struct {
		name string
		ch   <-chan propResult
	}
	var inflight []pend
	var acked []string
	collect := func() {
		keep := inflight[:0]
		for _, p := range inflight {
			select {
			case o := <-p.ch:
				if o.err == nil {
					if o.res.Err != nil {
						t.Fatalf("seed %d: %s: %v", seed, p.name, o.res.Err)
					}
					acked = append(acked, p.name)
				}
			default:
				keep = append(keep, p)
			}
		}
		inflight = keep
	}
	ids := []uint64{1, 2, 3, 4}
	next := 0
	for step := range 400 {
		c.settle()
		collect()
		// New proposals through random running nodes.
		for range rng.IntN(4) {
			n := c.nodes[ids[rng.IntN(len(ids))]]
			if n.r == nil {
				continue
			}
			name := fmt.Sprintf("p%d", next)
			next++
			inflight = append(inflight, pend{name, goPropose(ctx, n, createFile(name))})
		}
		switch x := rng.IntN(100); {
		case x < 3:
			c.net.Isolate(ids[rng.IntN(len(ids))])
		case x < 5:
			a := ids[rng.IntN(3)]
			c.net.Partition([]uint64{a}, []uint64{ids[(int(a))%3]})
		case x < 12:
			c.net.Heal()
		case x < 14 && step < 300:
			// Restart a node over its store (at most one down at a time).
			id := ids[rng.IntN(len(ids))]
			if c.nodes[id].r != nil {
				c.stop(id)
				c.settle()
				c.start(id, nil)
			}
		}
		c.tickAll()
	}
	// Heal, stop the faults, let in-flight proposals finish, then converge.
	c.net.Heal()
	c.net.SetFaults(memnet.Faults{})
	c.until("in-flight proposals answered", 600, func() bool {
		collect()
		return len(inflight) == 0
	})
	idx := c.converge()
	c.checkHas(acked)
	for _, n := range c.nodes {
		if d := n.dupes.Load(); d > 0 {
			t.Fatalf("seed %d: node %d applied %d proposals twice", seed, n.id, d)
		}
	}
	st := c.net.Stats()
	t.Logf("seed %d: %d/%d proposals acknowledged, applied index %d, net %+v", seed, len(acked), next, idx, st)
	if len(acked) < next/2 {
		t.Fatalf("seed %d: only %d of %d proposals acknowledged", seed, len(acked), next)
	}
}
