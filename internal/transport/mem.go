package transport

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairn-fs/cairn/internal/clock"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/cairn-fs/cairn/internal/blob"
)

// Op names an RPC, for MemNetwork's fault hooks.
type Op int

// The RPCs.
const (
	OpRaft Op = iota
	OpSnapshot
	OpPutBlob
	OpGetBlob
	OpHasBlobs
	OpJoin
	// OpPutBlobs is a batch of blobs (Client.PutBlobs): one fault decision
	// for the whole batch.
	OpPutBlobs
)

var opNames = [...]string{"raft", "snapshot", "putblob", "getblob", "hasblobs", "join", "putblobs"}

func (o Op) String() string {
	if int(o) < len(opNames) {
		return opNames[o]
	}
	return fmt.Sprintf("op%d", int(o))
}

// Fault is the fate of one delivery on a MemNetwork.
type Fault struct {
	// Drop loses the delivery: a Raft message vanishes silently; a call
	// fails with ErrUnavailable.
	Drop bool
	// Delay postpones the delivery (through MemConfig.Schedule); Raft
	// messages with different delays arrive reordered.
	Delay time.Duration
	// Duplicate delivers a Raft message a second time, after its own random
	// delay. Ignored for calls.
	Duplicate bool
}

// MemConfig configures a MemNetwork. Every random choice comes from one RNG
// seeded with Seed, drawn in the order of the sends.
type MemConfig struct {
	// Seed seeds the RNGs, one per directed link, so that a delivery's fate
	// depends on the seed and on how many deliveries the link carried
	// before, not on how concurrent senders on other links interleave.
	// Default 0 (a valid seed).
	Seed uint64
	// DropRate is the probability that a delivery is dropped. Default 0.
	DropRate float64
	// DuplicateRate is the probability that a Raft message is delivered
	// twice. Default 0.
	DuplicateRate float64
	// MaxDelay: each delivery is delayed uniformly in [0, MaxDelay).
	// Default 0: no delay.
	MaxDelay time.Duration
	// Fault, if not nil, decides every delivery's fate instead of the rates
	// above, drawing from rng (the link's RNG; do not keep it). It is
	// called with the network's lock held: it must not call the network.
	// Partitions apply before it. Default nil.
	Fault func(rng *rand.Rand, from, to NodeID, op Op) Fault
	// Schedule runs f after d (the simulator passes its fake clock's timer).
	// Raft messages are always delivered through it, so that SendRaft never
	// calls a handler on the sender's goroutine; a call with no delay runs
	// the handler directly. Default: the wall clock's AfterFunc.
	Schedule func(d time.Duration, f func())
	// OnRaft, if set, sees every Raft message sent (the simulator's event
	// trace), before its fate is drawn.
	OnRaft func(from, to NodeID, m *raftpb.Message)
}

// MemStats counts a MemNetwork's deliveries.
type MemStats struct {
	Delivered, Dropped, Duplicated, Refused int64
}

// MemNetwork is an in-memory network of nodes whose RPCs are function calls
// to their Handlers, with injectable drops, delays, duplicates and
// partitions. It behaves like the HTTP transport as seen through Client:
// the same errors (handler errors pass through the same status table), the
// same hash check on PutBlob, messages copied through their wire encoding.
// Safe for concurrent use.
type MemNetwork struct {
	cfg MemConfig

	mu      sync.Mutex
	rngs    map[[2]NodeID]*rand.Rand // per directed link
	nodes   map[NodeID]Handler
	urls    map[string]NodeID
	blocked map[[2]NodeID]bool // directed links (from, to) that are cut

	delivered, dropped, duplicated, refused atomic.Int64
}

// NewMemNetwork returns an empty network.
func NewMemNetwork(cfg MemConfig) *MemNetwork {
	if cfg.Schedule == nil {
		cfg.Schedule = func(d time.Duration, f func()) { clock.Real{}.AfterFunc(d, f) }
	}
	return &MemNetwork{
		cfg:     cfg,
		rngs:    map[[2]NodeID]*rand.Rand{},
		nodes:   map[NodeID]Handler{},
		urls:    map[string]NodeID{},
		blocked: map[[2]NodeID]bool{},
	}
}

// Register attaches node id, reachable by Join at url, serving h. A node
// registered again (a restart) replaces its handler.
func (n *MemNetwork) Register(id NodeID, url string, h Handler) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.nodes[id] = h
	if url != "" {
		n.urls[url] = id
	}
}

// Unregister detaches node id (it crashed): calls to it fail with
// ErrUnavailable and messages in flight to it are lost.
func (n *MemNetwork) Unregister(id NodeID) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.nodes, id)
}

// Partition cuts every link between nodes of different groups, both ways.
// Links already cut stay cut; Heal restores them all.
func (n *MemNetwork) Partition(groups ...[]NodeID) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for i, g := range groups {
		for j, h := range groups {
			if i == j {
				continue
			}
			for _, a := range g {
				for _, b := range h {
					n.blocked[[2]NodeID{a, b}] = true
				}
			}
		}
	}
}

