package node

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/cairn-fs/cairn/internal/blob"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairn-fs/cairn/internal/consensus"
	"github.com/cairn-fs/cairn/internal/meta"
	"github.com/cairn-fs/cairn/internal/placement"
	"github.com/cairn-fs/cairn/internal/replica"
	"github.com/cairn-fs/cairn/internal/store"
	"github.com/cairn-fs/cairn/internal/transport"
)

// clusterNode is the cluster half of a node: the Raft log, the RPC
// transport, the placement map and the replicator.
type clusterNode struct {
	n      *Node
	cfg    Config
	id     uint64
	raft   *consensus.Raft
	client *transport.HTTPClient
	server *transport.Server
	ident  *transport.Identity // node-to-node TLS; nil with --cluster-tls=off (clustertls.go)
	peerHC *http.Client        // calls to members' public API (peerDo, clustertls.go)
	rep    *replica.Replicator
	repair *replica.Repairer
	reader *meta.Reader
	lv     *liveness       // failure detector (liveness.go)
	mets   *clusterMetrics // metrics.go
	// store is the node's store once it exists (replica puts guard
	// against its deleter).
	store atomic.Pointer[store.Local]

	mapMu sync.Mutex // serializes rebuildMaps
	pmap  atomic.Pointer[placement.Map]
	addrs atomic.Pointer[map[uint64]string]
	// seeds are addresses learnt from a join answer, before the cluster
	// map reaches this node.
	seedMu sync.Mutex
	seeds  map[uint64]string

	stop chan struct{}
	wg   sync.WaitGroup
}

// loadOrCreateNodeID returns the node's Raft ID from DATA/node.id,
// creating a random one at first start.
func loadOrCreateNodeID(dir string) (uint64, error) {
	p := filepath.Join(dir, "node.id")
	b, err := os.ReadFile(p)
	if err == nil {
		id, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
		if err != nil || id == 0 {
			return 0, fmt.Errorf("%s: not a node ID: %q", p, b)
		}
		return id, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return 0, err
	}
	var r [8]byte
	var id uint64
	for id == 0 {
		if _, err := rand.Read(r[:]); err != nil {
			return 0, err
		}
		id = binary.BigEndian.Uint64(r[:]) >> 1 // positive, readable in logs
	}
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, []byte(strconv.FormatUint(id, 10)+"\n"), 0o644); err != nil {
		return 0, err
	}
	return id, os.Rename(tmp, p)
}

