package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// nodeRow is one line of `cairn node list`.
type nodeRow struct {
	id, url, zone, state, liveness, role string
	leader                               bool
}

// nodeList runs `cairn node list` against s and parses its table.
func nodeList(t *testing.T, s *server) ([]nodeRow, string, error) {
	t.Helper()
	out, err := s.cli("node", "list")
	if err != nil {
		return nil, out, err
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) == 0 || !strings.HasPrefix(lines[0], "ID") {
		return nil, out, fmt.Errorf("no table header")
	}
	var rows []nodeRow
	for _, ln := range lines[1:] {
		f := strings.Fields(ln)
		if len(f) < 6 || f[0][0] < '0' || f[0][0] > '9' {
			continue // a trailing note
		}
		rows = append(rows, nodeRow{id: f[0], url: f[1], zone: f[2], state: f[3], liveness: f[4], role: f[5],
			leader: len(f) > 6 && f[len(f)-1] == "*"})
	}
	return rows, out, nil
}

func rowByURL(rows []nodeRow, url string) (nodeRow, bool) {
	for _, r := range rows {
		if r.url == url {
			return r, true
		}
	}
	return nodeRow{}, false
}

// TestNodeCommands drives `cairn node list|drain|remove` against a real
// 3-node cluster: three voters and one leader after promotion; drain marks a
// node draining; removal (through another node) leaves two members, and
// writes and reads keep working through them.
func TestNodeCommands(t *testing.T) {
	base := t.TempDir()
	n1 := startClusterNode(t, filepath.Join(base, "n1"), freeAddr(t), "")
	n2 := startClusterNode(t, filepath.Join(base, "n2"), freeAddr(t), n1.url)
	n3 := startClusterNode(t, filepath.Join(base, "n3"), freeAddr(t), n1.url)
	nodes := []*server{n1, n2, n3}

	// Three members, three voters (the learners get promoted), one leader,
	// as every node sees it.
	var rows []nodeRow
	for _, s := range nodes {
		waitFor(t, 30*time.Second, "3 voters and a leader seen by "+s.addr, func() bool {
			var err error
			rows, _, err = nodeList(t, s)
			if err != nil || len(rows) != 3 {
				return false
			}
			leaders := 0
			for _, r := range rows {
				if r.role != "voter" || r.state != "active" || r.liveness != "alive" {
					return false
				}
				if r.leader {
					leaders++
				}
			}
			return leaders == 1
		}, nodes...)
	}
	for _, s := range nodes {
		if _, ok := rowByURL(rows, s.url); !ok {
			out, _ := s.cli("node", "list")
			t.Fatalf("node %s missing from the list:\n%s", s.url, out)
		}
	}
	r1, _ := rowByURL(rows, n1.url)
	r3, _ := rowByURL(rows, n3.url)

	waitFor(t, 30*time.Second, "bucket creation", func() bool {
		resp, _ := do(t, "POST", n1.url+"/_cairn/buckets", []byte(`{"name":"web","public":true}`), auth()...)
		return resp.StatusCode == 201 || resp.StatusCode == 409
	}, nodes...)
	put := func(via *server, p string, data []byte) {
		t.Helper()
		waitFor(t, 20*time.Second, "PUT "+p+" via "+via.addr, func() bool {
			resp, _ := do(t, "PUT", via.url+"/web/"+p, data, auth()...)
			return resp.StatusCode == 201 || resp.StatusCode == 200
		}, nodes...)
	}
	get := func(via *server, p string, data []byte) {
		t.Helper()
		waitFor(t, 10*time.Second, "GET "+p+" via "+via.addr, func() bool {
			resp, body := do(t, "GET", via.url+"/web/"+p, nil)
			return resp.StatusCode == 200 && bytes.Equal(body, data)
		}, nodes...)
	}
	put(n1, "before.txt", []byte("written with three active nodes"))

	// Drain node 3 (named by its URL); every node sees it draining, and
	// writes go on.
	out, err := n1.cli("node", "drain", n3.url)
	if err != nil || !strings.Contains(out, "draining") {
		t.Fatalf("cairn node drain: %v\n%s", err, out)
	}
	for _, s := range nodes {
		waitFor(t, 10*time.Second, "node 3 draining as seen by "+s.addr, func() bool {
			rows, _, err := nodeList(t, s)
			r, ok := rowByURL(rows, n3.url)
			return err == nil && ok && r.state == "draining" && r.role == "voter"
		}, nodes...)
	}
	put(n2, "while-draining.txt", []byte("written while node 3 drains"))
	get(n3, "while-draining.txt", []byte("written while node 3 drains"))

	// The node the command talks to is not removed without --force.
	if out, err := n1.cli("node", "remove", r1.id); err == nil || !strings.Contains(out, "409") {
		t.Fatalf("removing the node we talk to: %v\n%s", err, out)
	}
	// Nor is an unknown one.
	if out, err := n1.cli("node", "remove", "12345"); err == nil || !strings.Contains(out, "404") {
		t.Fatalf("removing an unknown node: %v\n%s", err, out)
	}

	// Remove node 3 through node 1: two members left, both voters.
	out, err = n1.cli("node", "remove", r3.id)
	if err != nil || !strings.Contains(out, "removed node "+r3.id) {
		t.Fatalf("cairn node remove: %v\n%s", err, out)
	}
	for _, s := range nodes[:2] {
		waitFor(t, 10*time.Second, "2 members as seen by "+s.addr, func() bool {
			rows, _, err := nodeList(t, s)
			if err != nil || len(rows) != 2 {
				return false
			}
			leaders := 0
			for _, r := range rows {
				if r.url == n3.url || r.role != "voter" {
					return false
				}
				if r.leader {
					leaders++
				}
			}
			return leaders == 1
		}, nodes...)
	}

	// Node 3 notices its removal and stops on its own, with an error, and
	// marks its data directory so it does not start again.
	expectRemovedExit(t, n3, 20*time.Second, "after its removal")
	restart := exec.Command(cairnBin, "server", "--data", n3.dir, "--listen", n3.addr)
	restart.Env = append(os.Environ(), "CAIRN_ADMIN_KEY="+adminKey, "CAIRN_CLUSTER_SECRET="+clusterSecret)
	done := make(chan struct{})
	var rout []byte
	var rerr error
	go func() { rout, rerr = restart.CombinedOutput(); close(done) }()
	select {
	case <-done:
		if rerr == nil || !strings.Contains(string(rout), "removed from the cluster") || !strings.Contains(string(rout), "wipe") {
			t.Fatalf("restart of the removed node: %v\n%s", rerr, rout)
		}
	case <-time.After(20 * time.Second):
		restart.Process.Kill()
		<-done
		t.Fatalf("the removed node started again on its old data:\n%s", rout)
	}

	// Writes and reads go on through the remaining nodes.
	for i, via := range nodes[:2] {
		p := fmt.Sprintf("after-remove-%d.txt", i)
		data := []byte(fmt.Sprintf("written through %s after node 3 left", via.addr))
		put(via, p, data)
		for _, s := range nodes[:2] {
			get(s, p, data)
		}
	}
	for _, s := range nodes[:2] {
		get(s, "before.txt", []byte("written with three active nodes"))
		get(s, "while-draining.txt", []byte("written while node 3 drains"))
	}
	put(n2, "after-stop.txt", []byte("node 3 stopped"))
	get(n1, "after-stop.txt", []byte("node 3 stopped"))

	// --force removes the node the command talks to: node 2 asks node 1.
	rows, out, err = nodeList(t, n2)
	r2, ok := rowByURL(rows, n2.url)
	if err != nil || !ok {
		t.Fatalf("node 2 not listed: %v\n%s", err, out)
	}
	t.Logf("cairn node list via node 2:\n%s", out)
	out, err = n2.cli("node", "remove", r2.id, "--force")
	if err != nil || !strings.Contains(out, "removed node "+r2.id) {
		t.Fatalf("cairn node remove --force of the node talked to: %v\n%s", err, out)
	}
	waitFor(t, 10*time.Second, "node 1 alone, leader", func() bool {
		rows, _, err := nodeList(t, n1)
		return err == nil && len(rows) == 1 && rows[0].url == n1.url && rows[0].leader && rows[0].role == "voter"
	}, nodes...)
	// One data node cannot hold W=2 of the default R=3: a bucket with R=1 can.
	resp, body := do(t, "POST", n1.url+"/_cairn/buckets", []byte(`{"name":"solo","replicas":1}`), auth()...)
	expect(t, resp, body, 201)
	waitFor(t, 20*time.Second, "PUT solo/alone.txt via node 1", func() bool {
		resp, _ := do(t, "PUT", n1.url+"/solo/alone.txt", []byte("node 1 alone"), auth()...)
		return resp.StatusCode == 201
	}, nodes...)
	resp, body = do(t, "GET", n1.url+"/solo/alone.txt", nil, auth()...)
	if resp.StatusCode != 200 || string(body) != "node 1 alone" {
		t.Fatalf("GET solo/alone.txt: %d %q", resp.StatusCode, body)
	}
	get(n1, "before.txt", []byte("written with three active nodes"))
	// The last voter stays, even forced.
	if out, err := n1.cli("node", "remove", r1.id, "--force"); err == nil || !strings.Contains(out, "last voter") {
		t.Fatalf("removing the last voter: %v\n%s", err, out)
	}
}

