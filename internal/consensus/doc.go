// Package consensus orders namespace commands into a log and applies each
// entry to the node's KV store with meta.Apply.
//
// Invariants (both implementations of Log):
//   - Entries are applied in index order; applying an entry and recording its
//     index as the applied index are one KV batch (meta.Apply writes the
//     index into the batch it is given).
//   - Many concurrent proposals are batched into one entry (one fsync).
//   - A failed commit is never retried: the log stops and reports why.
//
// Local is the single-node log of the first release. Raft is the
// replicated one: etcd-io/raft's RawNode driven by our own loop, with the
// log and hard state in the same KV store as the namespace.
//
// # The Raft loop
//
// One goroutine owns the RawNode. It takes ticks (RaftConfig.Ticker),
// proposals, inbound messages (Step), staged snapshots (ApplySnapshot) and
// control requests, then handles each Ready in the order Raft requires:
//
//  1. persist: new entries and the hard state in one batch, synced when
//     Ready.MustSync; with a snapshot, these and the staged namespace in
//     one ingest (see Snapshots);
//  2. send the messages (Transport.Send; MsgSnap starts a snapshot stream);
//  3. apply the committed entries in one batch that also records the
//     applied index (not synced: the entries are durable in the log, and a
//     crash that loses the batch re-applies them on restart; the store
//     writes batches in order, so no later batch survives without it);
//  4. answer read barriers, Advance, and truncate the log if it is long.
//
// # Key layout (beside package meta's lowercase prefixes)
//
// Consensus owns two uppercase prefixes. "R" keys are this node's own Raft
// state and never leave it; every other key of the store is replicated
// state and travels in snapshots. Integers are big-endian.
//
//	Rh            → raftpb.HardState (protobuf)
//	Rc            → raftpb.ConfState (protobuf) as of the applied index;
//	                written in the batch that applies a configuration change
//	Rt            → truncation point: index(8) term(8). Entries ≤ index are
//	                gone; FirstIndex = index+1 and Term(index) = term
//	Re index(8)   → raftpb.Entry (protobuf)
//	Rn            → u64 this store's node ID (NewRaft refuses another ID)
//	Ri            → u64 incarnation, incremented at every NewRaft
//	P node(8)     → u64 sequence number of the last batch from that
//	                proposer that was applied (replicated: see Proposals)
//
// Bootstrap (RaftConfig.InitialVoters, store without Raft state) writes a
// log truncated at index I = max(applied, 1), term 1, whose configuration
// is the initial voters, and hard state {term 1, commit I}; an empty store
// also applies an empty entry 1 (creating the root), so all initial voters
// start byte-identical. A node started without InitialVoters and without
// state has an empty log and configuration and waits to be added
// (AddLearner); the leader then sends it a snapshot, since its log starts
// after index 1.
//
// Recovery: NewRaft reads Rh, Rc, Rt and scans the Re keys (the log is
// short), and starts Raft at meta's applied index (Config.Applied), which
// lies in [truncation index, last index]. Committed entries after it are
// applied again as Raft reports them.
//
// # Proposals
//
// Propose queues a command; the loop gathers the queued commands (at most
// MaxBatch) into one entry whose data is
//
//	version(1)=1, uvarint proposer node ID, uvarint batch sequence number,
//	uvarint n, n × varint delta of the proposal IDs (one per command,
//	first delta from 0), then meta.EncodeCommands(commands)
//
// At most MaxInflightEntries of a node's entries are unapplied at once, so
// under load commands pile up into large entries. Proposal IDs and batch
// sequence numbers are incarnation<<40 | counter, unique across restarts.
//
// Lost proposals are re-proposed, safely: a follower forwards its entries
// to the leader (MsgProp), which can lose them (message loss, leader
// change). The proposer re-proposes an unapplied entry, with the same
// sequence number, every RetryTicks and at every leader change. On apply,
// every node compares the entry's sequence number with the proposer's P
// record: an entry whose number is not above it is a duplicate or was
// overtaken by a later entry of the same proposer, and is skipped (only the
// applied index moves). The proposer puts the commands of an overtaken
// entry back in its queue under a new number: the skip rule guarantees the
// old entry can never apply. So each command applies at most once, and the
// proposer's waiter gets its own result.
//
// A caller's ctx ending first gives ErrUnavailable: a command not yet in an
// entry is dropped; one in an entry may still apply (outcome unknown). A
// snapshot installed over entries of this node also ends their waiters with
// ErrUnavailable (they may or may not have applied before it).
//
// # Reads
//
// AppliedIndex and WaitApplied serve read-your-writes through one node;
// reads need no quorum. ReadIndex is Raft's read-index protocol
// (ReadOnlySafe: the leader confirms its leadership with a heartbeat round)
// followed by WaitApplied; requests from one loop iteration share one
// Raft request, re-sent every RetryTicks until answered.
//
// # Membership
//
// AddVoter, AddLearner, Promote and Remove propose single-change
// ConfChangeV2s (simple, not joint), are idempotent (checked against the
// applied configuration) and re-proposed every RetryTicks, because Raft
// silently refuses a change while another is pending. The leader promotes
// the most caught-up learner whenever there are fewer than Voters voters
// (every ElectionTicks unless DisableAutoPromote; EnsureVoters on demand).
// CheckQuorum, PreVote and StepDownOnRemoval are on.
//
// # Snapshots
//
// There is no snapshot file. The log is truncated (CompactMargin entries
// kept behind the applied index) once more than CompactAfter applied
// entries are in it. When a peer needs entries that are gone, Raft asks
// Storage.Snapshot, which takes a KV snapshot of the current state (at the
// applied index I, with Term(I) and the ConfState as of I) and returns only
// metadata; the loop then streams that KV snapshot through
// Transport.SendSnapshot:
//
//	header:  "CAIRNSNP"(8), version(1)=1, index(8), term(8)
//	records: uvarint len(key) > 0, key, uvarint len(value), value — every
//	         key outside the "R" prefix, in ascending order
//	trailer: uvarint 0, count(8), CRC-32C(4) of every preceding byte
//
// The receiver (ApplySnapshot) stages the new state in files on its own
// disk (kv.Store.NewIngest: sstables for Pebble), in bounded memory
// whatever the namespace's size: the stream is merged in key order with a
// KV snapshot of its current state, a record becoming a set and a key the
// stream does not have a delete, checking order, sizes, count, checksum
// and that the state's own applied index is I. The loop then steps the
// MsgSnap; if Raft takes it, the Ready's Raft state changes (the whole log
// dropped, Rt = (I, term), Rc, the hard state, entries after I) go into one
// more file, between the namespace's two ranges, and every file is
// ingested in one step (pebble.DB.Ingest: atomic and durable; a reader or
// KV snapshot opened before keeps the old state): the namespace switches
// atomically and the node resumes from the log after I. If the node
// applied entries while staging, the staged deletions could miss keys: the
// install is refused and the leader retries.
package consensus
