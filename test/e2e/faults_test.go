package e2e

// Fault tests on real processes: a mixed read/write load from several
// clients through several nodes while nodes are SIGKILLed, SIGSTOPped or
// (netns_test.go) cut off the network, with the bounds of issue 3 and a
// porcupine check of the recorded history (history_test.go).

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// Node states, as the load generator sees them.
const (
	nodeLive    int32 = iota
	nodeDead          // SIGKILLed: not used
	nodeStopped       // SIGSTOPped: not used, its answers do not count
	nodeCut           // cut off the network: used for reads
)

// fnode is one node of a fault test; srv changes on restart.
type fnode struct {
	name, dir, addr, gossip, netns string
	voters                         int
	state                          atomic.Int32
	mu                             sync.Mutex
	srv                            *server
}

func (n *fnode) url() string { return "http://" + n.addr }

func (n *fnode) server() *server {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.srv
}

// launchFault starts (or restarts) the node's process, inside its network
// namespace when it has one, and waits until it is healthy. join is the
// URL of a member ("" for the first node).
func launchFault(t *testing.T, n *fnode, join string) {
	t.Helper()
	s := &server{t: t, dir: n.dir, addr: n.addr, url: n.url(), logs: &bytes.Buffer{}}
	args := []string{"server", "--data", n.dir, "--listen", n.addr, "--gossip-listen", n.gossip,
		"--log-level", "info", "--voters", fmt.Sprint(n.voters)}
	if join != "" {
		args = append(args, "--join", join)
	}
	if n.netns != "" {
		s.cmd = exec.Command("ip", append([]string{"netns", "exec", n.netns, cairnBin}, args...)...)
	} else {
		s.cmd = exec.Command(cairnBin, args...)
	}
	s.cmd.Env = append(os.Environ(), "CAIRN_ADMIN_KEY="+adminKey, "CAIRN_CLUSTER_SECRET="+clusterSecret)
	s.cmd.Stdout, s.cmd.Stderr = s.logs, s.logs
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// ip netns exec execs the command: the PID is cairn's, so signals reach it.
	t.Cleanup(func() {
		if s.cmd.ProcessState == nil {
			s.cmd.Process.Signal(syscall.SIGCONT)
		}
		s.stop()
	})
	n.mu.Lock()
	n.srv = s
	n.mu.Unlock()
	waitFor(t, 30*time.Second, n.name+" healthy", func() bool {
		status, _, _, _ := timed("GET", n.url()+"/_cairn/health", nil)
		return status == 200
	}, s)
	n.state.Store(nodeLive)
}

// fcluster is the set of nodes of a fault test.
type fcluster struct {
	t     *testing.T
	nodes []*fnode
}

func (c *fcluster) servers() []*server {
	var out []*server
	for _, n := range c.nodes {
		out = append(out, n.server())
	}
	return out
}

// failf saves every node's log to a file that outlives the test, then fails.
func (c *fcluster) failf(format string, args ...any) {
	c.t.Helper()
	c.saveLogs()
	c.t.Fatalf(format, args...)
}

func (c *fcluster) saveLogs() {
	c.t.Helper()
	dir, err := os.MkdirTemp("", "cairn-fault-logs-")
	if err != nil {
		return
	}
	for _, n := range c.nodes {
		if s := n.server(); s != nil {
			os.WriteFile(filepath.Join(dir, n.name+".log"), s.logs.Bytes(), 0o644)
		}
	}
	c.t.Logf("node logs saved in %s", dir)
}

// with returns the nodes in one of the given states.
func (c *fcluster) with(states ...int32) []*fnode {
	var out []*fnode
	for _, n := range c.nodes {
		if slices.Contains(states, n.state.Load()) {
			out = append(out, n)
		}
	}
	return out
}

type faultView struct {
	Self, Leader string
	Term         uint64
	Applied      uint64 `json:"applied_index"`
	Commit       uint64 `json:"commit_index"`
	Nodes        []struct{ ID, URL, Role string }
}

