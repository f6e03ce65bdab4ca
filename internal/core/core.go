package core

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	pvfs "github.com/cockroachdb/pebble/v2/vfs"

	"github.com/cairn-fs/cairn/internal/blob"
	"github.com/cairn-fs/cairn/internal/clock"
	"github.com/cairn-fs/cairn/internal/consensus"
	"github.com/cairn-fs/cairn/internal/kv"
	"github.com/cairn-fs/cairn/internal/meta"
	"github.com/cairn-fs/cairn/internal/placement"
	"github.com/cairn-fs/cairn/internal/replica"
	"github.com/cairn-fs/cairn/internal/store"
	"github.com/cairn-fs/cairn/internal/transport"
	"github.com/cairn-fs/cairn/internal/vfs"
)

// Config is what a node's core is built from: its disks, its network, its
// clock, and the settings of each component. The host (internal/node or
// internal/sim) fills it; New fills in the seams (FS, clock, logger) of
// the component configs.
type Config struct {
	// FS is the blob disk; BlobDir the blob store's directory on it.
	FS      vfs.FS
	BlobDir string
	// Blob holds the blob store's settings (Dir, FS, Now and Logger are
	// set by New).
	Blob blob.Config
	// KVFS is the namespace disk (nil: the OS's); KVDir Pebble's
	// directory on it. KV holds Pebble's settings (FS and Logger set by
	// New).
	KVFS  pvfs.FS
	KVDir string
	KV    kv.PebbleConfig
	// TempDir is where a pass that outgrows its memory bound keeps its
	// lists (the repair pass's blobs of buckets above the smallest R);
	// created when missing. Default: os.TempDir().
	TempDir string

	// Clock is the time every component reads and its timers run on.
	// Default clock.Real{}.
	Clock clock.Clock
	// Logger; default slog.Default().
	Logger *slog.Logger

	// Cluster, when set, makes a cluster member: a Raft log over Net,
	// replication and repair. Nil: a standalone node over a local log.
	Cluster *ClusterConfig

	// Store holds the store's settings (Blobs, KV, Log, Replication,
	// NodeID, IsLeader, Clock and Logger are set by New).
	Store store.Config
	// OnApply, if set, is called after the store saw each applied entry
	// (consensus.RaftConfig.OnApply), from the log's goroutine.
	OnApply func(index uint64, cmds []meta.Command, res []meta.Result)
}

// ClusterConfig is the cluster half of a core.
type ClusterConfig struct {
	// ID is this node's Raft ID (non-zero).
	ID uint64
	// Net is the client to the other members.
	Net transport.Client
	// Ticks drives Raft's logical clock, one tick per value; nil: a
	// ticker on Clock every Raft.TickInterval.
	Ticks <-chan time.Time
	// Raft holds the log's settings (ID, KV, Transport, Ticker, Clock,
	// OnApply, OnSnapshot, PromoteFirst, DeferStart and Logger are set by
	// New).
	Raft consensus.RaftConfig
	// Replica and Repair hold the replicator's and repairer's settings
	// (Self, Local, Peers, Map, Clock, Logger, and the repairer's
	// namespace callbacks are set by New).
	Replica replica.Config
	Repair  replica.RepairConfig
	// Liveness reports the failure detector's view of the members: an
	// entry Dead marks one. Nil: every member Live. It may be called from
	// any goroutine, often; it must not call into the core.
	Liveness func(nodes []*meta.Node) map[uint64]placement.State
	// OnNodes, if set, is called with the cluster map each time the
	// placement map is rebuilt (the host's address book), under the
	// rebuild's lock.
	OnNodes func(nodes []*meta.Node)
	// NoBlobs: this member holds no blob of its own (a witness, a client
	// node): no under-replicated write makes it pull one, and a write
	// that still ranks it does not store one here.
	NoBlobs bool
}

// Core is a node's core: the blob store, the namespace store, the log,
// replication and repair, the placement map and the store every front end
// calls. Built in one order by New, closed in the reverse one by Close.
type Core struct {
	cfg    Config
	log    *slog.Logger
	Blobs  *blob.Store
	KV     kv.Store
	Reader *meta.Reader
	// Log is Raft (cluster) or the local log (standalone).
	Log  consensus.Log
	Raft *consensus.Raft // nil standalone
	// Rep and Repair are nil standalone.
	Rep    *replica.Replicator
	Repair *replica.Repairer
	Store  *store.Local

	mapMu sync.Mutex
	pmap  atomic.Pointer[placement.Map]
}

