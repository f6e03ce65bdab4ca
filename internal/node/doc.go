// Package node wires one Cairn node together: the blob store, the
// namespace KV, the log, the store and the front ends (HTTP, S3, WebDAV,
// the mounts, the admin API and page). cmd/cairn and the end-to-end tests
// start nodes through it; it holds no logic of its own beyond start-up
// order and shutdown.
//
// It owns the order in which a node's parts start and stop, the cluster
// half (cluster.go: Raft, transport, replicator, repairer, membership,
// liveness, the watch for its own removal), the mounts' start, the access
// tables' reload from the log (access.go), the node's metrics, and the
// implementations of the admin front end's interfaces (admin.go:
// admin.Local over this node, admin.Cluster over the cluster half,
// converting their types and giving errors the front end's kinds). The
// admin API's handlers, error table and page are the front end's
// (internal/frontend/admin), not the node's.
//
// It must not be imported by anything but cmd (test/deps), and the store
// and front ends must not reach back into it: what a front end needs of
// the node it declares as an interface, which the node implements.
package node
