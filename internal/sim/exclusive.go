package sim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/cairn-fs/cairn/internal/meta"
	"github.com/cairn-fs/cairn/internal/store"
)

// Exclusive creates (design 0008): several nodes race for the same names
// in the same directories, by every way the store offers to make a name
// exactly once, so that the directories' ownership moves between nodes
// (claims, recalls, hand-overs) under the run's faults (and sessions
// expire with crashes and long cuts). The model (xhist) records which
// creates were acknowledged; the checks are in this file, the fencing
// check of the log in fencing.go.

// xKind is one way to create a name exclusively.
type xKind int

const (
	xMkdir       xKind = iota // store.Mkdir with Attrs.Exclusive (decided in the log)
	xCreate                   // store.Put with IfNoneMatchAny (decided in the log)
	xRename                   // a temporary file, then RenameNoReplace onto the name (decided in the log)
	xHolderPut                // Own, absent in the local view, a decided Put under the claim, done (the mount's create, published at once)
	xHolderMkdir              // the same with a decided mkdir (ChangeMany), adopted as the mount does
	xQueued                   // Own, absent, queued, done; published later under the claim, or by FlushDir on a recall (the mount's write-back queue)
	xLate                     // a decided create sent under a claim of this node's that has moved: must be refused
	xKinds
)

var xNames = [...]string{"mkdir", "create", "rename", "holder-put", "holder-mkdir", "queued", "late"}

func (k xKind) String() string { return xNames[k] }

// The race: exclDirs directories of exclBucket, made at bootstrap, never
// removed; names in them are made only by evExcl operations and never
// removed (the temporary files of xRename are not tracked).
const (
	exclBucket = "rep3"
	exclDirs   = 2
)

func exclDir(i int) string { return fmt.Sprintf("x%d", i) }

// exclSchedule draws the exclusive operations of a run from an RNG of
// their own (the rest of a seed's schedule is what it was before them):
// bursts of 2 to 4 operations through random nodes, within 40 ms, on one
// name (a new one, or a quarter of the time one raced for before), of
// random kinds.
func exclSchedule(seed uint64, cfg Config, ids []uint64) []event {
	rng := rand.New(rand.NewPCG(seed, 0xe8c1))
	var evs []event
	var names [exclDirs][]string
	span := cfg.Duration - 1500*time.Millisecond
	if span <= 0 {
		return nil
	}
	weights := [xKinds]int{xMkdir: 14, xCreate: 18, xRename: 14, xHolderPut: 16, xHolderMkdir: 10, xQueued: 18, xLate: 10}
	kind := func() xKind {
		x := rng.IntN(100)
		for k, w := range weights {
			if x < w {
				return xKind(k)
			}
			x -= w
		}
		return xCreate
	}
	for len(evs) < cfg.ExclOps {
		at := time.Second + time.Duration(rng.Int64N(int64(span)))
		d := rng.IntN(exclDirs)
		var name string
		if len(names[d]) > 0 && rng.IntN(4) == 0 {
			name = names[d][rng.IntN(len(names[d]))]
		} else {
			name = fmt.Sprintf("n%d", len(names[d]))
			names[d] = append(names[d], name)
		}
		for range 2 + rng.IntN(3) {
			e := event{at: at + time.Duration(rng.Int64N(int64(40*time.Millisecond))), kind: evExcl,
				node: ids[rng.IntN(len(ids))], bucket: exclBucket, path: exclDir(d) + "/" + name, xk: kind(), id: len(evs),
				body: content{seed: rng.Uint64(), size: 1 + rng.IntN(4096)}} // never empty: every body is its own
			if e.xk == xQueued {
				// Published after this long, unless a recall flushes it
				// first; odd nanoseconds keep it off other timers' instants.
				e.dur = time.Duration(rng.IntN(1500))*time.Millisecond + 3331*time.Nanosecond
			}
			evs = append(evs, e)
		}
	}
	return evs
}

// xop is one exclusive create of the model.
type xop struct {
	id      int
	node    uint64
	kind    xKind
	key     string // bucket/path
	value   string // hex SHA-256 of the body, or xDir
	outcome outcome
	err     error
}

