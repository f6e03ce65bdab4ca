package memnet

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"sync"
	"sync/atomic"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// ErrUnreachable is returned by SendSnapshot when the link is cut, the
// snapshot was dropped or the peer is not registered.
var ErrUnreachable = errors.New("memnet: peer unreachable")

// Endpoint is the receiving side of a node (consensus.Raft implements it).
type Endpoint interface {
	Step(ctx context.Context, m *pb.Message) error
	ApplySnapshot(ctx context.Context, m *pb.Message, body io.Reader) error
}

// Faults are per-message probabilities in [0, 1].
type Faults struct {
	Drop      float64 // lost (also applies to snapshots)
	Duplicate float64 // delivered twice
	Delay     float64 // held for 1..MaxDelay network ticks
	MaxDelay  int     // in Network.Tick calls; default 3
	Reorder   float64 // put at a random place in the destination's queue
}

// Stats counts what the network did.
type Stats struct {
	Sent, Dropped, Duplicated, Delayed, Reordered, Snapshots, SnapshotsFailed int64
}

type delayed struct {
	release int
	to      uint64
	m       *pb.Message
}

type peer struct {
	id    uint64
	ep    Endpoint
	queue []*pb.Message
	wake  chan struct{}
}

// Network connects registered endpoints. Safe for concurrent use.
type Network struct {
	mu      sync.Mutex
	rng     *rand.Rand
	faults  Faults
	peers   map[uint64]*peer
	cut     map[[2]uint64]bool
	delayed []delayed
	now     int
	stats   Stats
	pending atomic.Int64
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// New returns an empty network whose faults are drawn from seed.
func New(seed uint64) *Network {
	ctx, cancel := context.WithCancel(context.Background())
	return &Network{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), peers: map[uint64]*peer{},
		cut: map[[2]uint64]bool{}, ctx: ctx, cancel: cancel}
}

// Register connects id's endpoint, replacing a previous one (a restarted
// node); messages queued for id are delivered to the new endpoint.
func (n *Network) Register(id uint64, ep Endpoint) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if p, ok := n.peers[id]; ok {
		p.ep = ep
		return
	}
	p := &peer{id: id, ep: ep, wake: make(chan struct{}, 1)}
	n.peers[id] = p
	n.wg.Add(1)
	go n.deliver(p)
}

// Unregister disconnects id: messages to it are lost until it registers
// again.
func (n *Network) Unregister(id uint64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if p, ok := n.peers[id]; ok {
		p.ep = nil
	}
}

// SetFaults sets the fault probabilities for messages sent from now on.
func (n *Network) SetFaults(f Faults) {
	if f.MaxDelay <= 0 {
		f.MaxDelay = 3
	}
	n.mu.Lock()
	n.faults = f
	n.mu.Unlock()
}

// Cut blocks messages from `from` to `to` (one way).
func (n *Network) Cut(from, to uint64) {
	n.mu.Lock()
	n.cut[[2]uint64{from, to}] = true
	n.mu.Unlock()
}

// Isolate cuts every link to and from id.
func (n *Network) Isolate(id uint64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for o := range n.peers {
		if o != id {
			n.cut[[2]uint64{id, o}] = true
			n.cut[[2]uint64{o, id}] = true
		}
	}
}

// Partition cuts every link between a node of a and a node of b.
func (n *Network) Partition(a, b []uint64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, x := range a {
		for _, y := range b {
			n.cut[[2]uint64{x, y}] = true
			n.cut[[2]uint64{y, x}] = true
		}
	}
}

// Heal restores every link (faults stay as set).
func (n *Network) Heal() {
	n.mu.Lock()
	n.cut = map[[2]uint64]bool{}
	n.mu.Unlock()
}

// Tick advances the network clock: delayed messages that are due join
// their destination's queue.
func (n *Network) Tick() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.now++
	keep := n.delayed[:0]
	for _, d := range n.delayed {
		if d.release <= n.now {
			n.enqueueLocked(d.to, d.m, false)
		} else {
			keep = append(keep, d)
		}
	}
	n.delayed = keep
}

// Pending returns the number of messages queued for delivery or being
// stepped (delayed messages are not counted until they are due).
func (n *Network) Pending() int64 { return n.pending.Load() }

// Delayed returns the number of messages held by delays.
func (n *Network) Delayed() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.delayed)
}

// Stats returns the counters so far.
func (n *Network) Stats() Stats {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.stats
}

