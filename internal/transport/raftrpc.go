package transport

import (
	"context"
	"io"

	"go.etcd.io/raft/v3/raftpb"
)

// RaftLog is what RaftHandler needs of the node's Raft log
// (consensus.Raft implements it).
type RaftLog interface {
	Step(ctx context.Context, m *raftpb.Message) error
	ApplySnapshot(ctx context.Context, msg *raftpb.Message, body io.Reader) error
}

// RaftHandler is the Raft half of Handler (StepRaft, ApplySnapshot) over a
// RaftLog; a node's handler embeds it next to the blob and join halves.
type RaftHandler struct{ Log RaftLog }

// StepRaft hands msgs to the log, in order.
func (h RaftHandler) StepRaft(ctx context.Context, from NodeID, msgs []*raftpb.Message) error {
	for _, m := range msgs {
		if err := h.Log.Step(ctx, m); err != nil {
			return err
		}
	}
	return nil
}

// ApplySnapshot decodes the snapshot's message and streams body into the
// log.
func (h RaftHandler) ApplySnapshot(ctx context.Context, from NodeID, metaBytes []byte, body io.Reader) error {
	msg, err := DecodeSnapshotMeta(metaBytes)
	if err != nil {
		return err
	}
	return h.Log.ApplySnapshot(ctx, msg, body)
}
