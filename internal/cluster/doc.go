// Package cluster holds what a node knows about the other nodes. This first
// part is liveness: Detector, a failure detector over hashicorp/memberlist
// (SWIM with Lifeguard), which the data path asks on every request whether a
// replica is worth trying.
//
// # Membership versus liveness
//
// Which nodes are members, with which zone, weight and URL, is the cluster
// map (meta.Node), decided by the Raft log. Whether a member is up is
// decided here, by gossip, and never goes into the log. A node the detector
// has never heard of is not alive; a node that left gracefully (Leave) is
// Left, distinct from Dead (crash, kill, hang, partition). A member's gossip
// name is the decimal form of its Raft node ID, so the two views join on the
// ID; gossip members with other names are ignored.
//
// Liveness is the one-method interface the data path needs; StaticLiveness
// is a settable implementation for tests of other packages.
//
// # Invariants
//
//   - Alive takes no lock and does not allocate: it reads an immutable
//     snapshot replaced on every change.
//   - memberlist's event callbacks, which run under memberlist's node lock,
//     never block: they replace the snapshot and offer the event to each
//     subscriber's buffered channel, dropping it (and counting it in the
//     next delivered Event.Missed) when the buffer is full. A subscriber
//     that does not read cannot slow failure detection.
//   - Every gossip packet and stream is encrypted and authenticated with
//     AES-256-GCM under a key derived from the cluster secret, and carries
//     the label "cairn/1": a node without the secret cannot join, and cannot
//     make a member look dead or alive.
//
// # Why a dead node is marked within about two seconds
//
// memberlist's LAN defaults (probe every 1 s, suspicion 4 × log10(N) s with
// a 6× ceiling) take 5 s or more. The defaults here, for a LAN or loopback:
//
//	ProbeInterval           200 ms  each node probes one member this often
//	ProbeTimeout            100 ms  direct UDP ack deadline (LAN RTT < 1 ms)
//	IndirectChecks          3       peers asked to probe after a missed ack
//	SuspicionMult           4       min suspicion = 4 × max(1, log10 N) × 200 ms
//	SuspicionMaxTimeoutMult 2       max suspicion = 2 × min
//	GossipInterval          100 ms  rounds that spread suspect/dead/alive news
//	GossipNodes             3       members reached per round
//	AwarenessMaxMultiplier  2       a node slow to get its own acks stretches
//	                                its probes at most 2× (Lifeguard)
//
// The time from a crash to "dead" is the sum of:
//
//  1. Waiting to be probed. Every live member probes one member per
//     ProbeInterval in a shuffled round robin, so with N-1 live probers
//     the dead node is probed after about ProbeInterval/2 on average, rarely
//     more than 2 × ProbeInterval (0.1–0.4 s).
//  2. The failed probe: the direct ack times out after ProbeTimeout, then
//     indirect probes through IndirectChecks peers and a TCP ping run until
//     the end of the ProbeInterval; then the prober marks the node suspect
//     and gossips it (0.2 s).
//  3. The suspicion timeout: 0.8 s for up to 10 nodes (1.4 s at 50). With
//     fewer than SuspicionMult nodes no confirmation from other members is
//     expected and the timer is the minimum; in larger clusters it starts at
//     the maximum (1.6 s) and shrinks towards the minimum as other members
//     independently confirm the suspicion, which they do within one or two
//     probe rounds.
//  4. Gossip of the "dead" message: one or two GossipIntervals.
//
// That is about 1.1–1.5 s for a healthy cluster, and at most about 2.2 s
// when no other member confirms (2.8 s at 50 nodes). Measured on loopback
// on a loaded 2-core machine with -race: 1.1 s with 3 nodes, 1.3–1.5 s
// with 5
// (TestKilledNodeMarkedDead logs it).
//
// False deaths: a live member that misses probes (GC pause, a burst of CPU
// starvation, lost packets) is only suspected; it refutes as soon as the
// suspicion reaches it by gossip (a round every 100 ms), so it is declared
// dead only if it stays silent for the whole suspicion time, at least
// 0.8 s. A stopped (SIGSTOP) or hung node is declared dead like a crashed
// one, which is the point: the data path must skip it. The price is
// bandwidth: about five small encrypted UDP probes a second per node, and
// gossip only when there is news.
//
// memberlist v0.6.0 keeps the suspect state internal (no event, and its
// member list includes suspects), so a suspected member is reported Alive
// until it is declared Dead; the data path covers that window with hedged
// requests.
//
// # Joining, leaving, coming back
//
// NewDetector never blocks on the network: a background loop joins through
// Seeds with jittered exponential backoff (200 ms to 5 s) whenever the node
// sees no other live member, so nodes may start in any order and a node cut
// off from everyone keeps trying. Give every node seeds (in Cairn: the
// gossip addresses of the members in the cluster map): a node restarted
// without seeds is found by the others, but until the next full state
// exchange (PushPullInterval) it may not see them. Detector.SetSeeds
// replaces the seeds of a running detector (the cluster map changed): a
// detector that is alone tries them at once, without a restart.
//
// Every ReconnectInterval (10 s) the loop also tries to reach one random
// Dead member directly, as Serf does: memberlist stops gossiping to dead
// members after GossipToTheDeadTime (30 s), so two groups split for longer
// would otherwise never merge again.
//
// Leave first re-advertises the node with a "leaving" flag in its gossiped
// metadata (the first byte; the caller's Meta follows), waits for that to be
// sent, then sends memberlist's leave. Peers that saw the flag report Left;
// memberlist knows the difference too but does not expose it. A node that
// restarts with the same ID and address refutes its death (a higher
// incarnation) and is reported Alive again with EventJoin; with another
// address it is accepted once it has been dead for DeadNodeReclaimTime.
package cluster