func faultViewOf(n *fnode) (faultView, error) {
	var v faultView
	status, body, _, err := timed("GET", n.url()+"/_cairn/nodes", nil, auth()...)
	if err != nil || status != 200 {
		return v, fmt.Errorf("GET /_cairn/nodes via %s: %d %v", n.name, status, err)
	}
	return v, json.Unmarshal(body, &v)
}

// leader returns the node that the live nodes agree leads, waiting up to
// bound for an agreement.
func (c *fcluster) leader(bound time.Duration) *fnode {
	c.t.Helper()
	var leader *fnode
	waitFor(c.t, bound, "a leader all live nodes agree on", func() bool {
		leader = nil
		for _, n := range c.with(nodeLive) {
			v, err := faultViewOf(n)
			if err != nil || v.Leader == "0" || v.Leader == "" {
				return false
			}
			var l *fnode
			for _, m := range v.Nodes {
				if m.ID == v.Leader {
					for _, cand := range c.nodes {
						if strings.TrimSuffix(m.URL, "/") == cand.url() {
							l = cand
						}
					}
				}
			}
			if l == nil || (leader != nil && l != leader) {
				return false
			}
			leader = l
		}
		return leader != nil && leader.state.Load() == nodeLive
	}, c.servers()...)
	return leader
}

// createBuckets creates the buckets of a fault test through n.
func (c *fcluster) createBuckets(n *fnode) {
	c.t.Helper()
	for _, b := range []string{`{"name":"stable","public":true}`, `{"name":"hist","public":true,"replicas":3,"write_quorum":2}`,
		`{"name":"probe","public":true,"replicas":3,"write_quorum":2}`} {
		waitFor(c.t, 30*time.Second, "bucket "+b, func() bool {
			status, _, _, _ := timed("POST", n.url()+"/_cairn/buckets", []byte(b), auth()...)
			return status == 201 || status == 409
		}, c.servers()...)
	}
}

// writeStable writes the files the plain reads check ("existing files") and
// waits until every node serves them.
func (c *fcluster) writeStable(n int) map[string][]byte {
	c.t.Helper()
	rng := rand.New(rand.NewSource(7))
	files := map[string][]byte{}
	for i := 0; i < n; i++ {
		p := fmt.Sprintf("stable/d%d/f%02d", i%4, i)
		data := make([]byte, 1+rng.Intn(120_000))
		rng.Read(data)
		files[p] = data
		via := c.nodes[i%len(c.nodes)]
		waitFor(c.t, 20*time.Second, "PUT "+p, func() bool {
			status, _, _, _ := timed("PUT", via.url()+"/"+p, data, auth()...)
			return status == 201 || status == 200
		}, c.servers()...)
	}
	for _, node := range c.nodes {
		for p, data := range files {
			waitFor(c.t, 10*time.Second, "GET "+p+" via "+node.name, func() bool {
				status, body, _, _ := timed("GET", node.url()+"/"+p, nil)
				return status == 200 && bytes.Equal(body, data)
			}, c.servers()...)
		}
	}
	return files
}

// readSample is one plain read of a stable file.
type readSample struct {
	node      *fnode
	call, ret time.Time
	ok        bool
	err       string
}

// probeWrite is one write of a unique path: the write gap is measured on them,
// and every acknowledged one must survive.
type probeWrite struct {
	path      string
	node      *fnode
	call, ret time.Time
	acked     bool
}

// faultLoad is the mixed read/write load of a fault test.
type faultLoad struct {
	c      *fcluster
	rec    *histRecorder
	stable map[string][]byte
	keys   []string
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	reads  []readSample
	probes []probeWrite
	seq    int
}

// faultProbec bounds a probe write; longer than a leader election.
var faultProbec = &http.Client{Timeout: 8 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 32}}

// faultReadc bounds a plain read of a stable file.
var faultReadc = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 32}}

