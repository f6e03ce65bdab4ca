package e2e

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	mrand "math/rand"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// netnsTopo is a set of network namespaces, each with one veth link into a
// bridge of the root namespace: node i has 10.213.X.i/24, the bridge (the
// test's client side) 10.213.X.254.
type netnsTopo struct {
	t      *testing.T
	bridge string
	ns     []string
	ips    []string
}

// ipCmd runs ip(8) with args and returns its combined output.
func ipCmd(args ...string) (string, error) {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// setupNetns builds the topology for n nodes, or skips the test when this
// process cannot (not root, no ip(8), no network namespaces). Everything is
// removed in t.Cleanup, which runs after the cleanups of the processes
// started later (t.Cleanup is last in, first out).
func setupNetns(t *testing.T, n int) *netnsTopo {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("netns partition test: needs root (ip netns, veth, bridge); run as root, as CI does")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("netns partition test: ip(8) (iproute2) not installed")
	}
	var rb [4]byte
	rand.Read(rb[:])
	suffix := hex.EncodeToString(rb[:]) // unique names: parallel runs do not clash
	topo := &netnsTopo{t: t, bridge: "cbr" + suffix}
	// A /24 in 10.213.0.0/16 that this host does not use yet.
	subnet := -1
	for _, x := range mrand.Perm(250) {
		out, err := ipCmd("-o", "addr", "show", "to", fmt.Sprintf("10.213.%d.0/24", x+1))
		if err == nil && strings.TrimSpace(out) == "" {
			subnet = x + 1
			break
		}
	}
	if subnet < 0 {
		t.Skip("netns partition test: no free 10.213.X.0/24")
	}
	probeNS := "cairn" + suffix + "p"
	if out, err := ipCmd("netns", "add", probeNS); err != nil {
		t.Skipf("netns partition test: network namespaces do not work here: %v %s", err, out)
	}
	ipCmd("netns", "del", probeNS)

	t.Cleanup(topo.teardown)
	must := func(args ...string) {
		t.Helper()
		if _, err := ipCmd(args...); err != nil {
			t.Fatal(err)
		}
	}
	must("link", "add", topo.bridge, "type", "bridge")
	must("addr", "add", fmt.Sprintf("10.213.%d.254/24", subnet), "dev", topo.bridge)
	must("link", "set", topo.bridge, "up")
	for i := 1; i <= n; i++ {
		ns := fmt.Sprintf("cairn%sn%d", suffix, i)
		host := fmt.Sprintf("cv%sn%d", suffix, i)
		ip := fmt.Sprintf("10.213.%d.%d", subnet, i)
		must("netns", "add", ns)
		topo.ns = append(topo.ns, ns)
		topo.ips = append(topo.ips, ip)
		must("link", "add", host, "type", "veth", "peer", "name", "eth0", "netns", ns)
		must("link", "set", host, "master", topo.bridge, "up")
		must("-n", ns, "addr", "add", ip+"/24", "dev", "eth0")
		must("-n", ns, "link", "set", "eth0", "up")
		must("-n", ns, "link", "set", "lo", "up")
	}
	return topo
}

// teardown removes the namespaces (their veth ends go with them) and the
// bridge.
func (topo *netnsTopo) teardown() {
	for _, ns := range topo.ns {
		if _, err := ipCmd("netns", "del", ns); err != nil {
			topo.t.Logf("teardown: %v", err)
		}
	}
	if _, err := ipCmd("link", "del", topo.bridge); err != nil {
		topo.t.Logf("teardown: %v", err)
	}
}

// cut isolates node i from the other nodes with blackhole routes on both
// sides; the bridge address (the test's client) still reaches it.
func (topo *netnsTopo) cut(i int) {
	topo.t.Helper()
	for j := range topo.ns {
		if j == i {
			continue
		}
		for _, r := range [][2]int{{i, j}, {j, i}} {
			if _, err := ipCmd("-n", topo.ns[r[0]], "route", "add", "blackhole", topo.ips[r[1]]+"/32"); err != nil {
				topo.t.Fatal(err)
			}
		}
	}
}

// heal removes the routes cut added.
func (topo *netnsTopo) heal(i int) {
	topo.t.Helper()
	for j := range topo.ns {
		if j == i {
			continue
		}
		for _, r := range [][2]int{{i, j}, {j, i}} {
			if _, err := ipCmd("-n", topo.ns[r[0]], "route", "del", "blackhole", topo.ips[r[1]]+"/32"); err != nil {
				topo.t.Fatal(err)
			}
		}
	}
}