// Close stops delivery; queued messages are dropped.
func (n *Network) Close() {
	n.cancel()
	n.mu.Lock()
	for _, p := range n.peers {
		select {
		case p.wake <- struct{}{}:
		default:
		}
	}
	n.mu.Unlock()
	n.wg.Wait()
}

// Transport returns the sending side for node id (it implements
// consensus.Transport).
func (n *Network) Transport(id uint64) *Transport { return &Transport{n: n, from: id} }

func clone(m *pb.Message) *pb.Message {
	p, err := proto.Marshal(m)
	if err != nil {
		panic(err)
	}
	c := &pb.Message{}
	if err := proto.Unmarshal(p, c); err != nil {
		panic(err)
	}
	return c
}

func (n *Network) blockedLocked(from, to uint64) bool {
	p := n.peers[to]
	return p == nil || p.ep == nil || n.cut[[2]uint64{from, to}] || n.ctx.Err() != nil
}

// enqueueLocked queues m for to (dropping it if the link is down now).
func (n *Network) enqueueLocked(to uint64, m *pb.Message, reorder bool) {
	p := n.peers[to]
	if n.blockedLocked(m.GetFrom(), to) {
		n.stats.Dropped++
		return
	}
	if reorder && len(p.queue) > 0 {
		i := n.rng.IntN(len(p.queue) + 1)
		p.queue = append(p.queue, nil)
		copy(p.queue[i+1:], p.queue[i:])
		p.queue[i] = m
		n.stats.Reordered++
	} else {
		p.queue = append(p.queue, m)
	}
	n.pending.Add(1)
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

func (n *Network) deliver(p *peer) {
	defer n.wg.Done()
	for {
		select {
		case <-p.wake:
		case <-n.ctx.Done():
			return
		}
		for {
			n.mu.Lock()
			if n.ctx.Err() != nil {
				n.mu.Unlock()
				return
			}
			if len(p.queue) == 0 {
				n.mu.Unlock()
				break
			}
			m := p.queue[0]
			p.queue[0] = nil
			p.queue = p.queue[1:]
			ep, blocked := p.ep, n.blockedLocked(m.GetFrom(), p.id)
			n.mu.Unlock()
			if !blocked {
				_ = ep.Step(n.ctx, m) // a stopped node just loses the message
			}
			n.pending.Add(-1)
		}
	}
}

// Transport is one node's sending side.
type Transport struct {
	n    *Network
	from uint64
}

// Send queues msgs, applying the network's faults. Never blocks.
func (t *Transport) Send(msgs []*pb.Message) {
	n := t.n
	cl := make([]*pb.Message, len(msgs))
	for i, m := range msgs {
		cl[i] = clone(m) // outside the lock: marshalling is the costly part
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	f := n.faults
	for i, m := range cl {
		to := m.GetTo()
		n.stats.Sent++
		if n.blockedLocked(t.from, to) || n.rng.Float64() < f.Drop {
			n.stats.Dropped++
			continue
		}
		copies := 1
		if n.rng.Float64() < f.Duplicate {
			copies = 2
			n.stats.Duplicated++
		}
		for c := range copies {
			if c > 0 {
				m = clone(msgs[i]) // the first copy may already be stepping
			}
			if n.rng.Float64() < f.Delay {
				n.stats.Delayed++
				n.delayed = append(n.delayed, delayed{release: n.now + 1 + n.rng.IntN(f.MaxDelay), to: to, m: m})
				continue
			}
			n.enqueueLocked(to, m, n.rng.Float64() < f.Reorder)
		}
	}
}

// SendSnapshot streams body to the peer's ApplySnapshot and returns its
// result, or ErrUnreachable.
func (t *Transport) SendSnapshot(ctx context.Context, to uint64, msg *pb.Message, body io.Reader) error {
	n := t.n
	n.mu.Lock()
	n.stats.Snapshots++
	var ep Endpoint
	if !n.blockedLocked(t.from, to) && n.rng.Float64() >= n.faults.Drop {
		ep = n.peers[to].ep
	}
	if ep == nil {
		n.stats.SnapshotsFailed++
	}
	n.mu.Unlock()
	if ep == nil {
		return ErrUnreachable
	}
	err := ep.ApplySnapshot(ctx, clone(msg), body)
	if err != nil {
		n.mu.Lock()
		n.stats.SnapshotsFailed++
		n.mu.Unlock()
	}
	return err
}
