package sim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairn-fs/cairn/internal/meta"
	"github.com/cairn-fs/cairn/internal/store"
)

// A namespace split into two groups (Config.Split), the first step of
// docs/design/0009-scale.md: the root group (the run's five nodes) and a
// second group, a Raft log of its own on three more nodes (IDs 101 to
// 103: processes on three of the root's nodes, in the design, with a
// network and faults of their own here). Each group is a whole cluster of
// the sim, with its own workload, faults and invariants (a) to (h). The
// split adds:
//
//   - bucket sp, made in the root group with splitFiles files, moves to
//     group 2 mid-run, under the faults of both: the mover fences sp in
//     the root group (meta.OpFenceBucket: no change to it applies there
//     from the fence's log position on), copies what the root group holds
//     of it, as read after the fence through a node that applied it, into
//     group 2, then flips the group map (a meta.RecordGroup record in the
//     root group: sp → "2"). Each step is retried through other nodes
//     until it succeeds; every step can be repeated.
//   - a workload on sp/k0..k5 (puts, deletes, reads) routed through the
//     group map as a node sees it: a node that has not seen the flip
//     routes to the root group, whose fence refuses the write
//     (store.ErrMoved: it never takes effect, the model counts it
//     refused). A burst of puts is aimed at the move.
//   - once sp is in group 2, its files sp/mK move one by one to the root
//     group's bucket rep3 (as mv/mK): the two phases a rename across a
//     cut takes. The intent (a meta.RecordMove record) goes into the
//     source group first, then the copy into the target, then the removal
//     from the source, then the intent goes. Each move stops, as if its
//     coordinator had crashed, after a phase drawn from the seed; a
//     recovery pass (after the workload, as a node that takes over the
//     source group's leadership would) finishes every intent left.
//
// Its invariants, checked after both groups healed and settled:
//
//   - (S1) every path of sp resolves to exactly one group at every log
//     position of the root group: the fence applies before the flip, and
//     no change to sp applies in the root group after the fence.
//   - (S2) the move loses no write: through every node of group 2, sp's
//     keys hold values allowed by the history of writes through the map
//     (acknowledged writes made in the root group before the move
//     included), and every node of the root group maps sp to group 2.
//   - (S3) a move across the groups is never lost nor duplicated: each of
//     sp/mK (group 2) and rep3/mv/mK (root) exists in exactly one group,
//     with its bytes, on every node, and no intent is left.
//
// TestSimDetects breaks the fence ("split-unfenced": the mover skips it,
// so writes routed to the root group after the copy are acknowledged and
// lost) and the move's order ("split-move": no intent, the source removed
// before the copy, and every move stopped between the two).
const (
	splitBucket = "split"
	splitKeys   = 6 // sp/k0..k5: written through the group map
	splitFiles  = 8 // sp/m0..m7: moved across groups one by one
	splitBurst  = 20
	splitRetry  = 300 * time.Millisecond
)

// SplitResult counts what a split run did (Result.Split).
type SplitResult struct {
	Moved                 bool   // sp reached group 2
	FenceIndex, FlipIndex uint64 // their positions in the root group's log
	// Writes through the group map: acknowledged, refused by the fence,
	// unknown.
	Acked, Refused, Unknown int
	// Moves of sp/mK across groups: started, finished by their
	// coordinator, stopped after a phase, finished by recovery.
	Moves, MovesDone, MovesStopped, Recovered int
}

func (r SplitResult) String() string {
	return fmt.Sprintf("moved %v (fence at %d, flip at %d), writes %d acked / %d refused / %d unknown, moves %d (%d done, %d stopped, %d recovered)",
		r.Moved, r.FenceIndex, r.FlipIndex, r.Acked, r.Refused, r.Unknown, r.Moves, r.MovesDone, r.MovesStopped, r.Recovered)
}

// groupConfig is the second group's Config: three voters, a quarter of
// the root's workload, its own seed.
func groupConfig(cfg Config) Config {
	g := Config{Seed: cfg.Seed ^ 0x67f2_9e37, Voters: 3, Duration: cfg.Duration, Ops: max(cfg.Ops/4, 1),
		MaxBigFiles: min(cfg.MaxBigFiles, 1), Step: cfg.Step, GCGrace: cfg.GCGrace, KeepTrace: cfg.KeepTrace, firstID: 100,
		ExclOps: -1, LockOps: -1}
	if cfg.ExclOps > 0 {
		g.ExclOps = max(cfg.ExclOps/4, 1)
	}
	if cfg.LockOps > 0 {
		g.LockOps = max(cfg.LockOps/4, 1)
	}
	logf := cfg.Logf
	g.Logf = func(format string, args ...any) { logf("group 2: "+format, args...) }
	return g
}

