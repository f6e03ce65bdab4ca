package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairn-fs/cairn/internal/clock"

	"github.com/hashicorp/memberlist"
)

// ErrClosed is returned by Leave after Close.
var ErrClosed = errors.New("cluster: detector closed")

// State is a member's liveness as the local detector sees it.
type State uint8

// Member states. memberlist v0.6.0 keeps its "suspect" state internal (no
// event, and Members lists suspects as members), so a suspected member is
// reported Alive until it is declared Dead: see doc.go.
const (
	StateAlive State = 1 // answers probes, or is suspected but not yet declared dead
	StateDead  State = 2 // declared dead by the failure detector (crash, hang, partition)
	StateLeft  State = 3 // left gracefully (Detector.Leave)
)

// String returns "alive", "dead" or "left".
func (s State) String() string {
	switch s {
	case StateAlive:
		return "alive"
	case StateDead:
		return "dead"
	case StateLeft:
		return "left"
	}
	return "state(" + strconv.Itoa(int(s)) + ")"
}

// Member is one node the detector has heard of. Members of the cluster map
// that the detector never heard of are not listed (and not alive).
type Member struct {
	ID    uint64    // Raft node ID
	Addr  string    // gossip address, host:port
	Meta  []byte    // the node's DetectorConfig.Meta; callers must not modify it
	State State     // liveness
	Since time.Time // local time of the last change of State
}

// EventKind says what changed about a member.
type EventKind uint8

// Event kinds.
const (
	EventJoin   EventKind = 1 // first seen alive, or alive again after Dead or Left
	EventUpdate EventKind = 2 // alive member changed its Meta
	EventDead   EventKind = 3 // declared dead
	EventLeft   EventKind = 4 // left gracefully
)

// String returns "join", "update", "dead" or "left".
func (k EventKind) String() string {
	switch k {
	case EventJoin:
		return "join"
	case EventUpdate:
		return "update"
	case EventDead:
		return "dead"
	case EventLeft:
		return "left"
	}
	return "event(" + strconv.Itoa(int(k)) + ")"
}

// Event is one change of membership, delivered by Subscribe.
type Event struct {
	Kind   EventKind
	Member Member // the member after the change
	// Missed counts events this subscriber lost just before this one
	// because its buffer was full. When it is non-zero, re-read Members.
	Missed uint64
}

// Liveness answers whether a node is up. The data path asks it on every
// request to skip dead replicas; Detector is the real implementation and
// StaticLiveness a settable one for tests.
type Liveness interface {
	// Alive reports whether node id is believed up. It must be fast and
	// safe for concurrent use. Unknown IDs are not alive.
	Alive(id uint64) bool
}

// Detector is the failure detector of one node: a memberlist instance
// whose view of the cluster it mirrors in a lock-free snapshot. All methods
// are safe for concurrent use.
type Detector struct {
	cfg  DetectorConfig
	log  *slog.Logger
	ml   *memberlist.Memberlist
	addr string // advertised gossip address

	// view is an immutable snapshot, replaced on every change; Alive reads
	// it without a lock.
	view atomic.Pointer[map[uint64]Member]

	// leaving is set by Leave before it re-advertises the node, so that
	// peers can tell a graceful leave from a death (see metaLeaving).
	leaving atomic.Bool

	// lifecycle serializes Leave and Close: memberlist panics on a Leave
	// after Shutdown.
	lifecycle sync.Mutex
	shut      bool // guarded by lifecycle

	mu     sync.Mutex // serializes writers of view and guards subs, closed
	subs   map[*subscriber]struct{}
	closed bool

	// seeds are the addresses maintain joins through (cfg.Seeds, then
	// SetSeeds); an immutable slice, replaced whole.
	seeds atomic.Pointer[[]string]

	wake         chan struct{} // signalled when a member dies or leaves, or the seeds change
	stop         chan struct{}
	wg           sync.WaitGroup
	joinAttempts atomic.Int64 // attempts to join the seeds, for tests
}

type subscriber struct {
	ch     chan Event
	missed uint64 // guarded by Detector.mu
}

var _ Liveness = (*Detector)(nil)