// startFaultLoad starts workers clients, each running a random mix of plain
// reads of stable files, consistent reads, puts and deletes of nkeys
// history keys, and plain reads of history keys, through random usable
// nodes; one reader of existing files per node; and a prober that starts a
// write of a new path every 100 ms through the live nodes in turn.
func startFaultLoad(c *fcluster, stable map[string][]byte, workers, nkeys int) *faultLoad {
	l := &faultLoad{c: c, rec: newHistRecorder("hist", 6*time.Second), stable: stable}
	for i := 0; i < nkeys; i++ {
		l.keys = append(l.keys, fmt.Sprintf("k%02d", i))
	}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	var stableKeys []string
	for p := range stable {
		stableKeys = append(stableKeys, p)
	}
	slices.Sort(stableKeys)
	for w := 0; w < workers; w++ {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			rng := rand.New(rand.NewSource(int64(w)))
			client := l.rec.newClient()
			for i := 0; l.ctx.Err() == nil; i++ {
				nodes := c.with(nodeLive, nodeCut)
				if len(nodes) == 0 {
					time.Sleep(50 * time.Millisecond)
					continue
				}
				n := nodes[rng.Intn(len(nodes))]
				key := l.keys[rng.Intn(len(l.keys))]
				r := rng.Intn(100)
				if r >= 30 && n.state.Load() == nodeCut && rng.Intn(4) > 0 {
					// Most history operations through a cut-off node
					// wait for their timeout: send only a quarter of them
					// there, so the majority stays loaded.
					if live := c.with(nodeLive); len(live) > 0 {
						n = live[rng.Intn(len(live))]
					}
				}
				switch {
				case r < 30:
					l.readStable(n, stableKeys[rng.Intn(len(stableKeys))])
				case r < 55:
					l.rec.do(l.ctx, client, n.url(), histInput{Op: "get", Key: key})
				case r < 85:
					tag := fmt.Sprintf("w%d-%d", w, i)
					if out := l.rec.do(l.ctx, client, n.url(), histInput{Op: "put", Key: key, Value: tag}); out.Unknown {
						client = l.rec.newClient()
					}
				case r < 93:
					if out := l.rec.do(l.ctx, client, n.url(), histInput{Op: "delete", Key: key}); out.Unknown {
						client = l.rec.newClient()
					}
				default:
					l.rec.plainGet(l.ctx, n.url(), key)
				}
				time.Sleep(time.Duration(5+rng.Intn(20)) * time.Millisecond)
			}
		}()
	}
	// One reader of existing files per node, so that every node's read
	// latency is sampled all the time.
	for i, n := range c.nodes {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			rng := rand.New(rand.NewSource(int64(1000 + i)))
			for l.ctx.Err() == nil {
				if st := n.state.Load(); st == nodeLive || st == nodeCut {
					l.readStable(n, stableKeys[rng.Intn(len(stableKeys))])
				}
				time.Sleep(time.Duration(10+rng.Intn(20)) * time.Millisecond)
			}
		}()
	}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-l.ctx.Done():
				return
			case <-tick.C:
			}
			nodes := c.with(nodeLive)
			if len(nodes) == 0 {
				continue
			}
			l.wg.Add(1)
			go func() {
				defer l.wg.Done()
				l.probe(nodes[i%len(nodes)])
			}()
		}
	}()
	return l
}

func (l *faultLoad) readStable(n *fnode, p string) {
	s := readSample{node: n, call: time.Now()}
	req, _ := http.NewRequestWithContext(l.ctx, "GET", n.url()+"/"+p, nil)
	resp, err := faultReadc.Do(req)
	if err == nil {
		var body []byte
		body, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			l.rec.truncation(resp.StatusCode, fmt.Errorf("GET %s via %s: status %d, body cut: %w", p, n.name, resp.StatusCode, err))
		}
		if err == nil && (resp.StatusCode != 200 || !bytes.Equal(body, l.stable[p])) {
			err = fmt.Errorf("status %d, %d bytes (want 200, %d bytes)", resp.StatusCode, len(body), len(l.stable[p]))
		}
	}
	s.ret = time.Now()
	if l.ctx.Err() != nil {
		return // cut by the end of the load
	}
	s.ok = err == nil
	if err != nil {
		s.err = fmt.Sprintf("GET %s via %s: %v", p, n.name, err)
	}
	// A failure counts only if the node was usable when it was seen.
	if !s.ok && n.state.Load() != nodeLive && n.state.Load() != nodeCut {
		return
	}
	l.mu.Lock()
	l.reads = append(l.reads, s)
	l.mu.Unlock()
}

