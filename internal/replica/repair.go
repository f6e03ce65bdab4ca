package replica

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/cairn-fs/cairn/internal/blob"
	"github.com/cairn-fs/cairn/internal/placement"
	"github.com/cairn-fs/cairn/internal/transport"
)

// Repair and rebalance.
//
// Every node runs a Repairer. A pass walks the namespace's referenced
// blobs (RepairConfig.Referenced, in hash order) and, for each, computes
// placement.Place(map, h, R) with the map read once at the start of the
// pass:
//
//   - Pull: this node is one of the blob's Targets and lacks it (as a
//     stand-in, only once a home node it stands in for is dead past the
//     grace period, RepairConfig.DeadPastGrace): fetch the
//     whole blob from another node (placement.Sources order, one request at
//     a time, each bounded by RequestTimeout), check its hash, store it. A
//     source that fails or serves wrong bytes is skipped.
//   - Hand-off: this node holds the blob but is neither a Target nor a Home
//     node (a stand-in whose home node is back, a node the ranking no
//     longer includes after a membership change, a draining node): ask
//     every Target which of these blobs it holds (HasBlobs, BatchSize
//     hashes a call), push the blob to those that lack it, and drop the
//     local copy only when every Target confirmed (HasBlobs said yes, or a
//     PutBlob succeeded), there are at least as many confirmed copies as
//     the blob's home nodes (R, or fewer if the cluster has fewer data
//     nodes), and a fresh read of the map still puts the blob on exactly
//     confirmed nodes and not here. An unreachable target, a failed push or
//     an unreadable local copy keeps the copy for a later pass.
//
// Under-replicated blobs. A write acknowledged with fewer copies than
// wanted is recorded in the namespace (meta's u records, the same on every
// node). An under pass (RunUnder) walks only those records, so it is cheap
// and runs as soon as something may have changed them: after every full
// pass, when TriggerUnder is called (the node applied such a write and
// lacks its blob: it is catching up after a restart), and again
// RetryUnder later while a pass made progress but left records pending.
// For each record where this node is a target it pulls the blob if it
// lacks it (as a stand-in only past the grace period, as above), then, if
// the blob has as many live targets as home nodes, asks the other targets
// (HasBlobs) whether they hold it; the records confirmed on every target
// are cleared through MarkReplicated (meta.OpReplicated).
//
// Blobs this node holds that nothing references are left alone: that is
// the garbage collector's business (a blob just written whose namespace
// entry is not applied yet looks the same). A node the map says is dead
// does nothing: it would be reacting to its own reported death.
//
// A pass is deterministic and idempotent: run again on a settled cluster
// it moves nothing. Passes on different nodes may run at the same time;
// copies are only ever dropped by a node that is not a target, after the
// targets confirmed, so with the same map on every node no blob falls
// below its home count. (Nodes briefly disagreeing about the map can at
// worst make a pass drop a copy the other view still wanted; the
// confirmed copies exist and the next passes place them home.)

// RepairStore is what the Repairer needs of the local blob store
// (blob.Store implements it).
type RepairStore interface {
	BlobStore
	// Delete removes blob h durably; deleting an absent blob is a no-op.
	Delete(h blob.Hash) error
}

