package placement

import (
	"fmt"
	"slices"
)

// Mirror, passed as r, asks for every data node: the replication factor of
// "mirror" buckets, whose blobs every web node holds and reads locally.
const Mirror = -1

// stateMask selects node states: bit s is set to include State s.
type stateMask uint8

const (
	homeMask  = stateMask(1<<Live | 1<<Dead)
	liveMask  = stateMask(1 << Live)
	drainMask = stateMask(1 << Draining)
)

// cand is one node's rank key for one blob.
type cand struct {
	key   float64
	id    NodeID
	zone  int32
	state State
}

func candLess(a, b cand) bool {
	return a.key < b.key || (a.key == b.key && a.id < b.id)
}

func candCmp(a, b cand) int {
	if candLess(a, b) {
		return -1
	}
	if candLess(b, a) {
		return 1
	}
	return 0
}

const (
	// stackCands is the number of candidates ranked without a heap
	// allocation.
	stackCands = 64
	// maxPartial is the largest limit served by selection instead of a
	// full sort; maxZones the most zones it handles.
	maxPartial = 8
	maxZones   = 64
)

// candidates appends to buf the rank keys for h of the members whose state
// is in mask, in member order.
func (m *Map) candidates(buf []cand, h *[32]byte, mask stateMask) []cand {
	for i := range m.nodes {
		if mask&(1<<m.nodes[i].State) == 0 {
			continue
		}
		buf = append(buf, cand{key: key(m.seed[i], m.inv[i], h), id: m.nodes[i].ID, zone: m.zone[i], state: m.nodes[i].State})
	}
	return buf
}

// sortCands sorts cs best first.
func sortCands(cs []cand) {
	if len(cs) <= 12 {
		for i := 1; i < len(cs); i++ {
			for j := i; j > 0 && candLess(cs[j], cs[j-1]); j-- {
				cs[j], cs[j-1] = cs[j-1], cs[j]
			}
		}
		return
	}
	slices.SortFunc(cs, candCmp)
}

// rank appends to dst the first limit nodes of the zone-aware ranking of h
// over the members whose state is in mask (all of them if limit is larger).
func (m *Map) rank(dst []NodeID, h *[32]byte, mask stateMask, limit int) []NodeID {
	var stack [stackCands]cand
	return m.order(dst, m.candidates(stack[:0], h, mask), mask, limit)
}

// order appends to dst the first limit nodes of the zone-aware ranking of
// the candidates cs whose state is in mask. It does not modify cs.
func (m *Map) order(dst []NodeID, cs []cand, mask stateMask, limit int) []NodeID {
	if limit <= maxPartial && len(m.zones) <= maxZones {
		return orderPartial(dst, cs, mask, limit)
	}
	var stack [stackCands]cand
	work := stack[:0]
	for _, c := range cs {
		if mask&(1<<c.state) != 0 {
			work = append(work, c)
		}
	}
	cs = work
	sortCands(cs)
	limit = min(limit, len(cs))
	if limit == 0 {
		return dst
	}
	// Pass 1: the best node of each zone, in the order of their keys,
	// which is the order of the zones' best keys.
	seen := make([]bool, len(m.zones))
	taken := 0
	for i := range cs {
		if taken == limit {
			return dst
		}
		if seen[cs[i].zone] {
			continue
		}
		seen[cs[i].zone] = true
		dst = append(dst, cs[i].id)
		cs[i].zone = -1
		taken++
	}
	// Pass 2: everyone else, best key first.
	for i := range cs {
		if taken == limit {
			break
		}
		if cs[i].zone < 0 {
			continue
		}
		dst = append(dst, cs[i].id)
		taken++
	}
	return dst
}

// orderPartial is order for limit <= maxPartial and at most maxZones
// zones, by selection in O(len(cs) * limit) rather than a full sort: the
// first limit nodes of the ranking are the best limit zone leaders, then,
// if there are fewer zones than limit, the best non-leaders.
func orderPartial(dst []NodeID, cs []cand, mask stateMask, limit int) []NodeID {
	var best [maxZones]int32 // 1 + index in cs of the zone's best node; 0: none yet
	var zones [maxZones]int32
	nz := 0
	for i := range cs {
		if mask&(1<<cs[i].state) == 0 {
			continue
		}
		z := cs[i].zone
		switch {
		case best[z] == 0:
			zones[nz] = z
			nz++
			best[z] = int32(i + 1)
		case candLess(cs[i], cs[best[z]-1]):
			best[z] = int32(i + 1)
		}
	}
	var top [maxPartial]cand
	nt := 0
	for _, z := range zones[:nz] {
		nt = insertTop(top[:], nt, limit, cs[best[z]-1])
	}
	for _, c := range top[:nt] {
		dst = append(dst, c.id)
	}
	if k := limit - nt; k > 0 && nt == nz {
		nt = 0
		for i := range cs {
			if mask&(1<<cs[i].state) == 0 || int(best[cs[i].zone]) == i+1 {
				continue
			}
			nt = insertTop(top[:], nt, k, cs[i])
		}
		for _, c := range top[:nt] {
			dst = append(dst, c.id)
		}
	}
	return dst
}