func startCluster(n *Node, cfg Config, onApply func(uint64, []meta.Command, []meta.Result), onSnapshot func()) (_ *clusterNode, err error) {
	if len(cfg.ClusterSecret) < 16 {
		return nil, errors.New("node: the cluster secret must be at least 16 bytes")
	}
	id, err := loadOrCreateNodeID(cfg.DataDir)
	if err != nil {
		return nil, fmt.Errorf("node ID: %w", err)
	}
	c := &clusterNode{n: n, cfg: cfg, id: id, reader: meta.NewReader(n.kv), seeds: map[uint64]string{},
		stop: make(chan struct{})}
	if c.lv, err = newLiveness(c); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			c.lv.close()
		}
	}()
	c.rebuildMaps()

	tcfg := transport.DefaultConfig()
	tcfg.NodeID = transport.NodeID(id)
	tcfg.Secret = []byte(cfg.ClusterSecret)
	tcfg.Addr = func(to transport.NodeID) (string, bool) {
		u, ok := (*c.addrs.Load())[uint64(to)]
		return u, ok
	}
	tcfg.Logger = cfg.Logger
	if !cfg.ClusterTLSOff {
		if c.ident, err = transport.NewIdentity(tcfg.Secret, tcfg.NodeID, nil); err != nil {
			return nil, err
		}
		tcfg.TLS = c.ident
	}
	c.peerHC = newPeerClient(c.ident)
	tcfg.OnUnreachable = func(to transport.NodeID, err error) {
		if r := c.raft; r != nil {
			r.ReportUnreachable(uint64(to))
		}
	}
	c.client, err = transport.New(tcfg)
	if err != nil {
		return nil, err
	}

	rcfg := consensus.DefaultRaftConfig()
	rcfg.ID = id
	rcfg.KV = n.kv
	rcfg.Transport = transport.RaftSender{C: c.client}
	if cfg.Join == "" {
		rcfg.InitialVoters = []uint64{id} // a new cluster; ignored once the store has Raft state
	}
	if cfg.Voters > 0 {
		rcfg.Voters = cfg.Voters
	}
	rcfg.OnApply = onApply
	c.mets = newClusterMetrics(c)
	rcfg.OnProposed = c.mets.observeProposal
	rcfg.PromoteFirst = c.isWitness // a witness votes before a data node does (witness.go)
	rcfg.OnSnapshot = func(uint64) { c.rebuildMaps(); onSnapshot() }
	rcfg.Logger = cfg.Logger
	c.raft, err = consensus.NewRaft(rcfg)
	if err != nil {
		c.client.Close()
		return nil, err
	}
	c.rep, err = replica.New(replica.Config{Self: placement.NodeID(id), Local: n.blobs,
		Peers: replica.TransportPeers{C: c.client}, Map: c.pmap.Load, Logger: cfg.Logger,
		CacheBytes: cfg.RemoteCacheBytes})
	if err != nil {
		c.raft.Close()
		c.client.Close()
		return nil, err
	}
	c.repair, err = replica.NewRepairer(replica.RepairConfig{Self: placement.NodeID(id), Local: n.blobs,
		Peers: replica.TransportPeers{C: c.client}, Map: c.pmap.Load, Logger: cfg.Logger,
		Interval: cfg.RepairInterval, AppliedIndex: c.raft.AppliedIndex,
		DefaultReplicas: store.DefaultReplicas, BytesPerSec: float64(cfg.RepairRate),
		DeadPastGrace: c.lv.deadPastGrace,
		Referenced: func(ctx context.Context, fn func(blob.Hash, int) bool) error {
			return c.reader.ReferencedBlobs(store.DefaultReplicas, fn)
		},
		UnderReplicated: func(fn func(blob.Hash, int) bool) error {
			return c.reader.UnderReplicated(func(h blob.Hash, replicas int, _ int64) bool { return fn(h, replicas) })
		},
		MarkReplicated: c.markReplicated})
	if err != nil {
		c.raft.Close()
		c.client.Close()
		return nil, err
	}
	c.server, err = transport.NewServer(tcfg, rpcHandler{c: c, witness: cfg.Witness, RaftHandler: transport.RaftHandler{Log: c.raft},
		GuardedBlobServer: replica.GuardedBlobServer{BlobServer: replica.BlobServer{Store: n.blobs}, Guard: c.guardReplicaPut}})
	if err != nil {
		c.raft.Close()
		c.client.Close()
		return nil, err
	}
	cfg.Logger.Info("cluster node", "id", id, "join", cfg.Join)
	return c, nil
}

// start runs the background work once the node serves: join the cluster
// through cfg.Join, or make sure this node is in the cluster map.
func (c *clusterNode) start() {
	c.lv.run()
	rctx, rcancel := context.WithCancel(context.Background())
	c.wg.Add(2)
	go func() { defer c.wg.Done(); <-c.stop; rcancel() }()
	go func() { defer c.wg.Done(); c.repair.Run(rctx) }()
	c.repair.Trigger()
	c.wg.Add(1)
	go func() { defer c.wg.Done(); c.watchMembership() }() // removed.go
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		if c.cfg.Join != "" {
			if _, err := c.reader.Node(c.id); err != nil && !c.joinLoop() {
				return // stopped, or the secret was rejected (join.go)
			}
		}
		c.registerLoop()
	}()
}

// retry calls f with backoff until it succeeds, the node stops or f
// returns errGiveUp (join.go); it reports success.
func (c *clusterNode) retry(what string, f func(ctx context.Context) error) bool {
	delay := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := f(ctx)
		cancel()
		if err == nil {
			return true
		}
		if errors.Is(err, errGiveUp) {
			return false
		}
		if attempt%10 == 1 {
			c.cfg.Logger.Warn(what+" failed; retrying", "attempt", attempt, "err", err)
		}
		select {
		case <-c.stop:
			return false
		case <-time.After(delay):
		}
		delay = min(delay*2, 2*time.Second)
	}
}

