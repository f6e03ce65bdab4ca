package consensus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairn-fs/cairn/internal/clock"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/cairn-fs/cairn/internal/meta"
)

// ErrUnavailable is returned (wrapping the context's error) when ctx ends
// before a proposal, read barrier or membership change completed: there is
// no leader or quorum reachable, or the message carrying it was lost. For a
// proposal the outcome is unknown: it may still commit and apply later.
var ErrUnavailable = errors.New("consensus: unavailable")

// errOutcomeUnknown answers proposals whose entry a snapshot covered: it
// may have applied.
var errOutcomeUnknown = fmt.Errorf("%w: a snapshot replaced the state; the proposal may or may not have applied", ErrUnavailable)

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
	// LogVersion is the cluster's active log version as applied here
	// (meta.LogVersion): proposals that need a newer one are refused.
	LogVersion byte
	// Err is what stopped the log (a storage failure, or an entry this
	// binary cannot decode: errors.Is(Err, meta.ErrUnsupported)); nil
	// while it runs.
	Err error
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
	ticker    *clock.Ticker
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

	// logVersion is the active log version applied here (version.go).
	logVersion atomic.Uint32

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
			// A new cluster's first members run this binary: it starts
			// at its newest log version (joiners older than it are
			// refused), instead of waiting for the leader to raise it.
			if err := meta.InitLogVersion(b, cfg.BootstrapLogVersion); err != nil {
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
	if err := r.loadLogVersion(); err != nil {
		return nil, err
	}
	r.snapCtx, r.snapCancel = context.WithCancel(context.Background())
	r.tickc = cfg.Ticker
	if r.tickc == nil {
		r.ticker = clock.NewTicker(cfg.Clock, cfg.TickInterval)
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

// Status returns this node's view: leader, role, term, commit and applied
// index.
func (r *Raft) Status() Status {
	r.amu.Lock()
	defer r.amu.Unlock()
	s := r.status
	s.Applied = r.applied
	s.LogVersion = byte(r.logVersion.Load())
	s.Err = r.err
	return s
}

// Close stops the loop after the Ready being handled. Waiting callers get
// ErrStopped. It does not close KV or Transport. Idempotent.
func (r *Raft) Close() error {
	r.stopOnce.Do(func() { close(r.stopc) })
	r.Start() // a log never started stops at once (run sees stopc)
	<-r.done
	return nil
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

var _ Log = (*Raft)(nil)