type splitKind int

const (
	spPut splitKind = iota
	spDelete
	spRead
	spMove
)

var splitNames = [...]string{"put", "delete", "read", "move"}

type splitEv struct {
	at    time.Duration
	kind  splitKind
	key   int // sp/k<key>, or the file sp/m<key> a move takes
	body  content
	r, g  int // which node of each group (an index, taken modulo the nodes)
	stop  int // a move: stop after phase 1, 2 or 3 (0: run to the end)
	tries int // a move drawn before sp moved is tried again later
}

func (e splitEv) String() string {
	return fmt.Sprintf("%v split %s %d (%d B) via %d/%d stop %d", e.at, splitNames[e.kind], e.key, e.body.size, e.r, e.g, e.stop)
}

type splitRun struct {
	root, g2 *Sim
	rng      *rand.Rand
	hist     *history // writes to sp/k* through the group map
	evs      []splitEv
	files    [splitFiles]content // sp/mK's bodies

	// The bucket's move, advanced by the driver: phase 1 fence, 2 copy,
	// 3 flip, 4 done; busy while a step runs.
	moveAt  time.Duration
	phase   atomic.Int32
	busy    atomic.Bool
	nextTry time.Duration
	attempt int

	// Moves across groups: attempted, acknowledged.
	moveTried [splitFiles]bool
	moveAcked [splitFiles]atomic.Bool

	mu sync.Mutex
	// Root-group log, as applied (by index, from any node): where the
	// fence and the flip applied, and every change to sp that applied.
	seen    map[uint64]bool
	writes  []string // "index: op path" of changes to sp that applied
	res     SplitResult
	counted atomic.Int64 // operations in flight (both groups wait for them)
}

func newSplit(root, g2 *Sim) *splitRun {
	sp := &splitRun{root: root, g2: g2, rng: rand.New(rand.NewPCG(root.cfg.Seed, 0x5b17)), hist: newHistory(), seen: map[uint64]bool{}}
	for k := range sp.files {
		sp.files[k] = content{seed: root.cfg.Seed*31 + uint64(k) + 7, size: 1 + k*97}
	}
	return sp
}

func (sp *splitRun) sabotage() string { return sp.root.cfg.sabotage }

// schedule draws the split's workload from an RNG of its own (the rest
// of a seed's schedule is what it was without it).
func (sp *splitRun) schedule() {
	rng, d := sp.rng, sp.root.cfg.Duration
	sp.moveAt = d/5 + time.Duration(rng.Int64N(int64(d/5)))
	sp.phase.Store(0)
	ops := max(sp.root.cfg.Ops/5, 10)
	for range ops {
		e := splitEv{at: time.Duration(rng.Int64N(int64(d))), key: rng.IntN(splitKeys), r: rng.IntN(64), g: rng.IntN(64)}
		switch x := rng.IntN(100); {
		case x < 60:
			e.kind, e.body = spPut, content{seed: rng.Uint64(), size: rng.IntN(3000)}
		case x < 75:
			e.kind = spDelete
		default:
			e.kind = spRead
		}
		sp.evs = append(sp.evs, e)
	}
	// A burst of puts while the bucket moves: some meet the fence, some
	// come after the flip.
	for i := range splitBurst {
		sp.evs = append(sp.evs, splitEv{at: sp.moveAt + time.Duration(i)*60*time.Millisecond, kind: spPut, key: rng.IntN(splitKeys),
			body: content{seed: rng.Uint64(), size: rng.IntN(3000)}, r: rng.IntN(64), g: rng.IntN(64)})
	}
	// Moves across groups, after the bucket's own move has had time.
	for k := range splitFiles {
		at := sp.moveAt + 3*time.Second + time.Duration(rng.Int64N(int64(max(d-sp.moveAt-5*time.Second, time.Second))))
		sp.evs = append(sp.evs, splitEv{at: at, kind: spMove, key: k, r: rng.IntN(64), g: rng.IntN(64), stop: rng.IntN(4)})
	}
	slices.SortStableFunc(sp.evs, func(x, y splitEv) int {
		switch {
		case x.at < y.at:
			return -1
		case x.at > y.at:
			return 1
		}
		return 0
	})
}

