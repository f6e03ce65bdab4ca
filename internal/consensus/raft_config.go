package consensus

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/cairn-fs/cairn/internal/clock"

	"github.com/cairn-fs/cairn/internal/kv"
	"github.com/cairn-fs/cairn/internal/meta"
)

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
	// BootstrapLogVersion is the active log version a store bootstrapped
	// empty from InitialVoters starts at. Default 0: meta.LogVersionMax
	// (every first member runs this binary). Tests of upgrades set the
	// baseline.
	BootstrapLogVersion byte
	// Ticker drives Raft's logical clock, one Tick per value. Nil: an
	// internal ticker every TickInterval. Tests pass their own channel.
	Ticker <-chan time.Time
	// TickInterval is the internal ticker's period. Default 100 ms.
	TickInterval time.Duration
	// Clock runs the internal ticker and times proposals (OnProposed).
	// Default clock.Real{}.
	Clock clock.Clock
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
	// NeverPromote, if set, marks learners that stay learners (client
	// nodes: they keep the namespace and never vote), neither promoted on
	// the leader's own nor by EnsureVoters. Called from the loop
	// goroutine, as PromoteFirst.
	NeverPromote func(id uint64) bool
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
	// TestingUnfenced applies entries with meta.ApplyOptions'
	// TestingUnfenced: a command stamped with a directory claim that has
	// moved applies anyway. Only internal/sim sets it (its "fencing"
	// sabotage), to show that its fencing invariant can fail; never set it
	// elsewhere.
	TestingUnfenced bool
	// TestingLockUnsafe applies entries with meta.ApplyOptions'
	// TestingLockUnsafe: every lock request is granted, conflicting or
	// not. Only internal/sim sets it (its lock safety invariant's
	// sabotage test); never set it elsewhere.
	TestingLockUnsafe bool
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
	c.Clock = clock.Or(c.Clock)
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