// joinLoop asks the --join member to admit this node until it does; it
// reports false if the node stopped first, or was stopped because the
// member keeps rejecting its cluster secret (ErrSecretRejected).
func (c *clusterNode) joinLoop() bool {
	rejected := 0
	return c.retry("join "+c.cfg.Join, func(ctx context.Context) error {
		resp, err := c.client.Join(ctx, strings.TrimRight(c.cfg.Join, "/"), transport.JoinRequest{
			ID: transport.NodeID(c.id), PublicURL: c.n.URL, ClusterURL: c.n.ClusterURL, Zone: c.cfg.Zone,
			Witness: c.cfg.Witness,
			Extra:   joinExtra{GossipAddr: c.lv.gossipAddr()}.marshal()})
		if !errors.Is(err, transport.ErrUnauthorized) && !errors.Is(err, transport.ErrTLSRequired) {
			rejected = 0
		} else if rejected++; rejected >= joinRejections {
			c.n.stopWith(secretRejected(c.cfg.Join, transport.DefaultConfig().MaxClockSkew, err))
			return errGiveUp
		}
		if err != nil {
			return err
		}
		c.lv.addJoinSeeds(parseJoinExtra(resp.Extra).GossipSeeds)
		c.seedMu.Lock()
		for _, m := range resp.Members {
			u := m.ClusterURL
			if u == "" {
				u = m.PublicURL
			}
			c.seeds[uint64(m.ID)] = u
		}
		c.seedMu.Unlock()
		c.rebuildMaps()
		c.cfg.Logger.Info("joined the cluster", "via", c.cfg.Join, "members", len(resp.Members))
		return nil
	})
}

// registerLoop makes sure this node's record in the cluster map matches its
// addresses (a new cluster's first node, or an address change on restart).
// Other fields of an existing record are kept.
func (c *clusterNode) registerLoop() {
	gossip := c.lv.gossipAddr()
	c.retry("register in the cluster map", func(ctx context.Context) error {
		rec := &meta.Node{ID: c.id}
		if cur, err := c.reader.Node(c.id); err == nil {
			if cur.URL == c.n.URL && cur.ClusterURL == c.clusterURL() && cur.Zone == c.cfg.Zone &&
				cur.GossipAddr == gossip && cur.Witness == c.cfg.Witness {
				return nil
			}
			rec = cur
		}
		rec.URL, rec.ClusterURL, rec.Zone, rec.GossipAddr, rec.Witness = c.n.URL, c.clusterURL(), c.cfg.Zone, gossip, c.cfg.Witness
		res, err := c.raft.Propose(ctx, meta.Command{Op: meta.OpSetNode, TimeNs: time.Now().UnixNano(),
			Node: rec})
		if err != nil {
			return err
		}
		return res.Err
	})
}

// clusterURL is the ClusterURL recorded in the cluster map: "" (meaning
// the public URL) without --cluster-listen.
func (c *clusterNode) clusterURL() string {
	if c.n.ClusterURL == c.n.URL {
		return ""
	}
	return c.n.ClusterURL
}

// applied is called after every applied entry; membership changes rebuild
// the placement and address maps.
func (c *clusterNode) applied(cmds []meta.Command) {
	under := false
	for _, cmd := range cmds {
		if cmd.Op == meta.OpSetNode || cmd.Op == meta.OpRemoveNode {
			c.rebuildMaps()
			return
		}
		// An under-replicated write whose blob this node lacks: this node
		// may be one of the targets that missed it (it is catching up after
		// a restart). An under pass pulls what it should hold at once.
		for _, h := range cmd.Under {
			under = under || !c.n.blobs.Has(h)
		}
	}
	if under && c.repair != nil && !c.cfg.Witness { // a witness holds no blob, ever
		c.repair.TriggerUnder()
	}
}

// markReplicated records that blobs hs have all their copies again
// (replica.RepairConfig.MarkReplicated).
func (c *clusterNode) markReplicated(ctx context.Context, hs []blob.Hash) error {
	res, err := c.raft.Propose(ctx, meta.Command{Op: meta.OpReplicated, Replicated: hs, TimeNs: time.Now().UnixNano()})
	if err == nil {
		err = res.Err
	}
	return err
}

// rebuildMaps recomputes the placement map and the node addresses from the
// cluster map in the namespace (plus join seeds) and the failure detector's
// view (liveness.go).
func (c *clusterNode) rebuildMaps() {
	c.mapMu.Lock()
	defer c.mapMu.Unlock()
	nodes, err := c.reader.Nodes()
	if err != nil {
		c.cfg.Logger.Error("read cluster map", "err", err)
		return
	}
	addrs := map[uint64]string{}
	c.seedMu.Lock()
	for id, u := range c.seeds {
		addrs[id] = u
	}
	c.seedMu.Unlock()
	var live map[uint64]placement.State // nil (all Live) until the detector starts
	if c.lv != nil {
		live = c.lv.states(nodes)
	}
	var pn []placement.Node
	for _, nd := range nodes {
		u := nd.ClusterURL
		if u == "" {
			u = nd.URL
		}
		if u != "" {
			addrs[nd.ID] = u
		}
		st := live[nd.ID] // Live or Dead
		switch {
		case nd.Witness:
			st = placement.Witness
		case nd.State == meta.NodeDraining:
			st = placement.Draining
		}
		pn = append(pn, placement.Node{ID: placement.NodeID(nd.ID), Zone: nd.Zone, Weight: nd.Weight, State: st})
	}
	m, err := placement.NewMap(pn)
	if err != nil {
		c.cfg.Logger.Error("build placement map", "err", err)
		return
	}
	c.pmap.Store(m)
	if c.repair != nil {
		c.repair.Trigger() // membership or liveness changed: copies may need to move
	}
	c.addrs.Store(&addrs)
}

