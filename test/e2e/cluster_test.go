package e2e

import (
	"bytes"
	"fmt"
	"math/rand"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

const clusterSecret = "e2e-cluster-secret-0123456789abcdef"

func startClusterNode(t *testing.T, dir, addr, join string) *server {
	t.Helper()
	return startClusterNodeBin(t, cairnBin, dir, addr, join)
}

// startClusterNodeBin starts a cluster node with the given cairn binary
// (upgrade_test.go runs an older release's).
func startClusterNodeBin(t *testing.T, bin, dir, addr, join string) *server {
	t.Helper()
	s := &server{t: t, dir: dir, addr: addr, url: "http://" + addr, logs: &bytes.Buffer{}}
	args := []string{"server", "--data", dir, "--listen", addr, "--log-level", "info"}
	if join != "" {
		args = append(args, "--join", join)
	}
	s.cmd = exec.Command(bin, args...)
	s.cmd.Env = append(os.Environ(), "CAIRN_ADMIN_KEY="+adminKey, "CAIRN_CLUSTER_SECRET="+clusterSecret)
	s.cmd.Stdout, s.cmd.Stderr = s.logs, s.logs
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.stop() })
	waitHealthy(t, s, httpc, "node "+addr)
	return s
}

// waitHealthy waits until s answers 200 to GET /_cairn/health through c
// (what names it in the failure).
func waitHealthy(t *testing.T, s *server, c *http.Client, what string) {
	t.Helper()
	waitFor(t, 30*time.Second, what+" healthy", func() bool {
		resp, err := c.Get(s.url + "/_cairn/health")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	}, s)
}

// waitFor polls cond (the processes under test are not ours to signal)
// until it holds or the bound passes.
func waitFor(t *testing.T, bound time.Duration, what string, cond func() bool, logs ...*server) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for !cond() {
		if time.Now().After(deadline) {
			for _, s := range logs {
				t.Logf("log of %s:\n%s", s.addr, s.logs)
			}
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestThreeNodeCluster starts a real 3-node cluster: a bucket and files
// written through one node are served by every node, a follower takes
// writes, and a killed node does not stop reads or writes through the
// others.
func TestThreeNodeCluster(t *testing.T) {
	base := t.TempDir()
	n1 := startClusterNode(t, filepath.Join(base, "n1"), freeAddr(t), "")
	n2 := startClusterNode(t, filepath.Join(base, "n2"), freeAddr(t), n1.url)
	n3 := startClusterNode(t, filepath.Join(base, "n3"), freeAddr(t), n1.url)
	nodes := []*server{n1, n2, n3}

	// The bucket is created through node 1 once the cluster accepts writes.
	waitFor(t, 30*time.Second, "bucket creation", func() bool {
		resp, _ := do(t, "POST", n1.url+"/_cairn/buckets", []byte(`{"name":"web","public":true}`), auth()...)
		return resp.StatusCode == 201 || resp.StatusCode == 409
	}, nodes...)

	rng := rand.New(rand.NewSource(3))
	files := map[string][]byte{}
	for i := 0; i < 20; i++ {
		data := make([]byte, rng.Intn(200_000))
		if i == 0 {
			data = make([]byte, 9<<20) // several blobs
		}
		rng.Read(data)
		p := fmt.Sprintf("d%d/f%d.bin", i%3, i)
		files[p] = data
		via := nodes[i%3]
		var status int
		waitFor(t, 20*time.Second, "PUT "+p, func() bool {
			resp, _ := do(t, "PUT", via.url+"/web/"+p, data, auth()...)
			status = resp.StatusCode
			return status == 201 || status == 200
		}, nodes...)
	}
	// Every node serves every file (propagation is milliseconds; allow slack).
	for _, s := range nodes {
		for p, data := range files {
			waitFor(t, 10*time.Second, "GET "+p+" via "+s.addr, func() bool {
				resp, body := do(t, "GET", s.url+"/web/"+p, nil)
				return resp.StatusCode == 200 && bytes.Equal(body, data)
			}, nodes...)
		}
	}

	// cairn sync through node 2 goes in bulk uploads (tar archives): every
	// node serves every file of it.
	local := t.TempDir()
	synced := map[string][]byte{}
	for i := range 700 {
		rel := fmt.Sprintf("s%d/g%d/file%03d.txt", i%5, i%3, i)
		data := []byte(fmt.Sprintf("synced file %d %s", i, strings.Repeat("x", rng.Intn(3000))))
		if err := os.MkdirAll(filepath.Join(local, filepath.Dir(rel)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(local, rel), data, 0o644); err != nil {
			t.Fatal(err)
		}
		synced[rel] = data
	}
	if out, err := n2.cli("sync", local, "web/synced", "--no-progress"); err != nil {
		t.Fatalf("sync through node 2: %v\n%s", err, out)
	} else if up, _, _, failed := syncCounts(t, out); up != len(synced) || failed != 0 {
		t.Fatalf("sync through node 2: %s", out)
	}
	for _, s := range nodes {
		for rel, data := range synced {
			waitFor(t, 10*time.Second, "GET synced "+rel+" via "+s.addr, func() bool {
				resp, body := do(t, "GET", s.url+"/web/synced/"+rel, nil)
				return resp.StatusCode == 200 && bytes.Equal(body, data)
			}, nodes...)
		}
	}

	// Kill node 3 once all three vote (killing a voter while another is
	// still a learner would take the majority away): the others keep
	// serving every file and taking writes.
	waitVoters(t, n1, 3, nodes...)
	n3.cmd.Process.Signal(syscall.SIGKILL)
	n3.cmd.Wait()
	for _, s := range nodes[:2] {
		for p, data := range files {
			start := time.Now()
			resp, body := do(t, "GET", s.url+"/web/"+p, nil)
			if resp.StatusCode != 200 || !bytes.Equal(body, data) {
				t.Fatalf("after killing node 3, GET %s via %s: %d", p, s.addr, resp.StatusCode)
			}
			if el := time.Since(start); el > 2*time.Second {
				t.Fatalf("GET %s via %s took %v with a dead node", p, s.addr, el)
			}
		}
	}
	waitFor(t, 20*time.Second, "a write with one node dead", func() bool {
		resp, _ := do(t, "PUT", n2.url+"/web/after-kill.txt", []byte("still writing"), auth()...)
		return resp.StatusCode == 201 || resp.StatusCode == 200
	}, nodes...)
	resp, body := do(t, "GET", n1.url+"/web/after-kill.txt", nil)
	if resp.StatusCode != 200 || string(body) != "still writing" {
		waitFor(t, 5*time.Second, "write visible on node 1", func() bool {
			resp, body := do(t, "GET", n1.url+"/web/after-kill.txt", nil)
			return resp.StatusCode == 200 && string(body) == "still writing"
		}, nodes...)
	}
}