// RepairConfig configures a Repairer.
type RepairConfig struct {
	// Self is this node's ID. Required.
	Self placement.NodeID
	// Local is this node's blob store. Required.
	Local RepairStore
	// Peers reaches the other nodes. Required.
	Peers Peers
	// Map returns the current placement map. Required; read at the start
	// of a pass and again before each drop.
	Map func() *placement.Map
	// Referenced calls fn for every blob the namespace references, with
	// its replication factor (the largest of the buckets naming it;
	// placement.Mirror for every data node; 0 for DefaultReplicas), until
	// fn returns false. Required. fn does network I/O and may be slow
	// (throttled): an implementation should not hold a lock or a long-lived
	// iterator across it (meta.Reader.ReferencedBlobs does not). A stable
	// order (meta's: by hash) makes passes deterministic.
	Referenced func(ctx context.Context, fn func(h blob.Hash, replicas int) bool) error
	// AppliedIndex, if set, is this node's applied index: the pushes and
	// confirmations of a hand-off carry it (transport.WithMinIndex), so a
	// target confirms or takes a copy only once it has applied every reap
	// this node saw, and spares the copy from them. Without it a lagging
	// target could confirm an old copy that a reap it applies later
	// deletes, after this node dropped its own.
	AppliedIndex func() uint64
	// DeadPastGrace, if set, says whether dead node id has been down past
	// the grace period. A stand-in (a target that is not a home node) pulls
	// a blob it lacks only when one of the blob's absent home nodes is, so
	// a brief outage does not re-replicate. Nil: stand-ins pull at once.
	DeadPastGrace func(id placement.NodeID) bool
	// UnderReplicated, if set, calls fn for every blob recorded as
	// under-replicated (meta.Reader.UnderReplicated), with the R of its
	// bucket (0 for DefaultReplicas), until fn returns false. Nil: no
	// under passes.
	UnderReplicated func(fn func(h blob.Hash, replicas int) bool) error
	// MarkReplicated records that blobs hs have all their copies
	// (proposes meta.OpReplicated). Required with UnderReplicated.
	MarkReplicated func(ctx context.Context, hs []blob.Hash) error
	// RetryUnder is how long after an under pass that made progress but
	// left records pending the next one runs. Default 2 s.
	RetryUnder time.Duration
	// UnderGap is the least time between the starts of two under passes
	// (each reads every record): triggers in between wait. Default 200 ms.
	UnderGap time.Duration
	// DefaultReplicas is R for a blob reported with replicas 0. Default 3.
	DefaultReplicas int
	// BlobsPerSec and BytesPerSec throttle the blobs a pass moves (pulled
	// or pushed; a blob pushed to two nodes counts twice). 0: unlimited.
	BlobsPerSec float64
	BytesPerSec float64
	// Interval is the time between passes in Run. Default 1 min.
	Interval time.Duration
	// BatchSize is how many hashes go in one HasBlobs call, and how many
	// hand-off candidates are handled together. Default 512.
	BatchSize int
	// Parallel is how many pulls a pass runs at once: a pull of a small
	// blob is a round trip, and one at a time a returning node took 10 s
	// to pull 5,000 small blobs. The byte and blob rates bound them all
	// together. Default 8.
	Parallel int
	// RequestTimeout bounds one RPC (a fetch, a push, a HasBlobs). Default 10 s.
	RequestTimeout time.Duration
	// Logger; default slog.Default().
	Logger *slog.Logger
}

// RepairStats counts what one pass did.
type RepairStats struct {
	Checked     int64 // referenced blobs looked at
	Pulled      int64 // blobs fetched into the local store
	PulledBytes int64
	PullFailed  int64 // blobs this node should hold but could not fetch
	Pushed      int64 // copies sent to targets that lacked them
	PushedBytes int64
	PushFailed  int64 // pushes that failed (target down, local copy unreadable)
	Dropped     int64 // local copies deleted after their targets confirmed
	Kept        int64 // hand-off candidates kept: a target did not confirm
	// Under passes (RunUnder) only:
	UnderChecked int64 // under-replicated records looked at
	UnderCleared int64 // records confirmed fully copied and cleared
	UnderPending int64 // records this node checked that still lack a copy
	Duration     time.Duration
}

// Changed reports whether the pass moved or dropped anything; a settled
// cluster runs passes where it does not.
func (s RepairStats) Changed() bool { return s.Pulled+s.Pushed+s.Dropped > 0 }

// Settled reports whether the pass found nothing to do and nothing it
// could not do.
func (s RepairStats) Settled() bool {
	return !s.Changed() && s.PullFailed+s.PushFailed+s.Kept == 0
}

// Repairer moves copies to where placement wants them. Safe for concurrent
// use; passes do not overlap.
type Repairer struct {
	cfg          RepairConfig
	pass         sync.Mutex // one pass at a time
	trigger      chan struct{}
	triggerUnder chan struct{}

	mu        sync.Mutex
	last      RepairStats
	runs      int64
	lastUnder RepairStats
	total     RepairStats // sums over every pass since the start (Duration: time spent)
	active    bool        // a pass is running
}

