package placement

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
)

func TestNewMap(t *testing.T) {
	inf := math.Inf(1)
	for _, tc := range []struct {
		name  string
		nodes []Node
		err   error
	}{
		{"empty", nil, nil},
		{"ok", []Node{{ID: 2, Weight: 1}, {ID: 1, Weight: 3, State: Dead, Zone: "b"}}, nil},
		{"witness needs no weight", []Node{{ID: 1, State: Witness}}, nil},
		{"id zero", []Node{{ID: 0, Weight: 1}}, ErrNodeID},
		{"duplicate", []Node{{ID: 7, Weight: 1}, {ID: 7, Weight: 2}}, ErrNodeID},
		{"zero weight", []Node{{ID: 1, Weight: 0}}, ErrWeight},
		{"negative weight", []Node{{ID: 1, Weight: -1}}, ErrWeight},
		{"NaN weight", []Node{{ID: 1, Weight: math.NaN()}}, ErrWeight},
		{"infinite weight", []Node{{ID: 1, Weight: inf}}, ErrWeight},
		{"draining needs weight", []Node{{ID: 1, State: Draining}}, ErrWeight},
		{"unknown state", []Node{{ID: 1, Weight: 1, State: Witness + 1}}, ErrState},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := NewMap(tc.nodes)
			if !errors.Is(err, tc.err) {
				t.Fatalf("NewMap err = %v, want %v", err, tc.err)
			}
			if err == nil && m.Len() != len(tc.nodes) {
				t.Fatalf("Len = %d, want %d", m.Len(), len(tc.nodes))
			}
		})
	}
}

func TestMapAccessors(t *testing.T) {
	in := []Node{{ID: 9, Zone: "b", Weight: 1}, {ID: 3, Zone: "a", Weight: 2, State: Dead}, {ID: 5, State: Witness, Zone: "w"}}
	m := mustMap(t, in)
	in[0].Weight = 100 // NewMap copied its input
	got := m.Nodes()
	if !slices.IsSortedFunc(got, func(a, b Node) int { return int(a.ID) - int(b.ID) }) || len(got) != 3 {
		t.Fatalf("Nodes = %v, want 3 nodes sorted by ID", got)
	}
	if n, ok := m.Node(9); !ok || n.Weight != 1 {
		t.Fatalf("Node(9) = %v, %v", n, ok)
	}
	if _, ok := m.Node(4); ok {
		t.Fatal("Node(4) found")
	}
	if z := m.Zones(); !slices.Equal(z, []string{"a", "b"}) {
		t.Fatalf("Zones = %q (witness zones are not data zones)", z)
	}
	if s := Draining.String(); s != "draining" {
		t.Fatalf("Draining.String() = %q", s)
	}
}

// TestDeterministic: the same members in any order, and the same blob, give
// the same answers, call after call.
func TestDeterministic(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	hs := hashes(3, 200)
	for trial := 0; trial < 200; trial++ {
		nodes := randomNodes(rng, 20, 1+rng.IntN(4))
		m1 := mustMap(t, nodes)
		shuffled := slices.Clone(nodes)
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		m2 := mustMap(t, shuffled)
		for _, h := range hs {
			r := 1 + rng.IntN(5)
			if a, b := Rank(m1, h), Rank(m2, h); !slices.Equal(a, b) {
				t.Fatalf("Rank depends on member order: %v vs %v", a, b)
			}
			if a, b := Rank(m1, h), Rank(m1, h); !slices.Equal(a, b) {
				t.Fatalf("Rank differs between calls: %v vs %v", a, b)
			}
			p1, p2 := Place(m1, h, r), Place(m2, h, r)
			if !slices.Equal(p1.Home, p2.Home) || !slices.Equal(p1.Targets, p2.Targets) {
				t.Fatalf("Place depends on member order: %+v vs %+v", p1, p2)
			}
			if a, b := Sources(m1, h), Sources(m2, h); !slices.Equal(a, b) {
				t.Fatalf("Sources depends on member order: %v vs %v", a, b)
			}
		}
	}
}