// Block cuts the link from one node to another, in that direction only.
func (n *MemNetwork) Block(from, to NodeID) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.blocked[[2]NodeID{from, to}] = true
}

// Isolate cuts every link of node id with the nodes registered now.
func (n *MemNetwork) Isolate(id NodeID) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for o := range n.nodes {
		if o != id {
			n.blocked[[2]NodeID{id, o}] = true
			n.blocked[[2]NodeID{o, id}] = true
		}
	}
}

// Heal restores every cut link.
func (n *MemNetwork) Heal() {
	n.mu.Lock()
	defer n.mu.Unlock()
	clear(n.blocked)
}

// Stats returns the delivery counters.
func (n *MemNetwork) Stats() MemStats {
	return MemStats{
		Delivered: n.delivered.Load(), Dropped: n.dropped.Load(),
		Duplicated: n.duplicated.Load(), Refused: n.refused.Load(),
	}
}

// Client returns node from's Client on the network. onUnreachable plays the
// part of Config.OnUnreachable (nil: none): it is called, on the sender's
// goroutine, for Raft messages to an unknown, unregistered or cut-off node.
func (n *MemNetwork) Client(from NodeID, onUnreachable func(to NodeID, err error)) Client {
	return &memClient{n: n, from: from, onUnreachable: onUnreachable}
}

// route decides one delivery: the handler, or an error for a node that is
// unknown, down or cut off, and its fault.
func (n *MemNetwork) route(from, to NodeID, op Op) (Handler, Fault, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	h := n.nodes[to]
	if h == nil {
		n.refused.Add(1)
		return nil, Fault{}, fmt.Errorf("%w: node %v is not on the network", ErrUnavailable, to)
	}
	if n.blocked[[2]NodeID{from, to}] {
		n.refused.Add(1)
		return nil, Fault{}, fmt.Errorf("%w: link %v→%v is cut", ErrUnavailable, from, to)
	}
	return h, n.faultLocked(from, to, op), nil
}

// dupDelay draws the delay of a duplicate's delivery on from → to.
func (n *MemNetwork) dupDelay(from, to NodeID) time.Duration {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cfg.MaxDelay <= 0 {
		return 0
	}
	return time.Duration(n.linkRNG(from, to).Int64N(int64(n.cfg.MaxDelay)))
}

// linkRNG returns the RNG of the directed link from → to.
func (n *MemNetwork) linkRNG(from, to NodeID) *rand.Rand {
	k := [2]NodeID{from, to}
	r := n.rngs[k]
	if r == nil {
		s := n.cfg.Seed ^ uint64(from)<<32 ^ uint64(to)
		r = rand.New(rand.NewPCG(s, s^0x9e3779b97f4a7c15))
		n.rngs[k] = r
	}
	return r
}

func (n *MemNetwork) faultLocked(from, to NodeID, op Op) Fault {
	rng := n.linkRNG(from, to)
	if n.cfg.Fault != nil {
		return n.cfg.Fault(rng, from, to, op)
	}
	var f Fault
	if n.cfg.DropRate > 0 && rng.Float64() < n.cfg.DropRate {
		f.Drop = true
		return f
	}
	if n.cfg.MaxDelay > 0 {
		f.Delay = time.Duration(rng.Int64N(int64(n.cfg.MaxDelay)))
	}
	if op == OpRaft && n.cfg.DuplicateRate > 0 && rng.Float64() < n.cfg.DuplicateRate {
		f.Duplicate = true
	}
	return f
}

// handler returns node id's current handler (at delivery time).
func (n *MemNetwork) handler(from, to NodeID) Handler {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.blocked[[2]NodeID{from, to}] {
		return nil
	}
	return n.nodes[to]
}

type memClient struct {
	n             *MemNetwork
	from          NodeID
	onUnreachable func(NodeID, error)
	closed        atomic.Bool
}

var _ Client = (*memClient)(nil)

func (c *memClient) Close() error {
	c.closed.Store(true)
	return nil
}

// SendRaft implements Client: each message is routed on its own (so it may
// be dropped, delayed, reordered or duplicated alone) and delivered through
// MemConfig.Schedule as a copy made through the wire encoding.
func (c *memClient) SendRaft(to NodeID, msgs []*raftpb.Message) {
	if c.closed.Load() {
		return
	}
	var unreachable error
	for _, m := range msgs {
		if c.n.cfg.OnRaft != nil {
			c.n.cfg.OnRaft(c.from, to, m)
		}
		_, f, err := c.n.route(c.from, to, OpRaft)
		if err != nil {
			unreachable = err
			continue
		}
		if f.Drop {
			c.n.dropped.Add(1)
			continue
		}
		b, err := proto.Marshal(m)
		if err != nil {
			unreachable = fmt.Errorf("encode raft message: %w", err)
			continue
		}
		c.deliverRaft(to, b, f.Delay)
		if f.Duplicate {
			c.n.duplicated.Add(1)
			c.deliverRaft(to, b, c.n.dupDelay(c.from, to))
		}
	}
	if unreachable != nil && c.onUnreachable != nil {
		c.onUnreachable(to, unreachable)
	}
}

