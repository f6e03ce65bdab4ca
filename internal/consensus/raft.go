package consensus

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/cairn-fs/cairn/internal/kv"
	"github.com/cairn-fs/cairn/internal/meta"
)

// ErrUnavailable is returned (wrapping the context's error) when ctx ends
// before a proposal, read barrier or membership change completed: there is
// no leader or quorum reachable, or the message carrying it was lost. For a
// proposal the outcome is unknown: it may still commit and apply later.
var ErrUnavailable = errors.New("consensus: unavailable")

// ErrBadMembership is returned by a membership change that makes no sense
// in the current configuration (promote a node that is not a learner,
// demote a voter through AddLearner, remove the last voter).
var ErrBadMembership = errors.New("consensus: invalid membership change")

// errOutcomeUnknown answers proposals whose entry a snapshot covered: it
// may have applied.
var errOutcomeUnknown = fmt.Errorf("%w: a snapshot replaced the state; the proposal may or may not have applied", ErrUnavailable)

// errRetry wakes a membership change whose proposal may have been dropped.
var errRetry = errors.New("consensus: retry")

var errSnapshotAborted = errors.New("consensus: snapshot stream aborted")

// RaftConfig configures a Raft log. Start from DefaultRaftConfig; zero
// numeric fields take their defaults in NewRaft.
type RaftConfig struct {
	// ID is this node's Raft ID, non-zero, unique in the cluster and stable
	// for the life of its store (NewRaft refuses a store written under
	// another ID). Required.
	ID uint64
	// KV is the node's store; the log lives under the "R" prefix beside the
	// namespace. Required. Not closed by Close.
	KV kv.Store
	// Transport sends messages and snapshots to peers. Required.
	Transport Transport
	// InitialVoters bootstraps a new cluster: used only when the store has
	// no Raft state yet, and then every initial voter must be started with
	// the same list (which must contain ID). A node started with no Raft
	// state and no InitialVoters waits, empty, to be added by the leader
	// (AddLearner) and catches up from a snapshot.
	InitialVoters []uint64
	// Ticker drives Raft's logical clock, one Tick per value. Nil: an
	// internal ticker every TickInterval. Tests pass their own channel.
	Ticker <-chan time.Time
	// TickInterval is the internal ticker's period. Default 100 ms.
	TickInterval time.Duration
	// ElectionTicks is the election timeout in ticks (randomized up to
	// twice that by raft). Default 10.
	ElectionTicks int
	// HeartbeatTicks is the leader's heartbeat period in ticks. Default 1.
	HeartbeatTicks int
	// RetryTicks is how long, in ticks, a read barrier or membership change
	// waits for an answer before it is re-issued (both are idempotent).
	// Default 2 × ElectionTicks.
	RetryTicks int
	// Voters is the number of voters the leader keeps by promoting caught-up
	// learners (3 or 5; others stay learners). Default 3.
	Voters int
	// DisableAutoPromote stops the leader from promoting learners on its
	// own; EnsureVoters still does it on request.
	DisableAutoPromote bool
	// PromoteFirst, if set, marks learners promoted before the others
	// (witnesses: voters that hold no data); among those it marks, and then
	// among the rest, the most caught-up wins. Called from the loop
	// goroutine; it must be fast and must not call into the Raft.
	PromoteFirst func(id uint64) bool
	// PromoteMaxLag is how many entries a learner may lag the leader's last
	// index and still be promoted. Default 100.
	PromoteMaxLag uint64
	// MaxBatch is the maximum number of commands in one log entry.
	// Default 256.
	MaxBatch int
	// MaxInflightEntries bounds this node's proposed but not yet applied
	// entries; more proposals wait and join the next entry. Default 4.
	MaxInflightEntries int
	// MaxSizePerMsg bounds the entries of one append message, in bytes.
	// Default 1 MiB.
	MaxSizePerMsg uint64
	// MaxInflightMsgs bounds the append messages in flight to one peer.
	// Default 256.
	MaxInflightMsgs int
	// MaxUncommittedBytes bounds the leader's uncommitted log; proposals
	// beyond it wait. Default 64 MiB.
	MaxUncommittedBytes uint64
	// CompactAfter: when more than this many applied entries are in the log,
	// it is truncated to CompactMargin entries behind the applied index.
	// Default 10000.
	CompactAfter uint64
	// CompactMargin is how many applied entries stay in the log after a
	// truncation, so that a peer lagging a little catches up from the log
	// rather than a snapshot. Default 1000; less than CompactAfter.
	CompactMargin uint64
	// EntryCacheBytes bounds the in-memory cache of the newest entries.
	// Default 16 MiB.
	EntryCacheBytes int
	// OnApply, if set, is called after each entry carrying commands is
	// applied (committed to KV), in log order, from the loop goroutine, with
	// the entry's commands and results. It must not block on the log.
	OnApply func(index uint64, cmds []meta.Command, res []meta.Result)
	// OnSnapshot, if set, is called from the loop goroutine after a
	// snapshot from a peer replaced the whole namespace (at index): the host
	// must drop every cache derived from it. OnApply is not called for the
	// entries the snapshot covers.
	OnSnapshot func(index uint64)
	// OnProposed, if set, is called when a Propose returns, with the time
	// it took and whether it failed (metrics). It must not block.
	OnProposed func(d time.Duration, failed bool)
	// DeferStart makes NewRaft return a log whose loop has not started:
	// nothing is applied, ticked, sent or received until Start. A host
	// builds what OnApply and OnSnapshot call (its store) in between, so
	// that no callback can see it half built (internal/core).
	DeferStart bool
	// Logger; default slog.Default().
	Logger *slog.Logger
}

// DefaultRaftConfig returns the defaults; set ID, KV and Transport.
func DefaultRaftConfig() RaftConfig {
	return RaftConfig{
		TickInterval:        100 * time.Millisecond,
		ElectionTicks:       10,
		HeartbeatTicks:      1,
		RetryTicks:          20,
		Voters:              3,
		PromoteMaxLag:       100,
		MaxBatch:            256,
		MaxInflightEntries:  4,
		MaxSizePerMsg:       1 << 20,
		MaxInflightMsgs:     256,
		MaxUncommittedBytes: 64 << 20,
		CompactAfter:        10000,
		CompactMargin:       1000,
		EntryCacheBytes:     16 << 20,
	}
}

