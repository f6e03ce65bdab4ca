// Package consensus orders namespace commands into a log and applies each
// entry to the node's KV store with meta.Apply.
//
// Invariants:
//   - Entries are applied in index order; applying an entry and recording its
//     index as the applied index are one KV batch, committed with sync before
//     any proposer of that entry is answered.
//   - Many concurrent proposals are batched into one entry (one fsync).
//   - A failed commit is never retried: the log stops and reports why.
//
// Local is the single-node log of the first release. The Raft-backed log
// (etcd-io/raft RawNode driven by our own loop, log and hard state in the
// same Pebble store) implements the same Log interface, so internal/store
// does not change when the cluster arrives.
package consensus
