// Package core assembles a node's core, in one order and with no late
// binding: the blob store, the namespace KV, the log (Raft in a cluster, a
// local log standalone), the replicator and repairer, the store every front
// end calls, the placement map and the guard on peers' blob puts.
//
// It is the one place that wiring lives: internal/node adds listeners,
// memberlist, TLS, HTTP and the front ends around a Core; internal/sim
// adds faults around the same Core, so the simulator exercises the node's
// own assembly, not a copy of it.
//
// core owns no I/O of its own: its disks (vfs.FS, a Pebble vfs), its
// network (a transport.Client) and its clock (clock.Clock, a tick source)
// come from the host. It must not import net/http, a front end or node.
package core
