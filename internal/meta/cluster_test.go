package meta

import (
	"errors"
	"testing"

	"github.com/cairn-fs/cairn/internal/kv"
)

func applyOne(t *testing.T, db kv.Store, index uint64, c Command) Result {
	t.Helper()
	b := db.NewBatch()
	defer b.Close()
	res, err := Apply(b, index, []Command{c})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(false); err != nil {
		t.Fatal(err)
	}
	return res[0]
}

func TestClusterMap(t *testing.T) {
	db := kv.NewMem()
	r := NewReader(db)
	n1 := &Node{ID: 7, Name: "web1", URL: "http://10.0.0.1:8080", Zone: "a"}
	if res := applyOne(t, db, 1, Command{Op: OpSetNode, Node: n1, TimeNs: 100}); res.Err != nil {
		t.Fatal(res.Err)
	}
	got, err := r.Node(7)
	if err != nil {
		t.Fatal(err)
	}
	if got.Weight != 1 || got.State != NodeActive || got.JoinedNs != 100 || got.Zone != "a" {
		t.Fatalf("defaults not applied: %+v", got)
	}
	// Replacing keeps the join time.
	n1b := *n1
	n1b.State, n1b.Weight = NodeDraining, 2.5
	if res := applyOne(t, db, 2, Command{Op: OpSetNode, Node: &n1b, TimeNs: 200}); res.Err != nil {
		t.Fatal(res.Err)
	}
	got, _ = r.Node(7)
	if got.State != NodeDraining || got.Weight != 2.5 || got.JoinedNs != 100 {
		t.Fatalf("replace: %+v", got)
	}
	applyOne(t, db, 3, Command{Op: OpSetNode, Node: &Node{ID: 3, Witness: true}, TimeNs: 300})
	nodes, err := r.Nodes()
	if err != nil || len(nodes) != 2 || nodes[0].ID != 3 || nodes[1].ID != 7 {
		t.Fatalf("Nodes: %v %v", nodes, err)
	}
	for _, bad := range []*Node{nil, {ID: 0, URL: "u"}, {ID: 1}, {ID: 1, URL: "u", Weight: -1}, {ID: 1, URL: "u", State: 9}} {
		if res := applyOne(t, db, 4, Command{Op: OpSetNode, Node: bad}); !errors.Is(res.Err, ErrInvalid) {
			t.Errorf("OpSetNode %+v: %v, want ErrInvalid", bad, res.Err)
		}
	}
	if res := applyOne(t, db, 5, Command{Op: OpRemoveNode, Node: &Node{ID: 7}}); res.Err != nil {
		t.Fatal(res.Err)
	}
	if _, err := r.Node(7); !errors.Is(err, ErrNotFound) {
		t.Fatalf("removed node: %v", err)
	}
	if res := applyOne(t, db, 6, Command{Op: OpRemoveNode, Node: &Node{ID: 7}}); !errors.Is(res.Err, ErrNotFound) {
		t.Fatalf("remove twice: %v", res.Err)
	}
}

func TestBucketReplication(t *testing.T) {
	db := kv.NewMem()
	r := NewReader(db)
	res := applyOne(t, db, 1, Command{Op: OpCreateBucket, Bucket: &Bucket{Name: "www", Replicas: Mirror}, TimeNs: 1})
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	b, _ := r.Bucket("www")
	if b.Replicas != Mirror || b.WriteQuorum != 0 {
		t.Fatalf("create: %+v", b)
	}
	res = applyOne(t, db, 2, Command{Op: OpUpdateBucket, Bucket: &Bucket{Name: "www", Replicas: 3, WriteQuorum: 2}, TimeNs: 2})
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	b, _ = r.Bucket("www")
	if b.Replicas != 3 || b.WriteQuorum != 2 {
		t.Fatalf("update: %+v", b)
	}
	for _, bad := range []Bucket{{Replicas: -2}, {Replicas: 17}, {Replicas: 2, WriteQuorum: 3}, {WriteQuorum: -1}} {
		bad.Name = "www"
		if res := applyOne(t, db, 3, Command{Op: OpUpdateBucket, Bucket: &bad}); !errors.Is(res.Err, ErrInvalid) {
			t.Errorf("update %+v: %v, want ErrInvalid", bad, res.Err)
		}
	}
}
