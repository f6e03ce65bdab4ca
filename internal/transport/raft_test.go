package transport

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"
)

func TestRaftSender(t *testing.T) {
	q := &queue{}
	net := NewMemNetwork(MemConfig{Schedule: q.schedule})
	h2, h3 := newFakeHandler(), newFakeHandler()
	net.Register(2, "", h2)
	net.Register(3, "", h3)
	s := RaftSender{C: net.Client(1, nil)}
	s.Send([]*raftpb.Message{raftMsg(1, 2, 1, nil), raftMsg(1, 3, 1, nil), raftMsg(1, 2, 2, nil)})
	q.runAll()
	if got := recvRaft(t, h2, 2, time.Second); got[0].GetIndex() != 1 || got[1].GetIndex() != 2 {
		t.Fatal("messages to node 2 out of order")
	}
	recvRaft(t, h3, 1, time.Second)

	typ := raftpb.MessageType_MsgSnap
	idx := uint64(77)
	snap := &raftpb.Message{Type: &typ, Snapshot: &raftpb.Snapshot{Metadata: &raftpb.SnapshotMetadata{Index: &idx}}}
	if err := s.SendSnapshot(context.Background(), 2, snap, strings.NewReader("data")); err != nil {
		t.Fatal(err)
	}
	m, err := DecodeSnapshotMeta(h2.snapMeta[0])
	if err != nil || m.GetType() != raftpb.MessageType_MsgSnap || m.GetSnapshot().GetMetadata().GetIndex() != 77 {
		t.Fatalf("meta decoded as %v, %v", m, err)
	}
}
