package consensus

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/cairn-fs/cairn/internal/kv"
	"github.com/cairn-fs/cairn/internal/meta"
)

// TestForceNewCluster: a 3-voter group loses two voters for good; the
// survivor cannot commit; ForceNewCluster on its stopped store makes it the
// only voter: it elects itself, keeps every acknowledged write, loses the
// entry that never committed, applies the forced commands, takes new
// writes, and stays a one-voter group across a restart.
func TestForceNewCluster(t *testing.T) {
	c := newCluster(t, 7, 3, nil)
	s := c.leader()
	c.mustPropose(s.id, bucketCmd)
	c.mustPropose(s.id, createFile("a"))
	c.mustPropose(s.id, createFile("b"))
	c.converge()
	var others []uint64
	for id := range c.nodes {
		if id != s.id {
			others = append(others, id)
			c.stop(id)
		}
	}
	slices.Sort(others)

	// Alone, the survivor appends but cannot commit.
	lastIndex := func() uint64 {
		st, err := openStorage(s.db, 1<<20, newSnapshots())
		if err != nil {
			t.Fatal(err)
		}
		return st.last
	}
	before := lastIndex()
	ctx, cancel := context.WithCancel(context.Background())
	lost := goPropose(ctx, s, createFile("lost"))
	c.until("the lone proposal appended", 5, func() bool { return lastIndex() > before })
	select {
	case r := <-lost:
		t.Fatalf("a proposal committed without a quorum: %+v", r)
	default:
	}
	cancel()
	c.stop(s.id)

	res, err := ForceNewCluster(s.db, s.id, []meta.Command{mkdirNamed("forced")})
	if err != nil {
		t.Fatal(err)
	}
	if res.ID != s.id || !slices.Equal(res.Removed, others) || res.Discarded < 1 || res.Index <= res.Applied {
		t.Fatalf("ForceNewCluster = %+v; want removed %v and the uncommitted entry discarded", res, others)
	}

	c.start(s.id, nil)
	if l := c.leader(); l.id != s.id {
		t.Fatalf("leader %d, want the survivor %d", l.id, s.id)
	}
	c.until("the forced entries applied", 100, func() bool { return s.r.AppliedIndex() >= res.Index })
	if m := s.r.Members(); !slices.Equal(m.GetVoters(), []uint64{s.id}) || len(m.GetLearners()) > 0 {
		t.Fatalf("members after force: %v", m)
	}
	c.mustPropose(s.id, createFile("c"))
	c.checkHas([]string{"a", "b", "c", "forced"})
	if _, err := meta.NewReader(s.db).Lookup("bkt", "lost"); !errors.Is(err, meta.ErrNotFound) {
		t.Fatalf("the uncommitted entry applied: %v", err)
	}

	// Durable: a restart is still a one-voter group that takes writes.
	c.stop(s.id)
	c.start(s.id, nil)
	c.leader()
	c.mustPropose(s.id, createFile("d"))
	c.checkHas([]string{"a", "b", "c", "d", "forced"})
	if n := s.dupes.Load(); n != 0 {
		t.Fatalf("%d duplicate applications", n)
	}
}

func TestForceNewClusterRefuses(t *testing.T) {
	if _, err := ForceNewCluster(kv.NewMem(), 1, nil); !errors.Is(err, ErrNoRaftState) {
		t.Fatalf("empty store: %v", err)
	}
	c := newCluster(t, 3, 1, nil)
	n := c.leader()
	c.stop(n.id)
	if _, err := ForceNewCluster(n.db, n.id+1, nil); err == nil {
		t.Fatal("forced a store under another node's ID")
	}
	// A lone voter is forced to what it already is: no change but the
	// commands.
	res, err := ForceNewCluster(n.db, n.id, nil)
	if err != nil || len(res.Removed) != 0 || res.Discarded != 0 {
		t.Fatalf("lone voter: %+v, %v", res, err)
	}
}
