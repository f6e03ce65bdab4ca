// Package kv is the ordered key-value layer under the namespace (package
// meta) and the Raft log.
//
// Two implementations share one contract (kv.go):
//
//   - OpenPebble: a CockroachDB Pebble database, the production store. A
//     Batch is a Pebble indexed batch, Commit(true) waits for the WAL fsync,
//     a Snapshot is a Pebble snapshot. The file system is pluggable (Pebble's
//     own vfs.FS), so crash tests can run on vfs.NewCrashableMem.
//   - NewMem: an in-memory, deterministic store for tests. Every committed
//     state is an immutable copy-on-write B-tree; a commit publishes a new
//     tree with one atomic pointer store, so a Snapshot is O(1) and readers
//     never block writers.
//
// Invariants (both implementations, checked by one conformance suite):
//
//   - Keys are ordered bytewise (bytes.Compare); Scan visits [lower, upper)
//     in ascending order.
//   - Get returns a copy the caller may keep; the k, v slices passed to a
//     Scan callback are valid only during the call and must not be modified.
//   - A Batch's reads see the committed store plus the batch's own writes.
//   - Commit is atomic: a reader sees all of a batch's writes or none.
//   - A Snapshot never sees writes committed after it was taken.
//   - Pebble only: a batch committed with sync=true survives a crash; one
//     committed with sync=false may be lost (but never partially applied).
//
// The package defines no byte layout of its own: keys and values are opaque.
// Package meta documents the namespace's layout on top of it.
package kv