// modelRank is the ranking written from its definition, independently of
// Map.rank: score every data node; each zone's best node, zones ordered by
// it; then the rest by score. Ties break by lower ID.
func modelRank(nodes []Node, h [32]byte, keep func(State) bool) []NodeID {
	type sc struct {
		score float64
		n     Node
	}
	var all []sc
	for _, n := range nodes {
		if keep(n.State) {
			// The score of the design: weight / -ln(u); higher wins.
			all = append(all, sc{1 / key(nodeSeed(n.ID), 1/n.Weight, &h), n})
		}
	}
	better := func(a, b sc) bool { return a.score > b.score || a.score == b.score && a.n.ID < b.n.ID }
	best := map[string]sc{}
	for _, s := range all {
		if b, ok := best[s.n.Zone]; !ok || better(s, b) {
			best[s.n.Zone] = s
		}
	}
	var leaders, rest []sc
	for _, s := range all {
		if best[s.n.Zone].n.ID == s.n.ID {
			leaders = append(leaders, s)
		} else {
			rest = append(rest, s)
		}
	}
	sort.Slice(leaders, func(i, j int) bool { return better(leaders[i], leaders[j]) })
	sort.Slice(rest, func(i, j int) bool { return better(rest[i], rest[j]) })
	var out []NodeID
	for _, s := range append(leaders, rest...) {
		out = append(out, s.n.ID)
	}
	return out
}

func TestRankMatchesModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 5))
	hs := hashes(6, 100)
	isHome := func(s State) bool { return s == Live || s == Dead }
	isLive := func(s State) bool { return s == Live }
	for trial := 0; trial < 300; trial++ {
		// 80 nodes in up to 120 zones exercise the generic sort, the
		// heap buffers and the many-zones path.
		zones := 1 + rng.IntN(5)
		if trial%3 == 2 {
			zones = 1 + rng.IntN(120)
		}
		nodes := randomNodes(rng, []int{5, 20, 80}[trial%3], zones)
		m := mustMap(t, nodes)
		for _, h := range hs {
			want := modelRank(nodes, h, isHome)
			if got := Rank(m, h); !slices.Equal(got, want) {
				t.Fatalf("Rank = %v, model %v (nodes %+v)", got, want, nodes)
			}
			for _, r := range []int{1, 2, 3, 4, 8, 9, 30} {
				if got := Replicas(m, h, r); !slices.Equal(got, want[:min(r, len(want))]) {
					t.Fatalf("Replicas(r=%d) = %v, want prefix of %v", r, got, want)
				}
				wantLive := modelRank(nodes, h, isLive)
				if got := Place(m, h, r).Targets; !slices.Equal(got, wantLive[:min(r, len(wantLive))]) {
					t.Fatalf("Targets(r=%d) = %v, want prefix of %v", r, got, wantLive)
				}
			}
		}
	}
}

// TestOneZoneIsPlainHRW: with one zone the ranking is plain weighted
// rendezvous hashing, checked against scores computed with math.Log.
func TestOneZoneIsPlainHRW(t *testing.T) {
	nodes := []Node{{ID: 1, Weight: 1}, {ID: 2, Weight: 2}, {ID: 3, Weight: 1}, {ID: 4, Weight: 0.5}, {ID: 5, Weight: 3}}
	m := mustMap(t, nodes)
	for _, h := range hashes(7, 5000) {
		score := map[NodeID]float64{}
		for _, n := range nodes {
			score[n.ID] = -n.Weight / math.Log(unit(draw(nodeSeed(n.ID), &h)))
		}
		got := Rank(m, h)
		if !slices.IsSortedFunc(got, func(a, b NodeID) int {
			switch {
			case score[a] > score[b]:
				return -1
			case score[a] < score[b]:
				return 1
			}
			return 0
		}) {
			t.Fatalf("Rank = %v not in descending score order %v", got, score)
		}
	}
}

func TestNegLn(t *testing.T) {
	check := func(u float64) {
		got, want := negLn(u), -math.Log(u)
		if d := math.Abs(got - want); d > 2*ulp(want) {
			t.Fatalf("negLn(%v) = %v, math.Log gives %v (off by %v ulp)", u, got, want, d/ulp(want))
		}
	}
	for _, u := range []float64{unit(0), unit(math.MaxUint64), 0.5, math.Sqrt2 / 2, 0.25, 1e-9, 0.999999} {
		check(u)
	}
	rng := rand.New(rand.NewPCG(8, 9))
	for i := 0; i < 200000; i++ {
		check(unit(rng.Uint64()))
	}
}

func ulp(x float64) float64 { return math.Nextafter(x, math.Inf(1)) - x }