// bootstrap makes sp's files in the root group (sp itself is made with
// the other buckets).
func (sp *splitRun) bootstrap() error {
	s := sp.root
	for k, c := range sp.files {
		if err := s.await(fmt.Sprintf("make %s/m%d", splitBucket, k), 30*time.Second, func(ctx context.Context) error {
			body := c.bytes()
			_, _, err := s.nodes[0].inc.st.Put(ctx, splitBucket, fmt.Sprintf("m%d", k), bytes.NewReader(body), store.PutOptions{Size: int64(len(body))})
			return err
		}); err != nil {
			return err
		}
	}
	return nil
}

// pick returns the incarnation of the i-th node (modulo) of x, if it
// runs and is not paused.
func pick(x *Sim, i int) *incarnation {
	n := x.nodes[i%len(x.nodes)]
	if n.inc == nil || x.paused(n.id) {
		return nil
	}
	return n.inc
}

// pickUp returns a running, unpaused node of x, trying from the i-th.
func pickUp(x *Sim, i int) *incarnation {
	for j := range x.nodes {
		if inc := pick(x, i+j); inc != nil {
			return inc
		}
	}
	return nil
}

// with runs f as a user of inc (errStopped once inc is stopping).
func with(inc *incarnation, f func() error) error {
	leave, ok := inc.enter()
	if !ok {
		return errStopped
	}
	defer leave()
	return f()
}

// goSplit runs f on a goroutine counted as an operation of both groups,
// so that each group's checks wait for it.
func (sp *splitRun) goSplit(f func()) {
	for _, x := range []*Sim{sp.root, sp.g2} {
		x.ops.Add(1)
		x.inOps.Add(1)
	}
	go func() {
		defer func() {
			for _, x := range []*Sim{sp.root, sp.g2} {
				x.inOps.Add(-1)
				x.ops.Done()
				x.done.Add(1)
			}
		}()
		f()
	}()
}

// advance runs the split's events due at el and the next step of the
// bucket's move (on the driver).
func (sp *splitRun) advance(el time.Duration) {
	for len(sp.evs) > 0 && sp.evs[0].at <= el {
		e := sp.evs[0]
		sp.evs = sp.evs[1:]
		if e.kind == spMove && sp.phase.Load() < 4 && e.tries < 20 {
			e.tries++
			e.at = el + time.Second
			sp.evs = append(sp.evs, e)
			slices.SortStableFunc(sp.evs, func(x, y splitEv) int { return int(x.at - y.at) })
			continue
		}
		sp.root.tr.add("event %v", e)
		sp.run(e)
	}
	if p := sp.phase.Load(); p == 0 && el >= sp.moveAt {
		sp.phase.Store(1)
		p = 1
		if sp.sabotage() == "split-unfenced" {
			sp.phase.Store(2)
		}
	}
	if p := sp.phase.Load(); p >= 1 && p <= 3 && !sp.busy.Load() && el >= sp.nextTry {
		sp.attempt++
		r, g := pickUp(sp.root, sp.attempt), pickUp(sp.g2, sp.attempt)
		if r == nil || g == nil {
			return
		}
		sp.busy.Store(true)
		sp.nextTry = el + splitRetry
		sp.goSplit(func() {
			defer sp.busy.Store(false)
			ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
			defer cancel()
			err := sp.moveStep(ctx, p, r, g)
			sp.root.tr.add("split move phase %d via %d/%d: %v", p, r.n.id, g.n.id, err)
			if err == nil {
				sp.phase.Store(p + 1)
			}
		})
	}
}

