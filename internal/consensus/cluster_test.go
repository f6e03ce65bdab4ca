package consensus

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/raft/v3"

	"github.com/cairn-fs/cairn/internal/consensus/memnet"
	"github.com/cairn-fs/cairn/internal/kv"
	"github.com/cairn-fs/cairn/internal/meta"
)

// The in-process cluster used by the Raft tests: kv.NewMem per node, the
// memnet network, and manual ticks. Between ticks the harness waits until
// every node and the network are quiet (no message queued or being
// stepped, every tick handled), so a tick means what it means in
// production: time passing while nothing else happens.

type tnode struct {
	id        uint64
	db        kv.Store
	r         *Raft
	tick      chan time.Time
	ticksSent int64
	entries   atomic.Int64 // applied entries that carried commands
	snaps     atomic.Int64 // snapshots installed
	dupes     atomic.Int64 // create-only puts applied a second time
}

type cluster struct {
	t     testing.TB
	seed  uint64
	net   *memnet.Network
	nodes map[uint64]*tnode
	mod   func(*RaftConfig)
}

func testLogger() *slog.Logger {
	if os.Getenv("CAIRN_RAFT_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// newCluster starts nodes 1..n as the initial voters.
func newCluster(t testing.TB, seed uint64, n int, mod func(*RaftConfig)) *cluster {
	c := &cluster{t: t, seed: seed, net: memnet.New(seed), nodes: map[uint64]*tnode{}, mod: mod}
	var voters []uint64
	for i := 1; i <= n; i++ {
		voters = append(voters, uint64(i))
	}
	for _, id := range voters {
		c.start(id, voters)
	}
	t.Cleanup(c.close)
	return c
}

// start opens node id over its store (a new one the first time).
func (c *cluster) start(id uint64, initialVoters []uint64) *tnode {
	n := c.nodes[id]
	if n == nil {
		n = &tnode{id: id, db: kv.NewMem()}
		c.nodes[id] = n
	}
	n.tick = make(chan time.Time)
	n.ticksSent = 0
	cfg := DefaultRaftConfig()
	cfg.ID, cfg.KV, cfg.Transport, cfg.Ticker = id, n.db, c.net.Transport(id), n.tick
	cfg.InitialVoters = initialVoters
	cfg.Logger = testLogger()
	cfg.OnApply = func(_ uint64, cmds []meta.Command, res []meta.Result) {
		n.entries.Add(1)
		for i := range cmds {
			if cmds[i].IfNoneMatchAny && errors.Is(res[i].Err, meta.ErrPrecondition) {
				n.dupes.Add(1)
			}
		}
	}
	cfg.OnSnapshot = func(uint64) { n.snaps.Add(1) }
	if c.mod != nil {
		c.mod(&cfg)
	}
	r, err := NewRaft(cfg)
	if err != nil {
		c.t.Fatalf("seed %d: start node %d: %v", c.seed, id, err)
	}
	n.r = r
	c.net.Register(id, r)
	return n
}

func (c *cluster) stop(id uint64) {
	n := c.nodes[id]
	if n.r == nil {
		return
	}
	c.net.Unregister(id)
	n.r.Close()
	n.r = nil
}

func (c *cluster) close() {
	for id := range c.nodes {
		c.stop(id)
	}
	c.net.Close()
}

func (c *cluster) running() []*tnode {
	var out []*tnode
	for _, n := range c.nodes {
		if n.r != nil {
			out = append(out, n)
		}
	}
	slices.SortFunc(out, func(a, b *tnode) int { return int(a.id) - int(b.id) })
	return out
}

func (c *cluster) signature() (sig int64, quiet bool) {
	quiet = c.net.Pending() == 0
	for _, n := range c.running() {
		if n.stopped() {
			continue // a log stopped by an error counts nothing more
		}
		q, d, tk, sn := n.r.stepsQueued.Load(), n.r.stepsDone.Load(), n.r.ticksDone.Load(), n.r.snapsInflight.Load()
		sig += q + d + tk
		if q != d || tk != n.ticksSent || sn != 0 {
			quiet = false
		}
	}
	return sig + c.net.Stats().Sent, quiet && c.net.Pending() == 0
}

// settle waits (bounded) until nothing moves.
func (c *cluster) settle() {
	for range 20000 {
		s1, q := c.signature()
		if q {
			if s2, q2 := c.signature(); q2 && s1 == s2 {
				return
			}
		}
		runtime.Gosched()
	}
}

// tickAll ticks every running node whose loop has not stopped. A loop
// stops on its own when its log does (an entry it cannot apply); nodes do
// not all stop in the same tick, and a tick sent to a stopped loop would
// block the harness for good.
func (c *cluster) tickAll() {
	for _, n := range c.running() {
		select {
		case n.tick <- time.Time{}:
			n.ticksSent++
		case <-n.r.done:
		}
	}
	c.net.Tick()
}

// stopped reports whether n's loop has ended.
func (n *tnode) stopped() bool {
	select {
	case <-n.r.done:
		return true
	default:
		return false
	}
}

// untilFloor is the least real time until waits before it fails. Ticks
// alone are no measure on a loaded machine: settle gives up after a bounded
// number of yields, so 300 ticks could pass in 20 ms while the nodes'
// goroutines had not run (TestPromoteFirst failed that way under -race
// with two CPU hogs). The simulator has the same floor (sim.minRealWait).
const untilFloor = 10 * time.Second

// until ticks until cond holds, failing after maxTicks and at least
// untilFloor of real time; past maxTicks it ticks once a millisecond.
func (c *cluster) until(what string, maxTicks int, cond func() bool) {
	c.t.Helper()
	start := time.Now()
	ticks := 0
	for ; ticks < maxTicks || time.Since(start) < untilFloor; ticks++ {
		c.settle()
		if cond() {
			return
		}
		if ticks >= maxTicks {
			time.Sleep(time.Millisecond)
		}
		c.tickAll()
	}
	c.settle()
	if !cond() {
		c.t.Fatalf("seed %d: %s: not reached after %d ticks and %v", c.seed, what, ticks, time.Since(start).Round(time.Millisecond))
	}
}

// leader returns the node that leads in the highest term, waiting for one.
func (c *cluster) leader() *tnode {
	c.t.Helper()
	var l *tnode
	c.until("elect a leader", 300, func() bool {
		l = nil
		var term uint64
		for _, n := range c.running() {
			s := n.r.Status()
			if s.State == raft.StateLeader && s.Term >= term {
				l, term = n, s.Term
			}
		}
		return l != nil
	})
	return l
}

type propResult struct {
	res meta.Result
	err error
}

// goPropose proposes in the background; the channel gets the result.
func goPropose(ctx context.Context, n *tnode, cmd meta.Command) <-chan propResult {
	ch := make(chan propResult, 1)
	r := n.r
	go func() {
		res, err := r.Propose(ctx, cmd)
		ch <- propResult{res, err}
	}()
	return ch
}

// propose proposes through node id and ticks until it is answered.
func (c *cluster) propose(id uint64, cmd meta.Command) propResult {
	c.t.Helper()
	ch := goPropose(context.Background(), c.nodes[id], cmd)
	var out propResult
	c.until(fmt.Sprintf("propose through %d", id), 500, func() bool {
		select {
		case out = <-ch:
			return true
		default:
			return false
		}
	})
	return out
}

func (c *cluster) mustPropose(id uint64, cmd meta.Command) meta.Result {
	c.t.Helper()
	o := c.propose(id, cmd)
	if o.err != nil || o.res.Err != nil {
		c.t.Fatalf("seed %d: propose through %d: %v / %v", c.seed, id, o.err, o.res.Err)
	}
	return o.res
}

// wait runs f in the background and ticks until it returns.
func (c *cluster) wait(what string, maxTicks int, f func() error) {
	c.t.Helper()
	ch := make(chan error, 1)
	go func() { ch <- f() }()
	var err error
	c.until(what, maxTicks, func() bool {
		select {
		case err = <-ch:
			return true
		default:
			return false
		}
	})
	if err != nil {
		c.t.Fatalf("seed %d: %s: %v", c.seed, what, err)
	}
}

var bucketCmd = meta.Command{Op: meta.OpCreateBucket, Bucket: &meta.Bucket{Name: "bkt"}, TimeNs: 1}

// createFile is create-only: applying it twice fails the second time,
// which OnApply counts as a duplicate.
func createFile(name string) meta.Command {
	return meta.Command{Op: meta.OpPutFile, BucketName: "bkt", Path: name, TimeNs: 9, IfNoneMatchAny: true,
		File: &meta.Inode{Type: meta.TypeFile}}
}

func mkdirNamed(name string) meta.Command {
	return meta.Command{Op: meta.OpMkdir, BucketName: "bkt", Path: name, TimeNs: 7}
}

// dump returns the applied index and every namespace record of db, read
// from one snapshot.
func dump(db kv.Store) (uint64, []byte) {
	s := db.Snapshot()
	defer s.Close()
	idx, err := meta.NewReader(s).AppliedIndex()
	if err != nil {
		panic(err)
	}
	var buf []byte
	for _, rg := range namespaceRanges {
		s.Scan(rg[0], rg[1], func(k, v []byte) bool {
			buf = binary.AppendUvarint(buf, uint64(len(k)))
			buf = append(buf, k...)
			buf = binary.AppendUvarint(buf, uint64(len(v)))
			buf = append(buf, v...)
			return true
		})
	}
	return idx, buf
}

// converge ticks until every running node has applied the same index, then
// checks that their namespace key spaces are byte-identical.
func (c *cluster) converge() uint64 {
	c.t.Helper()
	var idx uint64
	c.until("all nodes applied the same index", 1000, func() bool {
		ns := c.running()
		idx = ns[0].r.AppliedIndex()
		for _, n := range ns {
			s := n.r.Status()
			if n.r.AppliedIndex() != idx || s.Commit != idx {
				return false
			}
		}
		return true
	})
	var ref []byte
	var refID uint64
	for _, n := range c.running() {
		i, d := dump(n.db)
		if i != idx {
			c.t.Fatalf("seed %d: node %d store at %d, log says %d", c.seed, n.id, i, idx)
		}
		if ref == nil {
			ref, refID = d, n.id
			continue
		}
		if !bytes.Equal(ref, d) {
			c.t.Fatalf("seed %d: namespace of node %d (%d bytes) differs from node %d (%d bytes) at index %d",
				c.seed, n.id, len(d), refID, len(ref), idx)
		}
	}
	return idx
}

func (c *cluster) checkHas(names []string) {
	c.t.Helper()
	for _, n := range c.running() {
		rd := meta.NewReader(n.db)
		for _, name := range names {
			if _, err := rd.Lookup("bkt", name); err != nil {
				c.t.Fatalf("seed %d: node %d: acknowledged %q missing: %v", c.seed, n.id, name, err)
			}
		}
	}
}

var _ Transport = (*memnet.Transport)(nil)
