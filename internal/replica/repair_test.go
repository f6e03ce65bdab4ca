package replica

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-fs/cairn/internal/clock"

	"github.com/cairn-fs/cairn/internal/blob"
	"github.com/cairn-fs/cairn/internal/kv"
	"github.com/cairn-fs/cairn/internal/meta"
	"github.com/cairn-fs/cairn/internal/placement"
	"github.com/cairn-fs/cairn/internal/transport"
	"github.com/cairn-fs/cairn/internal/vfs"
)

// faultyHandler is a node's RPC handler that can serve corrupt bytes for
// chosen blobs.
type faultyHandler struct {
	nodeHandler
	mu      sync.Mutex
	corrupt map[blob.Hash]bool
}

func (f *faultyHandler) setCorrupt(h blob.Hash) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.corrupt[h] = true
}

func (f *faultyHandler) GetBlob(ctx context.Context, from transport.NodeID, h blob.Hash, off, n int64) (io.ReadCloser, int64, error) {
	rc, size, err := f.nodeHandler.GetBlob(ctx, from, h, off, n)
	f.mu.Lock()
	bad := f.corrupt[h]
	f.mu.Unlock()
	if err != nil || !bad {
		return rc, size, err
	}
	data, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		return nil, 0, err
	}
	if len(data) > 0 {
		data[len(data)/2] ^= 0xff
	}
	return io.NopCloser(bytes.NewReader(data)), size, nil
}

// countingPeers counts HasBlobs calls and their largest batch.
type countingPeers struct {
	Peers
	calls, maxBatch atomic.Int64
}

func (c *countingPeers) HasBlobs(ctx context.Context, to placement.NodeID, hs []blob.Hash) ([]bool, error) {
	c.calls.Add(1)
	for {
		cur := c.maxBatch.Load()
		if int64(len(hs)) <= cur || c.maxBatch.CompareAndSwap(cur, int64(len(hs))) {
			break
		}
	}
	return c.Peers.HasBlobs(ctx, to, hs)
}

// rcluster is N real blob stores over the in-memory transport, each with a
// Replicator and a Repairer, sharing one placement map and one namespace
// (refs: blob → R).
type rcluster struct {
	t        *testing.T
	net      *transport.MemNetwork
	m        atomic.Pointer[placement.Map]
	stores   map[placement.NodeID]*blob.Store
	handlers map[placement.NodeID]*faultyHandler
	peers    map[placement.NodeID]*countingPeers
	reps     map[placement.NodeID]*Replicator
	repairs  map[placement.NodeID]*Repairer
	batch    int

	mu    sync.Mutex
	refs  map[blob.Hash]int
	data  map[blob.Hash][]byte
	under map[blob.Hash]int // under-replicated records: blob → R
}

func newRCluster(t *testing.T, n int, batch int, dead ...placement.NodeID) *rcluster {
	c := &rcluster{t: t, net: transport.NewMemNetwork(transport.MemConfig{Seed: 1}),
		stores: map[placement.NodeID]*blob.Store{}, handlers: map[placement.NodeID]*faultyHandler{},
		peers: map[placement.NodeID]*countingPeers{}, reps: map[placement.NodeID]*Replicator{},
		repairs: map[placement.NodeID]*Repairer{}, batch: batch,
		refs: map[blob.Hash]int{}, data: map[blob.Hash][]byte{}, under: map[blob.Hash]int{}}
	c.setMap(n, dead...)
	for id := placement.NodeID(1); id <= placement.NodeID(n); id++ {
		c.addNode(id)
	}
	return c
}

