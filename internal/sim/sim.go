package sim

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing/synctest"
	"time"

	pvfs "github.com/cockroachdb/pebble/v2/vfs"
	"go.etcd.io/raft/v3"
	raftpb "go.etcd.io/raft/v3/raftpb"

	"github.com/cairn-fs/cairn/internal/blob"
	"github.com/cairn-fs/cairn/internal/meta"
	"github.com/cairn-fs/cairn/internal/store"
	"github.com/cairn-fs/cairn/internal/transport"
	"github.com/cairn-fs/cairn/internal/vfs"
)

// Simulated durations (fake time unless said otherwise).
const (
	tickEvery    = 100 * time.Millisecond // one Raft tick (as TickInterval in production)
	detectDelay  = 1500 * time.Millisecond
	opTimeout    = 4 * time.Second
	repairEvery  = 3 * time.Second
	gcGrace      = 10 * time.Second
	gcInterval   = 200 * time.Millisecond
	baseMaxDelay = 20 * time.Millisecond
	drainTime    = 5 * time.Minute // after the nodes stop: longer than any background deadline
	// stepJitter keeps the driver's steps off the grid of the nodes' own
	// periodic timers (GC every 200 ms, lock sessions, operations'
	// straggler and hedge waits started at a step): two timers due at one
	// fake instant run in an order a replay does not reproduce.
	stepJitter = 7 * time.Nanosecond
	// startStagger: nodes start this far apart (and a restarted node this
	// far after its step), so their periodic timers do not share instants.
	startStagger = 1237 * time.Microsecond
)

// Config sizes a run. Zero fields take the defaults of DefaultConfig.
type Config struct {
	Seed        uint64
	Voters      int           // default 3
	Learners    int           // default 2
	Duration    time.Duration // fake time of the workload phase; default 40 s
	Ops         int           // operations in the workload; default 400
	MaxBigFiles int           // files of more than one blob (4 MiB each); default 3
	Step        time.Duration // fake time per driver step; default 10 ms + 7 ns (stepJitter)
	GCGrace     time.Duration // store.Config.GCGrace of every node; default 10 s
	// ExclOps is the number of exclusive creates and renames racing for
	// the same names (exclusive.go); 0: Ops/5, negative: none.
	ExclOps int
	// LockOps is the number of lock operations (locks.go); 0: Ops/8,
	// negative: none.
	LockOps int
	// Logf, if set, receives progress lines (the schedule's faults as they
	// happen, the summary).
	Logf func(format string, args ...any)
	// KeepTrace keeps the trace's lines (Result.Lines) besides its digest.
	KeepTrace bool
	// Split adds a second namespace group (split.go, design 0009): a
	// cluster of three more nodes whose log holds bucket sp once it has
	// moved there from the root group, mid-run, under the faults of both.
	Split bool

	// firstID: the nodes' IDs are firstID+1 and up (the second group's
	// start at 101: they stand for processes on the root's nodes, with a
	// network of their own).
	firstID uint64

	// sabotage, for the harness's tests, breaks one invariant before the
	// final checks: "namespace", "history" or "blob"; "blob-heal" loses a
	// blob before the first mid-run check; "stale-read" has consistent
	// reads return a value overwritten before they began; "local-orphan-sweep" brings back
	// the orphan sweep of before issue 18 (store.Config.TestingLocalOrphanSweep);
	// "exclusive" has the exclusive creates lose their exclusive flags and
	// holders create without looking; "durability" removes a name an
	// acknowledged exclusive create made; "fencing" applies commands
	// stamped with claims that moved (consensus.RaftConfig.TestingUnfenced);
	// "locks" grants every lock request decided in the log, conflicting
	// or not (consensus.RaftConfig.TestingLockUnsafe); "local-locks"
	// every one a node decides under its cached lock right
	// (store.Config.TestingLockUnsafe).
	sabotage string
}