func (c *memClient) deliverRaft(to NodeID, b []byte, d time.Duration) {
	c.n.cfg.Schedule(d, func() {
		h := c.n.handler(c.from, to) // a node that crashed or was cut off meanwhile loses it
		if h == nil {
			c.n.dropped.Add(1)
			return
		}
		m := new(raftpb.Message)
		if err := proto.Unmarshal(b, m); err != nil {
			panic(fmt.Sprintf("transport: raft message does not survive its encoding: %v", err))
		}
		c.n.delivered.Add(1)
		_ = h.StepRaft(context.Background(), c.from, []*raftpb.Message{m})
	})
}

// call routes one blocking call and runs f against the target's handler,
// after the fault's delay; the caller waits for f or for ctx.
func (c *memClient) call(ctx context.Context, to NodeID, op Op, f func(h Handler) error) error {
	if c.closed.Load() {
		return ErrClosed
	}
	h, fault, err := c.n.route(c.from, to, op)
	if err != nil {
		return err
	}
	if fault.Drop {
		c.n.dropped.Add(1)
		return fmt.Errorf("%w: %v to node %v dropped", ErrUnavailable, op, to)
	}
	run := func() error {
		c.n.delivered.Add(1)
		if err := f(h); err != nil {
			return wireError(op, to, err)
		}
		return nil
	}
	if fault.Delay == 0 {
		return run()
	}
	done := make(chan error, 1)
	c.n.cfg.Schedule(fault.Delay, func() { done <- run() })
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("%w: %v to node %v: %w", ErrUnavailable, op, to, ctx.Err())
	}
}

// wireError turns a handler's error into what the HTTP client would return.
func wireError(op Op, to NodeID, err error) error {
	return fmt.Errorf("%w: %v to node %v: %v", sentinelOf(statusOf(err)), op, to, err)
}

func (c *memClient) PutBlob(ctx context.Context, to NodeID, b BlobPut) error {
	return c.call(ctx, to, OpPutBlob, func(hd Handler) error {
		// The in-memory network is trusted as node-to-node TLS is: a CRC,
		// when sent, is checked instead of the hash.
		if err := checkBlob(b.Hash, b.Data, b.CRC, true); err != nil {
			return err
		}
		return hd.PutBlob(ctx, c.from, b.Hash, bytes.Clone(b.Data))
	})
}

func (c *memClient) GetBlob(ctx context.Context, to NodeID, h blob.Hash, off, n int64) (io.ReadCloser, error) {
	if off < 0 || n < -1 {
		return nil, fmt.Errorf("%w: GetBlob off %d n %d", ErrBadRequest, off, n)
	}
	var rc io.ReadCloser
	err := c.call(ctx, to, OpGetBlob, func(hd Handler) error {
		r, _, err := hd.GetBlob(ctx, c.from, h, off, n)
		rc = r
		return err
	})
	if err != nil {
		return nil, err
	}
	return rc, nil
}

func (c *memClient) HasBlobs(ctx context.Context, to NodeID, hs []blob.Hash) ([]bool, error) {
	var has []bool
	err := c.call(ctx, to, OpHasBlobs, func(hd Handler) error {
		var err error
		has, err = hd.HasBlobs(ctx, c.from, append([]blob.Hash(nil), hs...))
		if err == nil && len(has) != len(hs) {
			err = fmt.Errorf("HasBlobs answered %d of %d hashes", len(has), len(hs))
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return has, nil
}

func (c *memClient) Join(ctx context.Context, url string, req JoinRequest) (JoinResponse, error) {
	var resp JoinResponse
	c.n.mu.Lock()
	to, ok := c.n.urls[url]
	c.n.mu.Unlock()
	if !ok {
		return resp, fmt.Errorf("%w: no node at %s", ErrUnavailable, url)
	}
	err := c.call(ctx, to, OpJoin, func(hd Handler) error {
		var err error
		resp, err = hd.Join(ctx, c.from, req)
		return err
	})
	return resp, err
}

func (c *memClient) SendSnapshot(ctx context.Context, to NodeID, meta []byte, body io.Reader) error {
	return c.call(ctx, to, OpSnapshot, func(hd Handler) error {
		r := &eofReader{r: body}
		if err := hd.ApplySnapshot(ctx, c.from, bytes.Clone(meta), r); err != nil {
			return err
		}
		if !r.eof {
			return fmt.Errorf("%w: handler did not read the snapshot to its end", ErrBadRequest)
		}
		return nil
	})
}

// eofReader records whether its reader was read to io.EOF.
type eofReader struct {
	r   io.Reader
	eof bool
}

func (e *eofReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err == io.EOF {
		e.eof = true
	}
	return n, err
}
