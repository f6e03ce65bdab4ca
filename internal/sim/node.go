package sim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	pvfs "github.com/cockroachdb/pebble/v2/vfs"

	"github.com/cairn-fs/cairn/internal/blob"
	"github.com/cairn-fs/cairn/internal/clock"
	"github.com/cairn-fs/cairn/internal/consensus"
	"github.com/cairn-fs/cairn/internal/core"
	"github.com/cairn-fs/cairn/internal/kv"
	"github.com/cairn-fs/cairn/internal/meta"
	"github.com/cairn-fs/cairn/internal/placement"
	"github.com/cairn-fs/cairn/internal/replica"
	"github.com/cairn-fs/cairn/internal/store"
	"github.com/cairn-fs/cairn/internal/transport"
	"github.com/cairn-fs/cairn/internal/vfs"
)

// node is one simulated member: its disks survive crashes, its
// incarnation (the running process) does not.
type node struct {
	id        uint64
	voter     bool
	zone      string
	pfs       *pvfs.MemFS // the Pebble disk (replaced by its crash clone on a crash)
	mem       *vfs.Mem    // the blob disk (crashed in place)
	inc       *incarnation
	boots     int
	restartAt time.Time // when a crashed node comes back (zero: not crashed)
}

// incarnation is one run of a node's process: every component, wired as
// internal/node/cluster.go wires a real node (minus HTTP, memberlist and
// join; see doc.go).
type incarnation struct {
	s      *Sim
	n      *node
	fence  *fenceFS
	kv     kv.Store
	blobs  *blob.Store
	raft   *consensus.Raft
	st     *store.Local
	rep    *replica.Replicator
	repair *replica.Repairer
	reader *meta.Reader
	client transport.Client
	tick   chan time.Time
	core   *core.Core
	holder *holder // its mount, as far as directory ownership goes (exclusive.go)
	// raftP publishes raft to the network's unreachable callback, which
	// may run before start has assigned it.
	raftP atomic.Pointer[consensus.Raft]

	users       sync.WaitGroup // goroutines using this incarnation's stores
	repairing   atomic.Bool
	repairAgain atomic.Bool
	stopping    atomic.Bool
}