// NewRepairer returns a Repairer.
func NewRepairer(cfg RepairConfig) (*Repairer, error) {
	switch {
	case cfg.Self == 0:
		return nil, errors.New("replica: RepairConfig.Self is required")
	case cfg.Local == nil || cfg.Peers == nil || cfg.Map == nil || cfg.Referenced == nil:
		return nil, errors.New("replica: RepairConfig.Local, Peers, Map and Referenced are required")
	}
	if cfg.DefaultReplicas <= 0 {
		cfg.DefaultReplicas = 3
	}
	if cfg.Interval <= 0 {
		cfg.Interval = time.Minute
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = 512
	}
	if cfg.Parallel <= 0 {
		cfg.Parallel = 8
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = 10 * time.Second
	}
	if cfg.RetryUnder <= 0 {
		cfg.RetryUnder = 2 * time.Second
	}
	if cfg.UnderGap <= 0 {
		cfg.UnderGap = 200 * time.Millisecond
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.UnderReplicated != nil && cfg.MarkReplicated == nil {
		return nil, errors.New("replica: RepairConfig.MarkReplicated is required with UnderReplicated")
	}
	return &Repairer{cfg: cfg, trigger: make(chan struct{}, 1), triggerUnder: make(chan struct{}, 1)}, nil
}

// TriggerUnder asks Run for an under pass soon (see RunUnder). It never
// blocks.
func (r *Repairer) TriggerUnder() {
	select {
	case r.triggerUnder <- struct{}{}:
	default:
	}
}

// Progress is what the Repairer did since the start and is doing now.
type Progress struct {
	Active    bool        // a pass is running
	Passes    int64       // full passes finished
	Last      RepairStats // the last full pass
	LastUnder RepairStats // the last under pass
	Total     RepairStats // sums over every pass, full and under
}

// Progress returns the Repairer's progress. Safe for concurrent use.
func (r *Repairer) Progress() Progress {
	r.mu.Lock()
	defer r.mu.Unlock()
	return Progress{Active: r.active, Passes: r.runs, Last: r.last, LastUnder: r.lastUnder, Total: r.total}
}

// begin and end bracket a pass for Progress.
func (r *Repairer) begin() {
	r.mu.Lock()
	r.active = true
	r.mu.Unlock()
}

func (r *Repairer) end(st RepairStats, under bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.active = false
	if under {
		r.lastUnder = st
	} else {
		r.last, r.runs = st, r.runs+1
	}
	t := &r.total
	t.Checked += st.Checked
	t.Pulled += st.Pulled
	t.PulledBytes += st.PulledBytes
	t.PullFailed += st.PullFailed
	t.Pushed += st.Pushed
	t.PushedBytes += st.PushedBytes
	t.PushFailed += st.PushFailed
	t.Dropped += st.Dropped
	t.Kept += st.Kept
	t.UnderChecked += st.UnderChecked
	t.UnderCleared += st.UnderCleared
	t.Duration += st.Duration
}

// Trigger asks Run for a pass soon (a node came back, the map changed).
// It never blocks; triggers during a pass give one more pass after it.
func (r *Repairer) Trigger() {
	select {
	case r.trigger <- struct{}{}:
	default:
	}
}

// Last returns the stats of the last finished pass and how many passes ran.
func (r *Repairer) Last() (RepairStats, int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last, r.runs
}

// Run runs a full pass every Interval and soon after each Trigger, and an
// under pass after each full pass, soon after each TriggerUnder, and
// RetryUnder after one that made progress but left records pending, until
// ctx ends. Errors are logged; the next pass retries.
func (r *Repairer) Run(ctx context.Context) {
	t := time.NewTimer(r.cfg.Interval)
	defer t.Stop()
	var retry <-chan time.Time // the next under pass's retry, if one is due
	var lastUnder time.Time
	for {
		full := false
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			full = true
		case <-r.trigger:
			full = true
		case <-r.triggerUnder:
		case <-retry:
		}
		if full {
			st, err := r.RunOnce(ctx)
			switch {
			case ctx.Err() != nil:
				return
			case err != nil:
				r.cfg.Logger.Warn("repair pass failed", "err", err)
			case !st.Settled():
				r.cfg.Logger.Info("repair pass", "checked", st.Checked, "pulled", st.Pulled,
					"pull_failed", st.PullFailed, "pushed", st.Pushed, "push_failed", st.PushFailed,
					"dropped", st.Dropped, "kept", st.Kept, "took", st.Duration)
			}
			if !t.Stop() {
				select {
				case <-t.C:
				default:
				}
			}
			t.Reset(r.cfg.Interval)
		}
		retry = nil
		if r.cfg.UnderReplicated == nil {
			continue
		}
		if wait := r.cfg.UnderGap - time.Since(lastUnder); !full && wait > 0 {
			// A burst of triggers (every under-replicated write applied
			// while this node lacks its blob) runs one pass per gap.
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
		}
		lastUnder = time.Now()
		st, err := r.RunUnder(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			r.cfg.Logger.Warn("under-replicated repair pass failed", "err", err)
		case st.Pulled+st.UnderCleared+st.PullFailed > 0:
			r.cfg.Logger.Info("under-replicated repair pass", "records", st.UnderChecked, "pulled", st.Pulled,
				"pull_failed", st.PullFailed, "cleared", st.UnderCleared, "pending", st.UnderPending, "took", st.Duration)
		}
		if err == nil && st.UnderPending > 0 && st.Pulled+st.UnderCleared > 0 {
			retry = time.After(r.cfg.RetryUnder)
		}
	}
}

