package node

import (
	"log/slog"
	"testing"
	"time"

	"github.com/cairn-fs/cairn/internal/placement"
)

func TestGossipBind(t *testing.T) {
	for _, tc := range []struct {
		listen, gossip string
		host           string
		port           int
		explicit       bool
	}{
		{"127.0.0.1:8080", "", "127.0.0.1", 8180, false},
		{"127.0.0.1:0", "", "127.0.0.1", 0, false},
		{":8081", "", "0.0.0.0", 8181, false},
		{"127.0.0.1:65500", "", "127.0.0.1", 0, false},
		{"127.0.0.1:8080", "10.0.0.5:7946", "10.0.0.5", 7946, true},
		{"127.0.0.1:8080", "localhost:7000", "127.0.0.1", 7000, true},
	} {
		host, port, explicit, err := gossipBind(Config{Listen: tc.listen, GossipListen: tc.gossip})
		if err != nil || host != tc.host || port != tc.port || explicit != tc.explicit {
			t.Errorf("gossipBind(%q, %q) = %q, %d, %v, %v; want %q, %d, %v", tc.listen, tc.gossip,
				host, port, explicit, err, tc.host, tc.port, tc.explicit)
		}
	}
	if _, _, _, err := gossipBind(Config{Listen: "127.0.0.1:8080", GossipListen: "nope"}); err == nil {
		t.Error("bad --gossip-listen accepted")
	}
}

func TestJoinExtra(t *testing.T) {
	e := parseJoinExtra(joinExtra{GossipAddr: "127.0.0.1:1", GossipSeeds: []string{"a:1"}}.marshal())
	if e.GossipAddr != "127.0.0.1:1" || len(e.GossipSeeds) != 1 {
		t.Fatalf("round trip: %+v", e)
	}
	if e := parseJoinExtra([]byte("{bad")); e.GossipAddr != "" {
		t.Fatalf("bad extra: %+v", e)
	}
}

// TestLivenessInProcess runs three cluster nodes in one process: every node
// records its gossip address in the cluster map and sees the others Live;
// a node that shuts down is Dead in the others' placement maps within a few
// seconds.
func TestLivenessInProcess(t *testing.T) {
	const secret = "liveness-test-cluster-secret-0123"
	closed := map[*Node]bool{} // Node.Close must run once
	start := func(join string) *Node {
		cfg := DefaultConfig()
		cfg.DataDir = t.TempDir()
		cfg.Listen = "127.0.0.1:0"
		cfg.AdminKey = "liveness-test-admin-key-0123456789"
		cfg.ClusterSecret = secret
		cfg.Join = join
		cfg.GCInterval = time.Hour
		cfg.RepairGrace = 1500 * time.Millisecond
		cfg.Logger = slog.New(slog.DiscardHandler)
		n, err := Start(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if !closed[n] {
				n.Close()
			}
		})
		return n
	}
	wait := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	n1 := start("")
	n2 := start(n1.URL)
	n3 := start(n1.URL)
	nodes := []*Node{n1, n2, n3}
	states := func(n *Node) map[uint64]placement.State {
		out := map[uint64]placement.State{}
		for _, nd := range n.cl.core.Map().Nodes() {
			out[uint64(nd.ID)] = nd.State
		}
		return out
	}
	wait("cluster map with gossip addresses, all alive", func() bool {
		for _, n := range nodes {
			ns, err := n.cl.reader.Nodes()
			if err != nil || len(ns) != 3 {
				return false
			}
			for _, nd := range ns {
				if nd.GossipAddr == "" {
					return false
				}
				if d := n.cl.lv.det.Load(); d == nil || !d.Alive(nd.ID) {
					return false
				}
			}
			for _, st := range states(n) {
				if st != placement.Live {
					return false
				}
			}
		}
		return true
	})
	id3 := n3.cl.id
	gossip3 := n3.cl.lv.gossipAddr()
	if nd, err := n1.cl.reader.Node(id3); err != nil || nd.GossipAddr != gossip3 {
		t.Fatalf("node 3's record: %+v, %v; want gossip %s", nd, err, gossip3)
	}
	closedAt := time.Now()
	closed[n3] = true
	n3.Close()
	wait("node 3 dead on nodes 1 and 2", func() bool {
		return states(n1)[id3] == placement.Dead && states(n2)[id3] == placement.Dead
	})
	t.Logf("node 3 marked dead %v after its shutdown", time.Since(closedAt).Round(time.Millisecond))
	if got := n1.cl.lv.livenessOf(id3); got != "left" { // Close leaves the gossip gracefully
		t.Fatalf("node 3's liveness on node 1: %q, want left", got)
	}
	if got := n1.cl.lv.livenessOf(n2.cl.id); got != "alive" {
		t.Fatalf("node 2's liveness on node 1: %q, want alive", got)
	}
	// The repair grace: node 3's copies are not re-made elsewhere until it
	// has been dead for --repair-grace (1.5 s here).
	deadAt := time.Now()
	if n1.cl.lv.deadPastGrace(placement.NodeID(id3)) {
		t.Fatal("node 3 past its repair grace as soon as it is dead")
	}
	wait("node 3 past the repair grace on node 1", func() bool { return n1.cl.lv.deadPastGrace(placement.NodeID(id3)) })
	if d := time.Since(deadAt); d > 5*time.Second {
		t.Fatalf("grace of 1.5 s ran out after %v", d)
	}
	if n1.cl.lv.deadPastGrace(placement.NodeID(n2.cl.id)) {
		t.Fatal("a live node is past the repair grace")
	}
}
