package replica

import (
	"context"
	"testing"

	"github.com/cairn-fs/cairn/internal/blob"
)

// The failure detector lags behind a healed partition or a restart: a blob
// whose only holders are marked dead is still read from them (last), not
// refused. Seen in TestNetnsPartition: right after healing, a node's
// namespace had caught up but every holder of a new blob was still "dead",
// and GETs answered 200 and then cut the body.
func TestReadTriesDeadMarkedHoldersLast(t *testing.T) {
	f := newFakeNet(1, 2, 3, 4, 5)
	data := []byte("written while node 1 was cut off")
	h := blob.Sum(data)
	f.nodes[4].Put(h, data)
	f.nodes[5].Put(h, data)
	// Every other node is marked dead; only 4 and 5 hold the blob.
	m := mapOf(t, 2, 3, 4, 5)
	r := newRep(t, 1, f, m)
	p := make([]byte, len(data))
	if n, err := r.ReadAt(context.Background(), h, p, 0); err != nil || n != len(data) || string(p) != string(data) {
		t.Fatalf("read %d %q %v", n, p, err)
	}

	// Live holders are still asked before dead-marked ones.
	f2 := newFakeNet(1, 2, 3, 4, 5)
	f2.nodes[3].Put(h, data)
	f2.nodes[4].Put(h, data)
	r2 := newRep(t, 1, f2, mapOf(t, 4))
	if _, err := r2.ReadAt(context.Background(), h, p, 0); err != nil {
		t.Fatal(err)
	}
	if f2.gets[4] > 0 {
		t.Fatalf("dead-marked node 4 asked although live node 3 holds the blob (gets %v)", f2.gets)
	}

	// No holder anywhere: a clear ErrUnavailable-class error, no hang.
	f3 := newFakeNet(1, 2, 3, 4, 5)
	r3 := newRep(t, 1, f3, mapOf(t, 2, 3, 4, 5))
	if _, err := r3.ReadAt(context.Background(), h, p, 0); err == nil {
		t.Fatal("read of a blob no node holds succeeded")
	}
}