// xDir is the value of a directory.
const xDir = "dir"

// errPresent: a holder found the name in its local view (EEXIST).
var errPresent = errors.New("sim: the name exists in the node's view")

// xhist records the exclusive creates.
type xhist struct {
	mu  sync.Mutex
	ops []*xop
	// acked, refused and unknown count the answers; lost counts queued
	// creates a crash dropped before they were published.
	acked, refused, unknown, lost int
	// late and lateFenced count xLate's sends and its ErrFenced answers.
	late, lateFenced int
	// claimed: the claims holders got, by node and directory (for xLate).
	claimed map[[2]uint64][]uint64
}

func (h *xhist) begin(e event, value string) *xop {
	x := &xop{id: e.id, node: e.node, kind: e.xk, key: e.bucket + "/" + e.path, value: value}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ops = append(h.ops, x)
	return x
}

// end records x's answer: nil acknowledges the create (it is committed),
// an answer that says the name exists or the claim moved refuses it (it
// never takes effect), any other leaves it unknown.
func (h *xhist) end(x *xop, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	x.err = err
	switch {
	case err == nil:
		x.outcome = acked
		h.acked++
	case errors.Is(err, errPresent), errors.Is(err, store.ErrExists), errors.Is(err, store.ErrPrecondition),
		errors.Is(err, store.ErrIsDir), errors.Is(err, store.ErrNotDir), errors.Is(err, store.ErrFenced):
		x.outcome = refused
		h.refused++
	default:
		x.outcome = unknown
		h.unknown++
	}
}

func (h *xhist) noteClaim(node, dir, epoch uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.claimed == nil {
		h.claimed = map[[2]uint64][]uint64{}
	}
	k := [2]uint64{node, dir}
	if !slices.Contains(h.claimed[k], epoch) {
		h.claimed[k] = append(h.claimed[k], epoch)
	}
}

// movedClaim returns the newest claim node got on dir that has moved in
// inc's applied view (the directory's owner record names another node or
// epoch, or none, and inc does not hold it): epochs are never reused, so
// a change stamped with it must never apply.
func (h *xhist) movedClaim(inc *incarnation, dir uint64) (store.Claim, bool) {
	h.mu.Lock()
	epochs := slices.Clone(h.claimed[[2]uint64{inc.n.id, dir}])
	h.mu.Unlock()
	o, err := inc.reader.DirOwner(meta.Ino(dir))
	if err != nil {
		return store.Claim{}, false
	}
	held, _ := inc.st.Held(dir)
	for i := len(epochs) - 1; i >= 0; i-- {
		e := epochs[i]
		if o != nil && o.Node == inc.n.id && o.Epoch == e || held.Epoch == e {
			continue
		}
		return store.Claim{Dir: dir, Epoch: e}, true
	}
	return store.Claim{}, false
}

// sabotaged reports whether the run breaks exclusive creates on purpose
// (Config.sabotage "exclusive": the creates lose their exclusive flags,
// holders do not look before they create).
func (s *Sim) sabotaged() bool { return s.cfg.sabotage == "exclusive" }

// runExcl starts an exclusive operation through node e.node, unless the
// node is down or paused.
func (s *Sim) runExcl(e event) {
	n := s.byID[e.node]
	inc := n.inc
	if inc == nil || s.paused(n.id) {
		return
	}
	s.ops.Add(1)
	s.inOps.Add(1)
	started := inc.goUse(func() {
		defer func() { s.inOps.Add(-1); s.ops.Done(); s.done.Add(1) }()
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		s.exclOp(ctx, inc, e)
	})
	if !started {
		s.inOps.Add(-1)
		s.ops.Done()
		s.fail("operation %v not started on a running node", e)
	}
}