// moveStep runs phase p of the bucket's move through root node r and
// group-2 node g.
func (sp *splitRun) moveStep(ctx context.Context, p int32, r, g *incarnation) error {
	switch p {
	case 1: // the fence
		return with(r, func() error { return r.st.FenceBucket(ctx, splitBucket, true) })
	case 2: // the copy, read through a node that applied the fence
		var files []string
		if err := with(r, func() error {
			if sp.sabotage() != "split-unfenced" {
				// Fencing again returns once r applied the fence: r's view
				// of sp is then final.
				if err := r.st.FenceBucket(ctx, splitBucket, true); err != nil {
					return err
				}
			}
			after := ""
			for {
				l, err := r.st.List(ctx, splitBucket, store.ListOptions{StartAfter: after})
				if err != nil {
					return err
				}
				for _, e := range l.Entries {
					if !e.IsDir {
						files = append(files, e.Path)
					}
				}
				if !l.Truncated {
					return nil
				}
				after = l.NextToken
			}
		}); err != nil {
			return err
		}
		for _, f := range files {
			var body []byte
			if err := with(r, func() error {
				var err error
				body, _, err = readFileCtx(ctx, r, splitBucket, f)
				return err
			}); err != nil {
				return err
			}
			if err := with(g, func() error {
				_, _, err := g.st.Put(ctx, splitBucket, f, bytes.NewReader(body), store.PutOptions{Size: int64(len(body))})
				return err
			}); err != nil {
				return err
			}
		}
		return nil
	default: // the flip
		return with(r, func() error {
			_, err := r.st.PutRecord(ctx, meta.RecordGroup, splitBucket, []byte("2"), false)
			return err
		})
	}
}

// groupOf is the group that holds sp as inc (of the root group) sees it.
func groupOf(inc *incarnation) (int, error) {
	recs, err := inc.st.ListRecords(context.Background(), meta.RecordGroup)
	if err != nil {
		return 0, err
	}
	for _, r := range recs {
		if r.Name == splitBucket && string(r.Value) == "2" {
			return 2, nil
		}
	}
	return 1, nil
}

// run starts one of the split's operations, unless a node it needs is
// down or paused.
func (sp *splitRun) run(e splitEv) {
	r, g := pick(sp.root, e.r), pick(sp.g2, e.g)
	if r == nil || g == nil {
		return
	}
	if e.kind == spMove {
		if sp.moveTried[e.key] {
			return
		}
		sp.moveTried[e.key] = true
		sp.mu.Lock()
		sp.res.Moves++
		sp.mu.Unlock()
		sp.goSplit(func() { sp.moveFile(e, r, g) })
		return
	}
	key := fmt.Sprintf("%s/k%d", splitBucket, e.key)
	path := fmt.Sprintf("k%d", e.key)
	var w *write
	switch e.kind {
	case spPut:
		w = sp.hist.begin(r.n.id, key, hashHex(e.body.bytes()))
	case spDelete:
		w = sp.hist.begin(r.n.id, key, absent)
	}
	sp.goSplit(func() {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		var grp int
		err := with(r, func() error {
			var err error
			grp, err = groupOf(r)
			return err
		})
		via := r
		if grp == 2 {
			via = g
		}
		if err == nil {
			err = with(via, func() error {
				switch e.kind {
				case spPut:
					body := e.body.bytes()
					_, _, err := via.st.Put(ctx, splitBucket, path, bytes.NewReader(body), store.PutOptions{Size: int64(len(body))})
					return err
				case spDelete:
					return via.st.Delete(ctx, splitBucket, path, "")
				default:
					data, sum, err := readFileCtx(ctx, via, splitBucket, path)
					switch {
					case errors.Is(err, store.ErrNotFound):
						return nil
					case err != nil:
						return err
					case hashHex(data) != sum:
						sp.root.fail("split: %s via %d: bytes hash to %.12s, inode says %.12s", key, via.n.id, hashHex(data), sum)
					case !sp.hist.wasWritten(key, sum):
						sp.root.fail("split: %s via %d holds %.12s, which no write put there", key, via.n.id, sum)
					}
					return nil
				}
			})
		}
		sp.root.tr.add("split %s %s via group %d node %d: %v", splitNames[e.kind], key, grp, via.n.id, err)
		if w == nil {
			return
		}
		sp.hist.end(w, err)
	})
}