// RunUnder runs one under pass (see "Under-replicated blobs" at the top of
// repair.go). It returns an error when UnderReplicated or MarkReplicated
// fails or ctx ends.
func (r *Repairer) RunUnder(ctx context.Context) (RepairStats, error) {
	var st RepairStats
	if r.cfg.UnderReplicated == nil {
		return st, nil
	}
	r.pass.Lock()
	defer r.pass.Unlock()
	r.begin()
	start := time.Now()
	defer func() { st.Duration = time.Since(start); r.end(st, true) }()
	m := r.cfg.Map()
	if n, ok := m.Node(r.cfg.Self); ok && n.State == placement.Dead {
		return st, nil
	}
	p := newPacer(r.cfg.BlobsPerSec, r.cfg.BytesPerSec)
	type check struct {
		h       blob.Hash
		targets []placement.NodeID
	}
	var checks, pulled []check
	pl := r.newPullers(m, p)
	err := r.cfg.UnderReplicated(func(h blob.Hash, rf int) bool {
		if ctx.Err() != nil {
			return false
		}
		st.UnderChecked++
		plan := placement.Place(m, h, r.normalize(rf))
		if !slices.Contains(plan.Targets, r.cfg.Self) {
			return true
		}
		complete := len(plan.Targets) >= len(plan.Home)
		switch {
		case r.cfg.Local.Has(h):
			if complete {
				checks = append(checks, check{h, plan.Targets})
			}
		case r.owed(plan):
			pl.pull(ctx, h)
			if complete {
				pulled = append(pulled, check{h, plan.Targets})
			}
		}
		return ctx.Err() == nil
	})
	pst := pl.wait()
	st.Pulled, st.PulledBytes, st.PullFailed = pst.Pulled, pst.PulledBytes, pst.PullFailed
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		return st, err
	}
	for _, c := range pulled {
		if r.cfg.Local.Has(c.h) {
			checks = append(checks, c)
		}
	}
	// Confirm the copies on the other targets.
	missing := make([]bool, len(checks))
	byTarget := map[placement.NodeID][]int{}
	for i, c := range checks {
		for _, t := range c.targets {
			if t != r.cfg.Self {
				byTarget[t] = append(byTarget[t], i)
			}
		}
	}
	if err := r.askTargets(ctx, byTarget, func(i int) blob.Hash { return checks[i].h },
		func(_ placement.NodeID, part []int, has []bool, err error) {
			for k, i := range part {
				missing[i] = missing[i] || err != nil || !has[k]
			}
		}); err != nil {
		return st, err
	}
	var done []blob.Hash
	for i, c := range checks {
		if missing[i] {
			st.UnderPending++
		} else {
			done = append(done, c.h)
		}
	}
	for lo := 0; lo < len(done); lo += markChunk {
		part := done[lo:min(lo+markChunk, len(done))]
		if err := r.cfg.MarkReplicated(ctx, part); err != nil {
			return st, fmt.Errorf("mark %d blobs replicated: %w", len(part), err)
		}
		st.UnderCleared += int64(len(part))
	}
	return st, nil
}

// markChunk is the most blobs one MarkReplicated call (one log command)
// carries.
const markChunk = 4096

// handoff is a local copy that belongs elsewhere.
type handoff struct {
	h       blob.Hash
	rf      int
	home    int // copies required before dropping
	targets []placement.NodeID
}

