package consensus

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"go.etcd.io/raft/v3"

	"github.com/cairn-fs/cairn/internal/kv"
	"github.com/cairn-fs/cairn/internal/meta"
)

func TestRaftReplicatesThroughAnyNode(t *testing.T) {
	c := newCluster(t, 1, 3, nil)
	l := c.leader()
	c.mustPropose(l.id, bucketCmd)
	var names []string
	for i, n := range c.running() { // leader and followers alike
		for j := range 5 {
			name := fmt.Sprintf("n%d-%d", n.id, j)
			res := c.mustPropose(n.id, mkdirNamed(name))
			if res.Inode == nil || res.Inode.Type != meta.TypeDir {
				t.Fatalf("node %d: mkdir result %+v", n.id, res)
			}
			names = append(names, name)
			// A proposer sees its own write as soon as it is acknowledged.
			if _, err := meta.NewReader(n.db).Lookup("bkt", name); err != nil {
				t.Fatalf("node %d: own write %q not visible after ack: %v", n.id, name, err)
			}
		}
		_ = i
	}
	// A failing command is applied (and fails) everywhere, reported to its proposer.
	if o := c.propose(c.running()[1].id, bucketCmd); o.err != nil || !errors.Is(o.res.Err, meta.ErrBucketExists) {
		t.Fatalf("duplicate bucket: %v / %v", o.err, o.res.Err)
	}
	idx := c.converge()
	c.checkHas(names)
	if idx < 17 {
		t.Fatalf("applied index %d, want at least 17", idx)
	}
}

func TestRaftBatchesConcurrentProposals(t *testing.T) {
	c := newCluster(t, 2, 3, nil)
	l := c.leader()
	c.mustPropose(l.id, bucketCmd)
	c.settle()
	before := l.entries.Load()
	const n = 400
	var follower *tnode
	for _, x := range c.running() {
		if x != l {
			follower = x
		}
	}
	ctx := context.Background()
	start := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		via := l
		if i%4 == 0 {
			via = follower
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			res, err := via.r.Propose(ctx, mkdirNamed(fmt.Sprintf("b%d", i)))
			if err == nil {
				err = res.Err
			}
			if err != nil {
				errs <- err
			}
		}()
	}
	close(start)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	c.until("all proposals answered", 500, func() bool {
		select {
		case <-done:
			return true
		default:
			return false
		}
	})
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	c.converge()
	entries := l.entries.Load() - before
	t.Logf("%d concurrent proposals in %d entries", n, entries)
	if entries > n/4 {
		t.Fatalf("weak batching: %d proposals took %d entries", n, entries)
	}
}

func TestRaftLeaderIsolated(t *testing.T) {
	c := newCluster(t, 3, 3, nil)
	old := c.leader()
	c.mustPropose(old.id, bucketCmd)
	c.converge()
	oldTerm := old.r.Status().Term
	c.net.Isolate(old.id)
	// A write through the cut-off leader cannot commit.
	ctx, cancel := context.WithCancel(context.Background())
	stuck := goPropose(ctx, old, mkdirNamed("lost"))
	var nl *tnode
	c.until("new leader in the majority", 300, func() bool {
		for _, n := range c.running() {
			if s := n.r.Status(); n != old && s.State == raft.StateLeader && s.Term > oldTerm {
				nl = n
				return true
			}
		}
		return false
	})
	var names []string
	for i := range 10 {
		via := nl.id
		if i%2 == 1 { // through the other follower too
			for _, n := range c.running() {
				if n != old && n != nl {
					via = n.id
				}
			}
		}
		name := fmt.Sprintf("maj%d", i)
		c.mustPropose(via, mkdirNamed(name))
		names = append(names, name)
	}
	// The old leader steps down (CheckQuorum) and still serves its old
	// state. It may not have yet: it checks its quorum once an election
	// timeout, and its first check after the cut still counts the
	// followers' answers from before it, so it steps down up to two
	// timeouts after the cut, while the followers may elect a leader
	// after one (randomized: one to two) and commit these writes at once.
	c.until("the isolated leader steps down (CheckQuorum)", 2*10+5, func() bool {
		return old.r.Status().State != raft.StateLeader
	})
	if _, err := meta.NewReader(old.db).Lookup("bkt", names[0]); err == nil {
		t.Fatal("isolated node saw a write it cannot have received")
	}
	select {
	case o := <-stuck:
		t.Fatalf("proposal through the isolated leader answered: %+v", o)
	default:
	}
	cancel()
	c.settle()
	if o := <-stuck; !errors.Is(o.err, ErrUnavailable) || !errors.Is(o.err, context.Canceled) {
		t.Fatalf("abandoned proposal: %v", o.err)
	}
	c.net.Heal()
	c.converge()
	c.checkHas(names)
	if _, err := meta.NewReader(old.db).Lookup("bkt", "lost"); err == nil {
		t.Fatal("the proposal never acknowledged by a quorum was applied")
	}
	// The rejoined node takes writes again.
	c.mustPropose(old.id, mkdirNamed("after"))
	c.converge()
	c.checkHas([]string{"after"})
}

