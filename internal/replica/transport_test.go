package replica

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/cairn-fs/cairn/internal/blob"
	"github.com/cairn-fs/cairn/internal/placement"
	"github.com/cairn-fs/cairn/internal/transport"
	"github.com/cairn-fs/cairn/internal/vfs"
)

// nodeHandler is a transport.Handler with only the blob half wired.
type nodeHandler struct{ BlobServer }

func (nodeHandler) StepRaft(context.Context, transport.NodeID, []*raftpb.Message) error { return nil }
func (nodeHandler) ApplySnapshot(context.Context, transport.NodeID, []byte, io.Reader) error {
	return errors.New("no raft here")
}
func (nodeHandler) Join(context.Context, transport.NodeID, transport.JoinRequest) (transport.JoinResponse, error) {
	return transport.JoinResponse{}, errors.New("no join here")
}

// TestOverTransport writes and reads real blob stores through the
// in-memory transport: blobs land on their ranked nodes, any node reads
// any blob, and a node cut off from the network does not stop reads.
func TestOverTransport(t *testing.T) {
	net := transport.NewMemNetwork(transport.MemConfig{Seed: 1})
	m := mapOf(t)
	stores := map[placement.NodeID]*blob.Store{}
	reps := map[placement.NodeID]*Replicator{}
	for id := placement.NodeID(1); id <= 5; id++ {
		bs, err := blob.Open(blob.Config{Dir: "/b", FS: vfs.NewMem(), MinFreeBytes: -1,
			Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { bs.Close() })
		stores[id] = bs
		net.Register(transport.NodeID(id), fmt.Sprintf("mem://%d", id), nodeHandler{BlobServer{bs}})
		r, err := New(Config{Self: id, Local: bs, Peers: TransportPeers{net.Client(transport.NodeID(id), nil)},
			Map: func() *placement.Map { return m }})
		if err != nil {
			t.Fatal(err)
		}
		reps[id] = r
	}
	ctx := context.Background()
	var hs []blob.Hash
	for i := 0; i < 30; i++ {
		data := bytes.Repeat([]byte{byte(i)}, 1000+i)
		h := blob.Sum(data)
		hs = append(hs, h)
		if _, err := reps[1].Write(ctx, h, data, placement.Policy{Replicas: 3, WriteQuorum: 3}); err != nil {
			t.Fatal(err)
		}
		for _, id := range placement.Replicas(m, h, 3) {
			if !stores[id].Has(h) {
				t.Fatalf("blob %d missing on ranked node %d", i, id)
			}
		}
	}
	// Every node reads every blob while one node is cut off; the cut-off
	// node still serves what it holds and fails fast on the rest.
	cut := placement.Replicas(m, hs[0], 3)[0]
	net.Isolate(transport.NodeID(cut))
	for id, r := range reps {
		for i, h := range hs {
			want := bytes.Repeat([]byte{byte(i)}, 1000+i)
			p := make([]byte, len(want))
			_, err := r.ReadAt(ctx, h, p, 0)
			if id == cut && !stores[id].Has(h) {
				if !errors.Is(err, placement.ErrUnavailable) {
					t.Fatalf("cut-off node %d, blob %d it lacks: %v, want placement.ErrUnavailable", id, i, err)
				}
				continue
			}
			if err != nil {
				t.Fatalf("node %d blob %d: %v", id, i, err)
			}
			if !bytes.Equal(p, want) {
				t.Fatalf("node %d blob %d: wrong bytes", id, i)
			}
		}
	}
}