func (c RaftConfig) withDefaults() RaftConfig {
	d := DefaultRaftConfig()
	def := func(v *int, dv int) {
		if *v == 0 {
			*v = dv
		}
	}
	def(&c.ElectionTicks, d.ElectionTicks)
	def(&c.HeartbeatTicks, d.HeartbeatTicks)
	def(&c.RetryTicks, 2*c.ElectionTicks)
	def(&c.Voters, d.Voters)
	def(&c.MaxBatch, d.MaxBatch)
	def(&c.MaxInflightEntries, d.MaxInflightEntries)
	def(&c.MaxInflightMsgs, d.MaxInflightMsgs)
	def(&c.EntryCacheBytes, d.EntryCacheBytes)
	if c.TickInterval == 0 {
		c.TickInterval = d.TickInterval
	}
	if c.PromoteMaxLag == 0 {
		c.PromoteMaxLag = d.PromoteMaxLag
	}
	if c.MaxSizePerMsg == 0 {
		c.MaxSizePerMsg = d.MaxSizePerMsg
	}
	if c.MaxUncommittedBytes == 0 {
		c.MaxUncommittedBytes = d.MaxUncommittedBytes
	}
	if c.CompactAfter == 0 {
		c.CompactAfter = d.CompactAfter
		if c.CompactMargin == 0 {
			c.CompactMargin = d.CompactMargin
		}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Validate reports the first invalid field (after defaults are applied).
func (c RaftConfig) Validate() error {
	switch {
	case c.ID == 0:
		return errors.New("consensus: RaftConfig.ID must be non-zero")
	case c.KV == nil:
		return errors.New("consensus: RaftConfig.KV is required")
	case c.Transport == nil:
		return errors.New("consensus: RaftConfig.Transport is required")
	case c.HeartbeatTicks <= 0 || c.ElectionTicks <= c.HeartbeatTicks:
		return fmt.Errorf("consensus: ElectionTicks (%d) must exceed HeartbeatTicks (%d) > 0", c.ElectionTicks, c.HeartbeatTicks)
	case c.RetryTicks <= 0 || c.TickInterval <= 0:
		return errors.New("consensus: RetryTicks and TickInterval must be positive")
	case c.Voters < 1 || c.Voters > 7:
		return fmt.Errorf("consensus: Voters %d not in [1, 7]", c.Voters)
	case c.MaxBatch <= 0 || c.MaxInflightEntries <= 0 || c.MaxInflightMsgs <= 0 || c.EntryCacheBytes <= 0:
		return errors.New("consensus: MaxBatch, MaxInflightEntries, MaxInflightMsgs and EntryCacheBytes must be positive")
	case c.CompactMargin >= c.CompactAfter:
		return fmt.Errorf("consensus: CompactMargin (%d) must be less than CompactAfter (%d)", c.CompactMargin, c.CompactAfter)
	}
	if len(c.InitialVoters) > 0 && !slices.Contains(c.InitialVoters, c.ID) {
		return fmt.Errorf("consensus: InitialVoters %v does not contain ID %d", c.InitialVoters, c.ID)
	}
	return nil
}

// Status is a node's view of the group.
type Status struct {
	ID      uint64
	Leader  uint64 // 0 when unknown
	State   raft.StateType
	Term    uint64
	Commit  uint64 // last index known committed (persisted)
	Applied uint64
	// LeaderChanges counts the changes of leader this node saw since it
	// started (including to and from "no leader").
	LeaderChanges uint64
}

// waiter is a caller blocked in Propose or a membership change.
type waiter struct {
	id     uint64
	done   chan outcome
	issued int64 // loop-owned: tick of the last (re)proposal, for membership changes
}

type raftProposal struct {
	cmd meta.Command
	w   *waiter
}

// inflightBatch is an entry this node proposed that has not applied yet.
type inflightBatch struct {
	seq   uint64
	props []raftProposal
	data  []byte
	tick  int64 // when last proposed
}

type readWaiter struct {
	ctx   context.Context
	reply chan uint64
}

type readReq struct {
	waiters []*readWaiter
	issued  int64
}

type install struct {
	msg   *pb.Message
	b     kv.Batch
	base  uint64
	index uint64
	reply chan error
}

type snapReport struct {
	to, index uint64
	err       error
}

// Raft is the replicated Log: etcd-io/raft's RawNode driven by one loop
// goroutine that persists the log in the node's KV store, sends messages
// through a Transport and applies committed entries with meta.Apply.
// Every method is safe for concurrent use.
type Raft struct {
	cfg   RaftConfig
	id    uint64
	log   *slog.Logger
	rn    *raft.RawNode
	st    *storage
	snaps *snapshots

	propc     chan raftProposal
	recvc     chan *pb.Message
	installc  chan *install
	ctrlc     chan func()
	reportc   chan snapReport
	tickc     <-chan time.Time
	ticker    *time.Ticker
	stopc     chan struct{}
	done      chan struct{}
	stopOnce  sync.Once
	startOnce sync.Once

	snapCtx    context.Context
	snapCancel context.CancelFunc
	snapWG     sync.WaitGroup

	// Owned by the loop goroutine.
	pending     []raftProposal
	inflight    map[uint64]*inflightBatch
	batchSeq    uint64
	propBlocked bool
	lead        uint64
	ticks       int64
	reads       map[string]*readReq
	newReads    []*readWaiter
	readSeq     uint64
	confWait    []*waiter
	heard       map[uint64]int64 // peer → tick of its last message
	install     *install

	wmu     sync.Mutex
	waiters map[uint64]*waiter
	idBase  uint64
	idSeq   atomic.Uint64

	amu      sync.Mutex
	applied  uint64
	appliedc chan struct{}
	status   Status
	members  *pb.ConfState
	err      error

	// Progress counters that in-package tests use to detect quiescence.
	stepsQueued, stepsDone, ticksDone, snapsInflight atomic.Int64
}

// NewRaft opens the Raft log stored in cfg.KV (bootstrapping it from
// cfg.InitialVoters when the store has none) and starts its loop. It
// resumes at the store's applied index: the entries after it are applied
// again from the log as they are known committed.
func NewRaft(cfg RaftConfig) (*Raft, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	db := cfg.KV
	if id, ok, err := getU64(db, keyNodeID); err != nil {
		return nil, err
	} else if ok && id != cfg.ID {
		return nil, fmt.Errorf("consensus: store belongs to node %d, not %d", id, cfg.ID)
	}
	inc, _, err := getU64(db, keyIncarnation)
	if err != nil {
		return nil, err
	}
	// Batch sequence numbers must grow across restarts, and past those of a
	// previous life of this ID whose store was wiped (the session record
	// is replicated state).
	sess, _, err := getU64(db, sessionKey(cfg.ID))
	if err != nil {
		return nil, err
	}
	inc = max(inc, sess>>40) + 1
	applied, err := meta.NewReader(db).AppliedIndex()
	if err != nil {
		return nil, fmt.Errorf("consensus: read applied index: %w", err)
	}
	snaps := newSnapshots()
	st, err := openStorage(db, cfg.EntryCacheBytes, snaps)
	if err != nil {
		return nil, err
	}
	b := db.NewBatch()
	defer b.Close()
	if err := b.Set(keyNodeID, u64(cfg.ID)); err != nil {
		return nil, err
	}
	if err := b.Set(keyIncarnation, u64(inc)); err != nil {
		return nil, err
	}
	empty := raft.IsEmptyHardState(st.hs) && st.last == 0 && st.truncIndex == 0 &&
		len(st.cs.GetVoters())+len(st.cs.GetLearners()) == 0
	if empty && len(cfg.InitialVoters) > 0 {
		// Bootstrap: a log truncated at index I (term 1) whose configuration
		// is the initial voters. An empty store starts at I = 1 (the first
		// Apply creates the root); a store that already holds a namespace
		// (a single-node store growing into a cluster) starts at its own
		// applied index, and other nodes must then join it empty.
		idx := max(applied, 1)
		if applied == 0 {
			if _, err := meta.Apply(b, 1, nil); err != nil {
				return nil, err
			}
		}
		cs := &pb.ConfState{Voters: slices.Clone(cfg.InitialVoters)}
		if err := b.Set(keyConfState, mustMarshal(cs)); err != nil {
			return nil, err
		}
		if err := b.Set(keyTrunc, truncValue(idx, 1)); err != nil {
			return nil, err
		}
		if err := b.Set(keyHardState, mustMarshal(&pb.HardState{Term: new(uint64(1)), Commit: new(idx)})); err != nil {
			return nil, err
		}
		applied = idx
	}
	if err := b.Commit(true); err != nil {
		return nil, fmt.Errorf("consensus: open: %w", err)
	}
	if st, err = openStorage(db, cfg.EntryCacheBytes, snaps); err != nil {
		return nil, err
	}
	if applied > st.last || applied < st.truncIndex {
		return nil, fmt.Errorf("consensus: applied index %d outside the log [%d, %d]", applied, st.truncIndex, st.last)
	}
	// Every applied entry was committed; the commit index in the hard state
	// may lag (it is written without sync when only it changed).
	if st.hs.GetCommit() < applied {
		st.hs.Commit = new(applied)
	}
	st.applied = applied
	rn, err := raft.NewRawNode(&raft.Config{
		ID:                        cfg.ID,
		ElectionTick:              cfg.ElectionTicks,
		HeartbeatTick:             cfg.HeartbeatTicks,
		Storage:                   st,
		Applied:                   applied,
		MaxSizePerMsg:             cfg.MaxSizePerMsg,
		MaxCommittedSizePerReady:  16 * cfg.MaxSizePerMsg,
		MaxUncommittedEntriesSize: cfg.MaxUncommittedBytes,
		MaxInflightMsgs:           cfg.MaxInflightMsgs,
		CheckQuorum:               true,
		PreVote:                   true,
		StepDownOnRemoval:         true,
		Logger:                    raftLogger{cfg.Logger},
	})
	if err != nil {
		return nil, fmt.Errorf("consensus: start raft: %w", err)
	}
	r := &Raft{
		cfg: cfg, id: cfg.ID, log: cfg.Logger.With("node", cfg.ID), rn: rn, st: st, snaps: snaps,
		propc: make(chan raftProposal, 4096), recvc: make(chan *pb.Message, 4096),
		installc: make(chan *install), ctrlc: make(chan func(), 64), reportc: make(chan snapReport, 16),
		stopc: make(chan struct{}), done: make(chan struct{}),
		reads: map[string]*readReq{}, waiters: map[uint64]*waiter{}, inflight: map[uint64]*inflightBatch{}, heard: map[uint64]int64{},
		batchSeq: inc << 40,
		idBase:   inc << 40, applied: applied, appliedc: make(chan struct{}),
		members: proto.Clone(st.cs).(*pb.ConfState),
	}
	r.status = Status{ID: cfg.ID, Term: st.hs.GetTerm(), Commit: st.hs.GetCommit(), Applied: applied}
	r.snapCtx, r.snapCancel = context.WithCancel(context.Background())
	r.tickc = cfg.Ticker
	if r.tickc == nil {
		r.ticker = time.NewTicker(cfg.TickInterval)
		r.tickc = r.ticker.C
	}
	r.log.Info("raft log started", "applied", applied, "first", st.truncIndex+1, "last", st.last,
		"term", st.hs.GetTerm(), "voters", st.cs.GetVoters(), "learners", st.cs.GetLearners())
	if !cfg.DeferStart {
		r.Start()
	}
	return r, nil
}

// Start starts the loop of a log made with DeferStart (NewRaft starts it
// otherwise). Later calls do nothing.
func (r *Raft) Start() {
	r.startOnce.Do(func() { go r.run() })
}

// ---------------------------------------------------------------------------
// Public API

// Propose submits cmd and blocks until this node has applied the entry
// carrying it (the Result is that application's outcome) or ctx ends. A
// follower forwards the entry to the leader. Concurrent proposals are
// batched into one entry. When ctx ends first the error wraps
// ErrUnavailable and ctx.Err(): a command not yet handed to Raft is then
// never proposed, but one already handed may still commit (its outcome is
// unknown to the caller, who must re-read before retrying a non-idempotent
// command). After Close or a storage failure the error wraps ErrStopped.
func (r *Raft) Propose(ctx context.Context, cmd meta.Command) (_ meta.Result, err error) {
	if !cmd.Op.Valid() {
		return meta.Result{}, fmt.Errorf("consensus: propose: %w: unknown op %d", meta.ErrInvalid, cmd.Op)
	}
	if f := r.cfg.OnProposed; f != nil {
		start := time.Now()
		defer func() { f(time.Since(start), err != nil) }()
	}
	w, err := r.submit(ctx, cmd)
	if err != nil {
		return meta.Result{}, err
	}
	o, err := r.wait(ctx, w)
	if err != nil {
		return meta.Result{}, err
	}
	return o.res, o.err
}

// ProposeMany implements OrderedProposer. ctx bounds the handing over and
// the waits, as for Propose.
func (r *Raft) ProposeMany(ctx context.Context, cmds []meta.Command) ([]meta.Result, []error) {
	for _, c := range cmds {
		if !c.Op.Valid() {
			err := fmt.Errorf("consensus: propose: %w: unknown op %d", meta.ErrInvalid, c.Op)
			errs := make([]error, len(cmds))
			for i := range errs {
				errs[i] = err
			}
			return make([]meta.Result, len(cmds)), errs
		}
	}
	return proposeMany(ctx, cmds, r.submit, func(w *waiter) (meta.Result, error) {
		o, err := r.wait(ctx, w)
		if err != nil {
			return meta.Result{}, err
		}
		return o.res, o.err
	})
}

// submit hands cmd to the loop, in the caller's order.
func (r *Raft) submit(ctx context.Context, cmd meta.Command) (*waiter, error) {
	w := r.newWaiter()
	select {
	case r.propc <- raftProposal{cmd: cmd, w: w}:
		return w, nil
	case <-ctx.Done():
		r.forget(w.id)
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, ctx.Err())
	case <-r.stopc:
		r.forget(w.id)
		return nil, r.stopErr()
	}
}

// wait blocks until w is answered, ctx ends or the log stops.
func (r *Raft) wait(ctx context.Context, w *waiter) (outcome, error) {
	select {
	case o := <-w.done:
		return o, nil
	case <-ctx.Done():
		if r.forget(w.id) {
			return outcome{}, fmt.Errorf("%w: %w", ErrUnavailable, ctx.Err())
		}
	case <-r.done:
		if r.forget(w.id) {
			return outcome{}, r.stopErr()
		}
	}
	return <-w.done, nil // answered concurrently
}

// AppliedIndex returns the index of the last entry applied locally. Reads
// of the local store reflect at least this index.
func (r *Raft) AppliedIndex() uint64 {
	r.amu.Lock()
	defer r.amu.Unlock()
	return r.applied
}

// WaitApplied blocks until the local applied index is at least index, ctx
// ends (the error wraps ErrUnavailable) or the log stops (ErrStopped).
func (r *Raft) WaitApplied(ctx context.Context, index uint64) error {
	for {
		r.amu.Lock()
		a, ch := r.applied, r.appliedc
		r.amu.Unlock()
		if a >= index {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("%w: applied %d, waiting for %d: %w", ErrUnavailable, a, index, ctx.Err())
		case <-r.done:
			return r.stopErr()
		}
	}
}

// ReadIndex is a linearizable read barrier: it asks the leader for its
// commit index (confirmed by a quorum of heartbeats), waits until this node
// has applied it, and returns it. A read of the local store after it
// returns sees every write acknowledged anywhere before it was called. It
// needs a leader and a quorum; the request is re-sent every RetryTicks
// until ctx ends (then the error wraps ErrUnavailable).
func (r *Raft) ReadIndex(ctx context.Context) (uint64, error) {
	w := &readWaiter{ctx: ctx, reply: make(chan uint64, 1)}
	if err := r.do(ctx, func() { r.newReads = append(r.newReads, w) }); err != nil {
		return 0, err
	}
	var index uint64
	select {
	case index = <-w.reply:
	case <-ctx.Done():
		return 0, fmt.Errorf("%w: read index: %w", ErrUnavailable, ctx.Err())
	case <-r.done:
		return 0, r.stopErr()
	}
	if err := r.WaitApplied(ctx, index); err != nil {
		return 0, err
	}
	return index, nil
}

// Members returns the configuration as of the applied index (a copy).
func (r *Raft) Members() *pb.ConfState {
	r.amu.Lock()
	defer r.amu.Unlock()
	return proto.Clone(r.members).(*pb.ConfState)
}

// Status returns this node's view: leader, role, term, commit and applied
// index.
func (r *Raft) Status() Status {
	r.amu.Lock()
	defer r.amu.Unlock()
	s := r.status
	s.Applied = r.applied
	return s
}

// AddVoter adds id as a voter (or promotes it if it is a learner) and
// blocks until the change is applied locally. Prefer AddLearner then
// Promote for a new node, so it catches up before it counts for quorum.
// Membership changes are idempotent and re-proposed every RetryTicks until
// applied or ctx ends (ErrUnavailable).
func (r *Raft) AddVoter(ctx context.Context, id uint64) error {
	return r.changeConf(ctx, pb.ConfChangeAddNode, id, func(cs *pb.ConfState) (bool, error) {
		return slices.Contains(cs.GetVoters(), id), nil
	})
}

// AddLearner adds id as a non-voting learner that receives the whole log.
// It fails with ErrBadMembership if id is a voter. See AddVoter.
func (r *Raft) AddLearner(ctx context.Context, id uint64) error {
	return r.changeConf(ctx, pb.ConfChangeAddLearnerNode, id, func(cs *pb.ConfState) (bool, error) {
		if slices.Contains(cs.GetVoters(), id) {
			return false, fmt.Errorf("%w: %d is a voter", ErrBadMembership, id)
		}
		return slices.Contains(cs.GetLearners(), id), nil
	})
}

// Promote turns learner id into a voter. ErrBadMembership if id is not a
// member. See AddVoter.
func (r *Raft) Promote(ctx context.Context, id uint64) error {
	return r.changeConf(ctx, pb.ConfChangeAddNode, id, func(cs *pb.ConfState) (bool, error) {
		if slices.Contains(cs.GetVoters(), id) {
			return true, nil
		}
		if !slices.Contains(cs.GetLearners(), id) {
			return false, fmt.Errorf("%w: %d is not a learner", ErrBadMembership, id)
		}
		return false, nil
	})
}

// Remove removes voter or learner id. Removing the last voter fails with
// ErrBadMembership. A removed leader steps down. See AddVoter.
func (r *Raft) Remove(ctx context.Context, id uint64) error {
	return r.changeConf(ctx, pb.ConfChangeRemoveNode, id, func(cs *pb.ConfState) (bool, error) {
		isVoter := slices.Contains(cs.GetVoters(), id)
		if isVoter && len(cs.GetVoters()) == 1 {
			return false, fmt.Errorf("%w: %d is the last voter", ErrBadMembership, id)
		}
		return !isVoter && !slices.Contains(cs.GetLearners(), id), nil
	})
}

// EnsureVoters is the promotion policy: if this node is the leader and the
// group has fewer than target voters, it promotes the most caught-up,
// learner heard from within an election timeout (lagging at most PromoteMaxLag entries) and
// returns its ID. It returns 0 when there is nothing to do or this node is
// not the leader. It never demotes. The leader runs it on its own every
// ElectionTicks with target = Voters unless DisableAutoPromote.
func (r *Raft) EnsureVoters(ctx context.Context, target int) (uint64, error) {
	res := make(chan uint64, 1)
	if err := r.do(ctx, func() { res <- r.promotionCandidate(target) }); err != nil {
		return 0, err
	}
	var cand uint64
	select {
	case cand = <-res:
	case <-ctx.Done():
		return 0, fmt.Errorf("%w: %w", ErrUnavailable, ctx.Err())
	case <-r.done:
		return 0, r.stopErr()
	}
	if cand == 0 {
		return 0, nil
	}
	return cand, r.Promote(ctx, cand)
}

// Step hands a message received from a peer to the loop. It blocks only
// while the inbound queue is full (then until ctx ends). Snapshots arrive
// through ApplySnapshot instead.
func (r *Raft) Step(ctx context.Context, m *pb.Message) error {
	if m.GetTo() != r.id {
		return fmt.Errorf("consensus: message for %d delivered to %d", m.GetTo(), r.id)
	}
	if m.GetType() == pb.MsgSnap {
		return errors.New("consensus: MsgSnap must come through ApplySnapshot")
	}
	select {
	case r.recvc <- m:
		r.stepsQueued.Add(1)
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-r.stopc:
		return r.stopErr()
	}
}

// ReportUnreachable tells Raft that the last send to id failed, so that the
// leader stops optimistic pipelining to it. Never blocks (the report is
// dropped when the loop is busy).
func (r *Raft) ReportUnreachable(id uint64) {
	select {
	case r.ctrlc <- func() { r.rn.ReportUnreachable(id) }:
	default:
	}
}

// ApplySnapshot installs a snapshot received from a peer: msg is the
// MsgSnap (metadata only) and body the stream written by the sender
// (format in doc.go). The stream is staged in one KV batch that deletes
// every namespace key of this node and writes the received ones; the loop
// then steps the message and, if Raft accepts it, commits the batch with
// the new log state (log dropped, truncation point, configuration, hard
// state) atomically, so readers see the old namespace or the new one.
// It returns nil when installed or when the snapshot is stale (the node is
// already past it), ErrBadSnapshot for a corrupt stream, another error when
// the node moved on while staging (the sender retries later).
func (r *Raft) ApplySnapshot(ctx context.Context, msg *pb.Message, body io.Reader) error {
	md := msg.GetSnapshot().GetMetadata()
	if msg.GetType() != pb.MsgSnap || msg.GetTo() != r.id || md.GetIndex() == 0 {
		return fmt.Errorf("%w: not a snapshot for node %d", ErrBadSnapshot, r.id)
	}
	if md.GetIndex() <= r.AppliedIndex() {
		return nil
	}
	base := r.cfg.KV.Snapshot()
	defer base.Close()
	baseApplied, err := meta.NewReader(base).AppliedIndex()
	if err != nil {
		return err
	}
	b := r.cfg.KV.NewBatch()
	if err := stageSnapshot(body, base, b, md.GetIndex(), md.GetTerm()); err != nil {
		b.Close()
		return fmt.Errorf("snapshot %d from %d: %w", md.GetIndex(), msg.GetFrom(), err)
	}
	in := &install{msg: msg, b: b, base: baseApplied, index: md.GetIndex(), reply: make(chan error, 1)}
	select {
	case r.installc <- in:
	case <-ctx.Done():
		b.Close()
		return ctx.Err()
	case <-r.stopc:
		b.Close()
		return r.stopErr()
	}
	select {
	case err := <-in.reply:
		return err
	case <-r.done:
		return r.stopErr()
	}
}

// Close stops the loop after the Ready being handled. Waiting callers get
// ErrStopped. It does not close KV or Transport. Idempotent.
func (r *Raft) Close() error {
	r.stopOnce.Do(func() { close(r.stopc) })
	r.Start() // a log never started stops at once (run sees stopc)
	<-r.done
	return nil
}

// ---------------------------------------------------------------------------
// Waiters

func (r *Raft) newWaiter() *waiter {
	w := &waiter{id: r.idBase | (r.idSeq.Add(1) & (1<<40 - 1)), done: make(chan outcome, 1)}
	r.wmu.Lock()
	r.waiters[w.id] = w
	r.wmu.Unlock()
	return w
}

// forget removes waiter id; false means it was already answered.
func (r *Raft) forget(id uint64) bool {
	r.wmu.Lock()
	defer r.wmu.Unlock()
	_, ok := r.waiters[id]
	delete(r.waiters, id)
	return ok
}

func (r *Raft) isWaiting(id uint64) bool {
	r.wmu.Lock()
	defer r.wmu.Unlock()
	_, ok := r.waiters[id]
	return ok
}

func (r *Raft) deliver(id uint64, o outcome) {
	r.wmu.Lock()
	w, ok := r.waiters[id]
	delete(r.waiters, id)
	r.wmu.Unlock()
	if ok {
		w.done <- o
	}
}

func (r *Raft) stopErr() error {
	r.amu.Lock()
	defer r.amu.Unlock()
	if r.err != nil {
		return fmt.Errorf("%w: %v", ErrStopped, r.err)
	}
	return ErrStopped
}

// do runs f on the loop goroutine (without waiting for it to finish).
func (r *Raft) do(ctx context.Context, f func()) error {
	select {
	case r.ctrlc <- f:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%w: %w", ErrUnavailable, ctx.Err())
	case <-r.stopc:
		return r.stopErr()
	}
}

func (r *Raft) changeConf(ctx context.Context, t pb.ConfChangeType, id uint64, satisfied func(*pb.ConfState) (bool, error)) error {
	for {
		if ok, err := satisfied(r.Members()); err != nil || ok {
			return err
		}
		w := r.newWaiter()
		cc := &pb.ConfChangeV2{
			Changes: []*pb.ConfChangeSingle{{Type: t.Enum(), NodeId: new(id)}},
			Context: encodeConfContext(r.id, w.id),
		}
		if err := r.do(ctx, func() {
			w.issued = r.ticks
			r.confWait = append(r.confWait, w)
			if err := r.rn.ProposeConfChange(cc); err != nil {
				r.log.Debug("membership change not proposed; will retry", "change", t.String(), "peer", id, "err", err)
			}
		}); err != nil {
			r.forget(w.id)
			return err
		}
		o, err := r.wait(ctx, w)
		if err != nil {
			return err
		}
		if o.err != nil && !errors.Is(o.err, errRetry) {
			return o.err
		}
	}
}

// ---------------------------------------------------------------------------
// The loop

func (r *Raft) run() {
	defer r.shutdown()
	for {
		var steps, ticks int64
		propc := r.propc
		if len(r.pending) >= 4*r.cfg.MaxBatch {
			propc = nil // back-pressure while no leader takes proposals
		}
		select {
		case <-r.stopc:
			return
		case <-r.tickc:
			r.tick()
			ticks++
		case p := <-propc:
			r.pending = append(r.pending, p)
		case m := <-r.recvc:
			r.step(m)
			steps++
		case in := <-r.installc:
			r.beginInstall(in)
		case f := <-r.ctrlc:
			f()
		case rep := <-r.reportc:
			r.snapshotReported(rep)
		}
		// Take whatever else is queued, so that one Ready (one fsync)
		// covers it: this is where proposals are batched.
	drain:
		for range 4096 {
			select {
			case p := <-propc:
				r.pending = append(r.pending, p)
			case m := <-r.recvc:
				r.step(m)
				steps++
			default:
				break drain
			}
		}
		r.issueReads()
		for {
			// Applying frees in-flight slots: flush again until quiet.
			r.flushProposals()
			if !r.rn.HasReady() {
				break
			}
			if err := r.handleReady(); err != nil {
				r.log.Error("raft log stopped", "err", err)
				r.amu.Lock()
				r.err = err
				r.amu.Unlock()
				return
			}
		}
		if in := r.install; in != nil { // Raft did not take it: stale or already known
			r.install = nil
			in.b.Close()
			in.reply <- nil
		}
		r.stepsDone.Add(steps)
		r.ticksDone.Add(ticks)
	}
}

func (r *Raft) shutdown() {
	r.stopOnce.Do(func() { close(r.stopc) })
	if r.ticker != nil {
		r.ticker.Stop()
	}
	r.snapCancel()
	r.snapWG.Wait()
	r.snaps.closeAll()
	if in := r.install; in != nil {
		in.b.Close()
		in.reply <- ErrStopped
	}
	err := r.stopErr()
	r.wmu.Lock()
	ws := r.waiters
	r.waiters = map[uint64]*waiter{}
	r.wmu.Unlock()
	for _, w := range ws {
		w.done <- outcome{err: err}
	}
	close(r.done)
}

func (r *Raft) step(m *pb.Message) {
	r.heard[m.GetFrom()] = r.ticks
	if err := r.rn.Step(m); err != nil {
		r.log.Debug("raft step", "type", m.GetType().String(), "from", m.GetFrom(), "err", err)
	}
}

func (r *Raft) tick() {
	r.rn.Tick()
	r.ticks++
	r.propBlocked = false
	r.retryBatches(false)
	// Membership changes: Raft drops a conf change silently when another is
	// pending or when the message to the leader is lost; re-propose.
	keep := r.confWait[:0]
	for _, w := range r.confWait {
		switch {
		case !r.isWaiting(w.id):
		case r.ticks-w.issued >= int64(r.cfg.RetryTicks):
			r.deliver(w.id, outcome{err: errRetry})
		default:
			keep = append(keep, w)
		}
	}
	r.confWait = keep
	// Read barriers: re-send those not answered (the request or its answer
	// can be lost, or there was no leader); drop abandoned ones.
	for rctx, req := range r.reads {
		live := req.waiters[:0]
		for _, w := range req.waiters {
			if w.ctx.Err() == nil {
				live = append(live, w)
			}
		}
		req.waiters = live
		if len(live) == 0 {
			delete(r.reads, rctx)
		} else if r.ticks-req.issued >= int64(r.cfg.RetryTicks) {
			req.issued = r.ticks
			r.rn.ReadIndex([]byte(rctx))
		}
	}
	if !r.cfg.DisableAutoPromote && r.ticks%int64(r.cfg.ElectionTicks) == 0 {
		if id := r.promotionCandidate(r.cfg.Voters); id != 0 {
			r.log.Info("promoting learner to voter", "peer", id, "voters", r.st.cs.GetVoters())
			cc := &pb.ConfChangeV2{Changes: []*pb.ConfChangeSingle{{Type: pb.ConfChangeAddNode.Enum(), NodeId: new(id)}},
				Context: encodeConfContext(r.id, 0)}
			if err := r.rn.ProposeConfChange(cc); err != nil {
				r.log.Debug("promotion not proposed", "peer", id, "err", err)
			}
		}
	}
}

// promotionCandidate returns the learner to promote, or 0 (see
// EnsureVoters). Loop goroutine only.
func (r *Raft) promotionCandidate(target int) uint64 {
	cs := r.st.cs
	if r.rn.BasicStatus().RaftState != raft.StateLeader || len(cs.GetVoters()) >= target ||
		len(cs.GetVotersOutgoing()) > 0 || len(cs.GetLearners()) == 0 {
		return 0
	}
	st := r.rn.Status()
	var best, bestMatch uint64
	bestFirst := false
	for _, id := range cs.GetLearners() {
		pr, ok := st.Progress[id]
		// Heard from within an election timeout (raft's RecentActive is
		// reset at every CheckQuorum round, so it is often false).
		heard, seen := r.heard[id]
		if !ok || !seen || r.ticks-heard > int64(r.cfg.ElectionTicks) || pr.Match+r.cfg.PromoteMaxLag < r.st.last {
			continue
		}
		first := r.cfg.PromoteFirst != nil && r.cfg.PromoteFirst(id)
		if best == 0 || (first && !bestFirst) || (first == bestFirst && pr.Match > bestMatch) {
			best, bestMatch, bestFirst = id, pr.Match, first
		}
	}
	return best
}

// flushProposals turns queued proposals into entries: at most MaxBatch
// commands each, and at most MaxInflightEntries of this node's entries
// unapplied at a time (so that under load proposals gather into big
// entries while earlier ones commit).
func (r *Raft) flushProposals() {
	for len(r.pending) > 0 && r.lead != raft.None && !r.propBlocked && len(r.inflight) < r.cfg.MaxInflightEntries {
		n := min(len(r.pending), r.cfg.MaxBatch)
		var props []raftProposal
		for _, p := range r.pending[:n] {
			if r.isWaiting(p.w.id) { // its caller gave up: never propose it
				props = append(props, p)
			}
		}
		r.pending = r.pending[n:]
		if len(props) == 0 {
			continue
		}
		ids := make([]uint64, len(props))
		cmds := make([]meta.Command, len(props))
		for i, p := range props {
			ids[i], cmds[i] = p.w.id, p.cmd
		}
		r.batchSeq++
		data, err := encodePayload(r.id, r.batchSeq, ids, cmds)
		if err != nil { // Propose checked the ops; fail the batch rather than the log
			for _, id := range ids {
				r.deliver(id, outcome{err: err})
			}
			continue
		}
		b := &inflightBatch{seq: r.batchSeq, props: props, data: data}
		r.inflight[b.seq] = b
		r.proposeBatch(b)
	}
	if len(r.pending) == 0 {
		r.pending = nil
	}
}

// proposeBatch hands b to Raft (again). Proposing the same batch twice is
// safe: the session check at apply time skips the second copy.
func (r *Raft) proposeBatch(b *inflightBatch) {
	b.tick = r.ticks
	if err := r.rn.Propose(b.data); err != nil {
		// Not appended anywhere (no leader, leadership transfer, log
		// full): retried at the next tick.
		b.tick = r.ticks - int64(r.cfg.RetryTicks)
		r.propBlocked = true
	}
}

// retryBatches re-proposes this node's unapplied entries that waited
// RetryTicks (all of them when force, after a leader change: the old leader
// may have lost them) and forgets those nobody waits for any more.
func (r *Raft) retryBatches(force bool) {
	for seq, b := range r.inflight {
		live := false
		for _, p := range b.props {
			if r.isWaiting(p.w.id) {
				live = true
				break
			}
		}
		if !live {
			delete(r.inflight, seq)
			continue
		}
		if r.lead != raft.None && !r.propBlocked && (force || r.ticks-b.tick >= int64(r.cfg.RetryTicks)) {
			r.proposeBatch(b)
		}
	}
}

// requeue puts the proposals of batches that can no longer apply back at
// the head of the queue, to be proposed under a new sequence number.
func (r *Raft) requeue(batches []*inflightBatch) {
	if len(batches) == 0 {
		return
	}
	slices.SortFunc(batches, func(a, b *inflightBatch) int { return cmp.Compare(a.seq, b.seq) })
	var props []raftProposal
	for _, b := range batches {
		props = append(props, b.props...)
	}
	r.pending = append(props, r.pending...)
}

func (r *Raft) issueReads() {
	if len(r.newReads) == 0 {
		return
	}
	r.readSeq++
	rctx := string(u64(r.readSeq))
	r.reads[rctx] = &readReq{waiters: r.newReads, issued: r.ticks}
	r.newReads = nil
	r.rn.ReadIndex([]byte(rctx))
}

func (r *Raft) beginInstall(in *install) {
	if r.st.applied != in.base {
		in.b.Close()
		in.reply <- errSnapshotRaced
		return
	}
	r.install = in
	r.step(in.msg)
}

// handleReady carries out one Ready in the order Raft requires: persist the
// snapshot, entries and hard state; send messages; apply committed entries;
// Advance.
func (r *Raft) handleReady() error {
	rd := r.rn.Ready()
	var b kv.Batch
	var after []func()
	stage := func(f func(), err error) error {
		if err == nil {
			after = append(after, f)
		}
		return err
	}
	var installed *install
	if !raft.IsEmptySnap(rd.Snapshot) {
		idx := rd.Snapshot.GetMetadata().GetIndex()
		if r.install == nil || r.install.index != idx {
			return fmt.Errorf("consensus: raft produced snapshot %d without its staged state", idx)
		}
		installed, r.install = r.install, nil
		b = installed.b
		if err := stage(r.st.stageSnapshot(b, rd.Snapshot)); err != nil {
			return err
		}
	} else {
		b = r.cfg.KV.NewBatch()
	}
	defer b.Close()
	if len(rd.Entries) > 0 {
		if err := stage(r.st.stageAppend(b, rd.Entries)); err != nil {
			return err
		}
	}
	if !raft.IsEmptyHardState(rd.HardState) {
		if err := stage(r.st.stageHardState(b, rd.HardState)); err != nil {
			return err
		}
	}
	if len(after) > 0 {
		if err := b.Commit(rd.MustSync || installed != nil); err != nil {
			return fmt.Errorf("persist raft state: %w", err)
		}
		for _, f := range after {
			f()
		}
	}
	if installed != nil {
		idx := rd.Snapshot.GetMetadata().GetIndex()
		r.log.Info("installed snapshot", "index", idx, "from", installed.msg.GetFrom())
		r.setApplied(idx, r.st.cs)
		sess, _, err := getU64(r.cfg.KV, sessionKey(r.id))
		if err != nil {
			return err
		}
		if sess >= r.batchSeq { // our ID's earlier life proposed more
			r.batchSeq = (sess>>40 + 1) << 40
		}
		// Our batches the snapshot covers were applied or skipped there, we
		// cannot tell which: their outcome is unknown, and they must not be
		// proposed again under a new sequence number.
		for seq, ib := range r.inflight {
			if seq <= sess {
				delete(r.inflight, seq)
				for _, p := range ib.props {
					r.deliver(p.w.id, outcome{err: errOutcomeUnknown})
				}
			}
		}
		installed.reply <- nil
		if r.cfg.OnSnapshot != nil {
			r.cfg.OnSnapshot(idx)
		}
	}
	r.send(rd.Messages)
	if len(rd.CommittedEntries) > 0 {
		if err := r.apply(rd.CommittedEntries); err != nil {
			return err
		}
	}
	for _, rs := range rd.ReadStates {
		if req, ok := r.reads[string(rs.RequestCtx)]; ok {
			delete(r.reads, string(rs.RequestCtx))
			for _, w := range req.waiters {
				w.reply <- rs.Index
			}
		}
	}
	if rd.SoftState != nil || rd.HardState != nil {
		r.amu.Lock()
		if ss := rd.SoftState; ss != nil {
			if ss.Lead != r.lead {
				r.log.Info("raft leader changed", "leader", ss.Lead, "term", r.rn.BasicStatus().GetTerm(), "state", ss.RaftState.String())
				r.lead = ss.Lead
				r.status.LeaderChanges++
				r.propBlocked = false
				defer r.retryBatches(true)
			}
			r.status.Leader, r.status.State = ss.Lead, ss.RaftState
		}
		if hs := rd.HardState; hs != nil {
			r.status.Term, r.status.Commit = hs.GetTerm(), hs.GetCommit()
		}
		r.amu.Unlock()
	}
	r.rn.Advance(rd)
	return r.maybeCompact()
}

func (r *Raft) send(msgs []*pb.Message) {
	out := msgs[:0:0]
	for _, m := range msgs {
		if m.GetType() == pb.MsgSnap {
			r.sendSnapshot(m)
			continue
		}
		out = append(out, m)
	}
	if len(out) > 0 {
		r.cfg.Transport.Send(out)
	}
}

func (r *Raft) sendSnapshot(m *pb.Message) {
	md := m.GetSnapshot().GetMetadata()
	idx, term, to := md.GetIndex(), md.GetTerm(), m.GetTo()
	snap := r.snaps.acquire(idx)
	if snap == nil {
		r.rn.ReportSnapshot(to, raft.SnapshotFailure)
		return
	}
	r.log.Info("sending snapshot", "peer", to, "index", idx)
	r.snapsInflight.Add(1)
	r.snapWG.Add(1)
	go func() {
		defer r.snapWG.Done()
		pr, pw := io.Pipe()
		werr := make(chan error, 1)
		go func() {
			err := writeSnapshot(pw, snap, idx, term)
			pw.CloseWithError(err)
			werr <- err
		}()
		err := r.cfg.Transport.SendSnapshot(r.snapCtx, to, m, pr)
		pr.CloseWithError(errSnapshotAborted) // unblocks the writer if the transport stopped reading
		if werr := <-werr; err == nil && werr != nil {
			err = werr
		}
		select {
		case r.reportc <- snapReport{to: to, index: idx, err: err}:
		case <-r.stopc: // shutdown closes the KV snapshots
		}
	}()
}

func (r *Raft) snapshotReported(rep snapReport) {
	r.snaps.release(rep.index)
	r.snapsInflight.Add(-1)
	if rep.err != nil {
		r.log.Warn("snapshot not delivered", "peer", rep.to, "index", rep.index, "err", rep.err)
		r.rn.ReportSnapshot(rep.to, raft.SnapshotFailure)
		return
	}
	r.log.Info("snapshot delivered", "peer", rep.to, "index", rep.index)
	r.rn.ReportSnapshot(rep.to, raft.SnapshotFinish)
}

type appliedEntry struct {
	index uint64
	node  uint64
	seq   uint64
	ids   []uint64
	cmds  []meta.Command
	res   []meta.Result
	conf  bool
}

// apply applies committed entries onto one batch that also records the
// applied index (meta.Apply writes it for each entry), then wakes waiters.
// The batch is committed without sync: the entries are durable in the log
// (and on a quorum), so a crash that loses the batch re-applies them.
func (r *Raft) apply(ents []*pb.Entry) error {
	b := r.cfg.KV.NewBatch()
	defer b.Close()
	var done []appliedEntry
	var stale []uint64
	var cs *pb.ConfState
	last := r.st.applied
	for _, e := range ents {
		i := e.GetIndex()
		if i <= last {
			continue
		}
		if i != last+1 {
			return fmt.Errorf("consensus: apply entry %d after %d", i, last)
		}
		switch e.GetType() {
		case pb.EntryNormal:
			if len(e.GetData()) == 0 { // a new leader's empty entry
				if _, err := meta.Apply(b, i, nil); err != nil {
					return err
				}
				break
			}
			node, seq, ids, cmds, err := decodePayload(e.GetData())
			if err != nil {
				return fmt.Errorf("consensus: entry %d: %w", i, err)
			}
			// Session check: a proposer's batches apply only in increasing
			// sequence order, so a re-proposed copy, or a batch overtaken
			// by a later one of the same proposer, is skipped everywhere.
			last, _, err := getU64(b, sessionKey(node))
			if err != nil {
				return err
			}
			if seq <= last {
				if _, err := meta.Apply(b, i, nil); err != nil {
					return err
				}
				if node == r.id {
					stale = append(stale, seq)
				}
				break
			}
			if err := b.Set(sessionKey(node), u64(seq)); err != nil {
				return err
			}
			res, err := meta.Apply(b, i, cmds)
			if err != nil {
				return err
			}
			done = append(done, appliedEntry{index: i, node: node, seq: seq, ids: ids, cmds: cmds, res: res})
		case pb.EntryConfChange, pb.EntryConfChangeV2:
			var cc pb.ConfChangeI
			var ctx []byte
			if e.GetType() == pb.EntryConfChange {
				c := &pb.ConfChange{}
				if err := proto.Unmarshal(e.GetData(), c); err != nil {
					return fmt.Errorf("consensus: entry %d: %w", i, err)
				}
				cc, ctx = c, c.GetContext()
			} else {
				c := &pb.ConfChangeV2{}
				if err := proto.Unmarshal(e.GetData(), c); err != nil {
					return fmt.Errorf("consensus: entry %d: %w", i, err)
				}
				cc, ctx = c, c.GetContext()
			}
			cs = r.rn.ApplyConfChange(cc)
			if err := b.Set(keyConfState, mustMarshal(cs)); err != nil {
				return err
			}
			if _, err := meta.Apply(b, i, nil); err != nil {
				return err
			}
			r.log.Info("membership changed", "index", i, "change", raft.DescribeConfChange(cc), "voters", cs.GetVoters(), "learners", cs.GetLearners())
			if node, id, ok := decodeConfContext(ctx); ok && id != 0 {
				done = append(done, appliedEntry{index: i, node: node, ids: []uint64{id}, conf: true})
			}
		default:
			return fmt.Errorf("consensus: entry %d of unknown type %v", i, e.GetType())
		}
		last = i
	}
	if last == r.st.applied {
		return nil
	}
	if err := b.Commit(false); err != nil {
		return fmt.Errorf("commit applied entries through %d: %w", last, err)
	}
	r.st.applied = last
	if cs != nil {
		r.st.cs = cs
	}
	// Hosts drop caches in OnApply: run it before the new applied index is
	// published, so a read that waited for the index (WaitApplied, a
	// consistent read) never meets a cache still holding the old state.
	for _, d := range done {
		if !d.conf && r.cfg.OnApply != nil {
			r.cfg.OnApply(d.index, d.cmds, d.res)
		}
	}
	r.setApplied(last, cs)
	var dead []*inflightBatch
	for _, seq := range stale {
		if b, ok := r.inflight[seq]; ok {
			dead = append(dead, b)
			delete(r.inflight, seq)
		}
	}
	r.requeue(dead)
	for _, d := range done {
		if d.node != r.id {
			continue
		}
		if !d.conf {
			delete(r.inflight, d.seq)
			// Our earlier batches still in flight can never apply now.
			var dead []*inflightBatch
			for seq, b := range r.inflight {
				if seq < d.seq {
					dead = append(dead, b)
					delete(r.inflight, seq)
				}
			}
			r.requeue(dead)
		}
		for k, id := range d.ids {
			if d.conf {
				r.deliver(id, outcome{})
			} else {
				r.deliver(id, outcome{res: d.res[k]})
			}
		}
	}
	return nil
}

func (r *Raft) setApplied(index uint64, cs *pb.ConfState) {
	r.amu.Lock()
	r.applied = index
	if cs != nil {
		r.members = proto.Clone(cs).(*pb.ConfState)
	}
	close(r.appliedc)
	r.appliedc = make(chan struct{})
	r.amu.Unlock()
}

// maybeCompact truncates the log behind the applied index once it holds
// more than CompactAfter applied entries, keeping CompactMargin of them.
// The batch needs no sync: it follows the apply batches it relies on in
// the store's write order.
func (r *Raft) maybeCompact() error {
	if r.st.applied-r.st.truncIndex <= r.cfg.CompactAfter {
		return nil
	}
	to := r.st.applied - r.cfg.CompactMargin
	b := r.cfg.KV.NewBatch()
	defer b.Close()
	f, err := r.st.stageCompact(b, to)
	if err != nil {
		return err
	}
	if err := b.Commit(false); err != nil {
		return fmt.Errorf("truncate raft log through %d: %w", to, err)
	}
	f()
	r.log.Debug("raft log truncated", "through", to)
	return nil
}

var _ Log = (*Raft)(nil)
