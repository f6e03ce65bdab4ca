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
	"github.com/cairn-fs/cairn/internal/core"
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
	core   *core.Core      // set by attach
	// raftP is raft for the transport's unreachable reports, which may
	// come before attach.
	raftP atomic.Pointer[consensus.Raft]
	tcfg  transport.Config
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

// newClusterNode prepares the cluster half of a node before its core
// exists: its ID, the node-to-node client, and the core's cluster settings
// (coreConfig). attach completes it once the core is built.
func newClusterNode(n *Node, cfg Config) (_ *clusterNode, err error) {
	if len(cfg.ClusterSecret) < 16 {
		return nil, errors.New("node: the cluster secret must be at least 16 bytes")
	}
	id, err := loadOrCreateNodeID(cfg.DataDir)
	if err != nil {
		return nil, fmt.Errorf("node ID: %w", err)
	}
	c := &clusterNode{n: n, cfg: cfg, id: id, seeds: map[uint64]string{}, stop: make(chan struct{})}
	c.addrs.Store(&map[uint64]string{})
	c.mets = newClusterMetrics(c)

	c.tcfg = transport.DefaultConfig()
	c.tcfg.NodeID = transport.NodeID(id)
	c.tcfg.Secret = []byte(cfg.ClusterSecret)
	c.tcfg.Addr = func(to transport.NodeID) (string, bool) {
		u, ok := (*c.addrs.Load())[uint64(to)]
		return u, ok
	}
	c.tcfg.Logger = cfg.Logger
	if !cfg.ClusterTLSOff {
		if c.ident, err = transport.NewIdentity(c.tcfg.Secret, c.tcfg.NodeID, nil); err != nil {
			return nil, err
		}
		c.tcfg.TLS = c.ident
	}
	c.peerHC = newPeerClient(c.ident)
	c.tcfg.OnUnreachable = func(to transport.NodeID, err error) {
		if r := c.raftP.Load(); r != nil {
			r.ReportUnreachable(uint64(to))
		}
	}
	if c.lv, err = newLiveness(c); err != nil {
		return nil, err
	}
	if c.client, err = transport.New(c.tcfg); err != nil {
		c.lv.close()
		return nil, err
	}
	return c, nil
}

// coreConfig is the cluster half of the node's core (internal/core).
func (c *clusterNode) coreConfig() *core.ClusterConfig {
	cfg := c.cfg
	rcfg := consensus.DefaultRaftConfig()
	if cfg.Join == "" {
		rcfg.InitialVoters = []uint64{c.id} // a new cluster; ignored once the store has Raft state
	}
	if cfg.Voters > 0 {
		rcfg.Voters = cfg.Voters
	}
	rcfg.OnProposed = c.mets.observeProposal
	return &core.ClusterConfig{ID: c.id, Net: c.client, Raft: rcfg,
		Replica: replica.Config{CacheBytes: cfg.RemoteCacheBytes},
		Repair: replica.RepairConfig{Interval: cfg.RepairInterval, DefaultReplicas: store.DefaultReplicas,
			BytesPerSec: float64(cfg.RepairRate), DeadPastGrace: c.lv.deadPastGrace},
		Liveness: c.liveStates, OnNodes: c.setAddrs, NoBlobs: cfg.Witness || cfg.Client}
}

// attach completes the cluster half once the core is built: the RPC
// server, and the handles on the core's parts.
func (c *clusterNode) attach(k *core.Core) (err error) {
	c.core, c.raft, c.rep, c.repair, c.reader = k, k.Raft, k.Rep, k.Repair, k.Reader
	c.raftP.Store(k.Raft)
	c.server, err = transport.NewServer(c.tcfg, rpcHandler{c: c, witness: c.cfg.Witness, client: c.cfg.Client, RaftHandler: transport.RaftHandler{Log: c.raft},
		GuardedBlobServer: k.BlobServer()})
	if err != nil {
		return err
	}
	c.cfg.Logger.Info("cluster node", "id", c.id, "join", c.cfg.Join)
	return nil
}

// liveStates is the failure detector's view of nodes.
func (c *clusterNode) liveStates(nodes []*meta.Node) map[uint64]placement.State {
	return c.lv.states(nodes)
}

