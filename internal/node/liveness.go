package node

// Liveness in cluster mode: every cluster node runs a cluster.Detector
// (memberlist gossip, see internal/cluster/doc.go) and the placement map
// marks the members it does not see alive as placement.Dead, so that writes
// give their copies to stand-ins instead of waiting on a dead node and reads
// skip it.
//
// # Gossip address
//
// The detector binds --gossip-listen HOST:PORT (env CAIRN_GOSSIP_LISTEN),
// UDP and TCP. Without it, the host of --cluster-listen, or without that
// of --listen, with its port + 100 (gossipPortOffset): 127.0.0.1:8080
// gossips on 127.0.0.1:8180, so `cairn dev` (8080-8082) gossips on
// 8180-8182, and --cluster-listen 10.0.0.5:9080 gossips on 10.0.0.5:9180; a listen port of 0 (tests) gives a
// free port. When that derived default cannot be bound (port in use), the
// node falls back to a free port on the same host and logs a warning; an
// explicit --gossip-listen that cannot be bound fails the start. A host
// name is resolved to an IP; 0.0.0.0 (or an empty host) advertises the
// host's first private address (memberlist's rule).
//
// The address the detector advertises is recorded in the node's cluster map
// record (meta.Node.GossipAddr): by registerLoop, and for a joining node by
// the member it joins through, from JoinRequest.Extra ({"gossip_addr":
// "HOST:PORT"}, see joinExtra). The join answer's Extra lists the gossip
// addresses of the members ({"gossip_seeds": [...]}), so a new node can join
// the gossip before the cluster map reaches it.
//
// # Seeds
//
// The detector's seeds are the gossip addresses of the other members in the
// cluster map (plus those of a join answer). Whenever that list changes it
// is handed to the running detector (cluster.Detector.SetSeeds): a detector
// that sees no other live member tries the new seeds at once, one that is
// connected keeps them for when it finds itself alone (gossip already
// spreads membership). A join answer's seeds are applied at once.
//
// # Placement states
//
// A data member (not a witness, not draining) is Dead when the detector
// reports it Dead or Left, or when it has never been seen alive for
// livenessGrace after this node started or after the member appeared in the
// cluster map, whichever is later (a member that never joins the gossip,
// e.g. a crashed node at our restart, is skipped after the grace; a member
// the detector saw alive and lost is skipped as soon as it is declared
// dead, about 1.1-1.5 s after a crash). Everything else is Live; this node
// is always Live to itself. The placement map is rebuilt on every detector
// event, on cluster map changes, and when a grace runs out (checked every
// livenessTick); transitions are logged at Info ("member marked dead",
// "member live").

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairn-fs/cairn/internal/cluster"
	"github.com/cairn-fs/cairn/internal/meta"
	"github.com/cairn-fs/cairn/internal/placement"
)

const (
	// gossipPortOffset: the default gossip port is the public port + 100.
	gossipPortOffset = 100
	// livenessGrace is how long a member may go unseen by the detector
	// (after this node's start, or after it entered the cluster map)
	// before placement treats it as Dead.
	livenessGrace = 5 * time.Second
	// livenessTick is the period of the grace and seed checks.
	livenessTick = 250 * time.Millisecond
	// leaveTimeout bounds the graceful leave announcement at shutdown.
	leaveTimeout = 500 * time.Millisecond
)

// joinExtra is the JSON carried in transport.JoinRequest.Extra (GossipAddr:
// the joiner's gossip address) and JoinResponse.Extra (GossipSeeds: the
// gossip addresses of the members known to the answering node).
type joinExtra struct {
	GossipAddr  string   `json:"gossip_addr,omitempty"`
	GossipSeeds []string `json:"gossip_seeds,omitempty"`
	// Probe asks only whether the sender is still a member; nothing is
	// changed (removed.go). The answer carries Member and Applied.
	Probe   bool   `json:"probe,omitempty"`
	Member  *bool  `json:"member,omitempty"`
	Applied uint64 `json:"applied,omitempty"`
	// LogVersion is the newest log version the joiner's binary reads
	// (upgrade.go); absent from binaries before issue 22.
	LogVersion byte `json:"log_version,omitempty"`
	// Client: the joiner is a client node (client.go).
	Client bool `json:"client,omitempty"`
}

func (e joinExtra) marshal() json.RawMessage {
	b, _ := json.Marshal(e) // cannot fail: strings only
	return b
}

func parseJoinExtra(raw json.RawMessage) joinExtra {
	var e joinExtra
	if len(raw) > 0 {
		_ = json.Unmarshal(raw, &e) // unknown or bad extras are ignored
	}
	return e
}