func (s *Sim) exclOp(ctx context.Context, inc *incarnation, e event) {
	id := inc.n.id
	key := e.bucket + "/" + e.path
	body := e.body.bytes()
	excl := !s.sabotaged()
	switch e.xk {
	case xMkdir:
		x := s.xh.begin(e, xDir)
		err := inc.st.Mkdir(ctx, e.bucket, e.path, store.Attrs{Exclusive: excl})
		s.xh.end(x, err)
		s.tr.add("excl #%d mkdir %s via %d: %v", e.id, key, id, err)
	case xCreate:
		x := s.xh.begin(e, hashHex(body))
		_, _, err := inc.st.Put(ctx, e.bucket, e.path, bytes.NewReader(body), store.PutOptions{Size: int64(len(body)), IfNoneMatchAny: excl})
		s.xh.end(x, err)
		s.tr.add("excl #%d create %s via %d: %v", e.id, key, id, err)
	case xRename:
		tmp := fmt.Sprintf("%s/t%d", parentPath(e.path), e.id)
		if _, _, err := inc.st.Put(ctx, e.bucket, tmp, bytes.NewReader(body), store.PutOptions{Size: int64(len(body))}); err != nil {
			s.tr.add("excl #%d rename %s via %d: temporary file: %v", e.id, key, id, err)
			return
		}
		x := s.xh.begin(e, hashHex(body))
		var err error
		if excl {
			err = inc.st.RenameNoReplace(ctx, e.bucket, tmp, e.path)
		} else {
			err = inc.st.Rename(ctx, e.bucket, tmp, e.path)
		}
		s.xh.end(x, err)
		s.tr.add("excl #%d rename %s via %d: %v", e.id, key, id, err)
	case xHolderPut, xHolderMkdir, xQueued:
		inc.holder.create(ctx, e, body)
	case xLate:
		s.late(ctx, inc, e, body)
	}
}

// dirIno returns the inode number of bucket/path's directory in inc's view.
func dirIno(ctx context.Context, inc *incarnation, bucket, path string) (uint64, string, error) {
	dir := parentPath(path)
	info, err := inc.st.Stat(ctx, bucket, dir)
	if err != nil {
		return 0, dir, err
	}
	return info.Ino, dir, nil
}

// parentPath is path's directory ("" at the top).
func parentPath(path string) string {
	for i := len(path) - 1; i >= 0; i-- {
		if path[i] == '/' {
			return path[:i]
		}
	}
	return ""
}

// late sends a decided create of the name under a claim this node held on
// its directory and has since lost (to a recall, an expired session, a
// crash): what a mount whose queued change reached the log late would
// send. The log must refuse it (ErrFenced) whether or not the name exists
// by then; the fencing check of the log (fencing.go) sees it too.
func (s *Sim) late(ctx context.Context, inc *incarnation, e event, body []byte) {
	key := e.bucket + "/" + e.path
	dir, _, err := dirIno(ctx, inc, e.bucket, e.path)
	if err != nil {
		return
	}
	c, ok := s.xh.movedClaim(inc, dir)
	if !ok {
		s.tr.add("excl #%d late %s via %d: no moved claim", e.id, key, inc.n.id)
		return
	}
	_, _, err = inc.st.Put(ctx, e.bucket, e.path, bytes.NewReader(body),
		store.PutOptions{Size: int64(len(body)), Decided: true, Claims: []store.Claim{c}})
	s.tr.add("excl #%d late %s via %d under epoch %d: %v", e.id, key, inc.n.id, c.Epoch, err)
	s.xh.mu.Lock()
	s.xh.late++
	if errors.Is(err, store.ErrFenced) {
		s.xh.lateFenced++
	}
	s.xh.mu.Unlock()
	if err == nil && !inc.stopping.Load() {
		s.fail("fencing: node %d's create of %s under its claim of directory %d epoch %d, which had moved, was applied",
			inc.n.id, key, c.Dir, c.Epoch)
	}
}

// ---------------------------------------------------------------------------
// The holder: a node's mount, as far as ownership goes.

