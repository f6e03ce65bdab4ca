// Package placement maps a blob hash to the nodes that hold its copies:
// weighted rendezvous (highest-random-weight) hashing over the cluster's
// data nodes, spread over zones. It is pure: no I/O, no clock, no global
// state; every function is deterministic and safe for concurrent use.
//
// # Inputs
//
// A Map is the cluster as placement sees it: for each member a NodeID (its
// Raft ID), a Zone, a capacity Weight and a State. Live and Dead nodes are
// data nodes and are ranked; Draining nodes and witnesses are not. The
// cluster package builds a new Map whenever membership, a weight or a
// liveness changes. The blob hash is the 32-byte SHA-256 that names the
// blob (blob.Hash converts implicitly).
//
// # Algorithm
//
// For blob h and node n:
//
//	seed(n) = mix(n.ID * 0x9e3779b97f4a7c15 + 0x636169726e2d7077)
//	x       = mix(mix(h[0:8] ^ seed(n)) ^ h[8:16])   // little-endian words
//	u       = (2*(x>>12) + 1) / 2^53                  // in (0, 1), exact
//	score   = n.Weight / -ln(u)                       // higher ranks first
//
// mix is the splitmix64 finalizer. For independent uniform u, -ln(u) is
// exponential, so -ln(u)/weight is an exponential race with rate weight:
// node n has the best score for a fraction weight(n)/sum(weights) of blobs,
// and the best node of a set of nodes wins in proportion to the set's total
// weight. The code orders by the reciprocal key -ln(u)/weight, lowest
// first; equal keys (not seen in practice) fall back to the lower ID.
//
// The ln is computed by this package with separately rounded IEEE-754
// operations, not math.Log, whose last bit differs between architectures:
// every node, amd64 or arm64, must compute the same placement. TestGolden
// pins the function's output; changing it moves every cluster's data.
//
// Zone-aware ranking: first the best-scoring node of each zone, the zones
// ordered by their best score; then every other node by score. With one
// zone this is plain weighted rendezvous hashing. Equivalently: sort by
// score, then move each zone's first appearance to the front, keeping order.
//
// # API
//
//	Rank(m, h)        every data node (Live and Dead), ranked
//	Replicas(m, h, r) the first r of Rank: the blob's home nodes (r = Mirror: all)
//	Place(m, h, r)    Plan{Home, Targets}: Targets = the first r of the same
//	                  ranking over Live nodes only: where copies go now;
//	                  Plan.StandIns and Plan.Absent tell repair what to move
//	Sources(m, h)     nodes that may hold a copy, most likely first (reads)
//
// A write's Policy (R, W, Strict) and its outcome, Copies, are here too,
// with the kinds a replicated write or read fails with: QuorumError
// (errors.Is ErrNoQuorum) and ErrUnavailable. Placement returns none of
// them; replication does, and the store maps them without importing it.
//
// # Invariants (each checked by a test)
//
//   - Determinism: the result depends only on the set of members and h, not
//     on their order, the call, the process or the CPU architecture.
//   - Minimal movement on addition: adding a node changes a blob's replica
//     set only by putting the new node in place of one old one; every copy
//     that moves, moves to the new node. With N equal nodes and no zones it
//     takes about r/(N+1) of the blobs, 1/(N+1) of the copies.
//   - Minimal movement on removal: removing (or draining) a node changes
//     only the replica lists that held it, each by one node; every other
//     blob keeps its replica list in the same order.
//   - Weights: the first replica of a blob is node n for a fraction
//     weight(n)/total of blobs. (Later replicas are only roughly
//     proportional: a heavy node cannot hold two copies of one blob.)
//   - Zones: the first min(r, zones) replicas are in distinct zones. With
//     r below the number of zones, a zone is picked in proportion to its
//     total weight.
//   - Liveness: Home ignores liveness, so a flapping node does not move
//     data. Targets holds every live Home node; each Dead home node is
//     replaced by a stand-in, the next live node of the ranking (with one
//     zone, exactly "the next live node in Rank"; with zones, the next one
//     that keeps the copies in distinct zones, which is usually the dead
//     node's zone-mate). Repair moves a stand-in's copy home when the
//     home node returns, and re-replicates to Targets when a node stays
//     dead past the grace period.
//   - Draining and Witness nodes never appear in Rank, Replicas or Targets.
//     A draining node's blobs are placed as if it were gone, so repair
//     copies them to their new homes; Sources lists it last as a read
//     source until then.
//
// Replication factors are counts >= 1 or Mirror; any other value is a
// programming error and panics (validate R where it is configured).
//
// # Cost
//
// One key is about 17 ns (two mixes and a ln). Replicas with r <= 8 uses
// selection, not a full sort: about 0.2 µs for 5 nodes and 1.2 µs for 50
// (BenchmarkReplicas), with one allocation, the result.
package placement
