package sim

import (
	"bytes"
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
	"syscall"
	"testing/synctest"
	"time"

	pvfs "github.com/cockroachdb/pebble/v2/vfs"
	"go.etcd.io/raft/v3"

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
)

// Config sizes a run. Zero fields take the defaults of DefaultConfig.
type Config struct {
	Seed        uint64
	Voters      int           // default 3
	Learners    int           // default 2
	Duration    time.Duration // fake time of the workload phase; default 40 s
	Ops         int           // operations in the workload; default 400
	MaxBigFiles int           // files of more than one blob (4 MiB each); default 3
	Step        time.Duration // fake time per driver step; default 10 ms
	// Logf, if set, receives progress lines (the schedule's faults as they
	// happen, the summary).
	Logf func(format string, args ...any)
	// KeepTrace keeps the trace's lines (Result.Lines) besides its digest.
	KeepTrace bool

	// sabotage, for the harness's tests, breaks one invariant before the
	// final checks: "namespace", "history" or "blob"; "blob-heal" loses a
	// blob before the first mid-run check; "stale-read" has consistent
	// reads return a value overwritten before they began; "local-orphan-sweep" brings back
	// the orphan sweep of before issue 18 (store.Config.TestingLocalOrphanSweep).
	sabotage string
}

// DefaultConfig returns the defaults for seed.
func DefaultConfig(seed uint64) Config {
	return Config{Seed: seed, Voters: 3, Learners: 2, Duration: 40 * time.Second, Ops: 400,
		MaxBigFiles: 3, Step: 10 * time.Millisecond}
}

// Result summarizes a run that kept every invariant.
type Result struct {
	Acked, Unknown     int // writes
	Refused            int // writes refused with ErrNoSpace (checked never to take effect)
	Reads, ReadErrors  int
	Crashes, Pauses    int
	Partitions         int
	Heals              int // mid-run checks of invariant (a), after every fault ended
	DiskFaults         int // blob-disk fault windows (evDisk)
	DiskRestarts       int // nodes restarted after their blob store turned read-only
	AppliedIndex       uint64
	ReferencedBlobs    int
	Net                transport.MemStats
	FakeTime, RealTime time.Duration
	// Events and Trace: the number of lines of the event trace and their
	// SHA-256 (trace.go); equal for two runs of one seed.
	Events int
	Trace  string
	// Lines are the trace's lines, with Config.KeepTrace.
	Lines []string
}

func (r Result) String() string {
	return fmt.Sprintf("writes %d acked / %d unknown / %d refused, reads %d (%d failed), crashes %d, pauses %d, partitions %d, "+
		"disk faults %d (%d restarts), checked after %d heals, applied index %d, %d referenced blobs, net %+v, fake %v, real %v",
		r.Acked, r.Unknown, r.Refused, r.Reads, r.ReadErrors, r.Crashes, r.Pauses, r.Partitions, r.DiskFaults, r.DiskRestarts, r.Heals, r.AppliedIndex,
		r.ReferencedBlobs, r.Net, r.FakeTime, r.RealTime.Round(time.Millisecond)) + fmt.Sprintf(", trace %d events %.12s", r.Events, r.Trace)
}

// netFaults are the message fault rates in force.
type netFaults struct {
	drop, dup float64
	maxDelay  time.Duration
}