// holder decides creates in directories its node owns, as the mount does
// (internal/frontend/fuse/own.go): under the directory's claim (Own), it
// looks the name up in the node's view plus its own undecided creates,
// and creates it with a decided change stamped with the claim, at once
// or through its queue. It is the incarnation's store.Holder: a recall
// (or a command decided in the log in that directory) has it publish its
// queue there first (FlushDir). A crash loses the queue.
type holder struct {
	s   *Sim
	inc *incarnation

	mu    sync.Mutex
	queue []*queued
	// inDoubt: names this incarnation decided to create whose change has
	// not been answered, or was answered with an unknown outcome: they
	// are in its view (the mount's queue is), so it does not decide them
	// again.
	inDoubt map[string]bool
}

// queued is a create in the holder's queue.
type queued struct {
	x     *xop
	e     event
	dir   uint64
	claim store.Claim
	body  []byte
	taken bool          // being published (by its timer or FlushDir)
	done  chan struct{} // closed once answered (or dropped by a crash)
}

func newHolder(s *Sim, inc *incarnation) *holder {
	return &holder{s: s, inc: inc, inDoubt: map[string]bool{}}
}

// present reports whether key is in the holder's view.
func (h *holder) present(ctx context.Context, bucket, path string) bool {
	h.mu.Lock()
	doubt := h.inDoubt[bucket+"/"+path]
	h.mu.Unlock()
	if doubt {
		return true
	}
	_, err := h.inc.st.Stat(ctx, bucket, path)
	return !errors.Is(err, store.ErrNotFound)
}

func (h *holder) setDoubt(key string, on bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if on {
		h.inDoubt[key] = true
	} else {
		delete(h.inDoubt, key)
	}
}

// settle records a decided create's answer: a refused or acknowledged one
// leaves the holder's doubts (the applied view has it, or never will).
func (h *holder) settle(x *xop, err error) {
	h.s.xh.end(x, err)
	h.s.xh.mu.Lock()
	o := x.outcome
	h.s.xh.mu.Unlock()
	if o != unknown {
		h.setDoubt(x.key, false)
	}
}

// create is one create of xHolderPut, xHolderMkdir or xQueued.
func (h *holder) create(ctx context.Context, e event, body []byte) {
	s, inc := h.s, h.inc
	id := inc.n.id
	key := e.bucket + "/" + e.path
	dir, dirPath, err := dirIno(ctx, inc, e.bucket, e.path)
	if err != nil {
		s.tr.add("excl #%d %v %s via %d: directory: %v", e.id, e.xk, key, id, err)
		return
	}
	var ino uint64
	if e.xk == xHolderMkdir {
		// The mount gives a new directory a number it reserved, so that
		// it can adopt it before the mkdir is published.
		if ino, err = inc.st.ReserveInos(ctx, 1); err != nil {
			s.tr.add("excl #%d %v %s via %d: reserve: %v", e.id, e.xk, key, id, err)
			return
		}
	}
	c, done, err := inc.st.Own(ctx, dir, e.bucket+"/"+dirPath)
	if errors.Is(err, store.ErrLockLost) {
		c, done, err = inc.st.Own(ctx, dir, e.bucket+"/"+dirPath) // a new session (as the mount)
	}
	if err != nil {
		s.tr.add("excl #%d %v %s via %d: own: %v", e.id, e.xk, key, id, err)
		return
	}
	s.xh.noteClaim(id, dir, c.Epoch)
	s.tr.add("excl #%d %v %s via %d: own dir %d epoch %d", e.id, e.xk, key, id, c.Dir, c.Epoch)
	value := hashHex(body)
	if e.xk == xHolderMkdir {
		value = xDir
	}
	x := s.xh.begin(e, value)
	if !s.sabotaged() && h.present(ctx, e.bucket, e.path) {
		done()
		s.xh.end(x, errPresent)
		s.tr.add("excl #%d %v %s via %d: present", e.id, e.xk, key, id)
		return
	}
	h.setDoubt(key, true)
	claims := []store.Claim{c}
	switch e.xk {
	case xHolderPut:
		_, _, err = inc.st.Put(ctx, e.bucket, e.path, bytes.NewReader(body),
			store.PutOptions{Size: int64(len(body)), Decided: true, Claims: claims})
		done()
		h.settle(x, err)
		s.tr.add("excl #%d %v %s via %d: %v", e.id, e.xk, key, id, err)
	case xHolderMkdir:
		inc.st.Adopt(ino, key, c) // what the mount makes in an owned directory is its own
		err = inc.st.ChangeMany(ctx, e.bucket, []store.Change{{Kind: store.ChangeMkdir, Path: e.path,
			Attrs: store.Attrs{Exclusive: !s.sabotaged(), Ino: ino}, Decided: true, Claims: claims}})[0]
		done()
		h.settle(x, err)
		s.tr.add("excl #%d %v %s via %d: %v", e.id, e.xk, key, id, err)
	case xQueued:
		q := &queued{x: x, e: e, dir: dir, claim: c, body: body, done: make(chan struct{})}
		h.mu.Lock()
		h.queue = append(h.queue, q)
		h.mu.Unlock()
		done() // decided: the claim may go, a recall publishes q first
		time.Sleep(e.dur)
		if h.take(q) {
			pctx, cancel := context.WithTimeout(context.Background(), opTimeout)
			h.publish(pctx, q)
			cancel()
		}
		<-q.done // published by FlushDir, perhaps
	}
}