func TestRaftLearnerCatchesUpFromSnapshot(t *testing.T) {
	mod := func(cfg *RaftConfig) { cfg.CompactAfter, cfg.CompactMargin = 20, 5 }
	c := newCluster(t, 4, 3, mod)
	l := c.leader()
	c.mustPropose(l.id, bucketCmd)
	var names []string
	for i := range 60 {
		name := fmt.Sprintf("s%d", i)
		c.mustPropose(c.running()[i%3].id, mkdirNamed(name))
		names = append(names, name)
	}
	c.converge()
	if first := l.r.st.truncIndex + 1; first < 20 {
		t.Fatalf("leader log not truncated: first index %d", first)
	}
	// Node 4 starts empty and is added as a learner: the entries it needs
	// are gone, so it gets a snapshot, then the log.
	n4 := c.start(4, nil)
	c.wait("add learner 4", 300, func() error { return l.r.AddLearner(context.Background(), 4) })
	c.converge()
	if n4.snaps.Load() == 0 {
		t.Fatal("learner caught up without a snapshot")
	}
	for i := range 10 {
		name := fmt.Sprintf("t%d", i)
		c.mustPropose(4, mkdirNamed(name)) // a learner forwards proposals too
		names = append(names, name)
	}
	c.converge()
	c.checkHas(names)
	if m := n4.r.Members(); !slices.Contains(m.GetLearners(), 4) {
		t.Fatalf("members on node 4: %v", m)
	}
	// Promote it explicitly.
	c.wait("promote 4", 300, func() error { return l.r.Promote(context.Background(), 4) })
	if m := l.r.Members(); !slices.Contains(m.GetVoters(), 4) || len(m.GetVoters()) != 4 {
		t.Fatalf("after promote: %v", m)
	}
	// Membership changes are idempotent.
	if err := l.r.Promote(context.Background(), 4); err != nil {
		t.Fatal(err)
	}
	if err := l.r.Promote(context.Background(), 9); !errors.Is(err, ErrBadMembership) {
		t.Fatalf("promote a stranger: %v", err)
	}
	// Remove a follower voter, add learner 5, then remove another voter: the
	// leader promotes learner 5 on its own to keep 3 voters.
	var victims []uint64
	for _, id := range []uint64{1, 2, 3} {
		if id != l.id {
			victims = append(victims, id)
		}
	}
	c.wait("remove voter", 300, func() error { return l.r.Remove(context.Background(), victims[0]) })
	c.stop(victims[0])
	c.start(5, nil)
	c.wait("add learner 5", 300, func() error { return l.r.AddLearner(context.Background(), 5) })
	c.wait("remove voter", 300, func() error { return l.r.Remove(context.Background(), victims[1]) })
	c.stop(victims[1])
	c.until("learner 5 promoted automatically", 300, func() bool {
		return slices.Contains(l.r.Members().GetVoters(), 5)
	})
	if v := l.r.Members().GetVoters(); len(v) != 3 {
		t.Fatalf("voters %v, want 3", v)
	}
	c.mustPropose(5, mkdirNamed("final"))
	c.converge()
	c.checkHas(append(names, "final"))
}