func (s *Sim) logger() *slog.Logger {
	if os.Getenv("CAIRN_SIM_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

const (
	blobDir = "/blobs"
	metaDir = "/meta"
	// replicaPutWait is store.Config.ReplicaPutWait in the sim.
	replicaPutWait = 100 * time.Millisecond
	// lockLease is store.Config.LockLease in the sim: the default, plus
	// 370 µs so that the lock loop's ticker (every lease/10) never fires at
	// an instant of the GC ticker (every gcInterval) of the same node, as
	// 500 ms and 200 ms would every second: a node that owns directories
	// renews its session from that loop, and two proposals due at one
	// instant reached the log in an order that did not replay.
	lockLease = store.DefaultLockLease + 370*time.Microsecond
)

// start boots n over its disks: the node's own core (internal/core),
// over the sim's disks, network and clock.
func (s *Sim) start(n *node) error {
	if n.inc != nil {
		return fmt.Errorf("node %d already running", n.id)
	}
	n.boots++
	log := s.logger().With("node", n.id, "boot", n.boots)
	inc := &incarnation{s: s, n: n, fence: &fenceFS{FS: n.mem}, tick: make(chan time.Time, 1)}
	inc.client = s.net.Client(transport.NodeID(n.id), func(to transport.NodeID, err error) {
		if r := inc.raftP.Load(); r != nil {
			r.ReportUnreachable(uint64(to))
		}
	})
	rcfg := consensus.DefaultRaftConfig()
	if n.voter {
		rcfg.InitialVoters = s.voterIDs() // ignored once the store has Raft state
	}
	rcfg.CompactAfter, rcfg.CompactMargin = 100, 20 // lagging and crashed nodes catch up by snapshot
	rcfg.TestingUnfenced = s.cfg.sabotage == "fencing"
	rcfg.TestingLockUnsafe = s.cfg.sabotage == "locks"
	// ReplicaPutWait: a replica cut off from the leader refuses a put
	// soon, rather than hold the run for the default 5 s.
	scfg := store.Config{GCGrace: s.cfg.GCGrace, GCInterval: gcInterval, ReplicaPutWait: replicaPutWait, LockLease: lockLease,
		TestingLocalOrphanSweep: s.cfg.sabotage == "local-orphan-sweep", TestingLockUnsafe: s.cfg.sabotage == "local-locks"}
	c, err := core.New(core.Config{
		FS: inc.fence, BlobDir: blobDir,
		Blob: blob.Config{MaxVolumeSize: 256 << 10, MinFreeBytes: 1, DisableMmap: true, CheckpointInterval: 512 << 10,
			ScrubPeriod: -1}, // no background scrub: its reads and saves would run outside the schedule
		KVFS: n.pfs, KVDir: metaDir, KV: kv.PebbleConfig{CacheSize: 1 << 20, MemTableSize: 1 << 20, MaxOpenFiles: 64},
		Clock: clock.Real{}, Logger: log, Store: scfg, // Real: the bubble's fake time (Test)
		Cluster: &core.ClusterConfig{ID: n.id, Net: inc.client, Ticks: inc.tick, Raft: rcfg,
			Liveness: func(nodes []*meta.Node) map[uint64]placement.State {
				live := map[uint64]placement.State{}
				for _, nd := range nodes {
					if s.detectedDead(n.id, nd.ID) {
						live[nd.ID] = placement.Dead
					}
				}
				return live
			}},
		OnApply: func(index uint64, cmds []meta.Command, res []meta.Result) {
			s.noteApplied(n.id, index, cmds, res)
		},
	})
	if err != nil {
		inc.client.Close()
		return fmt.Errorf("node %d: %w", n.id, err)
	}
	inc.core = c
	inc.kv, inc.blobs, inc.raft, inc.st, inc.rep, inc.repair, inc.reader = c.KV, c.Blobs, c.Raft, c.Store, c.Rep, c.Repair, c.Reader
	inc.raftP.Store(inc.raft)
	inc.holder = newHolder(s, inc)
	inc.st.AddHolder(inc.holder) // for the incarnation's life
	n.inc = inc
	s.net.Register(transport.NodeID(n.id), nodeURL(n.id), handler{inc: inc, RaftHandler: transport.RaftHandler{Log: inc.raft},
		GuardedBlobServer: c.BlobServer()})
	return nil
}

// noteApplied traces what every node applies and records, for failure
// messages, what node 1 applied about blobs.
func (s *Sim) noteApplied(id, index uint64, cmds []meta.Command, res []meta.Result) {
	s.logs.record(index, cmds, res) // fencing.go
	if s.split != nil {
		s.split.noteApplied(index, cmds, res) // split.go
	}
	for i := range cmds {
		s.tr.add("node %d applied %d: op %d %s/%s%s: %v", id, index, cmds[i].Op, cmds[i].BucketName, cmds[i].Path,
			ownTrace(&cmds[i], &res[i]), res[i].Err)
	}
	if id != 1 {
		return
	}
	for i := range cmds {
		if cmds[i].Op == meta.OpPutFile && errors.Is(res[i].Err, meta.ErrBlobReaped) {
			s.noteReaped(cmds[i].BucketName + "/" + cmds[i].Path)
		}
		if cmds[i].Op == meta.OpPutFile && res[i].Err == nil {
			s.noteLog(fmt.Sprintf("put %s/%s at index %d (start index %d)", cmds[i].BucketName, cmds[i].Path, index, cmds[i].StartIndex), cmds[i].File.Extents)
		}
		for _, h := range res[i].Freed {
			s.noteLog(fmt.Sprintf("reap at index %d", index), []meta.Extent{{Hash: h}})
		}
	}
}

// tickNow gives Raft one tick. The loop took the previous one: the
// driver waited for every goroutine to block since (Sim.step).
func (inc *incarnation) tickNow() {
	select {
	case inc.tick <- time.Time{}:
	default: // the loop is stuck: this tick is lost, as a real ticker's would be
	}
}

func nodeURL(id uint64) string { return fmt.Sprintf("sim://node%d", id) }

// rebuildMap recomputes this incarnation's placement map (the core's,
// with the simulated failure detector's view from this node) and starts a
// repair pass when it changed, as a real node's repair loop does.
func (inc *incarnation) rebuildMap() {
	old := inc.core.Map()
	inc.core.RebuildMap()
	if m := inc.core.Map(); old != nil && m != nil && !old.Equal(m) {
		inc.s.kickRepair(inc)
	}
}

// goUse runs f on a new goroutine counted as a user of inc, unless inc is
// stopping; it reports whether f was started.
func (inc *incarnation) goUse(f func()) bool {
	inc.s.incMu.Lock()
	defer inc.s.incMu.Unlock()
	if inc.stopping.Load() {
		return false
	}
	inc.users.Add(1)
	go func() {
		defer inc.users.Done()
		f()
	}()
	return true
}

// crash kills n's process: its links drop, its disks keep only what was
// synced (Pebble's crash clone, the blob Mem's Crash; torn tails when
// torn), and the old incarnation's components are closed in the
// background once nothing uses them.
func (s *Sim) crash(n *node, torn bool, unsyncedPct int) {
	inc := n.inc
	if inc == nil {
		return
	}
	s.incMu.Lock()
	inc.stopping.Store(true)
	s.incMu.Unlock()
	n.inc = nil
	s.net.Unregister(transport.NodeID(n.id))
	inc.client.Close()
	inc.fence.kill()
	if torn {
		n.mem.CrashTorn(s.diskRNG)
	} else {
		n.mem.Crash()
	}
	cfg := pvfs.CrashCloneCfg{}
	if unsyncedPct > 0 {
		cfg = pvfs.CrashCloneCfg{UnsyncedDataPercent: unsyncedPct, RNG: s.diskRNG}
	}
	n.pfs = n.pfs.CrashClone(cfg)
	s.closers.Add(1)
	go func() {
		defer s.closers.Done()
		inc.raft.Close()
		inc.users.Wait()
		inc.core.Close() // the blob store's close fails (its disk crashed); Pebble is the pre-crash one, on the abandoned file system
	}()
}

// stop shuts n down cleanly (end of the run).
func (s *Sim) stop(n *node) error {
	inc := n.inc
	if inc == nil {
		return nil
	}
	s.incMu.Lock()
	inc.stopping.Store(true)
	s.incMu.Unlock()
	n.inc = nil
	s.net.Unregister(transport.NodeID(n.id))
	inc.client.Close()
	inc.raft.Close()
	inc.users.Wait()
	return inc.core.Close()
}

// handler answers node-to-node calls, as internal/node's rpcHandler.
type handler struct {
	inc *incarnation
	transport.RaftHandler
	replica.GuardedBlobServer
}

// enter counts a call delivered to inc as a user of its stores, unless inc
// is stopping: a delivery scheduled before a crash must not reach the
// closed stores of the dead incarnation (it once reached a closed Pebble
// through GuardReplicaPut's sync: soak seed 1082). A real crash takes the
// handlers with it; node.Close shuts the servers down before the stores.
func (inc *incarnation) enter() (leave func(), ok bool) {
	inc.s.incMu.Lock()
	defer inc.s.incMu.Unlock()
	if inc.stopping.Load() {
		return nil, false
	}
	inc.users.Add(1)
	return inc.users.Done, true
}

var errStopped = fmt.Errorf("%w: the node crashed", transport.ErrUnavailable)

// PutBlob, PutBlobs, HasBlobs and GetBlob reach the blob server only while
// the incarnation runs (enter).
func (h handler) PutBlob(ctx context.Context, from transport.NodeID, b blob.Hash, data []byte) error {
	leave, ok := h.inc.enter()
	if !ok {
		return errStopped
	}
	defer leave()
	return h.GuardedBlobServer.PutBlob(ctx, from, b, data)
}

func (h handler) PutBlobs(ctx context.Context, from transport.NodeID, blobs []transport.BlobPut) []error {
	leave, ok := h.inc.enter()
	if !ok {
		errs := make([]error, len(blobs))
		for i := range errs {
			errs[i] = errStopped
		}
		return errs
	}
	defer leave()
	return h.GuardedBlobServer.PutBlobs(ctx, from, blobs)
}

func (h handler) HasBlobs(ctx context.Context, from transport.NodeID, hs []blob.Hash) ([]bool, error) {
	leave, ok := h.inc.enter()
	if !ok {
		return nil, errStopped
	}
	defer leave()
	return h.GuardedBlobServer.HasBlobs(ctx, from, hs)
}

func (h handler) GetBlob(ctx context.Context, from transport.NodeID, b blob.Hash, off, n int64) (io.ReadCloser, int64, error) {
	leave, ok := h.inc.enter()
	if !ok {
		return nil, 0, errStopped
	}
	defer leave()
	return h.GuardedBlobServer.GetBlob(ctx, from, b, off, n)
}

func (h handler) Join(ctx context.Context, from transport.NodeID, req transport.JoinRequest) (transport.JoinResponse, error) {
	return transport.JoinResponse{}, fmt.Errorf("%w: the simulator admits nodes itself", transport.ErrBadRequest)
}

// fenceFS passes calls to the node's blob disk until kill, after which
// every call fails: a crashed process's leftover goroutines can neither
// read nor write the disk its next incarnation uses.
type fenceFS struct {
	vfs.FS
	dead atomic.Bool
}

var errFenced = errors.New("sim: the process crashed")

func (f *fenceFS) kill() { f.dead.Store(true) }

func (f *fenceFS) check() error {
	if f.dead.Load() {
		return errFenced
	}
	return nil
}

func (f *fenceFS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	file, err := f.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &fenceFile{File: file, fs: f}, nil
}

func (f *fenceFS) Remove(name string) error {
	if err := f.check(); err != nil {
		return err
	}
	return f.FS.Remove(name)
}

func (f *fenceFS) Rename(o, n string) error {
	if err := f.check(); err != nil {
		return err
	}
	return f.FS.Rename(o, n)
}

func (f *fenceFS) MkdirAll(dir string, perm os.FileMode) error {
	if err := f.check(); err != nil {
		return err
	}
	return f.FS.MkdirAll(dir, perm)
}

func (f *fenceFS) SyncDir(dir string) error {
	if err := f.check(); err != nil {
		return err
	}
	return f.FS.SyncDir(dir)
}

// fenceFile fails every call once its FS is killed (the Mem's own Crash
// already does, for files open at the crash; this covers the gap between
// kill and Crash).
type fenceFile struct {
	vfs.File
	fs *fenceFS
}

func (f *fenceFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.fs.check(); err != nil {
		return 0, err
	}
	return f.File.WriteAt(p, off)
}

func (f *fenceFile) Sync() error {
	if err := f.fs.check(); err != nil {
		return err
	}
	return f.File.Sync()
}

func (f *fenceFile) Truncate(size int64) error {
	if err := f.fs.check(); err != nil {
		return err
	}
	return f.File.Truncate(size)
}

// ownTrace describes what an applied command says of directory
// ownership: a claim, recall or hand-over and its outcome, or the claims
// a change was stamped with.
func ownTrace(cmd *meta.Command, res *meta.Result) string {
	c := cmd.Own
	if c == nil {
		return ""
	}
	out := ""
	switch cmd.Op {
	case meta.OpOwn:
		out = fmt.Sprintf(" own dir %d by node %d session %d recall %v", c.Dir, c.Node, c.Session, c.Recall)
	case meta.OpDisown:
		out = fmt.Sprintf(" disown dir %d by node %d epoch %d", c.Dir, c.Node, c.Epoch)
	default:
		out = fmt.Sprintf(" stamped by node %d %v", c.Node, c.Held)
	}
	if r := res.Own; r != nil {
		out += fmt.Sprintf(" granted %v", r.Granted)
		if r.Owner != nil {
			out += fmt.Sprintf(" owner node %d epoch %d", r.Owner.Node, r.Owner.Epoch)
		}
	}
	return out
}
