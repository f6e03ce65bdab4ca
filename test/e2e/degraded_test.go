package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// statusView is the part of GET /_cairn/status these tests read.
type statusView struct {
	UnderReplicated int64 `json:"under_replicated"`
	Nodes           []struct {
		URL      string `json:"url"`
		Liveness string `json:"liveness"`
		Report   *struct {
			Disk struct {
				Blobs int64 `json:"blobs"`
			} `json:"disk"`
		} `json:"report"`
	} `json:"nodes"`
}

// clusterStatus returns s's GET /_cairn/status, or false.
func clusterStatus(s *server) (statusView, bool) {
	var v statusView
	status, body, _, err := timed("GET", s.url+"/_cairn/status", nil, auth()...)
	return v, err == nil && status == 200 && json.Unmarshal(body, &v) == nil
}

// blobsOn returns the blob count that s's status reports for the member
// at url (-1 when unknown).
func blobsOn(s *server, url string) int64 {
	v, ok := clusterStatus(s)
	if !ok {
		return -1
	}
	for _, n := range v.Nodes {
		if n.URL == url && n.Report != nil {
			return n.Report.Disk.Blobs
		}
	}
	return -1
}

// TestLoneNodeThenJoins: the first node of a future cluster takes writes
// into a default bucket (R=3 capped at its one data node); after two
// nodes join, every blob has three copies. Then, with one node down, a
// write is acknowledged under-replicated (it says so, and is counted), a
// strict bucket refuses with the copies reachable and required, and the
// returning node gets the copy and the count returns to 0.
func TestLoneNodeThenJoins(t *testing.T) {
	base := t.TempDir()
	d1 := startCairn(t, "server", filepath.Join(base, "d1"), freeAddr(t))
	waitFor(t, 20*time.Second, "bucket creation", func() bool {
		status, _, _, _ := timed("POST", d1.url+"/_cairn/buckets", []byte(`{"name":"web"}`), auth()...)
		return status == 201 || status == 409
	}, d1)
	files := map[string][]byte{}
	for i := range 20 {
		p := fmt.Sprintf("lone/f%02d.txt", i)
		files[p] = []byte(strings.Repeat(fmt.Sprintf("written on a lone node %d\n", i), 10+i))
		status, _, hdr := putHdr(t, d1.url+"/web/"+p, files[p])
		if status != 201 {
			t.Fatalf("PUT %s on a lone cluster node: %d\n%s", p, status, d1.logs)
		}
		if hdr.Get("X-Cairn-Copies-Wanted") != "" {
			t.Fatalf("PUT %s on a lone node says under-replicated: %s of %s", p, hdr.Get("X-Cairn-Copies"), hdr.Get("X-Cairn-Copies-Wanted"))
		}
	}
	g2, g3 := freeAddr(t), freeAddr(t) // gossip addresses kept across a restart
	d2 := startCairn(t, "server", filepath.Join(base, "d2"), freeAddr(t), "--join", d1.url, "--gossip-listen", g2)
	d3 := startCairn(t, "server", filepath.Join(base, "d3"), freeAddr(t), "--join", d1.url, "--gossip-listen", g3)
	all := []*server{d1, d2, d3}
	waitMembers(t, d1, 3, all...)
	waitFor(t, 60*time.Second, "three copies of every blob", func() bool {
		for _, s := range all {
			if blobsOn(d1, s.url) < int64(len(files)) {
				return false
			}
		}
		return true
	}, all...)
	for _, s := range all {
		for p, data := range files {
			getOK(t, s.url+"/web/"+p, data, all...)
		}
	}

	// A strict bucket that needs all three copies.
	if out, err := d1.cli("bucket", "create", "strict", "--write-quorum", "3", "--strict"); err != nil || !strings.Contains(out, "strict=true") {
		t.Fatalf("bucket create --strict: %v\n%s", err, out)
	}
	// Kill a node that does not lead (a leader's death would only add an
	// election to what this part tests).
	victim, via, other, gv := d3, d1, d2, g3
	if v, ok := nodesView(t, d1); ok {
		for _, n := range v.Nodes {
			if n.Leader && n.URL == d3.url {
				victim, other, gv = d2, d3, g2
			}
		}
	}
	victim.kill()
	// The default bucket takes the write with two copies and says so; the
	// strict one refuses.
	data := []byte("written while a node is down")
	status, body, hdr := putHdr(t, via.url+"/web/down.txt", data)
	if status != 201 || hdr.Get("X-Cairn-Copies") != "2" || hdr.Get("X-Cairn-Copies-Wanted") != "3" {
		t.Fatalf("PUT with a node down: %d, copies %q of %q: %s", status, hdr.Get("X-Cairn-Copies"), hdr.Get("X-Cairn-Copies-Wanted"), body)
	}
	status, body, _ = putHdr(t, via.url+"/strict/x.txt", data)
	if status != 503 || !strings.Contains(string(body), "2 copies reachable, 3 required") {
		t.Fatalf("strict PUT with a node down: %d %s; want 503 naming 2 reachable of 3 required", status, body)
	}
	// The other node reports it once it has applied the write (ms).
	waitFor(t, 5*time.Second, "one under-replicated blob in the status through the other node", func() bool {
		v, ok := clusterStatus(other)
		return ok && v.UnderReplicated == 1
	}, via, other)
	var out string
	waitFor(t, 10*time.Second, "cairn status showing the dead node", func() bool {
		var err error
		out, err = other.cli("status")
		return err == nil && strings.Contains(out, "under-replicated blobs: 1") && strings.Contains(out, " dead ")
	}, via, other)
	t.Logf("cairn status:\n%s", out)
	rows, list, err := nodeList(t, other)
	if r, ok := rowByURL(rows, victim.url); err != nil || !ok || r.liveness != "dead" || r.state != "active" {
		t.Fatalf("cairn node list with a node killed: the killed node is not dead (state active):\n%s", list)
	}
	// The victim returns: it gets the copy, and the count returns to 0.
	returned := time.Now()
	victim = startCairn(t, "server", victim.dir, victim.addr, "--join", d1.url, "--gossip-listen", gv)
	waitFor(t, 15*time.Second, "the returning node's copy and no under-replicated blob", func() bool {
		v, ok := clusterStatus(via)
		return ok && v.UnderReplicated == 0 && blobsOn(via, victim.url) >= int64(len(files))+1
	}, via, other, victim)
	t.Logf("repaired %v after the return", time.Since(returned).Round(time.Millisecond))
}

