package placement

import "testing"

func TestPolicyWantedAndQuorum(t *testing.T) {
	witness := Node{ID: 99, State: Witness}
	dead := func(ns []Node, i int) []Node { ns[i].State = Dead; return ns }
	drain := func(ns []Node, i int) []Node { ns[i].State = Draining; return ns }
	cases := []struct {
		name         string
		nodes        []Node
		p            Policy
		wantR, wantW int
	}{
		{"one node, default R=3", equalNodes(1), Policy{Replicas: 3}, 1, 1},
		{"two nodes and a witness", append(equalNodes(2), witness), Policy{Replicas: 3}, 2, 2},
		{"two nodes, W=1", equalNodes(2), Policy{Replicas: 3, WriteQuorum: 1}, 2, 1},
		{"three nodes", equalNodes(3), Policy{Replicas: 3}, 3, 2},
		{"three nodes, one dead: still wanted", dead(equalNodes(3), 1), Policy{Replicas: 3}, 3, 2},
		{"draining nodes are not data nodes", drain(equalNodes(3), 0), Policy{Replicas: 3}, 2, 2},
		{"five nodes, R=3", equalNodes(5), Policy{Replicas: 3}, 3, 2},
		{"W above R is all of R", equalNodes(2), Policy{Replicas: 3, WriteQuorum: 5}, 2, 2},
		{"mirror", equalNodes(4), Policy{Replicas: Mirror}, 4, 3},
		{"mirror, W=1", equalNodes(4), Policy{Replicas: Mirror, WriteQuorum: 1}, 4, 1},
		{"no data node", []Node{witness}, Policy{Replicas: 3}, 0, 0},
	}
	for _, c := range cases {
		m := mustMap(t, c.nodes)
		if got := c.p.Wanted(m); got != c.wantR {
			t.Errorf("%s: Wanted = %d, want %d", c.name, got, c.wantR)
		}
		if got := c.p.Quorum(m); got != c.wantW {
			t.Errorf("%s: Quorum = %d, want %d", c.name, got, c.wantW)
		}
	}
}

func TestCopiesUnder(t *testing.T) {
	for _, c := range []struct {
		c    Copies
		want bool
	}{{Copies{1, 2}, true}, {Copies{2, 2}, false}, {Copies{3, 2}, false}, {Copies{0, 0}, false}} {
		if got := c.c.Under(); got != c.want {
			t.Errorf("%+v.Under() = %v, want %v", c.c, got, c.want)
		}
	}
}
