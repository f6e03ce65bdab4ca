package placement

import (
	"fmt"
	"slices"
	"testing"
)

// numBlobs is how many random blobs the statistical tests place: 100k, or
// 20k under -short (the 6σ bounds widen to match).
func numBlobs() int {
	if testing.Short() {
		return 20_000
	}
	return 100_000
}

// TestAddNode: adding a node moves only the copies the new node now takes,
// about its fair share, and nothing moves between the old nodes.
func TestAddNode(t *testing.T) {
	blobs := numBlobs()
	hs := hashes(20, blobs)
	for _, tc := range []struct {
		n, r  int
		zones []string // round-robin zones of the old nodes; the new node joins zones[0]
		// wantSlots is the expected fraction of all copies that move, and
		// wantBlobs the fraction of blobs whose replica set changes.
		wantSlots, wantBlobs float64
	}{
		{n: 3, r: 1, wantSlots: 1.0 / 4, wantBlobs: 1.0 / 4},
		{n: 5, r: 1, wantSlots: 1.0 / 6, wantBlobs: 1.0 / 6},
		{n: 10, r: 1, wantSlots: 1.0 / 11, wantBlobs: 1.0 / 11},
		{n: 49, r: 1, wantSlots: 1.0 / 50, wantBlobs: 1.0 / 50},
		{n: 3, r: 3, wantSlots: 1.0 / 4, wantBlobs: 3.0 / 4},
		{n: 5, r: 3, wantSlots: 1.0 / 6, wantBlobs: 3.0 / 6},
		{n: 10, r: 3, wantSlots: 1.0 / 11, wantBlobs: 3.0 / 11},
		{n: 49, r: 3, wantSlots: 1.0 / 50, wantBlobs: 3.0 / 50},
		// 3 zones of 3, R=3: each zone holds one copy of every blob, so
		// the 4th node of zone a takes a quarter of zone a's copies.
		{n: 9, r: 3, zones: []string{"a", "b", "c"}, wantSlots: 1.0 / 12, wantBlobs: 1.0 / 4},
		// R=1 over zones: the primary is the global best, as without zones.
		{n: 9, r: 1, zones: []string{"a", "b", "c"}, wantSlots: 1.0 / 10, wantBlobs: 1.0 / 10},
	} {
		t.Run(fmt.Sprintf("N=%d/R=%d/zones=%d", tc.n, tc.r, len(tc.zones)), func(t *testing.T) {
			old := equalNodes(tc.n, tc.zones...)
			newNode := Node{ID: NodeID(tc.n + 1), Weight: 1}
			if len(tc.zones) > 0 {
				newNode.Zone = tc.zones[0]
			}
			m0, m1 := mustMap(t, old), mustMap(t, append(slices.Clone(old), newNode))
			changed, moved := 0, 0
			for _, h := range hs {
				before, after := Replicas(m0, h, tc.r), Replicas(m1, h, tc.r)
				gained := diff(after, before)
				if len(gained) == 0 {
					continue
				}
				changed++
				moved += len(gained)
				if len(gained) != 1 || gained[0] != newNode.ID {
					t.Fatalf("blob %x: %v -> %v: a copy moved to an old node", h[:4], before, after)
				}
			}
			near(t, "blobs changed", float64(changed)/float64(blobs), tc.wantBlobs, blobs)
			near(t, "copies moved", float64(moved)/float64(blobs*tc.r), tc.wantSlots, blobs*tc.r)
		})
	}
}

// TestRemoveNode: removing a node moves exactly the copies it held, each to
// one other node; every other blob keeps its replica set.
func TestRemoveNode(t *testing.T) {
	blobs := numBlobs()
	hs := hashes(21, blobs)
	for _, tc := range []struct {
		n, r  int
		zones []string // round-robin; node 2, the one removed, is in zones[1]
		// wantHeld is the fraction of blobs with a copy on node 2; 0 if
		// there is no simple closed form (then it is only logged).
		wantHeld float64
	}{
		{n: 4, r: 1, wantHeld: 1.0 / 4},
		{n: 6, r: 3, wantHeld: 3.0 / 6},
		{n: 50, r: 3, wantHeld: 3.0 / 50},
		// One copy per zone; node 2 is one of zone b's 3 nodes.
		{n: 9, r: 3, zones: []string{"a", "b", "c"}, wantHeld: 1.0 / 3},
		// Zones a, b, c of 3, 2, 2 nodes; 2 copies in 2 of the 3 zones,
		// drawn in proportion to zone weight: P(b) = 2/7 + 3/7*2/4 + 2/7*2/5
		// = 43/70, and node 2 is half of zone b.
		{n: 7, r: 2, zones: []string{"a", "b", "c"}, wantHeld: 43.0 / 70 / 2},
		{n: 5, r: 3, zones: []string{"a", "b"}},
	} {
		t.Run(fmt.Sprintf("N=%d/R=%d/zones=%d", tc.n, tc.r, len(tc.zones)), func(t *testing.T) {
			all := equalNodes(tc.n, tc.zones...)
			gone := all[1].ID
			m0 := mustMap(t, all)
			m1 := mustMap(t, slices.Delete(slices.Clone(all), 1, 2))
			// Draining the node places blobs exactly as removing it does,
			// and a witness changes nothing.
			drained := slices.Clone(all)
			drained[1].State = Draining
			drained = append(drained, Node{ID: 1000, State: Witness, Zone: "w"})
			mDrained := mustMap(t, drained)
			held := 0
			for _, h := range hs {
				before, after := Replicas(m0, h, tc.r), Replicas(m1, h, tc.r)
				if d := Replicas(mDrained, h, tc.r); !slices.Equal(d, after) {
					t.Fatalf("blob %x: draining gives %v, removing %v", h[:4], d, after)
				}
				if !slices.Contains(before, gone) {
					if !slices.Equal(before, after) {
						t.Fatalf("blob %x not on node %d moved: %v -> %v", h[:4], gone, before, after)
					}
					continue
				}
				held++
				lost, gained := diff(before, after), diff(after, before)
				if !slices.Equal(lost, []NodeID{gone}) || len(gained) != 1 {
					t.Fatalf("blob %x: %v -> %v: more moved than the removed node's copy", h[:4], before, after)
				}
			}
			if tc.wantHeld == 0 {
				t.Logf("blobs held by the removed node = %.4f", float64(held)/float64(blobs))
				return
			}
			near(t, "blobs held by the removed node", float64(held)/float64(blobs), tc.wantHeld, blobs)
		})
	}
}

