package placement

import (
	"errors"
	"fmt"
	"math"
	"slices"
)

// NodeID identifies a member for placement. It is the member's Raft ID: a
// nonzero uint64 assigned once when the node joins and never reused, so a
// node keeps its data across restarts and address changes. (A uint64 rather
// than a name: it is what etcd-io/raft uses, it is cheap to hash, and a
// rename must never move data.) ID 0 is reserved (raft.None).
type NodeID uint64

// State is a member's role for placement.
type State uint8

const (
	// Live is a data node that is up: ranked, and takes new copies.
	Live State = iota
	// Dead is a data node the failure detector reports down. It keeps its
	// place in the ranking (its home placements do not move when it
	// flaps), but the data path skips it: Plan gives its copies to
	// stand-ins.
	Dead
	// Draining is a node being removed. It is not ranked, so it gets no
	// new copies and repair moves its blobs to their new homes; it keeps
	// serving reads (Sources lists it) until they are moved. A draining
	// node that goes down stays Draining.
	Draining
	// Witness is a voter that stores no data. It is never ranked.
	Witness
)

var stateNames = [...]string{"live", "dead", "draining", "witness"}

// String returns the lowercase name of s ("live", "dead", ...).
func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("state(%d)", uint8(s))
}

// Node is one member of the cluster as placement sees it.
type Node struct {
	ID NodeID
	// Zone is the failure domain (rack, room, data center). Copies of a
	// blob go to distinct zones first. Nodes with the same Zone string,
	// including "", share a zone.
	Zone string
	// Weight is the capacity weight, > 0 and finite for every state but
	// Witness (where it is ignored). A node of weight 2 is the first
	// choice for twice as many blobs as one of weight 1. The unit is the
	// caller's (e.g. TiB); only ratios matter.
	Weight float64
	State  State
}

// Errors returned by NewMap.
var (
	// ErrNodeID: a node has ID 0, or two nodes share an ID.
	ErrNodeID = errors.New("placement: invalid or duplicate node ID")
	// ErrWeight: a non-witness node's weight is not a finite number > 0.
	ErrWeight = errors.New("placement: weight must be finite and > 0")
	// ErrState: a node has an unknown State.
	ErrState = errors.New("placement: unknown node state")
)

// Map is an immutable set of members, sorted by ID, with what ranking needs
// precomputed. Build one with NewMap whenever membership, a weight or a
// liveness changes. A *Map is safe for concurrent use.
type Map struct {
	nodes  []Node    // sorted by ID
	seed   []uint64  // nodeSeed(nodes[i].ID)
	inv    []float64 // 1 / nodes[i].Weight (0 for witnesses)
	zone   []int32   // index of nodes[i].Zone in zones
	zones  []string  // distinct zones, sorted
	nHome  int       // nodes in state Live or Dead
	nLive  int       // nodes in state Live
	nDrain int       // nodes in state Draining
}

// NewMap validates nodes and returns the Map holding a copy of them. The
// order of nodes does not matter: the same members give the same Map. It
// returns an error wrapping ErrNodeID, ErrWeight or ErrState for the first
// invalid node.
func NewMap(nodes []Node) (*Map, error) {
	ns := slices.Clone(nodes)
	slices.SortFunc(ns, func(a, b Node) int {
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
	m := &Map{
		nodes: ns,
		seed:  make([]uint64, len(ns)),
		inv:   make([]float64, len(ns)),
		zone:  make([]int32, len(ns)),
	}
	for i, n := range ns {
		if n.ID == 0 {
			return nil, fmt.Errorf("node ID 0: %w", ErrNodeID)
		}
		if i > 0 && ns[i-1].ID == n.ID {
			return nil, fmt.Errorf("node %d listed twice: %w", n.ID, ErrNodeID)
		}
		if n.State > Witness {
			return nil, fmt.Errorf("node %d: %v: %w", n.ID, n.State, ErrState)
		}
		m.seed[i] = nodeSeed(n.ID)
		if n.State == Witness {
			continue
		}
		if !(n.Weight > 0) || math.IsInf(n.Weight, 0) {
			return nil, fmt.Errorf("node %d: weight %v: %w", n.ID, n.Weight, ErrWeight)
		}
		m.inv[i] = 1 / n.Weight
		switch n.State {
		case Live:
			m.nLive++
			m.nHome++
		case Dead:
			m.nHome++
		case Draining:
			m.nDrain++
		}
		m.zones = append(m.zones, n.Zone)
	}
	slices.Sort(m.zones)
	m.zones = slices.Compact(m.zones)
	for i, n := range ns {
		if z, ok := slices.BinarySearch(m.zones, n.Zone); ok {
			m.zone[i] = int32(z)
		}
	}
	return m, nil
}

// Nodes returns a copy of the members, sorted by ID.
func (m *Map) Nodes() []Node { return slices.Clone(m.nodes) }

// Equal reports whether m and o hold the same members in the same states.
func (m *Map) Equal(o *Map) bool { return slices.Equal(m.nodes, o.nodes) }

// Node returns the member with the given ID, if any.
func (m *Map) Node(id NodeID) (Node, bool) {
	i, ok := slices.BinarySearchFunc(m.nodes, id, func(n Node, id NodeID) int {
		switch {
		case n.ID < id:
			return -1
		case n.ID > id:
			return 1
		}
		return 0
	})
	if !ok {
		return Node{}, false
	}
	return m.nodes[i], true
}

// Len returns the number of members, witnesses included.
func (m *Map) Len() int { return len(m.nodes) }

// Zones returns the distinct zones of the non-witness members, sorted.
func (m *Map) Zones() []string { return slices.Clone(m.zones) }