// take claims q for publishing, unless it is already being published.
func (h *holder) take(q *queued) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if q.taken {
		return false
	}
	q.taken = true
	return true
}

// publish sends q, decided, under the claim it was decided under.
func (h *holder) publish(ctx context.Context, q *queued) {
	s, inc := h.s, h.inc
	defer func() {
		h.mu.Lock()
		h.queue = slices.DeleteFunc(h.queue, func(o *queued) bool { return o == q })
		h.mu.Unlock()
		close(q.done)
	}()
	key := q.e.bucket + "/" + q.e.path
	if inc.stopping.Load() {
		// The process crashed with q in its queue: never published.
		s.xh.mu.Lock()
		s.xh.lost++
		s.xh.mu.Unlock()
		s.tr.add("excl #%d queued %s via %d: lost in a crash", q.e.id, key, inc.n.id)
		return
	}
	_, _, err := inc.st.Put(ctx, q.e.bucket, q.e.path, bytes.NewReader(q.body),
		store.PutOptions{Size: int64(len(q.body)), Decided: true, Claims: []store.Claim{q.claim}})
	h.settle(q.x, err)
	s.tr.add("excl #%d queued %s via %d: published under epoch %d: %v", q.e.id, key, inc.n.id, q.claim.Epoch, err)
}

// FlushDir implements store.Holder: the queued creates in dir are
// published (or, being published, waited for) before the store gives dir
// up or decides a change there.
func (h *holder) FlushDir(ctx context.Context, dir uint64) {
	h.mu.Lock()
	var mine, others []*queued
	for _, q := range h.queue {
		if q.dir != dir {
			continue
		}
		if q.taken {
			others = append(others, q)
		} else {
			q.taken = true
			mine = append(mine, q)
		}
	}
	h.mu.Unlock()
	if len(mine)+len(others) > 0 {
		h.s.tr.add("node %d flushes dir %d: %d queued, %d being published", h.inc.n.id, dir, len(mine), len(others))
	}
	for _, q := range mine {
		pctx, cancel := context.WithTimeout(ctx, opTimeout)
		h.publish(pctx, q)
		cancel()
	}
	for _, q := range others {
		select {
		case <-q.done:
		case <-ctx.Done():
			return
		}
	}
}

// ---------------------------------------------------------------------------
// The invariants of exclusive creates.

// checkExclusive: for every name, at most one exclusive create (of any
// kind) was acknowledged.
func (s *Sim) checkExclusive(when string) {
	s.xh.mu.Lock()
	defer s.xh.mu.Unlock()
	by := map[string][]*xop{}
	var keys []string
	for _, x := range s.xh.ops {
		if x.outcome != acked {
			continue
		}
		if by[x.key] == nil {
			keys = append(keys, x.key)
		}
		by[x.key] = append(by[x.key], x)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if xs := by[k]; len(xs) > 1 {
			s.fail("exclusivity, %s: %s was created exclusively %d times:%s", when, k, len(xs), describeX(xs))
		}
	}
}