// NewDetector starts a failure detector: it binds the gossip port (UDP and
// TCP), and, when cfg.Seeds is set, joins the cluster in the background,
// retrying with backoff until a seed answers. Zero fields of cfg take their
// defaults. It returns an error wrapping ErrBadConfig for a bad config, or
// the bind error.
func NewDetector(cfg DetectorConfig) (*Detector, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.Secret = slices.Clone(cfg.Secret)
	cfg.Meta = slices.Clone(cfg.Meta)
	cfg.Seeds = slices.Clone(cfg.Seeds)
	d := &Detector{
		cfg:  cfg,
		log:  cfg.Logger.With("component", "cluster"),
		subs: make(map[*subscriber]struct{}),
		wake: make(chan struct{}, 1),
		stop: make(chan struct{}),
	}
	empty := map[uint64]Member{}
	d.view.Store(&empty)
	seeds := slices.Clone(cfg.Seeds)
	d.seeds.Store(&seeds)

	mc := cfg.memberlistConfig()
	mc.Logger = log.New(&logWriter{log: d.log.With("lib", "memberlist")}, "", 0)
	mc.Delegate = (*delegate)(d)
	mc.Events = (*events)(d)
	mc.Conflict = (*events)(d)
	ml, err := memberlist.Create(mc)
	if err != nil {
		return nil, fmt.Errorf("cluster: start gossip on %s:%d: %w", cfg.BindAddr, cfg.BindPort, err)
	}
	d.ml = ml
	// Read once: memberlist rewrites its local node record on every
	// re-advertisement, so later reads through LocalNode would race.
	d.addr = ml.LocalNode().Address()
	d.log.Info("gossip started", "node", cfg.NodeID, "addr", d.addr, "seeds", cfg.Seeds)

	d.wg.Add(1)
	go d.maintain()
	return d, nil
}

// ID returns this node's ID.
func (d *Detector) ID() uint64 { return d.cfg.NodeID }

// Addr returns the gossip address other members reach this node at
// (host:port), with the port the kernel chose when BindPort was 0.
func (d *Detector) Addr() string { return d.addr }

// Alive reports whether node id is alive in this node's view: joined and
// not declared dead and not left. Never-seen IDs are not alive; after
// Close nothing is. It takes no lock and does not allocate.
func (d *Detector) Alive(id uint64) bool {
	m, ok := (*d.view.Load())[id]
	return ok && m.State == StateAlive
}

// Suspect reports whether memberlist currently suspects node id: it missed
// probes and will be declared dead unless it refutes the suspicion. A
// suspect member is still Alive. It takes memberlist's lock.
func (d *Detector) Suspect(id uint64) bool {
	d.lifecycle.Lock()
	defer d.lifecycle.Unlock()
	if d.shut {
		return false
	}
	name := nodeName(id)
	for _, n := range d.ml.Members() {
		if n.Name == name {
			return n.State == memberlist.StateSuspect
		}
	}
	return false
}

// Members returns every member this node has heard of, dead and left ones
// included, sorted by ID. The result is the caller's.
func (d *Detector) Members() []Member {
	v := *d.view.Load()
	out := make([]Member, 0, len(v))
	for _, m := range v {
		m.Meta = slices.Clone(m.Meta)
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b Member) int {
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
	return out
}

// Member returns the member with the given ID, if it was ever seen.
func (d *Detector) Member(id uint64) (Member, bool) {
	m, ok := (*d.view.Load())[id]
	m.Meta = slices.Clone(m.Meta)
	return m, ok
}

// Subscribe returns a channel of membership events from now on, and a
// function that ends the subscription and closes the channel. Events are
// never blocked on: when the channel's buffer (DetectorConfig.EventBuffer)
// is full, events are dropped and the next delivered one says how many in
// Event.Missed. Close closes every subscription's channel.
func (d *Detector) Subscribe() (<-chan Event, func()) {
	s := &subscriber{ch: make(chan Event, d.cfg.EventBuffer)}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		close(s.ch)
		return s.ch, func() {}
	}
	d.subs[s] = struct{}{}
	return s.ch, func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		if _, ok := d.subs[s]; ok {
			delete(d.subs, s)
			close(s.ch)
		}
	}
}