// RunOnce runs one pass (see the comment at the top of repair.go). It
// returns an error only when Referenced fails or ctx ends; blobs that
// could not be moved are counted in the stats and retried next pass.
func (r *Repairer) RunOnce(ctx context.Context) (RepairStats, error) {
	r.pass.Lock()
	defer r.pass.Unlock()
	r.begin()
	start := time.Now()
	var st RepairStats
	m := r.cfg.Map()
	if n, ok := m.Node(r.cfg.Self); ok && n.State == placement.Dead {
		r.cfg.Logger.Debug("repair skipped: the map says this node is dead")
		r.end(st, false)
		return st, nil
	}
	p := newPacer(r.cfg.BlobsPerSec, r.cfg.BytesPerSec)
	var batch []handoff
	var perr error // a pacing wait cut by ctx
	pl := r.newPullers(m, p)
	err := r.cfg.Referenced(ctx, func(h blob.Hash, rf int) bool {
		if ctx.Err() != nil {
			return false
		}
		st.Checked++
		rf = r.normalize(rf)
		plan := placement.Place(m, h, rf)
		target := slices.Contains(plan.Targets, r.cfg.Self)
		has := r.cfg.Local.Has(h)
		switch {
		case target && !has && r.owed(plan):
			pl.pull(ctx, h)
			perr = ctx.Err()
		case has && !target && !plan.IsHome(r.cfg.Self):
			batch = append(batch, handoff{h: h, rf: rf, home: len(plan.Home), targets: plan.Targets})
			if len(batch) >= r.cfg.BatchSize {
				perr = r.handOff(ctx, p, batch, &st)
				batch = batch[:0]
			}
		}
		return perr == nil
	})
	if err == nil && perr == nil && len(batch) > 0 {
		perr = r.handOff(ctx, p, batch, &st)
	}
	pst := pl.wait()
	st.Pulled, st.PulledBytes, st.PullFailed = pst.Pulled, pst.PulledBytes, pst.PullFailed
	st.Duration = time.Since(start)
	r.end(st, false)
	if err == nil {
		err = perr
	}
	if err == nil {
		err = ctx.Err()
	}
	return st, err
}

// owed reports whether this node, a target of plan, should hold its copy
// now: always as a home node; as a stand-in once an absent home node has
// been dead past the grace period.
func (r *Repairer) owed(plan placement.Plan) bool {
	if r.cfg.DeadPastGrace == nil || plan.IsHome(r.cfg.Self) {
		return true
	}
	for _, id := range plan.Absent() {
		if r.cfg.DeadPastGrace(id) {
			return true
		}
	}
	return false
}

// normalize turns a reported replication factor into one Place accepts.
func (r *Repairer) normalize(rf int) int {
	if rf == placement.Mirror || rf >= 1 {
		return rf
	}
	return r.cfg.DefaultReplicas
}

// pullers runs the pulls of one pass, at most RepairConfig.Parallel at a
// time, under the pass's pacer.
type pullers struct {
	r   *Repairer
	m   *placement.Map
	p   *pacer
	sem chan struct{}
	wg  sync.WaitGroup
	mu  sync.Mutex
	st  RepairStats // Pulled, PulledBytes, PullFailed
}

func (r *Repairer) newPullers(m *placement.Map, p *pacer) *pullers {
	return &pullers{r: r, m: m, p: p, sem: make(chan struct{}, r.cfg.Parallel)}
}

// pull starts the pull of blob h once a slot is free (or does nothing when
// ctx ends first).
func (ps *pullers) pull(ctx context.Context, h blob.Hash) {
	select {
	case ps.sem <- struct{}{}:
	case <-ctx.Done():
		return
	}
	ps.wg.Add(1)
	go func() {
		defer func() { <-ps.sem; ps.wg.Done() }()
		var st RepairStats
		_ = ps.r.pull(ctx, ps.m, ps.p, h, &st) // only ctx's error, which the pass reports
		ps.mu.Lock()
		ps.st.Pulled += st.Pulled
		ps.st.PulledBytes += st.PulledBytes
		ps.st.PullFailed += st.PullFailed
		ps.mu.Unlock()
	}()
}

// wait waits for the pulls started and returns what they did.
func (ps *pullers) wait() RepairStats {
	ps.wg.Wait()
	return ps.st
}