// start runs the background work once the node serves: join the cluster
// through cfg.Join, or make sure this node is in the cluster map.
func (c *clusterNode) start() {
	c.lv.run()
	rctx, rcancel := context.WithCancel(context.Background())
	c.wg.Add(2)
	go func() { defer c.wg.Done(); <-c.stop; rcancel() }()
	if !c.cfg.Client { // client.go: a client's copies are its cache's
		go func() { defer c.wg.Done(); c.repair.Run(rctx) }()
		c.repair.Trigger()
	} else {
		c.wg.Done()
	}
	c.wg.Add(1)
	go func() { defer c.wg.Done(); c.watchMembership() }() // removed.go
	c.wg.Add(1)
	go func() { defer c.wg.Done(); c.upgradeLoop() }() // upgrade.go
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
			Extra:   joinExtra{GossipAddr: c.lv.gossipAddr(), LogVersion: meta.LogVersionMax, Client: c.cfg.Client}.marshal()})
		if errors.Is(err, transport.ErrRefused) { // too old a binary (upgrade.go)
			c.n.stopWith(fmt.Errorf("join %s: %w", c.cfg.Join, err))
			return errGiveUp
		}
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
				cur.GossipAddr == gossip && cur.Witness == c.cfg.Witness && (cur.State == meta.NodeClient) == c.cfg.Client {
				return nil
			}
			rec = cur
		}
		rec.URL, rec.ClusterURL, rec.Zone, rec.GossipAddr, rec.Witness = c.n.URL, c.clusterURL(), c.cfg.Zone, gossip, c.cfg.Witness
		switch {
		case c.cfg.Client:
			rec.State = meta.NodeClient
		case rec.State == meta.NodeClient: // a client restarted as a data node
			rec.State = meta.NodeActive
		}
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

// rebuildMaps recomputes the placement map and the node addresses
// (core.RebuildMap, which calls setAddrs).
func (c *clusterNode) rebuildMaps() {
	if k := c.core; k != nil {
		k.RebuildMap()
	}
}

// setAddrs records the members' node-to-node addresses from the cluster
// map, plus the seeds a join answer gave (core.ClusterConfig.OnNodes).
func (c *clusterNode) setAddrs(nodes []*meta.Node) {
	addrs := map[uint64]string{}
	c.seedMu.Lock()
	for id, u := range c.seeds {
		addrs[id] = u
	}
	c.seedMu.Unlock()
	for _, nd := range nodes {
		u := nd.ClusterURL
		if u == "" {
			u = nd.URL
		}
		if u != "" {
			addrs[nd.ID] = u
		}
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
	client  bool // refuses blob copies (client.go)
}

// noBlob is the refusal of a blob copy sent to a node that stores none.
func (h rpcHandler) noBlob() error {
	switch {
	case h.witness:
		return errWitnessBlob
	case h.client:
		return errClientBlob
	}
	return nil
}

// PutBlob stores a blob a peer sent, unless this node stores none.
func (h rpcHandler) PutBlob(ctx context.Context, from transport.NodeID, hash blob.Hash, data []byte) error {
	if err := h.noBlob(); err != nil {
		return err
	}
	return h.GuardedBlobServer.PutBlob(ctx, from, hash, data)
}

// PutBlobs stores a batch of blobs a peer sent, unless this node stores
// none.
func (h rpcHandler) PutBlobs(ctx context.Context, from transport.NodeID, blobs []transport.BlobPut) []error {
	if err := h.noBlob(); err != nil {
		errs := make([]error, len(blobs))
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	return h.GuardedBlobServer.PutBlobs(ctx, from, blobs)
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
	extra := parseJoinExtra(req.Extra)
	if err := c.checkJoiner(req.ID, extra); err != nil { // upgrade.go
		return transport.JoinResponse{}, fmt.Errorf("join: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if req.ClusterURL == req.PublicURL {
		req.ClusterURL = "" // the record's "same as URL"
	}
	res, err := c.raft.Propose(ctx, meta.Command{Op: meta.OpSetNode, TimeNs: time.Now().UnixNano(),
		Node: &meta.Node{ID: uint64(req.ID), URL: req.PublicURL, ClusterURL: req.ClusterURL, Zone: req.Zone, Witness: req.Witness,
			GossipAddr: extra.GossipAddr, State: joinState(extra)}})
	if err == nil {
		err = res.Err
	}
	if err != nil {
		return transport.JoinResponse{}, fmt.Errorf("join: record node %d: %w", req.ID, err)
	}
	// The log version may have moved up while the record was proposed
	// (OpSetLogVersion names the members it asked, so it cannot have
	// moved after the record applied): check again before the joiner
	// gets any entry, and take the record back if it is too old.
	if err := c.checkJoiner(req.ID, extra); err != nil {
		if _, rerr := c.raft.Propose(ctx, meta.Command{Op: meta.OpRemoveNode, TimeNs: time.Now().UnixNano(),
			Node: &meta.Node{ID: uint64(req.ID)}}); rerr != nil {
			c.cfg.Logger.Warn("join refused, but its record stays in the cluster map", "node", req.ID, "err", rerr)
		}
		return transport.JoinResponse{}, fmt.Errorf("join: %w", err)
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
