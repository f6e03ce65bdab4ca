package transport

import (
	"context"
	"fmt"
	"io"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// RaftSender adapts a Client to the shape of consensus.Transport (Send of
// mixed-destination messages, SendSnapshot of a MsgSnap plus its body)
// without importing it. Safe for concurrent use if C is.
type RaftSender struct {
	C Client
}

// Send groups msgs by destination, keeping their order per peer, and
// queues each group with SendRaft. It never blocks on a peer and does not
// modify the messages.
func (s RaftSender) Send(msgs []*raftpb.Message) {
	for len(msgs) > 0 {
		to := msgs[0].GetTo()
		var group, rest []*raftpb.Message
		for _, m := range msgs {
			if m.GetTo() == to {
				group = append(group, m)
			} else {
				rest = append(rest, m)
			}
		}
		s.C.SendRaft(NodeID(to), group)
		msgs = rest
	}
}

// SendSnapshot sends msg (a MsgSnap holding only metadata), marshalled, as
// the snapshot's meta, and body as its data; the receiver gets msg back with
// DecodeSnapshotMeta.
func (s RaftSender) SendSnapshot(ctx context.Context, to uint64, msg *raftpb.Message, body io.Reader) error {
	meta, err := proto.Marshal(msg)
	if err != nil {
		return fmt.Errorf("%w: encode snapshot message: %w", ErrBadRequest, err)
	}
	return s.C.SendSnapshot(ctx, NodeID(to), meta, body)
}

// DecodeSnapshotMeta returns the MsgSnap that RaftSender.SendSnapshot sent
// as meta; for Handler.ApplySnapshot.
func DecodeSnapshotMeta(meta []byte) (*raftpb.Message, error) {
	m := new(raftpb.Message)
	if err := proto.Unmarshal(meta, m); err != nil {
		return nil, fmt.Errorf("%w: snapshot message: %w", ErrBadRequest, err)
	}
	return m, nil
}
