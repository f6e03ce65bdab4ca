package placement

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestPlanDeadNodes: with one zone, a dead home node's copy goes to the
// next live node of the ranking; Home ignores liveness.
func TestPlanDeadNodes(t *testing.T) {
	const r = 3
	for _, tc := range []struct {
		dead        []int // positions in Rank(m, h) marked Dead
		wantTargets []int // positions in Rank(m, h)
		wantStandIn []int
	}{
		{dead: nil, wantTargets: []int{0, 1, 2}},
		{dead: []int{0}, wantTargets: []int{1, 2, 3}, wantStandIn: []int{3}},
		{dead: []int{1}, wantTargets: []int{0, 2, 3}, wantStandIn: []int{3}},
		{dead: []int{2}, wantTargets: []int{0, 1, 3}, wantStandIn: []int{3}},
		{dead: []int{0, 2}, wantTargets: []int{1, 3, 4}, wantStandIn: []int{3, 4}},
		{dead: []int{3}, wantTargets: []int{0, 1, 2}},                           // a dead non-home node changes nothing
		{dead: []int{1, 3}, wantTargets: []int{0, 2, 4}, wantStandIn: []int{4}}, // skips the dead 4th too
		{dead: []int{0, 1, 2, 3}, wantTargets: []int{4}, wantStandIn: []int{4}}, // fewer live than R
		{dead: []int{0, 1, 2, 3, 4}, wantTargets: nil},
	} {
		t.Run(fmt.Sprint("dead=", tc.dead), func(t *testing.T) {
			for i, h := range hashes(30, 200) {
				nodes := equalNodes(5)
				nodes[1].Weight, nodes[3].Weight = 2, 0.7
				rank := Rank(mustMap(t, nodes), h)
				at := func(pos []int) []NodeID {
					var ids []NodeID
					for _, p := range pos {
						ids = append(ids, rank[p])
					}
					return ids
				}
				for _, p := range tc.dead {
					nodes[rank[p]-1].State = Dead
				}
				m := mustMap(t, nodes)
				if got := Rank(m, h); !slices.Equal(got, rank) {
					t.Fatalf("blob %d: Rank changed when nodes died: %v -> %v", i, rank, got)
				}
				p := Place(m, h, r)
				if !slices.Equal(p.Home, rank[:r]) {
					t.Fatalf("blob %d: Home = %v, want %v", i, p.Home, rank[:r])
				}
				if !slices.Equal(p.Targets, at(tc.wantTargets)) {
					t.Fatalf("blob %d: Targets = %v, want %v (rank %v)", i, p.Targets, at(tc.wantTargets), rank)
				}
				if !slices.Equal(p.StandIns(), at(tc.wantStandIn)) {
					t.Fatalf("blob %d: StandIns = %v, want %v", i, p.StandIns(), at(tc.wantStandIn))
				}
				var wantAbsent []NodeID
				for _, id := range rank[:r] {
					if !slices.Contains(p.Targets, id) {
						wantAbsent = append(wantAbsent, id)
					}
				}
				if !slices.Equal(p.Absent(), wantAbsent) {
					t.Fatalf("blob %d: Absent = %v, want %v", i, p.Absent(), wantAbsent)
				}
				for _, id := range p.Targets {
					if p.IsHome(id) == slices.Contains(p.StandIns(), id) {
						t.Fatalf("blob %d: node %d is both or neither home and stand-in", i, id)
					}
				}
			}
		})
	}
}

// TestPlanZoneStandIns: with zones, a dead node's stand-in keeps the copies
// in distinct zones (the next live node of its zone when R >= zones),
// rather than the next live node of the whole ranking.
func TestPlanZoneStandIns(t *testing.T) {
	nodes := equalNodes(9, "a", "b", "c")
	for i, h := range hashes(31, 2000) {
		rank := Rank(mustMap(t, nodes), h)
		dead := slices.Clone(nodes)
		dead[rank[0]-1].State = Dead
		m := mustMap(t, dead)
		p := Place(m, h, 3)
		if z := zonesOf(m, p.Targets); len(z) != 3 {
			t.Fatalf("blob %d: targets %v span zones %v, want 3", i, p.Targets, z)
		}
		deadNode, _ := m.Node(rank[0])
		standIn, _ := m.Node(p.StandIns()[0])
		if len(p.StandIns()) != 1 || standIn.Zone != deadNode.Zone {
			t.Fatalf("blob %d: stand-ins %v for dead %v, want one in zone %q", i, p.StandIns(), rank[0], deadNode.Zone)
		}
	}
}

// TestPlanProperties checks Plan over random memberships and liveness.
func TestPlanProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(32, 33))
	for trial := 0; trial < 300; trial++ {
		zones := 1 + rng.IntN(4)
		nodes := randomNodes(rng, 25, zones)
		m := mustMap(t, nodes)
		state := map[NodeID]State{}
		liveZones := map[string]bool{}
		nLive := 0
		for _, n := range nodes {
			state[n.ID] = n.State
			if n.State == Live {
				nLive++
				liveZones[n.Zone] = true
			}
		}
		for _, h := range hashes(uint64(100+trial), 50) {
			r := []int{1, 2, 3, 5, Mirror}[rng.IntN(5)]
			p := Place(m, h, r)
			want := nLive
			if r != Mirror {
				want = min(r, nLive)
			}
			if len(p.Targets) != want {
				t.Fatalf("len(Targets) = %d, want %d", len(p.Targets), want)
			}
			for _, id := range p.Home {
				if state[id] == Live && !slices.Contains(p.Targets, id) {
					t.Fatalf("live home node %d is not a target: %+v", id, p)
				}
			}
			for _, id := range p.Absent() {
				if state[id] != Dead {
					t.Fatalf("absent home node %d is %v, want dead", id, state[id])
				}
			}
			if len(p.StandIns()) != len(p.Absent()) && len(p.Targets) == len(p.Home) {
				t.Fatalf("%d stand-ins for %d absent homes: %+v", len(p.StandIns()), len(p.Absent()), p)
			}
			if got := len(zonesOf(m, p.Targets)); got != min(len(p.Targets), len(liveZones)) {
				t.Fatalf("targets %v span %d zones, want %d", p.Targets, got, min(len(p.Targets), len(liveZones)))
			}
			src := Sources(m, h)
			if !slices.Equal(src[:len(p.Targets)], p.Targets) {
				t.Fatalf("Sources %v does not start with Targets %v", src, p.Targets)
			}
			if zones == 1 {
				// One zone: the targets are exactly the first live
				// nodes of the ranking.
				var firstLive []NodeID
				for _, id := range Rank(m, h) {
					if state[id] == Live && len(firstLive) < want {
						firstLive = append(firstLive, id)
					}
				}
				if !slices.Equal(p.Targets, firstLive) {
					t.Fatalf("one zone: Targets = %v, want the first live nodes of the ranking %v", p.Targets, firstLive)
				}
			}
		}
	}
}