// DefaultConfig returns the defaults for seed.
func DefaultConfig(seed uint64) Config {
	return Config{Seed: seed, Voters: 3, Learners: 2, Duration: 40 * time.Second, Ops: 400,
		MaxBigFiles: 3, Step: 10*time.Millisecond + stepJitter, GCGrace: gcGrace, Split: true}
}

// Result summarizes a run that kept every invariant.
type Result struct {
	Acked, Unknown    int // writes
	Refused           int // writes refused with ErrNoSpace (checked never to take effect)
	Reads, ReadErrors int
	Crashes, Pauses   int
	Partitions        int
	Heals             int // mid-run checks of invariant (a), after every fault ended
	DiskFaults        int // blob-disk fault windows (evDisk)
	DiskRestarts      int // nodes restarted after their blob store turned read-only
	// Exclusive creates (exclusive.go): acknowledged, refused (the name
	// existed, or the claim moved), unknown, and queued ones a crash lost.
	ExclAcked, ExclRefused, ExclUnknown, ExclLost int
	// Late creates under a moved claim (all refused), and how many with
	// ErrFenced.
	Late, LateFenced int
	// Lock operations (locks.go): granted, refused (held by another, or
	// a deadlock), failed (timed out, session lost, crashed), and granted
	// ones the node had lost by the time it released them.
	LocksGranted, LocksRefused, LocksFailed, LocksLost int
	// Ownership as the replay of the log saw it (fencing.go): owner
	// records set (claims and adoptions), recalls refused by an owner,
	// hand-overs, records dropped (expired sessions, removed
	// directories), and commands refused with ErrFenced.
	Claims, Recalls, HandOvers, Dropped, Fenced int
	AppliedIndex                                uint64
	ReferencedBlobs                             int
	Net                                         transport.MemStats
	FakeTime, RealTime                          time.Duration
	// Events and Trace: the number of lines of the event trace and their
	// SHA-256 (trace.go); equal for two runs of one seed.
	Events int
	Trace  string
	// Lines are the trace's lines, with Config.KeepTrace.
	Lines []string
	// With Config.Split: the second group's run, and the split's
	// (split.go).
	Group2 string
	Split  SplitResult
}

func (r Result) String() string {
	return fmt.Sprintf("writes %d acked / %d unknown / %d refused, reads %d (%d failed), crashes %d, pauses %d, partitions %d, "+
		"disk faults %d (%d restarts), checked after %d heals, applied index %d, %d referenced blobs, net %+v, fake %v, real %v",
		r.Acked, r.Unknown, r.Refused, r.Reads, r.ReadErrors, r.Crashes, r.Pauses, r.Partitions, r.DiskFaults, r.DiskRestarts, r.Heals, r.AppliedIndex,
		r.ReferencedBlobs, r.Net, r.FakeTime, r.RealTime.Round(time.Millisecond)) +
		fmt.Sprintf(", exclusive %d acked / %d refused / %d unknown / %d lost, late %d (%d fenced), owners: %d claims, %d recalls, %d hand-overs, %d dropped, %d fenced",
			r.ExclAcked, r.ExclRefused, r.ExclUnknown, r.ExclLost, r.Late, r.LateFenced, r.Claims, r.Recalls, r.HandOvers, r.Dropped, r.Fenced) +
		fmt.Sprintf(", locks %d granted / %d refused / %d failed / %d lost", r.LocksGranted, r.LocksRefused, r.LocksFailed, r.LocksLost) +
		fmt.Sprintf(", trace %d events %.12s", r.Events, r.Trace) + r.splitString()
}

func (r Result) splitString() string {
	if r.Group2 == "" {
		return ""
	}
	return fmt.Sprintf("; group 2: %s; split: %v", r.Group2, r.Split)
}

// netFaults are the message fault rates in force.
type netFaults struct {
	drop, dup float64
	maxDelay  time.Duration
}