// Sim is one simulated cluster. It is driven from one goroutine (Run);
// the nodes' own goroutines run freely between steps.
type Sim struct {
	cfg     Config
	t0      time.Time
	tr      trace
	net     *transport.MemNetwork
	nodes   []*node
	byID    map[uint64]*node
	diskRNG *rand.Rand
	hist    *history
	res     Result

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
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	start := time.Now() // the bubble's fake clock (Test)
	s := &Sim{cfg: cfg, t0: start, tr: newTrace(cfg.KeepTrace), byID: map[uint64]*node{},
		diskRNG: rand.New(rand.NewPCG(cfg.Seed, 0xd15c)), hist: newHistory(),
		faults:      netFaults{drop: 0.02, dup: 0.02, maxDelay: baseMaxDelay},
		pausedUntil: map[uint64]time.Time{}, downSince: map[uint64]time.Time{}, cut: map[[2]uint64]time.Time{},
		diskUntil: map[uint64]time.Time{}, faultRNG: rand.New(rand.NewPCG(cfg.Seed, 0xfa17))}
	s.net = transport.NewMemNetwork(transport.MemConfig{Seed: cfg.Seed, Fault: s.fault,
		Schedule: func(d time.Duration, f func()) { time.AfterFunc(d, f) }})
	zones := []string{"z1", "z2", "z3"}
	for i := range cfg.Voters + cfg.Learners {
		id := uint64(i + 1)
		n := &node{id: id, voter: i < cfg.Voters, zone: zones[i%len(zones)], pfs: pvfs.NewCrashableMem(), mem: vfs.NewMem()}
		s.nodes = append(s.nodes, n)
		s.byID[id] = n
	}
	err := s.run()
	if err != nil {
		s.fail("%v", err)
	}
	for _, n := range s.nodes {
		if err := s.stop(n); err != nil {
			s.fail("node %d: close: %v", n.id, err)
		}
	}
	s.ops.Wait()
	s.closers.Wait()
	// Background work of the stopped nodes (a replicator's straggler
	// copies, deliveries in flight) ends on its own deadlines: let fake
	// time run until every goroutine of the bubble has exited, as the
	// bubble requires (time stops when Run returns).
	time.Sleep(drainTime)
	synctest.Wait()
	s.res.Acked, s.res.Unknown, s.res.Reads, s.res.ReadErrors = s.hist.acked, s.hist.unknowns, s.hist.reads, s.hist.readErrs
	s.res.Refused = s.hist.refused
	s.res.Net = s.net.Stats()
	s.res.FakeTime = time.Since(start)
	s.res.Events, s.res.Trace = s.tr.sum()
	s.res.Lines = s.tr.lines
	s.failMu.Lock()
	defer s.failMu.Unlock()
	if len(s.failures) > 0 {
		return s.res, errors.New(strings.Join(s.failures, "\n"))
	}
	return s.res, nil
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
	for _, n := range s.nodes {
		if err := s.start(n); err != nil {
			return err
		}
	}
	if err := s.bootstrap(); err != nil {
		return fmt.Errorf("bootstrap: %w", err)
	}
	evs := makeSchedule(s.cfg.Seed, s.cfg, s.ids())
	t0 := time.Now()
	lastRepair := time.Duration(0)
	faulty := false
	for len(evs) > 0 || time.Now().Sub(t0) < s.cfg.Duration {
		el := time.Now().Sub(t0)
		for len(evs) > 0 && evs[0].at <= el {
			s.apply(evs[0])
			evs = evs[1:]
		}
		if el-lastRepair >= repairEvery {
			lastRepair = el
			s.repairAll()
		}
		s.endFaults()
		f := s.anyFault()
		if faulty && !f {
			// Every fault has ended: check the acknowledged writes now,
			// not only at the end. The schedule resumes where it was.
			p0 := time.Now()
			if err := s.checkHealed(); err != nil {
				return err
			}
			t0 = t0.Add(time.Now().Sub(p0))
		}
		faulty = f
		s.step()
	}
	return s.finish()
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
	s.fmu.Lock()
	s.faults = saved
	s.fmu.Unlock()
	return nil
}

