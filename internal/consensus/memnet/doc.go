// Package memnet is an in-memory network for consensus.Raft nodes in one
// process: tests register each node's inbound side (Step, ApplySnapshot)
// and give each node the Transport returned by Network.Transport.
//
// Faults are drawn from one seeded RNG: a message can be dropped,
// duplicated, delayed by a number of network ticks (which reorders it
// behind later ones) or moved ahead of queued ones; links can be cut one
// way or both (partitions). Messages are copied through their protobuf
// encoding, as a real network would, so nodes never share them.
//
// Delivery: one goroutine per destination steps queued messages in order.
// Pending counts messages queued or being stepped (not delayed ones), so a
// test can wait for the network to drain. Snapshots are streamed straight
// from the sender's reader to the receiver's ApplySnapshot, synchronously;
// a cut link or a drop fails them with ErrUnreachable.
//
// The RNG fixes the faults drawn but not the goroutine schedule, so a seed
// reproduces the fault pattern, not the exact interleaving.
//
// It is for tests: nothing but tests and internal/sim may import it.
package memnet