// Sim is one simulated cluster. It is driven from one goroutine (Run);
// the nodes' own goroutines run freely between steps.
type Sim struct {
	cfg Config
	t0  time.Time
	tr  *trace
	// With Config.Split: group is 1 for the root group's cluster, 2 for
	// the second group's; root is the root group's Sim (the driver: it
	// steps time for both), g2 the second group's (on the root's Sim),
	// split the run's split workload (split.go, on the root's Sim).
	group   int
	root    *Sim
	g2      *Sim
	split   *splitRun
	laters  []later // the driver's own timers (after)
	net     *transport.MemNetwork
	nodes   []*node
	byID    map[uint64]*node
	diskRNG *rand.Rand
	hist    *history
	xh      xhist      // exclusive creates (exclusive.go)
	locks   lockCounts // lock operations (locks.go)
	// lockInos are the lock files' inode numbers (locks.go), once made.
	lockInos [lockFiles]uint64
	logs     *logReplay // the applied log and its replay (fencing.go)
	res      Result

	incMu   sync.Mutex // orders goUse against crash/stop
	closers sync.WaitGroup
	ops     sync.WaitGroup // workload goroutines
	inOps   atomic.Int64
	done    atomic.Int64 // operations answered (activity)
	ticks   int

	fmu         sync.Mutex
	faults      netFaults
	lossyUntil  time.Time
	pausedUntil map[uint64]time.Time
	downSince   map[uint64]time.Time // crashed or paused
	cut         map[[2]uint64]time.Time
	diskUntil   map[uint64]time.Time // blob disks failing (evDisk), until
	faultRNG    *rand.Rand           // draws of the disk faults (under fmu)

	failMu   sync.Mutex
	failures []string
	reaped   map[string]int         // puts refused with meta.ErrBlobReaped, by path (node 1's view)
	blobLog  map[blob.Hash][]string // what node 1 applied about each blob: puts naming it, reaps
}

// noteLog records, for a failure message, an applied command naming blobs.
func (s *Sim) noteLog(what string, ex []meta.Extent) {
	s.failMu.Lock()
	defer s.failMu.Unlock()
	if s.blobLog == nil {
		s.blobLog = map[blob.Hash][]string{}
	}
	for _, e := range ex {
		s.blobLog[e.Hash] = append(s.blobLog[e.Hash], what)
	}
}

// blobHistory returns what node 1 applied about h.
func (s *Sim) blobHistory(h blob.Hash) []string {
	s.failMu.Lock()
	defer s.failMu.Unlock()
	return slices.Clone(s.blobLog[h])
}

// noteReaped records a put that the log refused because a blob it
// deduplicated against was reaped meanwhile (the store then retries).
func (s *Sim) noteReaped(key string) {
	s.failMu.Lock()
	defer s.failMu.Unlock()
	if s.reaped == nil {
		s.reaped = map[string]int{}
	}
	s.reaped[key]++
}