// moveFile moves sp/mK from group 2 to the root group's rep3/mv/mK in
// the two phases a rename across a cut takes, stopping after phase e.stop
// (a coordinator that crashed there). With the "split-move" sabotage:
// no intent, the source removed before the copy, every move stopped in
// between.
func (sp *splitRun) moveFile(e splitEv, r, g *incarnation) {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	k := e.key
	err := func() error {
		if sp.sabotage() == "split-move" {
			if err := with(g, func() error { return g.st.Delete(ctx, splitBucket, fmt.Sprintf("m%d", k), "") }); err != nil {
				return err
			}
			return errStoppedHere
		}
		if err := with(g, func() error {
			_, err := g.st.PutRecord(ctx, meta.RecordMove, fmt.Sprint(k), nil, false)
			return err
		}); err != nil {
			return err
		}
		if e.stop == 1 {
			return errStoppedHere
		}
		if err := sp.finishMove(ctx, k, r, g, e.stop); err != nil {
			return err
		}
		return nil
	}()
	sp.root.tr.add("split move m%d via %d/%d (stop %d): %v", k, r.n.id, g.n.id, e.stop, err)
	sp.mu.Lock()
	defer sp.mu.Unlock()
	switch {
	case err == nil:
		sp.res.MovesDone++
		sp.moveAcked[k].Store(true)
	case errors.Is(err, errStoppedHere):
		sp.res.MovesStopped++
	}
}

var errStoppedHere = errors.New("the move's coordinator stopped here (a crash)")

// finishMove is a move's work after its intent: copy sp/mK into the root
// group (unless the source is gone: an earlier pass copied it), remove
// the source, drop the intent; stop (as moveFile) after phase 2 or 3.
func (sp *splitRun) finishMove(ctx context.Context, k int, r, g *incarnation, stop int) error {
	src := fmt.Sprintf("m%d", k)
	var body []byte
	found := true
	if err := with(g, func() error {
		var err error
		body, _, err = readFileCtx(ctx, g, splitBucket, src)
		if errors.Is(err, store.ErrNotFound) {
			found = false
			return nil
		}
		return err
	}); err != nil {
		return err
	}
	if found {
		if err := with(r, func() error {
			_, _, err := r.st.Put(ctx, "rep3", "mv/"+src, bytes.NewReader(body), store.PutOptions{Size: int64(len(body))})
			return err
		}); err != nil {
			return err
		}
		if stop == 2 {
			return errStoppedHere
		}
		if err := with(g, func() error { return g.st.Delete(ctx, splitBucket, src, "") }); err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		if stop == 3 {
			return errStoppedHere
		}
	}
	err := with(g, func() error { return g.st.DeleteRecord(ctx, meta.RecordMove, fmt.Sprint(k)) })
	if errors.Is(err, store.ErrNotFound) {
		err = nil
	}
	return err
}

// noteApplied records what the root group's log applied about sp (from
// every node; an index counts once).
func (sp *splitRun) noteApplied(index uint64, cmds []meta.Command, res []meta.Result) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.seen[index] {
		return
	}
	sp.seen[index] = true
	for i := range cmds {
		c := &cmds[i]
		if res[i].Err != nil {
			continue
		}
		switch {
		case c.Op == meta.OpFenceBucket && c.BucketName == splitBucket && c.Count == 1:
			if sp.res.FenceIndex == 0 {
				sp.res.FenceIndex = index
			}
		case c.Op == meta.OpPutRecord && c.Record.Kind == meta.RecordGroup && c.Record.Name == splitBucket:
			if sp.res.FlipIndex == 0 {
				sp.res.FlipIndex = index
			}
		case bucketName(c) == splitBucket && c.Op != meta.OpCreateBucket:
			sp.writes = append(sp.writes, fmt.Sprintf("%d: op %d %s", index, c.Op, c.Path))
			if sp.res.FenceIndex != 0 && index > sp.res.FenceIndex {
				sp.root.fail("split (S1): op %d on %s/%s applied in the root group at index %d, after the fence at %d",
					c.Op, splitBucket, c.Path, index, sp.res.FenceIndex)
			}
		}
	}
}

func bucketName(c *meta.Command) string {
	if c.Bucket != nil {
		return c.Bucket.Name
	}
	return c.BucketName
}