// TestWeights: a node is the first choice for a share of blobs proportional
// to its weight.
func TestWeights(t *testing.T) {
	blobs := numBlobs()
	hs := hashes(22, blobs)
	for _, weights := range [][]float64{{1, 1, 2}, {1, 2, 3, 4}, {0.5, 8, 1, 1, 1, 1, 1, 1, 1, 1}} {
		t.Run(fmt.Sprint(weights), func(t *testing.T) {
			var nodes []Node
			total := 0.0
			for i, w := range weights {
				nodes = append(nodes, Node{ID: NodeID(i + 1), Weight: w})
				total += w
			}
			m := mustMap(t, nodes)
			first := map[NodeID]int{}
			for _, h := range hs {
				first[Replicas(m, h, 1)[0]]++
			}
			for i, w := range weights {
				near(t, fmt.Sprintf("primaries of node %d (weight %v)", i+1, w),
					float64(first[NodeID(i+1)])/float64(blobs), w/total, blobs)
			}
		})
	}
}

// TestIndependence: with 3 equal nodes every one of the 6 orders is equally
// likely, which needs the nodes' draws for a blob to be independent.
func TestIndependence(t *testing.T) {
	blobs := numBlobs()
	hs := hashes(23, blobs)
	m := mustMap(t, equalNodes(3))
	orders := map[[3]NodeID]int{}
	for _, h := range hs {
		orders[[3]NodeID(Rank(m, h))]++
	}
	if len(orders) != 6 {
		t.Fatalf("%d orders seen, want 6", len(orders))
	}
	for o, c := range orders {
		near(t, fmt.Sprint("order ", o), float64(c)/float64(blobs), 1.0/6, blobs)
	}
}

func TestZones(t *testing.T) {
	hs := hashes(24, 20_000)
	for _, tc := range []struct {
		name  string
		zones []string // zone of each node
		r     int
		want  int // distinct zones among the replicas of every blob
	}{
		{"3 zones of 3, R=3", []string{"a", "b", "c", "a", "b", "c", "a", "b", "c"}, 3, 3},
		{"3 uneven zones, R=3", []string{"a", "a", "a", "a", "b", "b", "c"}, 3, 3},
		{"3 zones, R=2", []string{"a", "b", "c", "a", "b", "c"}, 2, 2},
		{"2 zones, R=3", []string{"a", "b", "a", "b", "a"}, 3, 2},
		{"2 zones, one node in b, R=3", []string{"a", "a", "a", "a", "b"}, 3, 2},
		{"4 zones, R=3", []string{"a", "b", "c", "d", "a", "b", "c", "d"}, 3, 3},
		{"1 zone, R=3", []string{"a", "a", "a", "a"}, 3, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nodes := make([]Node, len(tc.zones))
			for i, z := range tc.zones {
				nodes[i] = Node{ID: NodeID(i + 1), Zone: z, Weight: 1}
			}
			m := mustMap(t, nodes)
			for _, h := range hs {
				rs := Replicas(m, h, tc.r)
				if z := zonesOf(m, rs); len(z) != tc.want {
					t.Fatalf("blob %x: replicas %v span zones %v, want %d zones", h[:4], rs, z, tc.want)
				}
			}
		})
	}
}

// TestZoneChoice: when R is below the number of zones, a zone is chosen in
// proportion to its total weight (its best node wins an exponential race
// whose rate is the zone's weight).
func TestZoneChoice(t *testing.T) {
	blobs := numBlobs()
	hs := hashes(25, blobs)
	nodes := []Node{
		{ID: 1, Zone: "a", Weight: 1}, {ID: 2, Zone: "a", Weight: 1}, {ID: 3, Zone: "a", Weight: 2},
		{ID: 4, Zone: "b", Weight: 2}, {ID: 5, Zone: "c", Weight: 1}, {ID: 6, Zone: "c", Weight: 1},
	}
	m := mustMap(t, nodes)
	count := map[string]int{}
	for _, h := range hs {
		n, _ := m.Node(Replicas(m, h, 1)[0])
		count[n.Zone]++
	}
	near(t, "zone a first", float64(count["a"])/float64(blobs), 4.0/8, blobs)
	near(t, "zone b first", float64(count["b"])/float64(blobs), 2.0/8, blobs)
	near(t, "zone c first", float64(count["c"])/float64(blobs), 2.0/8, blobs)
}