func (l *faultLoad) probe(n *fnode) {
	l.mu.Lock()
	l.seq++
	p := probeWrite{path: fmt.Sprintf("probe/p%05d", l.seq), node: n, call: time.Now()}
	l.mu.Unlock()
	req, _ := http.NewRequestWithContext(l.ctx, "PUT", n.url()+"/"+p.path, strings.NewReader(p.path))
	req.Header.Set("Authorization", "Bearer "+adminKey)
	resp, err := faultProbec.Do(req)
	if err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		p.acked = resp.StatusCode == 201 || resp.StatusCode == 200
	}
	p.ret = time.Now()
	l.mu.Lock()
	l.probes = append(l.probes, p)
	l.mu.Unlock()
}

func (l *faultLoad) stop() {
	l.cancel()
	l.wg.Wait()
}

// writeGap is how long after at the first probe write started after at
// was acknowledged (false: none yet).
func (l *faultLoad) writeGap(at time.Time) (time.Duration, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var best time.Duration
	found := false
	for _, p := range l.probes {
		if p.acked && !p.call.Before(at) && (!found || p.ret.Sub(at) < best) {
			best, found = p.ret.Sub(at), true
		}
	}
	return best, found
}

// waitWrites waits until a write started after at is acknowledged and
// returns the gap; it fails the test past bound.
func (l *faultLoad) waitWrites(what string, at time.Time, bound time.Duration) time.Duration {
	l.c.t.Helper()
	deadline := at.Add(bound + 8*time.Second) // a probe started just before bound may take a while
	for {
		if gap, ok := l.writeGap(at); ok {
			l.c.t.Logf("%s: writes resumed %v after the fault", what, gap.Round(time.Millisecond))
			if gap >= bound {
				l.c.failf("%s: writes resumed %v after the fault, want < %v", what, gap.Round(time.Millisecond), bound)
			}
			return gap
		}
		if time.Now().After(deadline) {
			l.c.failf("%s: no write acknowledged since the fault %v ago", what, time.Since(at).Round(time.Millisecond))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// readFailures returns the failed plain reads of stable files (through
// usable nodes) that started in [from, to).
func (l *faultLoad) readFailures(from, to time.Time) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, s := range l.reads {
		if !s.ok && !s.call.Before(from) && s.call.Before(to) {
			out = append(out, s.err)
		}
	}
	return out
}

// readP99 is the 99th percentile latency of the plain reads of stable files
// through the nodes in via that started in [from, to), and their number.
func (l *faultLoad) readP99(from, to time.Time, via []*fnode) (time.Duration, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var d []time.Duration
	for _, s := range l.reads {
		if slices.Contains(via, s.node) && !s.call.Before(from) && s.call.Before(to) {
			d = append(d, s.ret.Sub(s.call))
		}
	}
	if len(d) == 0 {
		return 0, 0
	}
	slices.Sort(d)
	return d[(len(d)*99+99)/100-1], len(d)
}

// ackedProbes returns the acknowledged probe paths.
func (l *faultLoad) ackedProbes() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, p := range l.probes {
		if p.acked {
			out = append(out, p.path)
		}
	}
	return out
}

// lastAckedProbe returns the probe acknowledged last ("" if none).
func (l *faultLoad) lastAckedProbe() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var last probeWrite
	for _, p := range l.probes {
		if p.acked && p.ret.After(last.ret) {
			last = p
		}
	}
	return last.path
}