// finish completes what the split left once both groups healed and
// settled: the bucket's move, then every move intent left (recovery),
// and checks S1 to S3.
func (sp *splitRun) finish() error {
	s := sp.root
	for p := sp.phase.Load(); p >= 1 && p <= 3; p = sp.phase.Load() {
		if err := s.await(fmt.Sprintf("split move phase %d", p), time.Minute, func(ctx context.Context) error {
			return sp.moveStep(ctx, p, s.nodes[0].inc, sp.g2.nodes[0].inc)
		}); err != nil {
			return err
		}
		sp.phase.Store(p + 1)
	}
	g := sp.g2.nodes[0].inc
	r := s.nodes[0].inc
	if sp.phase.Load() == 4 {
		recs, err := g.st.ListRecords(context.Background(), meta.RecordMove)
		if err != nil {
			return err
		}
		for _, rec := range recs {
			var k int
			if _, err := fmt.Sscan(rec.Name, &k); err != nil || k < 0 || k >= splitFiles {
				return fmt.Errorf("split: move intent %q", rec.Name)
			}
			if err := s.await("split recovery of move "+rec.Name, time.Minute, func(ctx context.Context) error {
				return sp.finishMove(ctx, k, r, g, 0)
			}); err != nil {
				return err
			}
			sp.mu.Lock()
			sp.res.Recovered++
			sp.mu.Unlock()
		}
	}
	for _, x := range []*Sim{s, sp.g2} {
		if err := x.until(fmt.Sprintf("group %d: logs converge after the split's recovery", x.group), 2*time.Minute, x.logsConverged); err != nil {
			return err
		}
	}
	sp.mu.Lock()
	sp.res.Moved = sp.phase.Load() == 4
	sp.res.Acked, sp.res.Refused, sp.res.Unknown = sp.hist.acked, sp.hist.refused, sp.hist.unknowns
	res := sp.res
	sp.mu.Unlock()
	// S1: the fence before the flip.
	if sp.sabotage() != "split-unfenced" && (res.FenceIndex == 0 || res.FlipIndex <= res.FenceIndex) {
		s.fail("split (S1): fence at index %d, flip at %d: the map flipped before the root group stopped taking changes", res.FenceIndex, res.FlipIndex)
	}
	// S2: the map, and every key through every node of group 2.
	for _, n := range s.nodes {
		if grp, err := groupOf(n.inc); err != nil || grp != 2 {
			s.fail("split (S2): node %d maps %s to group %d (%v)", n.id, splitBucket, grp, err)
		}
	}
	for k := range splitKeys {
		key := fmt.Sprintf("%s/k%d", splitBucket, k)
		allowed := sp.hist.allowed(key)
		for _, n := range sp.g2.nodes {
			data, sum, err := readFile(n.inc, splitBucket, fmt.Sprintf("k%d", k))
			got := absent
			switch {
			case errors.Is(err, store.ErrNotFound):
			case err != nil:
				s.fail("split (S2): %s unreadable via node %d: %v", key, n.id, err)
				continue
			default:
				if got = hashHex(data); got != sum {
					s.fail("split (S2): %s via node %d: bytes hash to %.12s, inode says %.12s", key, n.id, got, sum)
				}
			}
			if !slices.Contains(allowed, got) {
				s.fail("split (S2): %s via node %d holds %.12s; allowed %s; writes:%s", key, n.id, got, short(allowed), sp.hist.describe(key))
			}
		}
	}
	// S3: every moved file in exactly one group, whole.
	if recs, err := g.st.ListRecords(context.Background(), meta.RecordMove); err != nil || len(recs) > 0 {
		s.fail("split (S3): %d move intents left after recovery (%v)", len(recs), err)
	}
	for k, c := range sp.files {
		want := hashHex(c.bytes())
		in := func(x *Sim, bucket, path string) int {
			count := 0
			for _, n := range x.nodes {
				data, _, err := readFile(n.inc, bucket, path)
				switch {
				case errors.Is(err, store.ErrNotFound):
				case err != nil:
					s.fail("split (S3): %s/%s unreadable via node %d: %v", bucket, path, n.id, err)
				case hashHex(data) != want:
					s.fail("split (S3): %s/%s via node %d is not the file that moved", bucket, path, n.id)
				default:
					count++
				}
			}
			return count
		}
		src, dst := in(sp.g2, splitBucket, fmt.Sprintf("m%d", k)), in(s, "rep3", fmt.Sprintf("mv/m%d", k))
		switch {
		case src == len(sp.g2.nodes) && dst == 0:
			if sp.moveAcked[k].Load() {
				s.fail("split (S3): m%d: the move was acknowledged, but the file is still in group 2 only", k)
			}
		case src == 0 && dst == len(s.nodes):
		case src == 0 && dst == 0:
			s.fail("split (S3): m%d is in neither group: lost in its move", k)
		default:
			s.fail("split (S3): m%d: in group 2 on %d of %d nodes, in the root group on %d of %d", k, src, len(sp.g2.nodes), dst, len(s.nodes))
		}
	}
	s.cfg.Logf("split: %v", res)
	return nil
}