// New builds a core: blob store, KV, log, replicator, repairer, store,
// placement map; then it starts the log. On error nothing stays open.
func New(cfg Config) (_ *Core, err error) {
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	c := &Core{cfg: cfg, log: cfg.Logger}
	var closers []func() error
	defer func() {
		if err != nil {
			for i := len(closers) - 1; i >= 0; i-- {
				closers[i]()
			}
		}
	}()

	bcfg := cfg.Blob
	bcfg.Dir, bcfg.FS, bcfg.Logger, bcfg.Now = cfg.BlobDir, cfg.FS, cfg.Logger, cfg.Clock.Now
	dc := c.diskCache()
	dc.StoreConfig(&bcfg) // a client node's blob store is its cache
	if c.Blobs, err = blob.Open(bcfg); err != nil {
		return nil, fmt.Errorf("open blob store: %w", err)
	}
	closers = append(closers, c.Blobs.Close)
	dc.Attach(c.Blobs)
	closers = append(closers, dc.Close)

	kcfg := cfg.KV
	kcfg.FS, kcfg.Logger = cfg.KVFS, cfg.Logger
	if cfg.TempDir != "" {
		if err := prepareTempDir(cfg.TempDir); err != nil { // replicas.go
			return nil, err
		}
	}
	if c.KV, err = kv.OpenPebble(cfg.KVDir, kcfg); err != nil {
		return nil, fmt.Errorf("open namespace store: %w", err)
	}
	closers = append(closers, c.KV.Close)
	c.Reader = meta.NewReader(c.KV)

	scfg := cfg.Store
	scfg.Blobs, scfg.KV, scfg.Clock, scfg.Logger = c.Blobs, c.KV, cfg.Clock, cfg.Logger
	// The log calls back into the store; the store is built before the
	// log starts (DeferStart), so no callback sees it missing.
	onApply := func(index uint64, cmds []meta.Command, res []meta.Result) {
		c.Store.Applied(index, cmds, res)
		c.applied(cmds)
		if cfg.OnApply != nil {
			cfg.OnApply(index, cmds, res)
		}
	}
	cl := cfg.Cluster
	if cl == nil {
		local, err := consensus.NewLocal(consensus.LocalConfig{KV: c.KV, Logger: cfg.Logger, OnApply: onApply})
		if err != nil {
			return nil, err
		}
		c.Log = local
		closers = append(closers, local.Close)
	} else {
		c.RebuildMap()
		rcfg := cl.Raft
		rcfg.ID, rcfg.KV, rcfg.Transport, rcfg.Logger = cl.ID, c.KV, transport.RaftSender{C: cl.Net}, cfg.Logger
		rcfg.Ticker, rcfg.Clock = cl.Ticks, cfg.Clock
		rcfg.OnApply = onApply
		rcfg.OnSnapshot = func(uint64) {
			c.RebuildMap()
			c.Store.Invalidate()
		}
		rcfg.DeferStart = true
		// A witness (a voter that holds no data) is promoted first.
		rcfg.PromoteFirst = func(id uint64) bool {
			nd, err := c.Reader.Node(id)
			return err == nil && nd.Witness
		}
		// A client node stays a learner.
		rcfg.NeverPromote = func(id uint64) bool {
			nd, err := c.Reader.Node(id)
			return err == nil && nd.State == meta.NodeClient
		}
		if c.Raft, err = consensus.NewRaft(rcfg); err != nil {
			return nil, fmt.Errorf("start raft: %w", err)
		}
		c.Log = c.Raft
		closers = append(closers, c.Raft.Close)

		peers := replica.TransportPeers{C: cl.Net}
		self := placement.NodeID(cl.ID)
		repc := cl.Replica
		repc.Self, repc.Local, repc.Peers, repc.Map, repc.Clock, repc.Logger = self, c.Blobs, peers, c.Map, cfg.Clock, cfg.Logger
		repc.NoLocalCopies = cl.NoBlobs
		if c.Rep, err = replica.New(repc); err != nil {
			return nil, err
		}
		rpc := cl.Repair
		rpc.Self, rpc.Local, rpc.Peers, rpc.Map, rpc.Clock, rpc.Logger = self, c.Blobs, peers, c.Map, cfg.Clock, cfg.Logger
		rpc.AppliedIndex = c.Raft.AppliedIndex
		if rpc.DefaultReplicas == 0 {
			rpc.DefaultReplicas = store.DefaultReplicas
		}
		replicas := rpc.DefaultReplicas
		tmp := cfg.TempDir
		rpc.Referenced = func(ctx context.Context, fn func(blob.Hash, int) bool) error {
			return referencedBlobs(c.Reader, replicas, tmp, 0, fn) // replicas.go
		}
		rpc.UnderReplicated = func(fn func(blob.Hash, int) bool) error {
			return c.Reader.UnderReplicated(func(h blob.Hash, r int, _ int64) bool { return fn(h, r) })
		}
		rpc.MarkReplicated = c.markReplicated
		if c.Repair, err = replica.NewRepairer(rpc); err != nil {
			return nil, err
		}
		scfg.Replication, scfg.NodeID = c.Rep, cl.ID
		r := c.Raft
		scfg.IsLeader = func() bool { st := r.Status(); return st.Leader != 0 && st.Leader == st.ID }
	}
	scfg.Log = c.Log
	if c.Store, err = store.New(scfg); err != nil {
		return nil, err
	}
	closers = append(closers, c.Store.Close)
	if c.Raft != nil {
		c.Raft.Start()
	}
	return c, nil
}