// caughtUp waits until n serves the last acknowledged probe with a plain
// read, and returns how long that took.
func (l *faultLoad) caughtUp(n *fnode, bound time.Duration) time.Duration {
	l.c.t.Helper()
	start := time.Now()
	p := l.lastAckedProbe()
	if p == "" {
		l.c.failf("no probe acknowledged")
	}
	waitFor(l.c.t, bound, n.name+" serving "+p, func() bool {
		status, body, _, err := timed("GET", n.url()+"/"+p, nil)
		if err != nil {
			l.rec.truncation(status, fmt.Errorf("GET %s via %s %v after it came back: status %d, body cut: %w",
				p, n.name, time.Since(start).Round(time.Millisecond), status, err))
		}
		return status == 200 && string(body) == p
	}, l.c.servers()...)
	return time.Since(start)
}

// finalChecks stops the load and checks, with every node usable: every
// acknowledged probe is readable through every node; every history key,
// read consistently through the leader (recorded), is served by every node
// with a plain read within converge; plain reads pass the weak check; the
// history is linearizable.
func (l *faultLoad) finalChecks(converge time.Duration) {
	c := l.c
	c.t.Helper()
	l.stop()
	if fails := l.readFailures(time.Time{}, time.Now().Add(time.Hour)); len(fails) > 0 {
		c.failf("%d plain reads of existing files failed through usable nodes, first: %s", len(fails), fails[0])
	}
	leader := c.leader(10 * time.Second)
	client := l.rec.newClient()
	final := map[string]histOutput{}
	for _, k := range l.keys {
		var out histOutput
		waitFor(c.t, 10*time.Second, "consistent read of "+k, func() bool {
			out = l.rec.do(context.Background(), client, leader.url(), histInput{Op: "get", Key: k})
			return !out.Unknown
		}, c.servers()...)
		final[k] = out
	}
	start := time.Now()
	for _, n := range c.nodes {
		for _, k := range l.keys {
			want := final[k]
			waitFor(c.t, converge, n.name+" converging on "+k, func() bool {
				status, body, _, _ := timed("GET", n.url()+"/hist/"+k, nil)
				if status != want.Status {
					return false
				}
				tag, err := parseHistBody(body)
				return status == 404 || (err == nil && tag == want.Value)
			}, c.servers()...)
		}
	}
	c.t.Logf("every node serves the final value of every history key (%v after the last consistent read)", time.Since(start).Round(time.Millisecond))
	acked := l.ackedProbes()
	for _, n := range c.nodes {
		for _, p := range acked {
			status, body, _, err := timed("GET", n.url()+"/"+p, nil)
			if status != 200 || string(body) != p {
				c.failf("acknowledged write %s lost: GET via %s: %d %q %v", p, n.name, status, body, err)
			}
		}
	}
	c.t.Logf("%d acknowledged probe writes readable through all %d nodes", len(acked), len(c.nodes))
	l.rec.checkPlainReads(c.t)
	l.rec.checkTruncations(c.t)
	l.rec.check(c.t)
	if c.t.Failed() || os.Getenv("CAIRN_E2E_KEEP_LOGS") != "" {
		c.saveLogs()
	}
}