// gossipBind returns the address the detector binds: --gossip-listen, or
// the host of --cluster-listen (else --listen) with its port +
// gossipPortOffset (explicit = false).
func gossipBind(cfg Config) (host string, port int, explicit bool, err error) {
	addr := cfg.GossipListen
	explicit = addr != ""
	if !explicit {
		addr = cfg.Listen
		if cfg.ClusterListen != "" {
			addr = cfg.ClusterListen
		}
	}
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, explicit, fmt.Errorf("gossip address %q: %w", addr, err)
	}
	port, err = strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, explicit, fmt.Errorf("gossip address %q: bad port", addr)
	}
	if !explicit && port != 0 {
		if port += gossipPortOffset; port > 65535 {
			port = 0
		}
	}
	switch {
	case h == "":
		h = "0.0.0.0"
	case net.ParseIP(h) == nil:
		ip, err := net.ResolveIPAddr("ip", h)
		if err != nil {
			return "", 0, explicit, fmt.Errorf("gossip address %q: %w", addr, err)
		}
		h = ip.IP.String()
	}
	return h, port, explicit, nil
}

// liveness owns the node's failure detector and turns its view into
// placement states.
type liveness struct {
	c     *clusterNode
	log   *slog.Logger
	self  uint64
	addr  string // advertised gossip address, recorded in the cluster map
	start time.Time

	det atomic.Pointer[cluster.Detector] // nil after close

	mu        sync.Mutex
	firstSeen map[uint64]time.Time // when a member entered the cluster map (as seen here)
	published map[uint64]placement.State
	deadSince map[uint64]time.Time // when a published Dead member was first published so
	pastGrace map[uint64]bool      // dead members whose repair grace had run out when published
	mapSeeds  []string             // gossip addresses of the other members, sorted
	joinSeeds []string             // from a join answer

	// Owned by the run loop.
	events   <-chan cluster.Event
	unsub    func()
	curSeeds []string // the detector's seeds

	wake chan struct{}
	stop chan struct{}
	wg   sync.WaitGroup
}

// newLiveness starts the detector (binding the gossip port); the gossip
// addresses of the cluster map become its seeds through states. Its loop
// starts with run.
func newLiveness(c *clusterNode) (*liveness, error) {
	host, port, explicit, err := gossipBind(c.cfg)
	if err != nil {
		return nil, err
	}
	l := &liveness{c: c, log: c.cfg.Logger, self: c.id, start: time.Now(),
		firstSeen: map[uint64]time.Time{}, published: map[uint64]placement.State{},
		deadSince: map[uint64]time.Time{}, pastGrace: map[uint64]bool{},
		wake: make(chan struct{}, 1), stop: make(chan struct{})}
	// The seeds come from the cluster map when the core first builds its
	// placement map (states), before the loop starts (run).
	dc := cluster.DefaultDetectorConfig()
	dc.NodeID = c.id
	dc.BindAddr = host
	dc.BindPort = port
	dc.Secret = []byte(c.cfg.ClusterSecret)
	dc.Logger = c.cfg.Logger
	dc.Seeds = l.mapSeeds
	dc.Meta = encodeVersionMeta(selfVersion()) // upgrade.go
	d, err := cluster.NewDetector(dc)
	if err != nil && !explicit && port != 0 {
		c.cfg.Logger.Warn("default gossip port unavailable; using a free port (set --gossip-listen to choose)",
			"addr", net.JoinHostPort(host, strconv.Itoa(port)), "err", err)
		dc.BindPort = 0
		d, err = cluster.NewDetector(dc)
	}
	if err != nil {
		return nil, fmt.Errorf("failure detector: %w (set --gossip-listen)", err)
	}
	l.addr = d.Addr()
	l.det.Store(d)
	l.events, l.unsub = d.Subscribe()
	l.curSeeds = dc.Seeds
	c.cfg.Logger.Info("failure detector started", "gossip", l.addr, "seeds", len(dc.Seeds))
	return l, nil
}

// run starts the loop that rebuilds the placement map on detector events
// and grace expiries and applies new seeds.
func (l *liveness) run() {
	l.wg.Add(1)
	go l.loop()
}

func (l *liveness) close() error {
	select {
	case <-l.stop:
		return nil
	default:
		close(l.stop)
	}
	l.wg.Wait()
	d := l.det.Swap(nil)
	if d == nil {
		return nil
	}
	if !alone(d) {
		if err := d.Leave(leaveTimeout); err != nil {
			l.log.Warn("gossip leave", "err", err)
		}
	}
	return d.Close()
}

func (l *liveness) loop() {
	defer l.wg.Done()
	t := time.NewTicker(livenessTick)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case _, ok := <-l.events:
			if !ok {
				l.events = nil
				continue
			}
			for drained := false; !drained; {
				select {
				case _, ok := <-l.events:
					if !ok {
						l.events, drained = nil, true
					}
				default:
					drained = true
				}
			}
			l.c.rebuildMaps()
		case <-l.wake:
			l.refreshSeeds()
		case now := <-t.C:
			l.refreshSeeds()
			if l.changed(now) {
				l.c.rebuildMaps()
			}
		}
	}
}

// seedsOf returns the gossip addresses of the members other than this node.
func (l *liveness) seedsOf(nodes []*meta.Node) []string {
	var s []string
	for _, nd := range nodes {
		if nd.ID != l.self && nd.GossipAddr != "" {
			s = append(s, nd.GossipAddr)
		}
	}
	slices.Sort(s)
	return slices.Compact(s)
}