// pull fetches blob h from another node and stores it. It returns an
// error only when ctx ended.
func (r *Repairer) pull(ctx context.Context, m *placement.Map, p *pacer, h blob.Hash, st *RepairStats) error {
	var errs []error
	for _, src := range placement.Sources(m, h) {
		if src == r.cfg.Self {
			continue
		}
		data, err := r.fetchWhole(ctx, src, h)
		if err == nil && blob.Sum(data) != h {
			err = fmt.Errorf("%w: served bytes of %s", blob.ErrCorrupt, blob.Sum(data))
		}
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			errs = append(errs, fmt.Errorf("node %d: %w", src, err))
			continue
		}
		if err := p.wait(ctx, len(data)); err != nil {
			return err
		}
		if err := r.cfg.Local.Put(h, data); err != nil {
			st.PullFailed++
			r.cfg.Logger.Warn("repair: storing a pulled blob failed", "hash", h.String(), "err", err)
			return nil
		}
		st.Pulled++
		st.PulledBytes += int64(len(data))
		return nil
	}
	st.PullFailed++
	r.cfg.Logger.Debug("repair: no source could serve a blob this node should hold",
		"hash", h.String(), "err", errors.Join(errs...))
	return nil
}

// fetchWhole reads all of blob h from node src.
func (r *Repairer) fetchWhole(ctx context.Context, src placement.NodeID, h blob.Hash) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.RequestTimeout)
	defer cancel()
	rc, err := r.cfg.Peers.GetBlob(ctx, src, h, 0, -1)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	var buf bytes.Buffer
	if _, err := io.Copy(&buf, io.LimitReader(rc, blob.MaxSize+1)); err != nil {
		return nil, err
	}
	if buf.Len() > blob.MaxSize {
		return nil, fmt.Errorf("%w: more than %d bytes", blob.ErrTooLarge, blob.MaxSize)
	}
	return buf.Bytes(), nil
}

// readLocal reads the whole local copy of h and checks its hash.
func (r *Repairer) readLocal(h blob.Hash) ([]byte, error) {
	n, err := r.cfg.Local.Size(h)
	if err != nil {
		return nil, err
	}
	data := make([]byte, n)
	k, err := r.cfg.Local.ReadAt(h, data, 0)
	if err != nil && !(errors.Is(err, io.EOF) && int64(k) == n) {
		return nil, err
	}
	if int64(k) != n || blob.Sum(data) != h {
		return nil, fmt.Errorf("local copy of %s: %w", h, blob.ErrCorrupt)
	}
	return data, nil
}

// copy states of one (blob, target) pair during a hand-off.
const (
	copyUnknown = iota
	copyConfirmed
	copyLacking
)

// handOff confirms (pushing where needed) the copies of a batch of
// hand-off candidates on their targets and drops the local copies that
// are fully confirmed. It returns an error only when ctx ended.
func (r *Repairer) handOff(ctx context.Context, p *pacer, batch []handoff, st *RepairStats) error {
	// state[i][j]: batch[i]'s copy on batch[i].targets[j].
	state := make([][]int, len(batch))
	byTarget := map[placement.NodeID][]int{}
	for i, c := range batch {
		state[i] = make([]int, len(c.targets))
		for _, t := range c.targets {
			byTarget[t] = append(byTarget[t], i)
		}
	}
	if err := r.askTargets(ctx, byTarget, func(i int) blob.Hash { return batch[i].h },
		func(t placement.NodeID, part []int, has []bool, err error) {
			if err != nil {
				// Unreachable: these copies stay unknown, so kept.
				r.cfg.Logger.Debug("repair: HasBlobs failed", "node", t, "err", err)
				return
			}
			for k, i := range part {
				j := slices.Index(batch[i].targets, t)
				if has[k] {
					state[i][j] = copyConfirmed
				} else {
					state[i][j] = copyLacking
				}
			}
		}); err != nil {
		return err
	}
	for i, c := range batch {
		var data []byte
		var rerr error
		for j, t := range c.targets {
			if state[i][j] != copyLacking {
				continue
			}
			if data == nil && rerr == nil {
				data, rerr = r.readLocal(c.h)
				if rerr != nil {
					r.cfg.Logger.Warn("repair: local copy unreadable; not handing it off", "hash", c.h.String(), "err", rerr)
				}
			}
			if rerr != nil {
				st.PushFailed++
				continue
			}
			if err := p.wait(ctx, len(data)); err != nil {
				return err
			}
			if err := r.putBlob(ctx, t, c.h, data); err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				st.PushFailed++
				r.cfg.Logger.Debug("repair: push failed", "hash", c.h.String(), "node", t, "err", err)
				continue
			}
			state[i][j] = copyConfirmed
			st.Pushed++
			st.PushedBytes += int64(len(data))
		}
	}
	// Drop what every target confirmed, if the map still agrees.
	var fresh *placement.Map
	for i, c := range batch {
		ok := len(c.targets) >= c.home && len(c.targets) > 0
		for j := range c.targets {
			ok = ok && state[i][j] == copyConfirmed
		}
		if ok {
			if fresh == nil {
				fresh = r.cfg.Map()
			}
			now := placement.Place(fresh, c.h, c.rf)
			ok = !slices.Contains(now.Targets, r.cfg.Self) && !now.IsHome(r.cfg.Self) &&
				len(now.Targets) >= len(now.Home)
			for _, t := range now.Targets {
				ok = ok && slices.Contains(c.targets, t)
			}
		}
		if !ok {
			st.Kept++
			continue
		}
		if err := r.cfg.Local.Delete(c.h); err != nil {
			st.Kept++
			r.cfg.Logger.Warn("repair: dropping a handed-off copy failed", "hash", c.h.String(), "err", err)
			continue
		}
		st.Dropped++
	}
	return nil
}