// step lets one step of fake time pass, ticking Raft on the way, and
// waits until every goroutine of the cluster is durably blocked
// (synctest.Wait): nothing runs between steps but the driver.
func (s *Sim) step() {
	time.Sleep(s.cfg.Step)
	s.ticks++
	if time.Duration(s.ticks)*s.cfg.Step >= tickEvery {
		s.ticks = 0
		for _, n := range s.nodes {
			if n.inc != nil && !s.paused(n.id) {
				n.inc.tickNow()
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
	for _, b := range buckets {
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

// ---------------------------------------------------------------------------
// Faults

// fault decides one delivery's fate (MemConfig.Fault; called under the
// network's lock, drawing from its RNG).
func (s *Sim) fault(rng *rand.Rand, from, to transport.NodeID, op transport.Op) transport.Fault {
	now := time.Now()
	s.fmu.Lock()
	f := s.faults
	var hold time.Duration
	for _, id := range []uint64{uint64(from), uint64(to)} {
		if u, ok := s.pausedUntil[id]; ok && u.After(now) {
			hold = max(hold, u.Sub(now))
		}
	}
	s.fmu.Unlock()
	var out transport.Fault
	drop := f.drop
	if op != transport.OpRaft {
		drop /= 2
	}
	if rng.Float64() < drop {
		out.Drop = true
		s.tr.add("net %d>%d %v drop", from, to, op)
		return out
	}
	out.Delay = hold
	if f.maxDelay > 0 {
		out.Delay += time.Duration(rng.Int64N(int64(f.maxDelay)))
	}
	if op == transport.OpRaft && rng.Float64() < f.dup {
		out.Duplicate = true
	}
	s.tr.add("net %d>%d %v delay %v dup %v", from, to, op, out.Delay, out.Duplicate)
	return out
}

func (s *Sim) paused(id uint64) bool {
	s.fmu.Lock()
	defer s.fmu.Unlock()
	u, ok := s.pausedUntil[id]
	return ok && u.After(time.Now())
}

// detectedDead is the simulated failure detector: observer sees id dead
// when id has been crashed or paused, or the link between them cut, for
// detectDelay.
func (s *Sim) detectedDead(observer, id uint64) bool {
	if observer == id {
		return false
	}
	now := time.Now()
	s.fmu.Lock()
	defer s.fmu.Unlock()
	old := func(t time.Time, ok bool) bool { return ok && now.Sub(t) >= detectDelay }
	if t, ok := s.downSince[id]; old(t, ok) {
		return true
	}
	t1, ok1 := s.cut[[2]uint64{observer, id}]
	t2, ok2 := s.cut[[2]uint64{id, observer}]
	return old(t1, ok1) || old(t2, ok2)
}

// livenessChanged rebuilds every node's map now and once the detector
// would have noticed.
func (s *Sim) livenessChanged() {
	s.rebuildAll()
	time.AfterFunc(detectDelay+time.Millisecond, s.rebuildAll)
}

func (s *Sim) rebuildAll() {
	for _, n := range s.nodes {
		if inc := n.inc; inc != nil {
			inc.rebuildMap()
		}
	}
}

func (s *Sim) cutLinks(pairs [][2]uint64) {
	now := time.Now()
	s.fmu.Lock()
	for _, p := range pairs {
		if _, ok := s.cut[p]; !ok {
			s.cut[p] = now
		}
	}
	s.fmu.Unlock()
	for _, p := range pairs {
		s.net.Block(transport.NodeID(p[0]), transport.NodeID(p[1]))
	}
	s.res.Partitions++
	s.livenessChanged()
}

func (s *Sim) heal() {
	s.net.Heal()
	s.fmu.Lock()
	clear(s.cut)
	s.fmu.Unlock()
	s.livenessChanged()
}

// endFaults ends pauses, crashes and lossy periods whose time is up.
func (s *Sim) endFaults() {
	now := time.Now()
	s.fmu.Lock()
	if !s.lossyUntil.IsZero() && !s.lossyUntil.After(now) {
		s.faults = netFaults{drop: 0.02, dup: 0.02, maxDelay: baseMaxDelay}
		s.lossyUntil = time.Time{}
	}
	var resumed []uint64
	for id, u := range s.pausedUntil {
		if !u.After(now) {
			delete(s.pausedUntil, id)
			delete(s.downSince, id)
			resumed = append(resumed, id)
		}
	}
	s.fmu.Unlock()
	if len(resumed) > 0 {
		s.livenessChanged()
	}
	s.endDiskFaults(false)
	for _, n := range s.nodes {
		if n.inc == nil && !n.restartAt.IsZero() && !n.restartAt.After(now) && !s.diskFailing(n.id) {
			s.restart(n)
		}
	}
}

// diskFailing reports whether id's blob disk is failing (evDisk): a node
// crashed meanwhile waits for the disk, as it would for an operator to
// replace it (it would not start: blob.Open reads every volume).
func (s *Sim) diskFailing(id uint64) bool {
	s.fmu.Lock()
	defer s.fmu.Unlock()
	_, ok := s.diskUntil[id]
	return ok
}

// startDiskFault makes n's blob disk fail as kind says until until.
func (s *Sim) startDiskFault(n *node, kind diskFault, until time.Time) {
	s.fmu.Lock()
	s.diskUntil[n.id] = until
	s.fmu.Unlock()
	n.mem.SetFault(func(op vfs.Op, name string) error {
		switch {
		case kind == diskReadEIO && op == vfs.OpRead:
			s.fmu.Lock()
			fail := s.faultRNG.IntN(2) == 0
			s.fmu.Unlock()
			if fail {
				return syscall.EIO
			}
		case kind == diskWriteEIO && op == vfs.OpWrite:
			return syscall.EIO
		case kind == diskNoSpace && op == vfs.OpWrite:
			s.fmu.Lock()
			part := s.faultRNG.IntN(3)
			s.fmu.Unlock()
			if part == 0 {
				return vfs.ShortWrite(13, syscall.ENOSPC)
			}
			return syscall.ENOSPC
		case kind == diskSyncEIO && op == vfs.OpSync:
			return syscall.EIO
		}
		return nil
	})
}

// endDiskFaults ends the blob-disk faults whose time is up (all of them
// when all is set). A node whose blob store turned read-only meanwhile
// (a failed write or fsync is never retried) is restarted, as an operator
// would once the disk is fixed: killed, and started at once over the
// same disks.
func (s *Sim) endDiskFaults(all bool) {
	now := time.Now()
	var ended []uint64
	s.fmu.Lock()
	for id, u := range s.diskUntil {
		if all || !u.After(now) {
			delete(s.diskUntil, id)
			ended = append(ended, id)
		}
	}
	s.fmu.Unlock()
	slices.Sort(ended)
	for _, id := range ended {
		n := s.byID[id]
		n.mem.SetFault(nil)
		if n.inc != nil && n.inc.blobs.Stats().ReadOnly {
			s.cfg.Logf("%v node %d restarted: its blob store is read-only after the disk fault", now.Sub(s.t0), id)
			s.res.DiskRestarts++
			s.crash(n, false, 0)
			n.restartAt = now
		}
	}
}

func (s *Sim) restart(n *node) {
	n.restartAt = time.Time{}
	if err := s.start(n); err != nil {
		s.fail("restart node %d after a crash: %v", n.id, err)
		return
	}
	s.fmu.Lock()
	delete(s.downSince, n.id)
	s.fmu.Unlock()
	s.livenessChanged()
	s.kickRepair(n.inc)
}

// down counts nodes crashed or paused.
func (s *Sim) down() int {
	c := 0
	for _, n := range s.nodes {
		if n.inc == nil || s.paused(n.id) {
			c++
		}
	}
	return c
}

// apply carries out one scheduled event.
func (s *Sim) apply(e event) {
	now := time.Now()
	s.tr.add("event %v", e)
	switch e.kind {
	case evPut, evDelete, evRead:
		s.runOp(e)
		return
	case evIsolate:
		var pairs [][2]uint64
		for _, o := range s.ids() {
			if o != e.node {
				pairs = append(pairs, [2]uint64{e.node, o}, [2]uint64{o, e.node})
			}
		}
		s.cutLinks(pairs)
	case evSplit:
		var pairs [][2]uint64
		group := []uint64{e.node, e.other}
		for _, a := range group {
			for _, o := range s.ids() {
				if !slices.Contains(group, o) {
					pairs = append(pairs, [2]uint64{a, o}, [2]uint64{o, a})
				}
			}
		}
		s.cutLinks(pairs)
	case evOneWay:
		s.cutLinks([][2]uint64{{e.node, e.other}})
	case evHeal:
		s.heal()
	case evCrash:
		n := s.byID[e.node]
		if n.inc == nil || s.down() > 0 {
			return // at most one node down at a time
		}
		s.crash(n, e.torn, e.pct)
		n.restartAt = now.Add(e.dur)
		s.res.Crashes++
		s.fmu.Lock()
		s.downSince[n.id] = now
		s.fmu.Unlock()
		s.livenessChanged()
	case evPause:
		n := s.byID[e.node]
		if n.inc == nil || s.down() > 0 {
			return
		}
		s.res.Pauses++
		s.fmu.Lock()
		s.pausedUntil[n.id] = now.Add(e.dur)
		s.downSince[n.id] = now
		s.fmu.Unlock()
		s.livenessChanged()
	case evLossy:
		s.fmu.Lock()
		s.faults = netFaults{drop: 0.15, dup: 0.1, maxDelay: 150 * time.Millisecond}
		s.lossyUntil = now.Add(e.dur)
		s.fmu.Unlock()
	case evRepairAll:
		s.repairAll()
	case evDisk:
		n := s.byID[e.node]
		s.fmu.Lock()
		_, busy := s.diskUntil[n.id]
		s.fmu.Unlock()
		if n.inc == nil || busy {
			return
		}
		s.res.DiskFaults++
		s.startDiskFault(n, e.disk, now.Add(e.dur))
	}
	s.cfg.Logf("%v", e)
}

// ---------------------------------------------------------------------------
// Workload

// runOp starts a workload operation through node e.node, unless the node
// is down or paused (a client would not reach it).
func (s *Sim) runOp(e event) {
	n := s.byID[e.node]
	inc := n.inc
	if inc == nil || s.paused(n.id) {
		return
	}
	key := e.bucket + "/" + e.path
	var body []byte
	var w *write
	switch e.kind {
	case evPut:
		body = e.body.bytes()
		w = s.hist.begin(n.id, key, hashHex(body))
	case evDelete:
		w = s.hist.begin(n.id, key, absent)
	}
	s.ops.Add(1)
	s.inOps.Add(1)
	started := inc.goUse(func() {
		defer func() { s.inOps.Add(-1); s.ops.Done(); s.done.Add(1) }()
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		switch e.kind {
		case evPut:
			var err error
			if e.body.bulk() {
				// A one-file bulk upload (PutFiles: WriteMany, then the
				// same command as Put), chosen by the content so that the
				// schedules of existing seeds stay the same.
				err = inc.st.PutFiles(ctx, e.bucket, []store.FilePut{{Path: e.path, Data: body}})[0].Err
			} else {
				_, _, err = inc.st.Put(ctx, e.bucket, e.path, bytes.NewReader(body), store.PutOptions{Size: int64(len(body))})
			}
			s.hist.end(w, err)
			s.tr.add("put %s via %d: %v", key, n.id, err)
		case evDelete:
			err := inc.st.Delete(ctx, e.bucket, e.path, "")
			s.hist.end(w, err)
			s.tr.add("delete %s via %d: %v", key, n.id, err)
		case evRead:
			s.checkRead(ctx, inc, key, e.bucket, e.path, e.at%2 == 1) // half are consistent reads
		}
	})
	if !started { // cannot happen: a running node is not stopping
		s.inOps.Add(-1)
		s.ops.Done()
		s.fail("operation %v not started on a running node", e)
	}
}