// SetSeeds replaces the seeds: the gossip addresses ("host:port") this
// detector joins through whenever it sees no other live member (see
// DetectorConfig.Seeds). If it is alone now, it tries the new seeds at
// once, in the background, then with the usual backoff; a detector that
// sees other members keeps them (gossip spreads membership) and uses the
// new seeds only if it ends up alone. It does not block. The slice is
// copied. Safe for concurrent use; no effect after Close.
func (d *Detector) SetSeeds(seeds []string) {
	s := slices.Clone(seeds)
	d.seeds.Store(&s)
	d.log.Debug("gossip seeds replaced", "node", d.cfg.NodeID, "seeds", s)
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// Seeds returns the current seeds (a copy).
func (d *Detector) Seeds() []string { return slices.Clone(*d.seeds.Load()) }

// Leave announces that this node is leaving, so that the others mark it
// Left rather than Dead, and waits up to timeout for the announcement to
// go out (0 waits without limit). The node keeps answering probes until
// Close; call Close next. It returns ErrClosed after Close.
//
// The others see Left only if they heard the leaving flag, which needs this
// node to be joined: a node that calls Leave while it knows no live member
// (for example while its first join is still under way) will be seen Dead. It returns an error if the announcement did not
// go out in time (the others will then mark the node Dead once it stops).
func (d *Detector) Leave(timeout time.Duration) error {
	d.lifecycle.Lock()
	defer d.lifecycle.Unlock()
	if d.shut {
		return ErrClosed
	}
	start := d.cfg.Clock.Now()
	// First re-advertise with the leaving flag, then send memberlist's
	// leave. Peers that see the flag on the leaver's last record report
	// Left; memberlist's own left-vs-dead distinction is not exposed.
	d.leaving.Store(true)
	if err := d.ml.UpdateNode(timeout); err != nil {
		return fmt.Errorf("cluster: leave: announce: %w", err)
	}
	rest := time.Duration(0)
	if timeout > 0 {
		if rest = timeout - clock.Since(d.cfg.Clock, start); rest <= 0 {
			rest = time.Millisecond
		}
	}
	if err := d.ml.Leave(rest); err != nil {
		return fmt.Errorf("cluster: leave: %w", err)
	}
	d.log.Info("left the cluster", "node", d.cfg.NodeID)
	return nil
}

// Close stops gossip at once, without a leave message (the others will
// mark this node Dead unless Leave ran first), closes every subscription,
// and waits for the background joiner (at most about TCPTimeout per seed,
// when a join attempt is under way). It waits for a Leave in progress.
// Alive reports false for every node afterwards. Safe to call more than
// once.
func (d *Detector) Close() error {
	d.lifecycle.Lock()
	defer d.lifecycle.Unlock()
	if d.shut {
		return nil
	}
	d.shut = true
	close(d.stop)
	var err error
	if e := d.ml.Shutdown(); e != nil {
		err = fmt.Errorf("cluster: shutdown gossip: %w", e)
	}
	d.wg.Wait()
	d.mu.Lock()
	d.closed = true
	for s := range d.subs {
		close(s.ch)
	}
	d.subs = nil
	empty := map[uint64]Member{}
	d.view.Store(&empty)
	d.mu.Unlock()
	return err
}

// maintain joins the seeds whenever this node sees no other live member,
// with jittered exponential backoff, and now and then tries to reach one
// dead member directly. It runs until Close.
func (d *Detector) maintain() {
	defer d.wg.Done()
	backoff := d.cfg.JoinRetryMin
	failures := 0
	var reconnect <-chan time.Time
	if d.cfg.ReconnectInterval > 0 {
		t := clock.NewTicker(d.cfg.Clock, d.cfg.ReconnectInterval)
		defer t.Stop()
		reconnect = t.C
	}
	for {
		var retry *clock.Timer
		var retryC <-chan time.Time
		// A leaving node must not pull itself back into the cluster.
		if len(*d.seeds.Load()) > 0 && !d.leaving.Load() && d.alone() {
			if d.joinSeeds(failures) {
				failures = 0
				backoff = d.cfg.JoinRetryMin
			} else {
				failures++
				retry = clock.NewTimer(d.cfg.Clock, jitter(backoff))
				retryC = retry.C
				backoff = min(2*backoff, d.cfg.JoinRetryMax)
			}
		}
		select {
		case <-d.stop:
			if retry != nil {
				retry.Stop()
			}
			return
		case <-d.wake:
		case <-retryC:
		case <-reconnect:
			d.reconnectOne()
		}
		if retry != nil {
			retry.Stop()
		}
	}
}

// joinSeeds makes one attempt to join through the seeds and reports
// whether this node now sees another live member.
func (d *Detector) joinSeeds(failures int) bool {
	d.joinAttempts.Add(1)
	seeds := *d.seeds.Load()
	n, err := d.ml.Join(seeds)
	if err == nil && !d.alone() {
		d.log.Info("joined the cluster", "node", d.cfg.NodeID, "seeds_answered", n)
		return true
	}
	if err == nil {
		err = errors.New("the seeds that answered know no other live member")
	}
	// The first failure of a run is worth a warning; the retries are not.
	level := slog.LevelDebug
	if failures == 0 {
		level = slog.LevelWarn
	}
	d.log.Log(context.Background(), level, "cannot join the cluster yet; retrying", "node", d.cfg.NodeID, "seeds", seeds, "err", err)
	return false
}

// reconnectOne tries to reach one random dead member, so that groups split
// for longer than GossipToTheDeadTime merge again when the network heals.
func (d *Detector) reconnectOne() {
	if d.leaving.Load() {
		return
	}
	var dead []Member
	for _, m := range *d.view.Load() {
		if m.State == StateDead && m.ID != d.cfg.NodeID {
			dead = append(dead, m)
		}
	}
	if len(dead) == 0 {
		return
	}
	m := dead[rand.IntN(len(dead))]
	if _, err := d.ml.Join([]string{m.Addr}); err != nil {
		d.log.Debug("dead member still unreachable", "member", m.ID, "addr", m.Addr, "err", err)
	}
}

// alone reports whether no member but this node is alive.
func (d *Detector) alone() bool {
	for id, m := range *d.view.Load() {
		if id != d.cfg.NodeID && m.State == StateAlive {
			return false
		}
	}
	return true
}

func jitter(d time.Duration) time.Duration {
	return time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
}

// apply records a change of one member and publishes its event. It is
// called by memberlist's event delegate while memberlist holds its node
// lock, so it must not call into memberlist and must not block: events go
// to buffered channels and are dropped (and counted) when one is full.
func (d *Detector) apply(kind EventKind, n *memberlist.Node) {
	id, ok := parseNodeName(n.Name)
	if !ok {
		d.log.Debug("ignoring gossip member with a non-Cairn name", "name", n.Name)
		return
	}
	leaving, meta := decodeMeta(n.Meta)
	// memberlist reuses its buffers; keep our own copies.
	m := Member{
		ID:   id,
		Addr: net.JoinHostPort(n.Addr.String(), strconv.Itoa(int(n.Port))),
		Meta: slices.Clone(meta),
	}

	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return
	}
	old := *d.view.Load()
	prev, seen := old[id]
	now := d.cfg.Clock.Now()
	switch kind {
	case EventJoin:
		m.State, m.Since = StateAlive, now
	case EventUpdate:
		m.State, m.Since = StateAlive, prev.Since
		if !seen || prev.State != StateAlive {
			m.Since = now
		}
		if seen && bytes.Equal(prev.Meta, m.Meta) {
			// Only the leaving flag changed: nothing a subscriber needs.
			kind = 0
		}
	case EventDead:
		m.State, m.Since = StateDead, now
		if leaving {
			kind, m.State = EventLeft, StateLeft
		}
	}
	next := make(map[uint64]Member, len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	next[id] = m
	d.view.Store(&next)

	if kind == EventDead || kind == EventLeft {
		select {
		case d.wake <- struct{}{}:
		default:
		}
	}
	if kind == 0 {
		d.log.Debug("member is leaving", "member", id, "addr", m.Addr)
		return
	}
	if id != d.cfg.NodeID {
		d.log.Info("member "+kind.String(), "member", id, "addr", m.Addr)
	}
	for s := range d.subs {
		ev := Event{Kind: kind, Member: m, Missed: s.missed}
		ev.Member.Meta = slices.Clone(m.Meta)
		select {
		case s.ch <- ev:
			s.missed = 0
		default:
			s.missed++
		}
	}
}

// events adapts Detector to memberlist's EventDelegate and ConflictDelegate.
type events Detector

func (e *events) NotifyJoin(n *memberlist.Node)   { (*Detector)(e).apply(EventJoin, n) }
func (e *events) NotifyUpdate(n *memberlist.Node) { (*Detector)(e).apply(EventUpdate, n) }
func (e *events) NotifyLeave(n *memberlist.Node)  { (*Detector)(e).apply(EventDead, n) }

func (e *events) NotifyConflict(existing, other *memberlist.Node) {
	(*Detector)(e).log.Warn("two processes claim one node ID; check for a copied data directory",
		"node", existing.Name, "known_addr", existing.Address(), "other_addr", other.Address())
}

// delegate adapts Detector to memberlist's Delegate: it only supplies the
// node metadata; Cairn sends no user messages over gossip.
type delegate Detector

func (g *delegate) NodeMeta(limit int) []byte {
	d := (*Detector)(g)
	return encodeMeta(d.leaving.Load(), d.cfg.Meta)
}
func (g *delegate) NotifyMsg([]byte)                  {}
func (g *delegate) GetBroadcasts(_, _ int) [][]byte   { return nil }
func (g *delegate) LocalState(bool) []byte            { return nil }
func (g *delegate) MergeRemoteState(_ []byte, _ bool) {}

// metaLeaving is bit 0 of the first byte of the gossiped node metadata; the
// caller's Meta follows that byte. Other bits are zero and ignored.
const metaLeaving = 1

func encodeMeta(leaving bool, meta []byte) []byte {
	b := make([]byte, 1, 1+len(meta))
	if leaving {
		b[0] = metaLeaving
	}
	return append(b, meta...)
}

// decodeMeta splits gossiped metadata; empty metadata (not from a Cairn
// detector) decodes as not leaving, no meta.
func decodeMeta(b []byte) (leaving bool, meta []byte) {
	if len(b) == 0 {
		return false, nil
	}
	return b[0]&metaLeaving != 0, b[1:]
}

func nodeName(id uint64) string { return strconv.FormatUint(id, 10) }

func parseNodeName(name string) (uint64, bool) {
	id, err := strconv.ParseUint(name, 10, 64)
	return id, err == nil && id > 0 && nodeName(id) == name
}