// putHdr PUTs data and returns the status, body and headers.
func putHdr(t *testing.T, url string, data []byte) (int, []byte, http.Header) {
	t.Helper()
	req, err := http.NewRequest("PUT", url, strings.NewReader(string(data)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+adminKey)
	resp, err := httpc.Do(req)
	if err != nil {
		t.Fatalf("PUT %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, body, resp.Header
}

// TestTwoDataNodesAndWitnessUnderLoad: two data nodes and a witness, a
// default bucket (R=3 capped at 2, W=2). Under a load of writes and reads
// through the live nodes, SIGKILL one data node, then (once it is back
// and repaired) the other: writes resume within 3 s, no read fails, and
// the returning node holds a copy of everything written while it was
// down within 15 s of its return.
func TestTwoDataNodesAndWitnessUnderLoad(t *testing.T) {
	base := t.TempDir()
	// Each node keeps its gossip address across restarts, as with the
	// default (the public port + 100): a node back at a new gossip address
	// within DeadNodeReclaimTime of its death is refused by memberlist
	// until a later push-pull, which is not what this test is about.
	gossip := map[string]string{}
	for _, n := range []string{"d1", "d2"} {
		gossip[n] = freeAddr(t)
	}
	d1 := startCairn(t, "server", filepath.Join(base, "d1"), freeAddr(t), "--gossip-listen", gossip["d1"])
	d2 := startCairn(t, "server", filepath.Join(base, "d2"), freeAddr(t), "--join", d1.url, "--gossip-listen", gossip["d2"])
	w := startCairn(t, "witness", filepath.Join(base, "w"), freeAddr(t), "--join", d1.url)
	nodes := []*server{d1, d2, w}
	waitMembers(t, d1, 3, nodes...)
	waitFor(t, 20*time.Second, "bucket creation", func() bool {
		status, _, _, _ := timed("POST", d1.url+"/_cairn/buckets", []byte(`{"name":"web","public":true}`), auth()...)
		return status == 201 || status == 409
	}, nodes...)
	stable := map[string][]byte{}
	var stableKeys []string
	for i := range 30 {
		p := fmt.Sprintf("stable/%02d.html", i)
		stable[p] = []byte(strings.Repeat(fmt.Sprintf("stable page %d\n", i), 20+i))
		stableKeys = append(stableKeys, p)
		putOK(t, nodes[i%3].url+"/web/"+p, stable[p], nodes...)
	}

	// The load: one writer of new files and two readers of stable files,
	// each request through a random live node.
	var (
		mu       sync.Mutex
		live     = map[*server]bool{d1: true, d2: true, w: true}
		inflight = map[*server]int{}      // requests under way, per node
		acked    = map[string]time.Time{} // path -> when its write started
		readFail []string
		stop     atomic.Bool
		wg       sync.WaitGroup
	)
	// pick returns a random live node for one request; done must be
	// called when the request is over. A node is killed only once no
	// request picked it before it was taken out of the live set.
	pick := func(rng *rand.Rand) (*server, func()) {
		mu.Lock()
		defer mu.Unlock()
		var ls []*server
		for s, up := range live {
			if up {
				ls = append(ls, s)
			}
		}
		slices.SortFunc(ls, func(a, b *server) int { return strings.Compare(a.addr, b.addr) })
		s := ls[rng.Intn(len(ls))]
		inflight[s]++
		return s, func() { mu.Lock(); inflight[s]--; mu.Unlock() }
	}
	idle := func(s *server) bool { mu.Lock(); defer mu.Unlock(); return inflight[s] == 0 }
	setLive := func(s *server, up bool) {
		mu.Lock()
		live[s] = up
		mu.Unlock()
	}
	deadline := time.Now().Add(3 * time.Minute) // the load stops by itself
	wg.Add(1)
	go func() {
		defer wg.Done()
		rng := rand.New(rand.NewSource(1))
		for i := 0; !stop.Load() && time.Now().Before(deadline); i++ {
			p := fmt.Sprintf("load/%05d.txt", i)
			start := time.Now()
			s, done := pick(rng)
			status, _, _, err := timed("PUT", s.url+"/web/"+p, []byte("load file "+p), auth()...)
			done()
			if err == nil && status == 201 {
				mu.Lock()
				acked[p] = start
				mu.Unlock()
			}
			time.Sleep(20 * time.Millisecond) // pacing of a bounded load, not a wait for a condition
		}
	}()
	for r := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(r + 2)))
			for !stop.Load() && time.Now().Before(deadline) {
				p := stableKeys[rng.Intn(len(stableKeys))]
				s, done := pick(rng)
				status, body, _, err := timed("GET", s.url+"/web/"+p, nil)
				done()
				if err != nil || status != 200 || string(body) != string(stable[p]) {
					mu.Lock()
					readFail = append(readFail, fmt.Sprintf("GET %s via %s: %d %v", p, s.addr, status, err))
					mu.Unlock()
				}
			}
		}()
	}
	defer func() { stop.Store(true); wg.Wait() }()
	ackedAfter := func(t0 time.Time) (int, time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		n, first := 0, time.Duration(-1)
		for _, at := range acked {
			if at.After(t0) {
				n++
				if d := at.Sub(t0); first < 0 || d < first {
					first = d
				}
			}
		}
		return n, first
	}
	countAcked := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(acked)
	}

	for round, victim := range []*server{d2, d1} {
		other := d1
		if victim == d1 {
			other = d2
		}
		waitFor(t, 20*time.Second, "writes flowing", func() bool { n, _ := ackedAfter(time.Now().Add(-time.Second)); return n > 0 }, nodes...)
		setLive(victim, false)
		waitFor(t, 10*time.Second, "no request under way to the victim", func() bool { return idle(victim) }, nodes...)
		killed := time.Now()
		victim.kill()
		waitFor(t, 3*time.Second, fmt.Sprintf("round %d: a write acknowledged after the kill of %s", round, victim.addr), func() bool {
			n, _ := ackedAfter(killed)
			return n > 0
		}, other, w)
		_, gap := ackedAfter(killed)
		t.Logf("round %d: killed %s; first write started after the kill was acknowledged %v after it", round, victim.addr, gap)
		if gap > 3*time.Second {
			t.Fatalf("round %d: writes resumed only %v after the kill", round, gap)
		}
		waitFor(t, 20*time.Second, "writes while the node is down", func() bool { n, _ := ackedAfter(killed); return n >= 50 }, other, w)
		if v, ok := clusterStatus(other); !ok || v.UnderReplicated == 0 {
			t.Fatalf("round %d: status through %s: %+v (ok %v); want under-replicated blobs", round, other.addr, v, ok)
		}
		// The victim returns on its data.
		args := []string{"--gossip-listen", gossip[filepath.Base(victim.dir)]}
		if victim == d2 {
			args = append(args, "--join", d1.url)
		}
		returned := time.Now()
		nv := startCairn(t, "server", victim.dir, victim.addr, args...)
		if victim == d1 {
			d1 = nv
		} else {
			d2 = nv
		}
		nodes = []*server{d1, d2, w}
		setLive(nv, true)
		want := int64(len(stable) + countAcked())
		waitFor(t, 15*time.Second, fmt.Sprintf("round %d: the returning node holds what was written while it was down", round), func() bool {
			v, ok := clusterStatus(other)
			return ok && v.UnderReplicated == 0 && blobsOn(other, nv.url) >= want
		}, d1, d2, w)
		t.Logf("round %d: %s repaired %v after its return (%d blobs)", round, nv.addr, time.Since(returned).Round(time.Millisecond), want)
		if testing.Verbose() && time.Since(returned) > 3*time.Second {
			for _, s := range []*server{d1, d2, w} {
				t.Logf("log of %s:\n%s", s.addr, s.logs)
			}
		}
		if testing.Verbose() {
			for _, l := range strings.Split(nv.logs.String(), "\n") {
				if strings.Contains(l, "repair") || strings.Contains(l, "leader") || strings.Contains(l, "member") {
					t.Log(l)
				}
			}
		}
	}
	stop.Store(true)
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(readFail) > 0 {
		t.Fatalf("%d reads failed, e.g. %v", len(readFail), readFail[:min(5, len(readFail))])
	}
	// Every acknowledged write reads back through every node.
	for p := range acked {
		for _, s := range nodes {
			getOK(t, s.url+"/web/"+p, []byte("load file "+p), nodes...)
		}
	}
}