func TestRaftRestartResumes(t *testing.T) {
	mod := func(cfg *RaftConfig) { cfg.CompactAfter, cfg.CompactMargin = 30, 10 }
	c := newCluster(t, 5, 3, mod)
	l := c.leader()
	c.mustPropose(l.id, bucketCmd)
	var names []string
	add := func(via uint64, k int, prefix string) {
		for i := range k {
			name := fmt.Sprintf("%s%d", prefix, i)
			c.mustPropose(via, mkdirNamed(name))
			names = append(names, name)
		}
	}
	add(l.id, 10, "a")
	c.converge()
	var f *tnode
	for _, n := range c.running() {
		if n != l {
			f = n
		}
	}
	applied := f.r.AppliedIndex()
	c.stop(f.id)
	add(l.id, 15, "b")
	f2 := c.start(f.id, []uint64{1, 2, 3}) // InitialVoters are ignored once there is state
	if got := f2.r.AppliedIndex(); got != applied {
		t.Fatalf("restarted at applied %d, want %d", got, applied)
	}
	c.converge()
	c.checkHas(names)
	// Restart the leader too, with the log truncated meanwhile.
	add(l.id, 40, "c")
	c.converge()
	applied = l.r.AppliedIndex()
	c.stop(l.id)
	add(f.id, 5, "d")
	c.start(l.id, nil)
	if got := c.nodes[l.id].r.AppliedIndex(); got != applied {
		t.Fatalf("restarted leader at %d, want %d", got, applied)
	}
	c.converge()
	c.checkHas(names)
}

func TestRaftReadIndex(t *testing.T) {
	c := newCluster(t, 6, 3, nil)
	l := c.leader()
	c.mustPropose(l.id, bucketCmd)
	c.converge()
	var f *tnode
	for _, n := range c.running() {
		if n != l {
			f = n
		}
	}
	// f falls behind while the others write.
	c.net.Isolate(f.id)
	for i := range 10 {
		c.mustPropose(l.id, mkdirNamed(fmt.Sprintf("r%d", i)))
	}
	// Cut off, f cannot get a read barrier.
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan error, 1)
	go func() { _, err := f.r.ReadIndex(ctx); ch <- err }()
	for range 30 {
		c.settle()
		c.tickAll()
	}
	select {
	case err := <-ch:
		t.Fatalf("read barrier without a quorum returned %v", err)
	default:
	}
	cancel()
	if err := <-ch; !errors.Is(err, ErrUnavailable) {
		t.Fatalf("cancelled read barrier: %v", err)
	}
	c.net.Heal()
	want := l.r.Status().Commit
	var idx, appliedAtReturn uint64
	c.wait("read index on the lagging follower", 300, func() error {
		var err error
		idx, err = f.r.ReadIndex(context.Background())
		appliedAtReturn = f.r.AppliedIndex()
		return err
	})
	if idx < want {
		t.Fatalf("read index %d below the commit index %d seen before the call", idx, want)
	}
	if appliedAtReturn < idx {
		t.Fatalf("ReadIndex returned %d with only %d applied", idx, appliedAtReturn)
	}
	if _, err := meta.NewReader(f.db).Lookup("bkt", "r9"); err != nil {
		t.Fatalf("read after the barrier misses the last acknowledged write: %v", err)
	}
	// On the leader too.
	c.wait("read index on the leader", 100, func() error { _, err := l.r.ReadIndex(context.Background()); return err })
}

// ProposeMany hands commands over in order: reserved inode numbers come
// out increasing, through the leader and through a follower, and Local
// does the same.
func TestProposeManyKeepsOrder(t *testing.T) {
	reserves := func() []meta.Command {
		cmds := make([]meta.Command, 50)
		for i := range cmds {
			cmds[i] = meta.Command{Op: meta.OpReserveInos, Count: 1, TimeNs: 1}
		}
		return cmds
	}
	check := func(who string, res []meta.Result, errs []error) {
		t.Helper()
		var last meta.Ino
		for i := range res {
			if errs[i] != nil || res[i].Err != nil {
				t.Fatalf("%s: command %d: %v / %v", who, i, errs[i], res[i].Err)
			}
			if ino := res[i].Inode.Ino; ino <= last {
				t.Fatalf("%s: command %d reserved %d after %d: out of order", who, i, ino, last)
			} else {
				last = ino
			}
		}
	}
	c := newCluster(t, 7, 3, nil)
	l := c.leader()
	c.mustPropose(l.id, bucketCmd)
	for _, n := range c.running() {
		type out struct {
			res  []meta.Result
			errs []error
		}
		ch := make(chan out, 1)
		go func() {
			res, errs := n.r.ProposeMany(context.Background(), reserves())
			ch <- out{res, errs}
		}()
		var o out
		c.until(fmt.Sprintf("ProposeMany through %d", n.id), 2000, func() bool {
			select {
			case o = <-ch:
				return true
			default:
				return false
			}
		})
		check(fmt.Sprintf("node %d", n.id), o.res, o.errs)
	}
	lg, err := NewLocal(LocalConfig{KV: kv.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer lg.Close()
	res, errs := lg.ProposeMany(context.Background(), reserves())
	check("local", res, errs)
}