func (c *clusterNode) close() error {
	select {
	case <-c.stop:
	default:
		close(c.stop)
	}
	c.wg.Wait()
	return errors.Join(c.lv.close(), c.client.Close())
}

// rpcHandler answers node-to-node calls.
type rpcHandler struct {
	c *clusterNode
	transport.RaftHandler
	replica.GuardedBlobServer
	witness bool // refuses blob copies (witness.go)
}

// PutBlob stores a blob a peer sent, unless this node is a witness.
func (h rpcHandler) PutBlob(ctx context.Context, from transport.NodeID, hash blob.Hash, data []byte) error {
	if h.witness {
		return errWitnessBlob
	}
	return h.GuardedBlobServer.PutBlob(ctx, from, hash, data)
}

// PutBlobs stores a batch of blobs a peer sent, unless this node is a
// witness.
func (h rpcHandler) PutBlobs(ctx context.Context, from transport.NodeID, blobs []transport.BlobPut) []error {
	if h.witness {
		errs := make([]error, len(blobs))
		for i := range errs {
			errs[i] = errWitnessBlob
		}
		return errs
	}
	return h.GuardedBlobServer.PutBlobs(ctx, from, blobs)
}

// guardReplicaPut is store.Local.GuardReplicaPut once the store exists;
// before that nothing deletes blobs, so there is nothing to guard.
func (c *clusterNode) guardReplicaPut(ctx context.Context, minIndex uint64, hs []blob.Hash) (func(), error) {
	st := c.store.Load()
	if st == nil {
		return func() {}, nil
	}
	return st.GuardReplicaPut(ctx, minIndex, hs)
}

// Join admits a node: its record goes into the cluster map (so every node
// can reach it), then Raft adds it as a learner; the leader promotes
// learners while the cluster has fewer voters than its target.
func (h rpcHandler) Join(ctx context.Context, from transport.NodeID, req transport.JoinRequest) (transport.JoinResponse, error) {
	c := h.c
	if req.ID == 0 || req.PublicURL == "" {
		return transport.JoinResponse{}, fmt.Errorf("join: %w: ID and public URL required", transport.ErrBadRequest)
	}
	if parseJoinExtra(req.Extra).Probe {
		return c.answerProbe(uint64(req.ID)), nil // removed.go
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if req.ClusterURL == req.PublicURL {
		req.ClusterURL = "" // the record's "same as URL"
	}
	res, err := c.raft.Propose(ctx, meta.Command{Op: meta.OpSetNode, TimeNs: time.Now().UnixNano(),
		Node: &meta.Node{ID: uint64(req.ID), URL: req.PublicURL, ClusterURL: req.ClusterURL, Zone: req.Zone, Witness: req.Witness,
			GossipAddr: parseJoinExtra(req.Extra).GossipAddr}})
	if err == nil {
		err = res.Err
	}
	if err != nil {
		return transport.JoinResponse{}, fmt.Errorf("join: record node %d: %w", req.ID, err)
	}
	if err := c.raft.AddLearner(ctx, uint64(req.ID)); err != nil {
		return transport.JoinResponse{}, fmt.Errorf("join: add node %d: %w", req.ID, err)
	}
	var resp transport.JoinResponse
	addrs := *c.addrs.Load()
	for id, u := range addrs {
		resp.Members = append(resp.Members, transport.Member{ID: transport.NodeID(id), PublicURL: u, ClusterURL: u})
	}
	seeds := []string{c.lv.gossipAddr()}
	if nodes, err := c.reader.Nodes(); err == nil {
		for _, nd := range nodes {
			if nd.ID != uint64(req.ID) && nd.GossipAddr != "" {
				seeds = append(seeds, nd.GossipAddr)
			}
		}
	}
	resp.Extra = joinExtra{GossipSeeds: seeds}.marshal()
	return resp, nil
}