// addJoinSeeds records the gossip addresses of a join answer and has the
// loop apply them at once.
func (l *liveness) addJoinSeeds(seeds []string) {
	l.mu.Lock()
	var s []string
	for _, a := range seeds {
		if a != "" && a != l.addr {
			s = append(s, a)
		}
	}
	slices.Sort(s)
	l.joinSeeds = slices.Compact(s)
	l.mu.Unlock()
	l.poke()
}

func (l *liveness) poke() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// states records the cluster map's members (for the grace and the seeds)
// and returns the placement state of each data member: Live or Dead.
// Called by rebuildMaps, serialized by its lock.
func (l *liveness) states(nodes []*meta.Node) map[uint64]placement.State {
	now := time.Now()
	seeds := l.seedsOf(nodes)
	l.mu.Lock()
	defer l.mu.Unlock()
	if !slices.Equal(seeds, l.mapSeeds) {
		l.mapSeeds = seeds
		defer l.poke()
	}
	out := make(map[uint64]placement.State, len(nodes))
	inMap := make(map[uint64]bool, len(nodes))
	for _, nd := range nodes {
		inMap[nd.ID] = true
		if _, ok := l.firstSeen[nd.ID]; !ok {
			l.firstSeen[nd.ID] = now
		}
		if nd.Witness || nd.State == meta.NodeDraining || nd.State == meta.NodeClient {
			continue
		}
		st := l.stateLocked(nd.ID, now)
		out[nd.ID] = st
		if st == placement.Dead {
			if _, ok := l.deadSince[nd.ID]; !ok {
				l.deadSince[nd.ID] = now
			}
			l.pastGrace[nd.ID] = l.pastGraceLocked(nd.ID, now)
		} else {
			delete(l.deadSince, nd.ID)
			delete(l.pastGrace, nd.ID)
		}
		prev, seen := l.published[nd.ID]
		switch {
		case st == placement.Dead && (!seen || prev != placement.Dead):
			l.log.Info("member marked dead: the data path skips it", "member", nd.ID, "gossip", nd.GossipAddr)
		case st == placement.Live && seen && prev == placement.Dead:
			l.log.Info("member live", "member", nd.ID, "gossip", nd.GossipAddr)
		}
	}
	for id := range l.firstSeen {
		if !inMap[id] {
			delete(l.firstSeen, id) // removed from the map
			delete(l.deadSince, id)
			delete(l.pastGrace, id)
		}
	}
	l.published = out
	return out
}

// changed reports whether some member's state differs from the last
// published map (a grace ran out), or a dead member's repair grace ran
// out since (repair must start re-making its copies).
func (l *liveness) changed(now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for id, st := range l.published {
		if l.stateLocked(id, now) != st {
			return true
		}
		if st == placement.Dead && !l.pastGrace[id] && l.pastGraceLocked(id, now) {
			l.log.Warn("member dead past the repair grace: its copies are re-made on other nodes",
				"member", id, "grace", l.c.cfg.RepairGrace)
			return true
		}
	}
	return false
}

// deadPastGrace reports whether data member id has been dead for at least
// --repair-grace (replica.RepairConfig.DeadPastGrace): before that, a
// restart or a short outage, its copies are not re-made elsewhere.
func (l *liveness) deadPastGrace(id placement.NodeID) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.pastGraceLocked(uint64(id), time.Now())
}

func (l *liveness) pastGraceLocked(id uint64, now time.Time) bool {
	t, ok := l.deadSince[id]
	return ok && now.Sub(t) >= l.c.cfg.RepairGrace
}

func (l *liveness) stateLocked(id uint64, now time.Time) placement.State {
	if id == l.self {
		return placement.Live
	}
	d := l.det.Load()
	if d == nil { // closed: keep what was published
		if st, ok := l.published[id]; ok {
			return st
		}
		return placement.Live
	}
	if m, ok := d.Member(id); ok {
		if m.State == cluster.StateAlive {
			return placement.Live
		}
		return placement.Dead
	}
	since := l.start
	if t := l.firstSeen[id]; t.After(since) {
		since = t
	}
	if now.Sub(since) < livenessGrace {
		return placement.Live
	}
	return placement.Dead
}

// refreshSeeds hands the detector the current seeds when they changed.
// Run by the loop only.
func (l *liveness) refreshSeeds() {
	l.mu.Lock()
	want := slices.Concat(l.mapSeeds, l.joinSeeds)
	l.mu.Unlock()
	slices.Sort(want)
	want = slices.Compact(want)
	d := l.det.Load()
	if d == nil || slices.Equal(want, l.curSeeds) {
		return
	}
	d.SetSeeds(want)
	l.curSeeds = want
	l.log.Debug("failure detector seeds", "seeds", want)
}

// alone reports whether d sees no live member but itself.
func alone(d *cluster.Detector) bool {
	for _, m := range d.Members() {
		if m.ID != d.ID() && m.State == cluster.StateAlive {
			return false
		}
	}
	return true
}

// gossipAddr is this node's advertised gossip address ("" without a
// detector).
func (l *liveness) gossipAddr() string {
	if l == nil {
		return ""
	}
	return l.addr
}
