package consensus

import (
	"context"
	"io"

	pb "go.etcd.io/raft/v3/raftpb"
)

// Transport carries Raft messages between nodes. The Raft log calls it from
// its loop goroutine (Send) and from one goroutine per outgoing snapshot
// (SendSnapshot). Implementations: internal/transport (the network) and
// internal/consensus/memnet (an in-memory, fault-injecting one for tests).
//
// Delivery is best effort: Raft tolerates lost, duplicated and reordered
// messages, so a transport never retries on its own. On the receiving node
// the transport calls Raft.Step for each message and Raft.ApplySnapshot for
// each snapshot stream.
type Transport interface {
	// Send queues msgs for delivery and returns without waiting for the
	// network; it may drop messages (a full queue, an unreachable peer).
	// It must not modify the messages or the entries they carry (they are
	// shared with the log); it owns the slice. Called only from the loop
	// goroutine, so it must never block on a peer.
	Send(msgs []*pb.Message)
	// SendSnapshot streams the snapshot announced by msg (type MsgSnap, to
	// peer `to`; msg.Snapshot holds only metadata) followed by body, the
	// snapshot records (format in doc.go), to the peer, where it is passed
	// to Raft.ApplySnapshot. It blocks until the peer has installed or
	// rejected it, the stream failed, or ctx ends; it returns nil only if
	// the peer's ApplySnapshot returned nil. It must read body to its end
	// or stop reading on error (the log closes body after return).
	SendSnapshot(ctx context.Context, to uint64, msg *pb.Message, body io.Reader) error
}