// TestNodeCommandsNotACluster: a node without a cluster says so.
func TestNodeCommandsNotACluster(t *testing.T) {
	s := startServer(t, t.TempDir(), freeAddr(t))
	out, err := s.cli("node", "list")
	if err == nil || !strings.Contains(out, "501") || !strings.Contains(out, "not a cluster") {
		t.Fatalf("cairn node list on a single node: %v\n%s", err, out)
	}
}

// TestRemovedWhileStopped: a node removed while it was frozen (SIGSTOP)
// never sees its removal committed; when it resumes, it finds no leader,
// asks the others, learns it was removed and stops.
func TestRemovedWhileStopped(t *testing.T) {
	base := t.TempDir()
	n1 := startCairn(t, "server", filepath.Join(base, "n1"), freeAddr(t))
	n2 := startCairn(t, "server", filepath.Join(base, "n2"), freeAddr(t), "--join", n1.url)
	n3 := startCairn(t, "server", filepath.Join(base, "n3"), freeAddr(t), "--join", n1.url)
	nodes := []*server{n1, n2, n3}
	v := waitMembers(t, n1, 3, nodes...)
	var id3 string
	for _, n := range v.Nodes {
		if n.URL == n3.url {
			id3 = n.ID
		}
	}
	n3.cmd.Process.Signal(syscall.SIGSTOP)
	out, err := n1.cli("node", "remove", id3)
	if err != nil {
		n3.cmd.Process.Signal(syscall.SIGCONT)
		t.Fatalf("cairn node remove: %v\n%s", err, out)
	}
	waitMembers(t, n1, 2, n1, n2)
	n3.cmd.Process.Signal(syscall.SIGCONT)
	expectRemovedExit(t, n3, 30*time.Second, "after it resumed")
}

// expectRemovedExit waits up to bound for the removed node n to exit on
// its own with an error that says it was removed from the cluster.
func expectRemovedExit(t *testing.T, n *server, bound time.Duration, since string) {
	t.Helper()
	exited := make(chan error, 1)
	go func() { exited <- n.cmd.Wait() }()
	select {
	case err := <-exited:
		if err == nil || !strings.Contains(n.logs.String(), "removed from the cluster") {
			t.Fatalf("the removed node stopped with %v; log:\n%s", err, n.logs)
		}
		for _, ln := range strings.Split(n.logs.String(), "\n") {
			if strings.Contains(ln, "removed from the cluster") {
				t.Logf("removed node: %s", ln)
			}
		}
	case <-time.After(bound):
		dumpLogs(t, n)
		t.Fatalf("the removed node still runs %v %s", bound, since)
	}
}