// mapN is the map of nodes 1..n in one zone, dead ones marked.
func mapN(t *testing.T, n int, dead ...placement.NodeID) *placement.Map {
	var nodes []placement.Node
	for id := placement.NodeID(1); id <= placement.NodeID(n); id++ {
		st := placement.Live
		if slices.Contains(dead, id) {
			st = placement.Dead
		}
		nodes = append(nodes, placement.Node{ID: id, Zone: "z", Weight: 1, State: st})
	}
	m, err := placement.NewMap(nodes)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func (c *rcluster) setMap(n int, dead ...placement.NodeID) { c.m.Store(mapN(c.t, n, dead...)) }

func (c *rcluster) ids() []placement.NodeID {
	var ids []placement.NodeID
	for id := range c.stores {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// referenced is the namespace as RepairConfig.Referenced: by hash.
func (c *rcluster) referenced(ctx context.Context, fn func(h blob.Hash, rf int) bool) error {
	c.mu.Lock()
	hs := make([]blob.Hash, 0, len(c.refs))
	for h := range c.refs {
		hs = append(hs, h)
	}
	refs := make(map[blob.Hash]int, len(c.refs))
	for h, rf := range c.refs {
		refs[h] = rf
	}
	c.mu.Unlock()
	slices.SortFunc(hs, func(a, b blob.Hash) int { return bytes.Compare(a[:], b[:]) })
	for _, h := range hs {
		if !fn(h, refs[h]) {
			break
		}
	}
	return nil
}

// underReplicated and markReplicated are the namespace's under-replicated
// records as RepairConfig wants them.
func (c *rcluster) underReplicated(fn func(h blob.Hash, rf int) bool) error {
	c.mu.Lock()
	recs := make(map[blob.Hash]int, len(c.under))
	for h, rf := range c.under {
		recs[h] = rf
	}
	c.mu.Unlock()
	for h, rf := range recs {
		if !fn(h, rf) {
			break
		}
	}
	return nil
}

func (c *rcluster) markReplicated(_ context.Context, hs []blob.Hash) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, h := range hs {
		delete(c.under, h)
	}
	return nil
}

func (c *rcluster) addNode(id placement.NodeID) {
	t := c.t
	bs, err := blob.Open(blob.Config{Dir: "/b", FS: vfs.NewMem(), MinFreeBytes: -1,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bs.Close() })
	c.stores[id] = bs
	h := &faultyHandler{nodeHandler: nodeHandler{BlobServer{bs}}, corrupt: map[blob.Hash]bool{}}
	c.handlers[id] = h
	c.net.Register(transport.NodeID(id), fmt.Sprintf("mem://%d", id), h)
	peers := &countingPeers{Peers: TransportPeers{c.net.Client(transport.NodeID(id), nil)}}
	c.peers[id] = peers
	rep, err := New(Config{Self: id, Local: bs, Peers: peers, Map: c.m.Load})
	if err != nil {
		t.Fatal(err)
	}
	c.reps[id] = rep
	rp, err := NewRepairer(RepairConfig{Self: id, Local: bs, Peers: peers, Map: c.m.Load,
		Referenced: c.referenced, BatchSize: c.batch, Logger: slog.New(slog.DiscardHandler),
		UnderReplicated: c.underReplicated, MarkReplicated: c.markReplicated})
	if err != nil {
		t.Fatal(err)
	}
	c.repairs[id] = rp
}

// write stores blob number i with replication factor rf through node via
// (all targets acknowledging) and records it in the namespace.
func (c *rcluster) write(via placement.NodeID, i, rf int) blob.Hash {
	data := bytes.Repeat([]byte(fmt.Sprintf("blob %d rf %d;", i, rf)), 10+i%50)
	h := blob.Sum(data)
	m := c.m.Load()
	w := len(placement.Place(m, h, rf).Targets)
	if _, err := c.reps[via].Write(context.Background(), h, data, placement.Policy{Replicas: rf, WriteQuorum: w}); err != nil {
		c.t.Fatalf("write blob %d: %v", i, err)
	}
	c.mu.Lock()
	c.refs[h], c.data[h] = rf, data
	c.mu.Unlock()
	return h
}

func (c *rcluster) holders(h blob.Hash) []placement.NodeID {
	var out []placement.NodeID
	for _, id := range c.ids() {
		if c.stores[id].Has(h) {
			out = append(out, id)
		}
	}
	return out
}

// round runs one pass on each of nodes (all nodes if none), in ID order,
// and reports whether any pass changed something or left work undone.
func (c *rcluster) round(nodes ...placement.NodeID) (RepairStats, bool) {
	if len(nodes) == 0 {
		nodes = c.ids()
	}
	var sum RepairStats
	busy := false
	for _, id := range nodes {
		st, err := c.repairs[id].RunOnce(context.Background())
		if err != nil {
			c.t.Fatalf("node %d: repair pass: %v", id, err)
		}
		busy = busy || !st.Settled()
		sum.Pulled += st.Pulled
		sum.PullFailed += st.PullFailed
		sum.Pushed += st.Pushed
		sum.PushFailed += st.PushFailed
		sum.Dropped += st.Dropped
		sum.Kept += st.Kept
	}
	return sum, busy
}

// settle runs rounds until one finds nothing to do; it fails after max.
func (c *rcluster) settle(max int) (total RepairStats, rounds int) {
	for rounds = 1; rounds <= max; rounds++ {
		st, busy := c.round()
		total.Pulled += st.Pulled
		total.Pushed += st.Pushed
		total.Dropped += st.Dropped
		if !busy {
			return total, rounds
		}
	}
	c.t.Fatalf("repair did not settle in %d rounds", max)
	return
}

// checkPlaced fails unless every referenced blob is on exactly its home
// nodes under the current map, with the right bytes.
func (c *rcluster) checkPlaced() {
	c.t.Helper()
	m := c.m.Load()
	c.mu.Lock()
	defer c.mu.Unlock()
	for h, rf := range c.refs {
		want := placement.Replicas(m, h, rf)
		slices.Sort(want)
		if got := c.holders(h); !slices.Equal(got, want) {
			c.t.Fatalf("blob %s (R=%d) on %v, want exactly %v", h.String()[:12], rf, got, want)
		}
		for _, id := range want {
			got, err := c.stores[id].Get(h, nil)
			if err != nil || !bytes.Equal(got, c.data[h]) {
				c.t.Fatalf("blob %s on node %d: wrong bytes (%v)", h.String()[:12], id, err)
			}
		}
	}
}

// (a) Blobs written while a node is dead go to stand-ins; once it is back,
// repair moves them home and the stand-ins drop their copies.
func TestRepairMovesStandInCopiesHome(t *testing.T) {
	const dead = 3
	c := newRCluster(t, 5, 0, dead)
	c.net.Isolate(dead)
	var standIns int
	for i := 0; i < 90; i++ {
		rf := []int{3, 2, 1}[i%3]
		via := placement.NodeID(1 + i%5)
		if via == dead {
			via = 1
		}
		h := c.write(via, i, rf)
		if slices.Contains(placement.Replicas(c.m.Load(), h, rf), dead) {
			standIns++
		}
	}
	if standIns < 10 {
		t.Fatalf("only %d blobs have a stand-in copy; the test needs more", standIns)
	}
	// While the node is still dead, passes change nothing: every blob is
	// on its Targets already.
	if st, busy := c.round(1, 2, 4, 5); busy {
		t.Fatalf("pass while node %d is dead: %+v", dead, st)
	}

	c.net.Heal()
	c.setMap(5)
	total, rounds := c.settle(5)
	c.checkPlaced()
	if total.Dropped != int64(standIns) {
		t.Fatalf("dropped %d stand-in copies, want %d", total.Dropped, standIns)
	}
	t.Logf("settled in %d rounds: %d pulled, %d pushed, %d dropped", rounds, total.Pulled, total.Pushed, total.Dropped)
	// Idempotent: a settled cluster's pass is a no-op.
	if st, busy := c.round(); busy || st.Changed() {
		t.Fatalf("pass after settling: %+v", st)
	}
}

// (b) A sixth node takes about R/(N+1) of the blobs; the old holders drop
// theirs; every blob ends with exactly R copies. HasBlobs is batched.
func TestRepairRebalancesOntoNewNode(t *testing.T) {
	const batch = 16
	c := newRCluster(t, 5, batch)
	const n3 = 300
	var r3 []blob.Hash
	for i := 0; i < n3; i++ {
		r3 = append(r3, c.write(placement.NodeID(1+i%5), i, 3))
	}
	for i := n3; i < n3+10; i++ {
		c.write(1, i, placement.Mirror)
	}
	for i := n3 + 10; i < n3+40; i++ {
		c.write(2, i, 1)
	}
	before := map[blob.Hash][]placement.NodeID{}
	for _, h := range r3 {
		before[h] = c.holders(h)
	}

	c.addNode(6)
	c.setMap(6)
	total, rounds := c.settle(5)
	c.checkPlaced()
	moved := 0
	for _, h := range r3 {
		after := c.holders(h)
		if !slices.Equal(after, before[h]) {
			moved++
			if !slices.Contains(after, 6) {
				t.Fatalf("blob %s moved from %v to %v, not onto the new node", h.String()[:12], before[h], after)
			}
		}
	}
	// About R/(N+1) = 3/6 of the R=3 blobs; binomial sd ≈ 8.7 for 300.
	if want := n3 * 3 / 6; moved < want-45 || moved > want+45 {
		t.Fatalf("%d of %d blobs moved, want about %d", moved, n3, want)
	}
	t.Logf("settled in %d rounds: %d of %d R=3 blobs moved; %d pulled, %d pushed, %d dropped",
		rounds, moved, n3, total.Pulled, total.Pushed, total.Dropped)
	var calls int64
	for id, p := range c.peers {
		calls += p.calls.Load()
		if mb := p.maxBatch.Load(); mb > batch {
			t.Fatalf("node %d sent %d hashes in one HasBlobs call, batch is %d", id, mb, batch)
		}
	}
	if calls == 0 {
		t.Fatal("no HasBlobs calls: hand-off never confirmed anything")
	}
}

// (c) A target that cannot be reached during the hand-off: the stand-in
// keeps its copy until it can confirm, then drops it.
func TestRepairKeepsCopyWhenTargetUnreachable(t *testing.T) {
	const dead = 2
	c := newRCluster(t, 5, 0, dead)
	c.net.Isolate(dead)
	owed := map[blob.Hash][]placement.NodeID{} // blob → its stand-in holders
	for i := 0; i < 40; i++ {
		h := c.write(1+placement.NodeID(i%2)*2, i, 3) // via 1 or 3
		plan := placement.Place(c.m.Load(), h, 3)
		if len(plan.StandIns()) > 0 {
			owed[h] = plan.StandIns()
		}
	}
	if len(owed) == 0 {
		t.Fatal("no stand-in copies written")
	}
	// The node is back in the map, but the network still cannot reach it.
	c.setMap(5)
	var kept int64
	for range 3 {
		st, _ := c.round(1, 3, 4, 5)
		if st.Dropped != 0 {
			t.Fatalf("dropped %d copies while a target was unreachable", st.Dropped)
		}
		kept = st.Kept
	}
	if kept != int64(len(owed)) {
		t.Fatalf("kept %d copies, want %d", kept, len(owed))
	}
	for h, ins := range owed {
		for _, id := range ins {
			if !c.stores[id].Has(h) {
				t.Fatalf("stand-in %d dropped blob %s while its home node was unreachable", id, h.String()[:12])
			}
		}
	}
	c.net.Heal()
	c.settle(5)
	c.checkPlaced()
}

// (d) Sources that serve corrupt bytes, or hold nothing, do not break a
// pass: the node pulls what it can, verified, and fails the rest cleanly.
func TestRepairSurvivesBadSources(t *testing.T) {
	c := newRCluster(t, 5, 0)
	m := c.m.Load()
	const self = 4
	var pulls, partlyBad, allBad []blob.Hash
	for i := 0; len(pulls) < 12; i++ {
		h := c.write(1, i, 3)
		home := placement.Replicas(m, h, 3)
		if !slices.Contains(home, self) {
			continue
		}
		if err := c.stores[self].Delete(h); err != nil {
			t.Fatal(err)
		}
		pulls = append(pulls, h)
		var others []placement.NodeID
		for _, id := range placement.Sources(m, h) {
			if id != self && c.stores[id].Has(h) {
				others = append(others, id)
			}
		}
		switch len(pulls) % 3 {
		case 1: // the first source tried serves bad bytes
			c.handlers[others[0]].setCorrupt(h)
			partlyBad = append(partlyBad, h)
		case 2: // every source does
			for _, id := range others {
				c.handlers[id].setCorrupt(h)
			}
			allBad = append(allBad, h)
		}
	}
	// Referenced blobs that no node holds at all.
	var lost int64
	for i := 0; i < 20; i++ {
		h := blob.Sum([]byte(fmt.Sprint("lost ", i)))
		c.mu.Lock()
		c.refs[h] = 3
		c.mu.Unlock()
		if slices.Contains(placement.Replicas(m, h, 3), self) {
			lost++
		}
	}
	st, err := c.repairs[self].RunOnce(context.Background())
	if err != nil {
		t.Fatalf("pass: %v", err)
	}
	if want := int64(len(pulls) - len(allBad)); st.Pulled != want {
		t.Fatalf("pulled %d, want %d (%+v)", st.Pulled, want, st)
	}
	if want := int64(len(allBad)) + lost; st.PullFailed != want {
		t.Fatalf("%d pulls failed, want %d (%+v)", st.PullFailed, want, st)
	}
	for _, h := range pulls {
		if slices.Contains(allBad, h) {
			if c.stores[self].Has(h) {
				t.Fatalf("blob %s stored from corrupt sources", h.String()[:12])
			}
			continue
		}
		got, err := c.stores[self].Get(h, nil)
		if err != nil || blob.Sum(got) != h {
			t.Fatalf("pulled blob %s: %v, hash ok %v", h.String()[:12], err, err == nil && blob.Sum(got) == h)
		}
	}
	if len(partlyBad) == 0 || len(allBad) == 0 {
		t.Fatal("test setup: no corrupt sources")
	}
}

// A node the map says is dead neither pulls nor drops anything.
func TestRepairDeadSelfDoesNothing(t *testing.T) {
	c := newRCluster(t, 5, 0)
	for i := 0; i < 20; i++ {
		c.write(1, i, 3)
	}
	c.setMap(5, 1)
	st, err := c.repairs[1].RunOnce(context.Background())
	if err != nil || st.Checked != 0 || st.Changed() {
		t.Fatalf("dead node's pass: %+v, %v", st, err)
	}
}

// The pacer holds a pass to its rate.
func TestRepairThrottle(t *testing.T) {
	p := newPacer(clock.Real{}, 200, 0)
	ctx := context.Background()
	for range 21 {
		if err := p.wait(ctx, 100); err != nil {
			t.Fatal(err)
		}
	}
	if el := p.elapsed(); el < 90e6 { // 20 intervals of 5 ms
		t.Fatalf("21 blobs at 200/s took %v", el)
	}
	p = newPacer(clock.Real{}, 0, 1e6)
	for range 11 {
		if err := p.wait(ctx, 10_000); err != nil {
			t.Fatal(err)
		}
	}
	if el := p.elapsed(); el < 90e6 { // 100 kB at 1 MB/s
		t.Fatalf("100 kB at 1 MB/s took %v", el)
	}
}

func (p *pacer) elapsed() time.Duration { return time.Since(p.start) }

// meta.Reader.ReferencedBlobs, the node's RepairConfig.Referenced: every
// referenced blob once, in hash order, with the largest R of the buckets
// naming it.
func TestReferencedBlobs(t *testing.T) {
	s := kv.NewMem()
	index := uint64(0)
	apply := func(cmds ...meta.Command) {
		index++
		b := s.NewBatch()
		defer b.Close()
		res, err := meta.Apply(b, index, cmds)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res {
			if r.Err != nil {
				t.Fatalf("command %d: %v", i, r.Err)
			}
		}
		if err := b.Commit(false); err != nil {
			t.Fatal(err)
		}
	}
	hs := func(names ...string) []meta.Extent {
		var out []meta.Extent
		for i, n := range names {
			out = append(out, meta.Extent{Hash: blob.Sum([]byte(n)), Offset: int64(i), Length: 1})
		}
		return out
	}
	put := func(bucket, path string, ext []meta.Extent) meta.Command {
		return meta.Command{Op: meta.OpPutFile, BucketName: bucket, Path: path, TimeNs: 1,
			File: &meta.Inode{Type: meta.TypeFile, Mode: 0o644, Size: int64(len(ext)), Extents: ext}}
	}
	bucket := func(name string, rf int32) meta.Command {
		return meta.Command{Op: meta.OpCreateBucket, TimeNs: 1, Bucket: &meta.Bucket{Name: name, Replicas: rf}}
	}
	apply(bucket("aaa", 0), bucket("bbb", 2), bucket("mmm", meta.Mirror), bucket("ccc", 5))
	var many []string
	for i := range 1500 {
		many = append(many, fmt.Sprint("many ", i))
	}
	apply(put("aaa", "x", hs("h1", "h2")), put("bbb", "y", hs("h2", "h3")), put("mmm", "z", hs("h3", "h4")),
		put("ccc", "d/e/f", hs("h5")), put("bbb", "gone", hs("h6")), put("bbb", "many", hs(many...)))
	apply(meta.Command{Op: meta.OpDelete, BucketName: "bbb", Path: "gone", TimeNs: 2})

	want := map[blob.Hash]int{}
	for _, n := range many {
		want[blob.Sum([]byte(n))] = 2
	}
	for n, rf := range map[string]int{"h1": 3, "h2": 3, "h3": placement.Mirror, "h4": placement.Mirror, "h5": 5} {
		want[blob.Sum([]byte(n))] = rf
	}
	got := map[blob.Hash]int{}
	var prev blob.Hash
	err := meta.NewReader(s).ReferencedBlobs(3, nil, func(h blob.Hash, rf int) bool {
		if len(got) > 0 && bytes.Compare(prev[:], h[:]) >= 0 {
			t.Fatalf("not in hash order")
		}
		prev = h
		got[h] = rf
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d blobs, want %d", len(got), len(want))
	}
	for h, rf := range want {
		if got[h] != rf {
			t.Fatalf("blob %s: R %d, want %d", h.String()[:12], got[h], rf)
		}
	}
	// Stopping early.
	n := 0
	if err := meta.NewReader(s).ReferencedBlobs(3, nil, func(blob.Hash, int) bool { n++; return n < 1100 }); err != nil || n != 1100 {
		t.Fatalf("stopped after %d, err %v", n, err)
	}
}

// Passes on every node at once (as in production) still converge to
// exactly the home nodes, with nothing lost.
func TestRepairConcurrentPasses(t *testing.T) {
	c := newRCluster(t, 5, 8, 4)
	c.net.Isolate(4)
	for i := 0; i < 120; i++ {
		c.write(placement.NodeID(1+i%3), i, []int{3, 2, 1}[i%3])
	}
	c.net.Heal()
	c.addNode(6)
	c.setMap(6)
	for round := 1; ; round++ {
		if round > 6 {
			t.Fatal("concurrent passes did not settle in 6 rounds")
		}
		var wg sync.WaitGroup
		var busy atomic.Bool
		for _, id := range c.ids() {
			wg.Add(1)
			go func() {
				defer wg.Done()
				st, err := c.repairs[id].RunOnce(context.Background())
				if err != nil {
					t.Errorf("node %d: %v", id, err)
				}
				if !st.Settled() {
					busy.Store(true)
				}
			}()
		}
		wg.Wait()
		if !busy.Load() {
			break
		}
	}
	c.checkPlaced()
}

// Stand-ins re-create a dead node's copies only once it is dead past the
// grace period.
func TestRepairStandInWaitsForGrace(t *testing.T) {
	c := newRCluster(t, 5, 0)
	var hs []blob.Hash
	for i := 0; i < 40; i++ {
		hs = append(hs, c.write(1, i, 3))
	}
	const dead = 5
	c.net.Isolate(dead)
	c.setMap(5, dead)
	var past atomic.Bool
	for _, id := range c.ids() {
		c.repairs[id].cfg.DeadPastGrace = func(placement.NodeID) bool { return past.Load() }
	}
	live := []placement.NodeID{1, 2, 3, 4}
	if st, _ := c.round(live...); st.Pulled != 0 {
		t.Fatalf("stand-ins pulled %d blobs within the grace period", st.Pulled)
	}
	past.Store(true)
	st, _ := c.round(live...)
	owed := 0
	for _, h := range hs {
		if slices.Contains(placement.Replicas(c.m.Load(), h, 3), dead) {
			owed++
		}
		if n := len(c.holders(h)) - btoi(c.stores[dead].Has(h)); n != 3 {
			t.Fatalf("blob %s on %d live nodes after re-replication, want 3", h.String()[:12], n)
		}
	}
	if st.Pulled != int64(owed) {
		t.Fatalf("pulled %d, want %d", st.Pulled, owed)
	}
	// The node comes back: the extra copies are dropped again.
	c.net.Heal()
	c.setMap(5)
	c.settle(4)
	c.checkPlaced()
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Two data nodes, one down: a write makes one copy, is under-replicated
// and recorded; once the node is back its under pass pulls the blob,
// confirms the other copy and clears the record. The surviving node's
// pass alone, while the other is down, neither checks nor clears.
func TestUnderPassRestoresCopies(t *testing.T) {
	c := newRCluster(t, 2, 0, 2)
	data := []byte("written while node 2 was down")
	h := blob.Sum(data)
	res, err := c.reps[1].Write(context.Background(), h, data, placement.Policy{Replicas: 3})
	if err != nil || res.Copies != (placement.Copies{Made: 1, Wanted: 2}) {
		t.Fatalf("degraded write: %v, %+v; want 1 of 2 copies", err, res.Copies)
	}
	c.mu.Lock()
	c.refs[h], c.data[h], c.under[h] = 3, data, 3
	c.mu.Unlock()
	st, err := c.repairs[1].RunUnder(context.Background())
	if err != nil || st.UnderChecked != 1 || st.UnderCleared != 0 || st.UnderPending != 0 {
		t.Fatalf("node 1 alone: %+v, %v", st, err)
	}
	c.setMap(2) // node 2 is back
	st, err = c.repairs[2].RunUnder(context.Background())
	if err != nil || st.Pulled != 1 || st.UnderCleared != 1 {
		t.Fatalf("node 2 back: %+v, %v; want one pull and one record cleared", st, err)
	}
	if !c.stores[2].Has(h) {
		t.Fatal("node 2 did not get its copy")
	}
	c.mu.Lock()
	n := len(c.under)
	c.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d records left, want 0", n)
	}
	if p := c.repairs[2].Progress(); p.LastUnder.UnderCleared != 1 || p.Total.Pulled != 1 || p.Active {
		t.Fatalf("progress %+v", p)
	}
}

// A record stays while a target lacks the copy (a stand-in inside the
// grace period), and is cleared by the pass that finds every copy.
func TestUnderPassKeepsRecordUntilEveryCopy(t *testing.T) {
	c := newRCluster(t, 3, 0)
	data := []byte("two of three")
	h := blob.Sum(data)
	targets := placement.Place(c.m.Load(), h, 3).Targets
	if _, err := c.reps[targets[0]].Write(context.Background(), h, data, placement.Policy{Replicas: 3, WriteQuorum: 3}); err != nil {
		t.Fatal(err)
	}
	if err := c.stores[targets[2]].Delete(h); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	c.refs[h], c.data[h], c.under[h] = 3, data, 3
	c.mu.Unlock()
	st, err := c.repairs[targets[0]].RunUnder(context.Background())
	if err != nil || st.UnderPending != 1 || st.UnderCleared != 0 {
		t.Fatalf("one copy missing: %+v, %v; want the record pending", st, err)
	}
	st, err = c.repairs[targets[2]].RunUnder(context.Background())
	if err != nil || st.Pulled != 1 || st.UnderCleared != 1 {
		t.Fatalf("the missing target's pass: %+v, %v; want a pull and the record cleared", st, err)
	}
}

// Run answers TriggerUnder with an under pass: the returning node pulls
// the blob and clears the record without waiting for its interval.
func TestRunTriggerUnder(t *testing.T) {
	c := newRCluster(t, 2, 0, 2)
	data := []byte("pulled on a trigger")
	h := blob.Sum(data)
	if _, err := c.reps[1].Write(context.Background(), h, data, placement.Policy{Replicas: 2}); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	c.refs[h], c.data[h], c.under[h] = 2, data, 2
	c.mu.Unlock()
	c.setMap(2)
	marked := make(chan struct{})
	rp, err := NewRepairer(RepairConfig{Self: 2, Local: c.stores[2], Peers: c.peers[2], Map: c.m.Load,
		Referenced: c.referenced, Interval: time.Hour, Logger: slog.New(slog.DiscardHandler),
		UnderReplicated: c.underReplicated,
		MarkReplicated: func(ctx context.Context, hs []blob.Hash) error {
			defer close(marked)
			return c.markReplicated(ctx, hs)
		}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { rp.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	rp.TriggerUnder()
	select {
	case <-marked:
	case <-time.After(10 * time.Second):
		t.Fatal("no under pass cleared the record after TriggerUnder")
	}
	if !c.stores[2].Has(h) {
		t.Fatal("the blob was not pulled")
	}
}
