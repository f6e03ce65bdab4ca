// Package node wires one Cairn node together: the blob store, the
// namespace KV, the log, the store and the HTTP front end. cmd/cairn and the
// end-to-end tests start nodes through it; it holds no logic of its own
// beyond start-up order and shutdown.
//
// It owns the order in which a node's parts start and stop, the cluster
// half (cluster.go: Raft, transport, replicator, repairer, membership),
// the mounts' start, and today the admin API and page's handlers (issue
// 21 moves them to a front end of their own). It must not be imported by
// anything but cmd (test/deps), and the store and front ends must not
// reach back into it.
package node