// askTargets asks every target t of byTarget (in ID order) which of the
// blobs hashOf(i), i in byTarget[t], it holds, BatchSize hashes a HasBlobs
// call, and hands each answer to fn with the indices it covers (err: the
// call failed, has is nil). It returns only ctx's error.
func (r *Repairer) askTargets(ctx context.Context, byTarget map[placement.NodeID][]int, hashOf func(i int) blob.Hash,
	fn func(t placement.NodeID, part []int, has []bool, err error)) error {
	targets := make([]placement.NodeID, 0, len(byTarget))
	for t := range byTarget {
		targets = append(targets, t)
	}
	slices.Sort(targets)
	for _, t := range targets {
		idx := byTarget[t]
		for lo := 0; lo < len(idx); lo += r.cfg.BatchSize {
			part := idx[lo:min(lo+r.cfg.BatchSize, len(idx))]
			hs := make([]blob.Hash, len(part))
			for k, i := range part {
				hs[k] = hashOf(i)
			}
			has, err := r.hasBlobs(ctx, t, hs)
			if err != nil && ctx.Err() != nil {
				return ctx.Err()
			}
			fn(t, part, has, err)
		}
	}
	return nil
}

func (r *Repairer) hasBlobs(ctx context.Context, to placement.NodeID, hs []blob.Hash) ([]bool, error) {
	ctx, cancel := context.WithTimeout(r.withApplied(ctx), r.cfg.RequestTimeout)
	defer cancel()
	has, err := r.cfg.Peers.HasBlobs(ctx, to, hs)
	if err == nil && len(has) != len(hs) {
		err = fmt.Errorf("HasBlobs answered %d of %d hashes", len(has), len(hs))
	}
	return has, err
}

// withApplied returns ctx carrying this node's applied index as the
// minimum the target must have applied (see RepairConfig.AppliedIndex).
func (r *Repairer) withApplied(ctx context.Context) context.Context {
	if r.cfg.AppliedIndex == nil {
		return ctx
	}
	return transport.WithMinIndex(ctx, r.cfg.AppliedIndex())
}

func (r *Repairer) putBlob(ctx context.Context, to placement.NodeID, h blob.Hash, data []byte) error {
	ctx = r.withApplied(ctx)
	ctx, cancel := context.WithTimeout(ctx, r.cfg.RequestTimeout)
	defer cancel()
	return r.cfg.Peers.PutBlob(ctx, to, h, data)
}

// pacer spreads a pass's moves to at most blobs/s and bytes/s (0: no
// limit) since the pass began.
type pacer struct {
	blobsPerSec, bytesPerSec float64
	start                    time.Time
	mu                       sync.Mutex // guards blobs and bytes: parallel pulls share the pacer
	blobs, bytes             float64
}

func newPacer(blobsPerSec, bytesPerSec float64) *pacer {
	return &pacer{blobsPerSec: blobsPerSec, bytesPerSec: bytesPerSec, start: time.Now()}
}

// wait accounts for one blob of n bytes and sleeps until the rates allow it.
func (p *pacer) wait(ctx context.Context, n int) error {
	p.mu.Lock()
	p.blobs++
	p.bytes += float64(n)
	var due float64 // seconds since start
	if p.blobsPerSec > 0 {
		due = max(due, (p.blobs-1)/p.blobsPerSec)
	}
	if p.bytesPerSec > 0 {
		due = max(due, (p.bytes-float64(n))/p.bytesPerSec)
	}
	p.mu.Unlock()
	d := time.Duration(due*float64(time.Second)) - time.Since(p.start)
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
