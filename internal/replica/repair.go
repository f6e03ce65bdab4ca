package replica

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/cairn-fs/cairn/internal/clock"

	"github.com/cairn-fs/cairn/internal/blob"
	"github.com/cairn-fs/cairn/internal/placement"
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
	// confirmations of a hand-off carry it (internal/minindex), so a
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
	// Clock runs the pass, retry and pacing timers and request deadlines.
	// Default clock.Real{}.
	Clock  clock.Clock
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
	cfg.Clock = clock.Or(cfg.Clock)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.UnderReplicated != nil && cfg.MarkReplicated == nil {
		return nil, errors.New("replica: RepairConfig.MarkReplicated is required with UnderReplicated")
	}
	return &Repairer{cfg: cfg, trigger: make(chan struct{}, 1), triggerUnder: make(chan struct{}, 1)}, nil
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

// Last returns the stats of the last finished pass and how many passes ran.
func (r *Repairer) Last() (RepairStats, int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last, r.runs
}