// cutWrite is the outcome of a write through a cut-off node.
type cutWrite struct {
	status int
	body   string
	err    error
	took   time.Duration
	ret    time.Time
}

// TestNetnsPartition: three nodes, each in its own network namespace with
// its own address, under a mixed load from the root namespace. Twice (a
// follower, then the leader) one node is cut off from the other nodes
// (blackhole routes; the test still reaches it): the majority keeps writing
// (writes resume within 3 s), the cut-off node keeps serving plain reads of
// existing files (200, the old content, under 1 s each), a write through it
// is not acknowledged while it is cut off, and after healing it converges
// (serves the latest acknowledged write within 10 s). At the end every
// acknowledged write is readable through every node and the history is
// linearizable.
func TestNetnsPartition(t *testing.T) {
	topo := setupNetns(t, 3)
	base := t.TempDir()
	c := &fcluster{t: t}
	for i, ip := range topo.ips {
		c.nodes = append(c.nodes, &fnode{name: fmt.Sprintf("n%d", i+1), dir: filepath.Join(base, fmt.Sprintf("n%d", i+1)),
			addr: ip + ":7070", gossip: ip + ":7170", netns: topo.ns[i], voters: 3})
	}
	stable, l := c.startUnderLoad(3, 18, 12)
	defer l.cancel()

	slow := &http.Client{Timeout: 20 * time.Second}
	for _, round := range []string{"follower", "leader"} {
		leader := c.leader(10 * time.Second)
		victim := leader
		if round == "follower" {
			for _, n := range c.nodes {
				if n != leader {
					victim = n
				}
			}
		}
		idx := -1
		for i, n := range c.nodes {
			if n == victim {
				idx = i
			}
		}
		victim.state.Store(nodeCut)
		cutAt := time.Now()
		topo.cut(idx)
		what := fmt.Sprintf("%s %s cut off", round, victim.name)

		// A write through the cut-off node, given 20 s.
		done := make(chan cutWrite, 1)
		go func() {
			p := "probe/through-cut-" + victim.name + "-" + round
			req, _ := http.NewRequest("PUT", victim.url()+"/"+p, strings.NewReader(p))
			req.Header.Set("Authorization", "Bearer "+adminKey)
			start := time.Now()
			resp, err := slow.Do(req)
			w := cutWrite{err: err, took: time.Since(start), ret: time.Now()}
			if err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				w.status, w.body = resp.StatusCode, strings.TrimSpace(string(b))
			}
			done <- w
		}()

		gap := l.waitWrites(what, cutAt, 3*time.Second)
		for time.Since(cutAt) < 6*time.Second {
			time.Sleep(100 * time.Millisecond)
		}
		// The cut-off node serves every existing file, old content, fast.
		for p, data := range stable {
			status, body, d, err := timed("GET", victim.url()+"/"+p, nil)
			if status != 200 || !bytes.Equal(body, data) || d >= time.Second {
				c.failf("%s: GET %s through it: %d (%v) in %v, want 200 with the old content under 1 s", what, p, status, err, d)
			}
		}
		p99, nreads := l.readP99(cutAt, time.Now(), []*fnode{victim})
		if fails := l.readFailures(cutAt, time.Now()); len(fails) > 0 {
			c.failf("%s: %d plain reads of existing files failed, first: %s", what, len(fails), fails[0])
		}
		healAt := time.Now()
		topo.heal(idx)
		victim.state.Store(nodeLive)
		l.rec.fault("cut off "+victim.name, cutAt, healAt)
		t.Logf("%s from %.3fs to %.3fs (history time)", what, time.Duration(l.rec.at(cutAt)).Seconds(), time.Duration(l.rec.at(healAt)).Seconds())
		converged := l.caughtUp(victim, 10*time.Second)
		var w cutWrite
		select {
		case w = <-done:
		case <-time.After(25 * time.Second):
			c.failf("%s: the write through it did not end", what)
		}
		t.Logf("%s: writes resumed after %v; %d plain reads through it, p99 %v; a write through it: status %d %.200s, err %v after %v (%s the heal)",
			what, gap.Round(time.Millisecond), nreads, p99.Round(time.Millisecond), w.status, w.body, w.err, w.took.Round(time.Millisecond),
			map[bool]string{true: "before", false: "after"}[w.ret.Before(healAt)])
		if (w.status == 200 || w.status == 201) && w.ret.Before(healAt) {
			c.failf("%s: a write through the cut-off node was acknowledged while it was cut off", what)
		}
		t.Logf("%s: converged %v after the heal", what, converged.Round(time.Millisecond))
		time.Sleep(2 * time.Second)
	}
	l.finalChecks(10 * time.Second)
}