// Run runs one simulation and checks its invariants. The error lists every
// violation found (nil: none); it does not name the seed (the caller does).
func Run(cfg Config) (Result, error) {
	d := DefaultConfig(cfg.Seed)
	if cfg.Voters == 0 {
		cfg.Voters = d.Voters
	}
	if cfg.Learners == 0 {
		cfg.Learners = d.Learners
	}
	if cfg.Duration == 0 {
		cfg.Duration = d.Duration
	}
	if cfg.Ops == 0 {
		cfg.Ops = d.Ops
	}
	if cfg.Step == 0 {
		cfg.Step = d.Step
	}
	if cfg.GCGrace == 0 {
		cfg.GCGrace = d.GCGrace
	}
	if cfg.ExclOps == 0 {
		cfg.ExclOps = cfg.Ops / 5
	}
	if cfg.LockOps == 0 {
		cfg.LockOps = cfg.Ops / 8
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	start := time.Now() // the bubble's fake clock (Test)
	s, err := newSim(cfg, 1, nil)
	if err != nil {
		return Result{}, err
	}
	if cfg.Split {
		g, err := newSim(groupConfig(cfg), 2, s)
		if err != nil {
			return Result{}, err
		}
		s.g2 = g
		s.split = newSplit(s, g)
	}
	if err := s.run(); err != nil {
		s.fail("%v", err)
	}
	for _, x := range s.sims() {
		for _, n := range x.nodes {
			if err := x.stop(n); err != nil {
				s.fail("group %d node %d: close: %v", x.group, n.id, err)
			}
		}
	}
	for _, x := range s.sims() {
		x.ops.Wait()
		x.closers.Wait()
	}
	// Background work of the stopped nodes (a replicator's straggler
	// copies, deliveries in flight) ends on its own deadlines: let fake
	// time run until every goroutine of the bubble has exited, as the
	// bubble requires (time stops when Run returns).
	time.Sleep(drainTime)
	synctest.Wait()
	s.res.Acked, s.res.Unknown, s.res.Reads, s.res.ReadErrors = s.hist.acked, s.hist.unknowns, s.hist.reads, s.hist.readErrs
	s.res.Refused = s.hist.refused
	s.xh.mu.Lock()
	s.res.ExclAcked, s.res.ExclRefused, s.res.ExclUnknown, s.res.ExclLost = s.xh.acked, s.xh.refused, s.xh.unknown, s.xh.lost
	s.res.Late, s.res.LateFenced = s.xh.late, s.xh.lateFenced
	s.xh.mu.Unlock()
	s.locks.mu.Lock()
	s.res.LocksGranted, s.res.LocksRefused, s.res.LocksFailed, s.res.LocksLost = s.locks.granted, s.locks.refused, s.locks.failed, s.locks.lost
	s.locks.mu.Unlock()
	r := s.logs
	s.res.Claims, s.res.Recalls, s.res.HandOvers, s.res.Dropped, s.res.Fenced = r.claims, r.recalls, r.handOvers, r.dropped, r.fenced
	s.res.Net = s.net.Stats()
	s.res.FakeTime = time.Since(start)
	s.res.Events, s.res.Trace = s.tr.sum()
	s.res.Lines = s.tr.lines
	if g := s.g2; g != nil {
		s.res.Group2 = g.summary()
		g.failMu.Lock()
		for _, f := range g.failures {
			s.fail("group 2: %s", f)
		}
		g.failMu.Unlock()
		s.res.Split = s.split.res
	}
	s.failMu.Lock()
	defer s.failMu.Unlock()
	if len(s.failures) > 0 {
		return s.res, errors.New(strings.Join(s.failures, "\n"))
	}
	return s.res, nil
}

// newSim makes the Sim of one group's cluster (its nodes not started):
// the root group's (group 1, root nil), or the second group's, driven by
// root and sharing its trace.
func newSim(cfg Config, group int, root *Sim) (*Sim, error) {
	s := &Sim{cfg: cfg, t0: time.Now(), group: group, root: root, byID: map[uint64]*node{},
		diskRNG: rand.New(rand.NewPCG(cfg.Seed, 0xd15c)), hist: newHistory(),
		faults:      netFaults{drop: 0.02, dup: 0.02, maxDelay: baseMaxDelay},
		pausedUntil: map[uint64]time.Time{}, downSince: map[uint64]time.Time{}, cut: map[[2]uint64]time.Time{},
		diskUntil: map[uint64]time.Time{}, faultRNG: rand.New(rand.NewPCG(cfg.Seed, 0xfa17))}
	if root == nil {
		s.tr = newTrace(cfg.KeepTrace)
	} else {
		s.tr = root.tr
	}
	logs, err := newLogReplay(meta.ApplyOptions{TestingUnfenced: cfg.sabotage == "fencing", TestingLockUnsafe: cfg.sabotage == "locks"})
	if err != nil {
		return nil, err
	}
	s.logs = logs
	s.net = transport.NewMemNetwork(transport.MemConfig{Seed: cfg.Seed, Fault: s.fault,
		Schedule: func(d time.Duration, f func()) { time.AfterFunc(d, f) },
		OnRaft: func(from, to transport.NodeID, m *raftpb.Message) {
			s.tr.add("raft %d>%d %v term %d index %d logterm %d commit %d entries %d reject %v", from, to, m.GetType(), m.GetTerm(),
				m.GetIndex(), m.GetLogTerm(), m.GetCommit(), len(m.GetEntries()), m.GetReject())
		}})
	zones := []string{"z1", "z2", "z3"}
	for i := range cfg.Voters + cfg.Learners {
		id := uint64(i+1) + cfg.firstID
		n := &node{id: id, voter: i < cfg.Voters, zone: zones[i%len(zones)], pfs: pvfs.NewCrashableMem(), mem: vfs.NewMem()}
		s.nodes = append(s.nodes, n)
		s.byID[id] = n
	}
	return s, nil
}

// sims are the clusters of the run: the root group's, and the second
// group's with Config.Split.
func (s *Sim) sims() []*Sim {
	if s.root != nil {
		return s.root.sims()
	}
	if s.g2 != nil {
		return []*Sim{s, s.g2}
	}
	return []*Sim{s}
}

// summary is a short account of a group's run, for Result.Group2.
func (s *Sim) summary() string {
	s.res.Acked, s.res.Unknown, s.res.Reads, s.res.ReadErrors = s.hist.acked, s.hist.unknowns, s.hist.reads, s.hist.readErrs
	return fmt.Sprintf("writes %d acked / %d unknown, reads %d, crashes %d, pauses %d, partitions %d, heals %d, applied index %d",
		s.res.Acked, s.res.Unknown, s.res.Reads, s.res.Crashes, s.res.Pauses, s.res.Partitions, s.res.Heals, s.res.AppliedIndex)
}

// fail records an invariant violation (safe from any goroutine).
func (s *Sim) fail(format string, args ...any) {
	msg := fmt.Sprintf("[%v] ", time.Now().Sub(s.t0)) + fmt.Sprintf(format, args...)
	s.failMu.Lock()
	defer s.failMu.Unlock()
	if len(s.failures) < 40 {
		s.failures = append(s.failures, msg)
	}
}

func (s *Sim) failed() bool {
	s.failMu.Lock()
	defer s.failMu.Unlock()
	return len(s.failures) > 0
}

func (s *Sim) voterIDs() []uint64 {
	var ids []uint64
	for _, n := range s.nodes {
		if n.voter {
			ids = append(ids, n.id)
		}
	}
	return ids
}

func (s *Sim) ids() []uint64 {
	var ids []uint64
	for _, n := range s.nodes {
		ids = append(ids, n.id)
	}
	return ids
}

func (s *Sim) run() error {
	sims := s.sims()
	for _, x := range sims {
		for _, n := range x.nodes {
			time.Sleep(startStagger)
			if err := x.start(n); err != nil {
				return err
			}
		}
	}
	for _, x := range sims {
		if err := x.bootstrap(); err != nil {
			return fmt.Errorf("group %d: bootstrap: %w", x.group, err)
		}
	}
	evs := make([][]event, len(sims))
	for i, x := range sims {
		evs[i] = makeSchedule(x.cfg.Seed, x.cfg, x.ids())
	}
	if s.split != nil {
		s.split.schedule()
	}
	t0 := time.Now()
	lastRepair := time.Duration(0)
	faulty := make([]bool, len(sims))
	more := func() bool {
		for _, e := range evs {
			if len(e) > 0 {
				return true
			}
		}
		return time.Now().Sub(t0) < s.cfg.Duration
	}
	for more() {
		el := time.Now().Sub(t0)
		for i, x := range sims {
			for len(evs[i]) > 0 && evs[i][0].at <= el {
				x.apply(evs[i][0])
				evs[i] = evs[i][1:]
			}
		}
		if s.split != nil {
			s.split.advance(el)
		}
		if el-lastRepair >= repairEvery {
			lastRepair = el
			for _, x := range sims {
				x.repairAll()
			}
		}
		for i, x := range sims {
			x.endFaults()
			f := x.anyFault()
			if faulty[i] && !f {
				// Every fault of this group has ended: check the
				// acknowledged writes now, not only at the end. The
				// schedules resume where they were.
				p0 := time.Now()
				if err := x.checkHealed(); err != nil {
					return fmt.Errorf("group %d: %w", x.group, err)
				}
				t0 = t0.Add(time.Now().Sub(p0))
			}
			faulty[i] = f
		}
		s.step()
	}
	for _, x := range sims {
		if err := x.finish(); err != nil {
			return fmt.Errorf("group %d: %w", x.group, err)
		}
	}
	if s.split != nil {
		return s.split.finish()
	}
	return nil
}

// anyFault reports whether a fault is in force: a link cut, a node down
// or paused, a lossy period.
func (s *Sim) anyFault() bool {
	if s.down() > 0 {
		return true
	}
	s.fmu.Lock()
	defer s.fmu.Unlock()
	return len(s.cut) > 0 || !s.lossyUntil.IsZero() || len(s.diskUntil) > 0
}

// checkHealed runs invariant (a) in the middle of the workload, right after
// the last fault in force ended: once every operation in flight is
// answered and every node has applied the same index, every acknowledged
// file reads back, with its bytes, through every node, in every bucket
// (R=1 included). Repair has not run: a node lacking a blob reads it from
// a replica. The network carries the reads without faults meanwhile.
func (s *Sim) checkHealed() error {
	s.res.Heals++
	s.tr.add("heal %d", s.res.Heals)
	when := fmt.Sprintf("after heal %d (mid-run)", s.res.Heals)
	if err := s.until("in-flight operations answered, "+when, 2*time.Minute, func() bool { return s.inOps.Load() == 0 }); err != nil {
		return err
	}
	if err := s.until("logs converge, "+when, 2*time.Minute, s.logsConverged); err != nil {
		return fmt.Errorf("%w (%s)", err, s.raftStates())
	}
	s.fmu.Lock()
	saved := s.faults
	s.faults = netFaults{}
	s.fmu.Unlock()
	if s.cfg.sabotage == "blob-heal" && s.res.Heals == 1 {
		s.loseBlob()
	}
	s.checkFiles(when)
	s.checkExclusive(when)
	s.checkDurable(when)
	s.replay(s.nodes[0].inc.raft.AppliedIndex(), when)
	s.fmu.Lock()
	s.faults = saved
	s.fmu.Unlock()
	return nil
}

// after runs f on the driver, at the first step boundary d or more from
// now (a time.AfterFunc would run it on a goroutine of its own, racing the
// driver's own changes to the nodes).
func (s *Sim) after(d time.Duration, f func()) {
	s.laters = append(s.laters, later{at: time.Now().Add(d), f: f})
}

type later struct {
	at time.Time
	f  func()
}

// runLaters runs, in order, the functions of after that are due.
func (s *Sim) runLaters() {
	now := time.Now()
	var due []later
	keep := s.laters[:0]
	for _, l := range s.laters {
		if l.at.After(now) {
			keep = append(keep, l)
		} else {
			due = append(due, l)
		}
	}
	s.laters = keep
	for _, l := range due {
		l.f()
	}
}

// step lets one step of fake time pass, ticking Raft on the way, and
// waits until every goroutine of the cluster is durably blocked
// (synctest.Wait): nothing runs between steps but the driver.
func (s *Sim) step() {
	if s.root != nil {
		s.root.step() // the root's Sim drives time for both groups
		return
	}
	time.Sleep(s.cfg.Step)
	sims := s.sims()
	for _, x := range sims {
		x.runLaters()
	}
	s.ticks++
	if time.Duration(s.ticks)*s.cfg.Step >= tickEvery {
		s.ticks = 0
		for _, x := range sims {
			for _, n := range x.nodes {
				if n.inc != nil && !x.paused(n.id) {
					n.inc.tickNow()
				}
			}
		}
	}
	synctest.Wait()
}

// until steps until cond holds, for at most limit of fake time.
func (s *Sim) until(what string, limit time.Duration, cond func() bool) error {
	start := time.Now()
	for !cond() {
		if time.Since(start) > limit {
			if os.Getenv("CAIRN_SIM_STACKS") != "" {
				buf := make([]byte, 8<<20)
				os.Stderr.Write(buf[:runtime.Stack(buf, true)])
			}
			return fmt.Errorf("%s: not reached after %v", what, time.Since(start))
		}
		s.step()
	}
	if d := time.Since(start); d > 30*time.Second {
		s.cfg.Logf("%s took %v of fake time", what, d)
	}
	return nil
}

// await runs f on its own goroutine and steps until it returns.
func (s *Sim) await(what string, limit time.Duration, f func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	ch := make(chan error, 1)
	go func() { ch <- f(ctx) }()
	var err error
	got := false
	if e := s.until(what, limit+time.Second, func() bool {
		select {
		case err = <-ch:
			got = true
		default:
		}
		return got
	}); e != nil {
		return e
	}
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

func (s *Sim) leader() *node {
	var best *node
	var term uint64
	for _, n := range s.nodes {
		if n.inc == nil {
			continue
		}
		st := n.inc.raft.Status()
		if st.State == raft.StateLeader && st.Term >= term {
			best, term = n, st.Term
		}
	}
	return best
}

// bootstrap elects a leader, writes the cluster map, adds the learners
// and creates the buckets.
func (s *Sim) bootstrap() error {
	if err := s.until("elect a leader", 30*time.Second, func() bool { return s.leader() != nil }); err != nil {
		return err
	}
	for _, n := range s.nodes {
		rec := &meta.Node{ID: n.id, URL: nodeURL(n.id), Zone: n.zone}
		if err := s.await(fmt.Sprintf("record node %d", n.id), 30*time.Second, func(ctx context.Context) error {
			for {
				l := s.leader()
				if l == nil {
					return errors.New("no leader")
				}
				res, err := l.inc.raft.Propose(ctx, meta.Command{Op: meta.OpSetNode, TimeNs: time.Now().UnixNano(), Node: rec})
				if err == nil {
					return res.Err
				}
				if ctx.Err() != nil {
					return err
				}
			}
		}); err != nil {
			return err
		}
	}
	for _, n := range s.nodes {
		if n.voter {
			continue
		}
		if err := s.await(fmt.Sprintf("add learner %d", n.id), 60*time.Second, func(ctx context.Context) error {
			l := s.leader()
			if l == nil {
				return errors.New("no leader")
			}
			return l.inc.raft.AddLearner(ctx, n.id)
		}); err != nil {
			return err
		}
	}
	bs := buckets
	if s.split != nil || s.group == 2 {
		bs = append(slices.Clip(bs), bucketSpec{splitBucket, 0, 0}) // split.go
	}
	for _, b := range bs {
		if err := s.await("create bucket "+b.name, 30*time.Second, func(ctx context.Context) error {
			err := s.nodes[0].inc.st.CreateBucket(ctx, store.BucketInfo{Name: b.name, Replicas: b.replicas, WriteQuorum: b.writeQuorum})
			if errors.Is(err, store.ErrBucketExists) {
				return nil
			}
			return err
		}); err != nil {
			return err
		}
	}
	for i := range exclDirs {
		if err := s.await("make "+exclDir(i), 30*time.Second, func(ctx context.Context) error {
			return s.nodes[0].inc.st.Mkdir(ctx, exclBucket, exclDir(i), store.Attrs{})
		}); err != nil {
			return err
		}
	}
	if err := s.makeLockFiles(); err != nil {
		return err
	}
	if s.split != nil {
		if err := s.split.bootstrap(); err != nil {
			return err
		}
	}
	// Every node knows every bucket and member before the workload starts.
	return s.until("bootstrap applied everywhere", 30*time.Second, func() bool {
		idx := s.nodes[0].inc.raft.AppliedIndex()
		for _, n := range s.nodes {
			if n.inc.raft.AppliedIndex() != idx {
				return false
			}
		}
		return true
	})
}