// TestFiveNodeFaults: five voters on loopback under a mixed load. SIGKILL a
// follower, then the leader: plain reads of existing files never fail
// through the live nodes and writes resume within 3 s of each kill. The two
// come back. SIGSTOP the (new) leader: plain reads through the others keep a
// p99 under 1 s and writes resume within 3 s; SIGCONT and it catches up.
// Finally every acknowledged write is readable through every node, every
// node converges, and the history is linearizable.
func TestFiveNodeFaults(t *testing.T) {
	base := t.TempDir()
	c := &fcluster{t: t}
	for i := 1; i <= 5; i++ {
		c.nodes = append(c.nodes, &fnode{name: fmt.Sprintf("n%d", i), dir: filepath.Join(base, fmt.Sprintf("n%d", i)),
			addr: freeAddr(t), gossip: freeAddr(t), voters: 5})
	}
	_, l := c.startUnderLoad(5, 24, 16)
	defer l.cancel()

	// SIGKILL a follower.
	leader := c.leader(10 * time.Second)
	var follower *fnode
	for _, n := range c.nodes {
		if n != leader {
			follower = n
		}
	}
	follower.state.Store(nodeDead)
	killed1 := time.Now()
	follower.server().kill()
	l.rec.fault("SIGKILL follower "+follower.name, killed1, killed1)
	gapFollower := l.waitWrites("SIGKILL follower "+follower.name, killed1, 3*time.Second)
	time.Sleep(2 * time.Second)

	// SIGKILL the leader.
	leader = c.leader(10 * time.Second)
	leader.state.Store(nodeDead)
	killed2 := time.Now()
	leader.server().kill()
	l.rec.fault("SIGKILL leader "+leader.name, killed2, killed2)
	gapLeader := l.waitWrites("SIGKILL leader "+leader.name, killed2, 3*time.Second)
	time.Sleep(2 * time.Second)
	if fails := l.readFailures(killed1, time.Now()); len(fails) > 0 {
		c.failf("%d plain reads of existing files failed through live nodes after the kills, first: %s", len(fails), fails[0])
	}

	// Both come back and catch up.
	for _, n := range []*fnode{follower, leader} {
		launchFault(t, n, c.with(nodeLive)[0].url())
	}
	for _, n := range []*fnode{follower, leader} {
		t.Logf("restarted %s caught up in %v", n.name, l.caughtUp(n, 15*time.Second).Round(time.Millisecond))
	}
	time.Sleep(2 * time.Second) // gossip: both alive everywhere

	// SIGSTOP the leader.
	leader = c.leader(10 * time.Second)
	leader.state.Store(nodeStopped)
	stopped := time.Now()
	if err := leader.server().cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	gapStop := l.waitWrites("SIGSTOP leader "+leader.name, stopped, 3*time.Second)
	for time.Since(stopped) < 5*time.Second {
		time.Sleep(100 * time.Millisecond)
	}
	others := c.with(nodeLive)
	p99, nreads := l.readP99(stopped, time.Now(), others)
	t.Logf("SIGSTOP leader %s: %d plain reads through the others, p99 %v", leader.name, nreads, p99.Round(time.Millisecond))
	if fails := l.readFailures(stopped, time.Now()); len(fails) > 0 {
		c.failf("%d plain reads of existing files failed through the other nodes during SIGSTOP, first: %s", len(fails), fails[0])
	}
	if nreads < 20 || p99 >= time.Second {
		c.failf("SIGSTOP leader: p99 of %d reads through the others = %v, want < 1 s over at least 20 reads", nreads, p99)
	}
	conted := time.Now()
	l.rec.fault("SIGSTOP leader "+leader.name, stopped, conted)
	if err := leader.server().cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	leader.state.Store(nodeLive)
	t.Logf("SIGCONT %s: caught up in %v", leader.name, l.caughtUp(leader, 10*time.Second).Round(time.Millisecond))
	time.Sleep(2 * time.Second)

	l.finalChecks(10 * time.Second)
	t.Logf("write gaps: SIGKILL follower %v, SIGKILL leader %v, SIGSTOP leader %v; SIGSTOP read p99 %v",
		gapFollower.Round(time.Millisecond), gapLeader.Round(time.Millisecond), gapStop.Round(time.Millisecond), p99.Round(time.Millisecond))
}

// startUnderLoad launches the cluster's nodes (the first bootstraps, the
// others join it), creates the buckets, waits for voters, writes stable
// files that the load reads, and starts the load over keys history keys
// with six clients; it returns once the load has run for two seconds.
func (c *fcluster) startUnderLoad(voters, stable, keys int) (map[string][]byte, *faultLoad) {
	t := c.t
	for i, n := range c.nodes {
		join := ""
		if i > 0 {
			join = c.nodes[0].url()
		}
		launchFault(t, n, join)
	}
	c.createBuckets(c.nodes[0])
	waitVoters(t, c.nodes[0].server(), voters, c.servers()...)
	st := c.writeStable(stable)
	time.Sleep(time.Second) // gossip settles
	l := startFaultLoad(c, st, 6, keys)
	time.Sleep(2 * time.Second)
	return st, l
}