// TestGolden pins the placement function. Every cluster's data lives where
// these functions say; a change here moves data on upgrade and must be a
// deliberate, documented migration, never a refactoring side effect.
func TestGolden(t *testing.T) {
	var h [32]byte
	for i := range h {
		h[i] = byte(i)
	}
	if got, want := draw(nodeSeed(1), &h), uint64(goldenDraw); got != want {
		t.Errorf("draw(node 1, 00 01 02 ...) = %#x, want %#x", got, want)
	}
	m := mustMap(t, []Node{
		{ID: 1, Zone: "a", Weight: 1}, {ID: 2, Zone: "a", Weight: 2},
		{ID: 3, Zone: "b", Weight: 1}, {ID: 4, Zone: "b", Weight: 1, State: Dead},
		{ID: 5, Zone: "c", Weight: 1.5}, {ID: 6, Zone: "c", Weight: 1},
		{ID: 7, Zone: "a", Weight: 1, State: Draining}, {ID: 8, State: Witness},
	})
	for i, want := range goldenRanks {
		var h [32]byte
		h[0], h[31] = byte(i), 0xff
		h[9] = byte(i * 7)
		if got := Rank(m, h); !slices.Equal(got, want) {
			t.Errorf("Rank(blob %d) = %v, want %v", i, got, want)
		}
	}
}

func TestExcludedStates(t *testing.T) {
	rng := rand.New(rand.NewPCG(10, 11))
	for trial := 0; trial < 100; trial++ {
		nodes := randomNodes(rng, 15, 3)
		m := mustMap(t, nodes)
		state := map[NodeID]State{}
		for _, n := range nodes {
			state[n.ID] = n.State
		}
		for _, h := range hashes(uint64(trial), 100) {
			for _, id := range Rank(m, h) {
				if s := state[id]; s != Live && s != Dead {
					t.Fatalf("Rank holds %v node %d", s, id)
				}
			}
			for _, id := range Place(m, h, Mirror).Targets {
				if state[id] != Live {
					t.Fatalf("Targets holds %v node %d", state[id], id)
				}
			}
			src := Sources(m, h)
			for i, id := range src {
				s := state[id]
				if s == Dead || s == Witness {
					t.Fatalf("Sources holds %v node %d", s, id)
				}
				if i > 0 && s == Live && state[src[i-1]] == Draining {
					t.Fatalf("Sources %v: live node after a draining one", src)
				}
			}
		}
	}
}

func TestMirror(t *testing.T) {
	nodes := []Node{
		{ID: 1, Weight: 1, Zone: "a"}, {ID: 2, Weight: 5, Zone: "b"}, {ID: 3, Weight: 1, State: Dead, Zone: "a"},
		{ID: 4, Weight: 1, State: Draining}, {ID: 5, State: Witness}, {ID: 6, Weight: 0.1, Zone: "c"},
	}
	m := mustMap(t, nodes)
	for _, h := range hashes(12, 1000) {
		home := Replicas(m, h, Mirror)
		if got := slices.Sorted(slices.Values(home)); !slices.Equal(got, []NodeID{1, 2, 3, 6}) {
			t.Fatalf("Replicas(Mirror) = %v, want every data node 1,2,3,6", home)
		}
		if !slices.Equal(home, Rank(m, h)) {
			t.Fatalf("Replicas(Mirror) = %v, Rank = %v", home, Rank(m, h))
		}
		if !slices.Equal(Replicas(m, h, 99), home) {
			t.Fatal("Replicas(r > data nodes) != Replicas(Mirror)")
		}
		p := Place(m, h, Mirror)
		if got := slices.Sorted(slices.Values(p.Targets)); !slices.Equal(got, []NodeID{1, 2, 6}) {
			t.Fatalf("Place(Mirror).Targets = %v, want every live data node", p.Targets)
		}
		if len(p.StandIns()) != 0 || !slices.Equal(p.Absent(), []NodeID{3}) {
			t.Fatalf("Place(Mirror): stand-ins %v absent %v", p.StandIns(), p.Absent())
		}
	}
}

func TestBadReplicationFactorPanics(t *testing.T) {
	m := mustMap(t, equalNodes(3))
	for _, r := range []int{0, -2, -100} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Replicas(r=%d) did not panic", r)
				}
			}()
			Replicas(m, [32]byte{}, r)
		}()
	}
}

func TestEmptyMap(t *testing.T) {
	m := mustMap(t, []Node{{ID: 1, State: Witness}})
	if len(Rank(m, [32]byte{})) != 0 || len(Replicas(m, [32]byte{}, 3)) != 0 || len(Place(m, [32]byte{}, Mirror).Targets) != 0 {
		t.Fatal("a map without data nodes places copies")
	}
}