// insertTop inserts c into top[:n], sorted best first and holding at most
// capacity candidates, and returns the new length.
func insertTop(top []cand, n, capacity int, c cand) int {
	if n == capacity {
		if !candLess(c, top[n-1]) {
			return n
		}
		n--
	}
	j := n
	for j > 0 && candLess(c, top[j-1]) {
		top[j] = top[j-1]
		j--
	}
	top[j] = c
	return n + 1
}

// count turns a replication factor into a number of nodes, out of n.
func count(r, n int) int {
	if r == Mirror {
		return n
	}
	if r < 1 {
		panic(fmt.Sprintf("placement: replication factor %d (want >= 1 or Mirror)", r))
	}
	return min(r, n)
}

// Rank returns every data node (Live or Dead) ranked for blob h, best
// first: the best node of each zone (zones ordered by their best node),
// then the others in key order. Draining nodes and witnesses are never
// ranked. The result is a new slice; it is empty if m has no data nodes.
func Rank(m *Map, h [32]byte) []NodeID {
	return m.rank(make([]NodeID, 0, m.nHome), &h, homeMask, m.nHome)
}

// Replicas returns the home nodes of blob h for replication factor r: the
// first r of Rank(m, h), ignoring liveness; every data node if r is Mirror
// or at least their number. It panics if r is neither Mirror nor >= 1
// (validate R where it is configured). The result is a new slice.
func Replicas(m *Map, h [32]byte, r int) []NodeID {
	n := count(r, m.nHome)
	return m.rank(make([]NodeID, 0, n), &h, homeMask, n)
}

// Plan says where the copies of one blob belong and where they go now.
type Plan struct {
	// Home is Replicas(m, h, r): where the copies belong, whatever is up.
	Home []NodeID
	// Targets is where new copies go now: the first r nodes of the
	// zone-aware ranking of h over the Live nodes (fewer if fewer are
	// live). It holds every live Home node; each dead Home node is
	// replaced by a stand-in, the next live node of the ranking (with
	// zones, the next that keeps copies in distinct zones).
	Targets []NodeID
}

// Place returns the Plan for blob h with replication factor r (a count
// >= 1, or Mirror). It panics on any other r, as Replicas does.
func Place(m *Map, h [32]byte, r int) Plan {
	nh := count(r, m.nHome)
	nl := count(r, m.nLive)
	// One set of keys serves both rankings; the live one ignores Dead.
	var stack [stackCands]cand
	cs := m.candidates(stack[:0], &h, homeMask)
	home := m.order(make([]NodeID, 0, nh), cs, homeMask, nh)
	return Plan{
		Home:    home,
		Targets: m.order(make([]NodeID, 0, nl), cs, liveMask, nl),
	}
}

// IsHome reports whether id is one of the blob's home nodes. A target that
// is not home is a stand-in: repair moves its copy home once the home node
// is back.
func (p Plan) IsHome(id NodeID) bool { return slices.Contains(p.Home, id) }

// StandIns returns the targets that are not home nodes, in ranking order.
func (p Plan) StandIns() []NodeID {
	var out []NodeID
	for _, id := range p.Targets {
		if !p.IsHome(id) {
			out = append(out, id)
		}
	}
	return out
}

// Absent returns the home nodes that are not targets (they are Dead), in
// ranking order: repair owes each of them a copy when it returns.
func (p Plan) Absent() []NodeID {
	var out []NodeID
	for _, id := range p.Home {
		if !slices.Contains(p.Targets, id) {
			out = append(out, id)
		}
	}
	return out
}

// Sources returns the nodes that may hold a copy of blob h, most likely
// first: every Live node in the zone-aware ranking of the live nodes (its
// first r are Place(m, h, r).Targets for every r; further down are the
// holders of older placements, e.g. during a rebalance), then the Draining
// nodes in key order. Dead nodes and witnesses are left out. Callers that
// prefer a local or nearer copy reorder the result; it is a new slice.
func Sources(m *Map, h [32]byte) []NodeID {
	out := m.rank(make([]NodeID, 0, m.nLive+m.nDrain), &h, liveMask, m.nLive)
	if m.nDrain == 0 {
		return out
	}
	var stack [stackCands]cand
	cs := m.candidates(stack[:0], &h, drainMask)
	sortCands(cs)
	for _, c := range cs {
		out = append(out, c.id)
	}
	return out
}