// Map returns the current placement map (nil standalone).
func (c *Core) Map() *placement.Map { return c.pmap.Load() }

// RebuildMap recomputes the placement map from the cluster map in the
// namespace and the failure detector's view, hands the members to
// ClusterConfig.OnNodes, and asks for a repair pass when the map changed.
func (c *Core) RebuildMap() {
	cl := c.cfg.Cluster
	if cl == nil {
		return
	}
	c.mapMu.Lock()
	defer c.mapMu.Unlock()
	nodes, err := c.Reader.Nodes()
	if err != nil {
		c.log.Error("read cluster map", "err", err)
		return
	}
	if cl.OnNodes != nil {
		cl.OnNodes(nodes)
	}
	var live map[uint64]placement.State // nil: all Live
	if cl.Liveness != nil {
		live = cl.Liveness(nodes)
	}
	pn := make([]placement.Node, 0, len(nodes))
	for _, nd := range nodes {
		st := live[nd.ID] // Live or Dead
		switch {
		case nd.Witness, nd.State == meta.NodeClient:
			st = placement.Witness // never ranked: no copy goes there, none is read from there
		case nd.State == meta.NodeDraining:
			st = placement.Draining
		}
		pn = append(pn, placement.Node{ID: placement.NodeID(nd.ID), Zone: nd.Zone, Weight: nd.Weight, State: st})
	}
	m, err := placement.NewMap(pn)
	if err != nil {
		c.log.Error("build placement map", "err", err)
		return
	}
	old := c.pmap.Swap(m)
	if c.Repair != nil && (old == nil || !old.Equal(m)) {
		c.Repair.Trigger() // membership or liveness changed: copies may need to move
	}
}

// applied follows the applied commands: a membership change rebuilds the
// placement map; an under-replicated write whose blob this node lacks
// starts an under pass (this node may be a target that missed it while it
// was catching up).
func (c *Core) applied(cmds []meta.Command) {
	cl := c.cfg.Cluster
	if cl == nil {
		return
	}
	under := false
	for _, cmd := range cmds {
		if cmd.Op == meta.OpSetNode || cmd.Op == meta.OpRemoveNode {
			c.RebuildMap()
			return
		}
		for _, h := range cmd.Under {
			under = under || !c.Blobs.Has(h)
		}
	}
	if under && !cl.NoBlobs {
		c.Repair.TriggerUnder()
	}
}

// markReplicated records that blobs hs have all their copies again
// (replica.RepairConfig.MarkReplicated).
func (c *Core) markReplicated(ctx context.Context, hs []blob.Hash) error {
	res, err := c.Raft.Propose(ctx, meta.Command{Op: meta.OpReplicated, Replicated: hs, TimeNs: c.cfg.Clock.Now().UnixNano()})
	if err == nil {
		err = res.Err
	}
	return err
}

// BlobServer answers peers' blob calls on this node's blob store; a put
// waits for the store's deleter (store.Local.GuardReplicaPut), so that a
// copy a writer is about to name is never swept as an orphan.
func (c *Core) BlobServer() replica.GuardedBlobServer {
	return replica.GuardedBlobServer{BlobServer: replica.BlobServer{Store: c.Blobs}, Guard: c.Store.GuardReplicaPut}
}

// Close closes the store, then the log, KV and blob store. The host
// stops whatever calls into the core (servers, loops) first.
func (c *Core) Close() error {
	return errors.Join(c.Store.Close(), c.Log.Close(), c.KV.Close(), c.diskCache().Close(), c.Blobs.Close())
}

// diskCache is a client node's cache of blobs read from other nodes,
// kept in its blob store (nil: none).
func (c *Core) diskCache() *replica.DiskCache {
	if c.cfg.Cluster == nil {
		return nil
	}
	return c.cfg.Cluster.Replica.DiskCache
}