func describeX(xs []*xop) string {
	out := ""
	for _, x := range xs {
		out += fmt.Sprintf("\n    #%d %v via node %d: %.12s", x.id, x.kind, x.node, x.value)
	}
	return out
}

// checkDurable: every acknowledged exclusive create (committed: its call
// returned nil) is in the namespace of every node, with its content (or
// as a directory). The names are never removed.
func (s *Sim) checkDurable(when string) {
	s.xh.mu.Lock()
	var xs []*xop
	for _, x := range s.xh.ops {
		if x.outcome == acked {
			xs = append(xs, x)
		}
	}
	s.xh.mu.Unlock()
	for _, x := range xs {
		bucket, path, _ := cutKey(x.key)
		for _, n := range s.nodes {
			if x.value == xDir {
				info, err := n.inc.st.Stat(context.Background(), bucket, path)
				if err != nil || !info.IsDir {
					s.fail("durability, %s: the directory %s (#%d %v via node %d, acknowledged) on node %d: %+v %v",
						when, x.key, x.id, x.kind, x.node, n.id, info, err)
				}
				continue
			}
			data, sum, err := readFile(n.inc, bucket, path)
			if err != nil || hashHex(data) != x.value || sum != x.value {
				s.fail("durability, %s: the file %s (#%d %v via node %d, acknowledged, %.12s) on node %d: %d bytes hashing to %.12s, inode says %.12s, %v",
					when, x.key, x.id, x.kind, x.node, x.value, n.id, len(data), hashHex(data), sum, err)
			}
		}
	}
}

// sabotageDurable removes, through the log, a name an acknowledged
// exclusive create made (Config.sabotage "durability").
func (s *Sim) sabotageDurable() {
	s.xh.mu.Lock()
	var victim *xop
	for _, x := range s.xh.ops {
		if x.outcome == acked {
			victim = x
			break
		}
	}
	s.xh.mu.Unlock()
	if victim == nil {
		return
	}
	bucket, path, _ := cutKey(victim.key)
	inc := s.nodes[0].inc
	if err := s.await("sabotage: remove "+victim.key, 30*time.Second, func(ctx context.Context) error {
		return inc.st.Delete(ctx, bucket, path, "")
	}); err != nil {
		s.fail("%v", err)
	}
	if err := s.until("logs converge after the sabotage", 2*time.Minute, s.logsConverged); err != nil {
		s.fail("%v", err)
	}
}

// sabotageFencing sends, at the end of a run whose nodes apply unfenced
// (Config.sabotage "fencing"), a create decided under a claim that has
// moved: node 1 claims x0, node 2 takes it over, and node 1 then sends a
// create stamped with its old claim. Applied, it breaks the fencing
// invariant whatever the workload did.
func (s *Sim) sabotageFencing() {
	n1, n2 := s.nodes[0].inc, s.nodes[1].inc
	var old store.Claim
	own := func(inc *incarnation, c *store.Claim) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			dir, dirPath, err := dirIno(ctx, inc, exclBucket, exclDir(0)+"/x")
			if err != nil {
				return err
			}
			got, done, err := inc.st.Own(ctx, dir, exclBucket+"/"+dirPath)
			if err != nil {
				return err
			}
			done()
			if c != nil {
				*c = got
			}
			return nil
		}
	}
	body := []byte("sabotage")
	for _, step := range []struct {
		what string
		f    func(ctx context.Context) error
	}{
		{"node 1 claims " + exclDir(0), own(n1, &old)},
		{"node 2 takes it over", own(n2, nil)},
		{"node 1 creates under its old claim", func(ctx context.Context) error {
			_, _, err := n1.st.Put(ctx, exclBucket, exclDir(0)+"/sabotage", bytes.NewReader(body),
				store.PutOptions{Size: int64(len(body)), Decided: true, Claims: []store.Claim{old}})
			return err
		}},
	} {
		if err := s.await("sabotage: "+step.what, time.Minute, step.f); err != nil {
			s.fail("%v", err)
			return
		}
	}
	if err := s.until("logs converge after the sabotage", 2*time.Minute, s.logsConverged); err != nil {
		s.fail("%v", err)
	}
}
