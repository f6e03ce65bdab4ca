package e2e

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// startCairn starts `cairn SUBCMD --data dir --listen addr ARGS...` in
// cluster mode (the e2e secret) with its own free gossip port, and waits
// until its health check passes. It is the general form of
// startClusterNode for the cluster operation tests (witness, cluster
// listener, forced recovery).
func startCairn(t *testing.T, subcmd, dir, addr string, args ...string) *server {
	t.Helper()
	s := &server{t: t, dir: dir, addr: addr, url: "http://" + addr, logs: &bytes.Buffer{}}
	all := append([]string{subcmd, "--data", dir, "--listen", addr, "--log-level", "info"}, args...)
	if !containsArg(args, "--gossip-listen") {
		all = append(all, "--gossip-listen", freeAddr(t))
	}
	s.cmd = exec.Command(cairnBin, all...)
	s.cmd.Env = append(os.Environ(), "CAIRN_ADMIN_KEY="+adminKey, "CAIRN_CLUSTER_SECRET="+clusterSecret)
	s.cmd.Stdout, s.cmd.Stderr = s.logs, s.logs
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.stop() })
	waitHealthy(t, s, httpc, subcmd+" "+addr)
	return s
}

// startThreeNodes starts a 3-node cluster of `cairn server` (nodes 2 and
// 3 join node 1) with args for every node, under base, waits for three
// voters, and creates bucket (a JSON body of POST /_cairn/buckets).
func startThreeNodes(t *testing.T, base, bucket string, args ...string) ([]*server, clusterView) {
	t.Helper()
	var nodes []*server
	for i := 1; i <= 3; i++ {
		a := args
		if i > 1 {
			a = append(append([]string{}, args...), "--join", nodes[0].url)
		}
		nodes = append(nodes, startCairn(t, "server", filepath.Join(base, fmt.Sprint("n", i)), freeAddr(t), a...))
	}
	v := waitMembers(t, nodes[0], 3, nodes...)
	waitFor(t, 30*time.Second, "bucket creation", func() bool {
		resp, _ := do(t, "POST", nodes[0].url+"/_cairn/buckets", []byte(bucket), auth()...)
		return resp.StatusCode == 201 || resp.StatusCode == 409
	}, nodes...)
	return nodes, v
}

func containsArg(args []string, a string) bool {
	for _, x := range args {
		if x == a {
			return true
		}
	}
	return false
}

// clusterView is the part of GET /_cairn/nodes these tests read.
type clusterView struct {
	Leader string `json:"leader"`
	Nodes  []struct {
		ID         string `json:"id"`
		URL        string `json:"url"`
		ClusterURL string `json:"cluster_url"`
		Witness    bool   `json:"witness"`
		Role       string `json:"role"`
		Leader     bool   `json:"leader"`
		Self       bool   `json:"self"`
	} `json:"nodes"`
}

// nodesView returns s's GET /_cairn/nodes, or false if it did not answer 200.
func nodesView(t *testing.T, s *server) (clusterView, bool) {
	t.Helper()
	status, body, _, err := timed("GET", s.url+"/_cairn/nodes", nil, auth()...)
	var v clusterView
	if err != nil || status != 200 || json.Unmarshal(body, &v) != nil {
		return v, false
	}
	return v, true
}

// waitMembers waits until s sees want members, all voters, and a leader.
func waitMembers(t *testing.T, s *server, want int, nodes ...*server) clusterView {
	t.Helper()
	var v clusterView
	waitFor(t, 30*time.Second, fmt.Sprintf("%d voters and a leader seen by %s", want, s.addr), func() bool {
		var ok bool
		v, ok = nodesView(t, s)
		if !ok || len(v.Nodes) != want || v.Leader == "0" {
			return false
		}
		for _, n := range v.Nodes {
			if n.Role != "voter" {
				return false
			}
		}
		return true
	}, nodes...)
	return v
}

// putOK writes data at url (retrying while the cluster settles).
func putOK(t *testing.T, url string, data []byte, nodes ...*server) {
	t.Helper()
	waitFor(t, 20*time.Second, "PUT "+url, func() bool {
		status, _, _, err := timed("PUT", url, data, auth()...)
		return err == nil && (status == 201 || status == 200)
	}, nodes...)
}

// getOK waits until url serves data.
func getOK(t *testing.T, url string, data []byte, nodes ...*server) {
	t.Helper()
	waitFor(t, 10*time.Second, "GET "+url, func() bool {
		status, body, _, err := timed("GET", url, nil, auth()...)
		return err == nil && status == 200 && bytes.Equal(body, data)
	}, nodes...)
}

// TestClusterListen runs three nodes with --cluster-listen: they join
// through public URLs, record their cluster URLs, replicate over the
// cluster listeners (a write through one node is read through another),
// and the public ports refuse every RPC but join.
func TestClusterListen(t *testing.T) {
	base := t.TempDir()
	var nodes []*server
	clusterAddrs := map[string]string{} // public URL → cluster address
	for i := 1; i <= 3; i++ {
		caddr := freeAddr(t)
		args := []string{"--cluster-listen", caddr}
		if i > 1 {
			args = append(args, "--join", nodes[0].url)
		}
		s := startCairn(t, "server", filepath.Join(base, fmt.Sprint("n", i)), freeAddr(t), args...)
		clusterAddrs[s.url] = caddr
		nodes = append(nodes, s)
	}
	v := waitMembers(t, nodes[0], 3, nodes...)
	for _, n := range v.Nodes {
		if want := "http://" + clusterAddrs[n.URL]; n.ClusterURL != want {
			t.Fatalf("node %s at %s: cluster_url %q, want %q", n.ID, n.URL, n.ClusterURL, want)
		}
	}

	waitFor(t, 30*time.Second, "bucket creation", func() bool {
		resp, _ := do(t, "POST", nodes[0].url+"/_cairn/buckets", []byte(`{"name":"web","public":true}`), auth()...)
		return resp.StatusCode == 201 || resp.StatusCode == 409
	}, nodes...)
	big := bytes.Repeat([]byte("cluster listener "), 400_000) // 6.8 MB: two blobs
	putOK(t, nodes[1].url+"/web/big.bin", big, nodes...)
	putOK(t, nodes[1].url+"/web/small.txt", []byte("small"), nodes...)
	for _, s := range nodes {
		getOK(t, s.url+"/web/big.bin", big, nodes...)
		getOK(t, s.url+"/web/small.txt", []byte("small"), nodes...)
	}

	// The public port answers 404 to RPCs (signed or not, they never reach
	// the RPC server); the cluster port serves them (401 unsigned).
	for _, s := range nodes {
		for _, p := range []string{"raft", "snapshot", "has", "blob/" + strings.Repeat("0", 64)} {
			status, body, _, err := timed("POST", s.url+"/_cairn/rpc/"+p, []byte("x"))
			if err != nil || status != 404 {
				t.Fatalf("public POST /_cairn/rpc/%s on %s: %d %v %s", p, s.addr, status, err, body)
			}
		}
		status, _, _, err := timed("POST", "http://"+clusterAddrs[s.url]+"/_cairn/rpc/raft", []byte("x"))
		if err != nil || status == 404 || status < 400 {
			t.Fatalf("unsigned POST to the cluster listener of %s: %d %v", s.addr, status, err)
		}
		// Join stays on the public port (authenticated: unsigned is refused, not 404).
		status, _, _, err = timed("POST", s.url+"/_cairn/rpc/join", []byte("{}"))
		if err != nil || status == 404 || status < 400 {
			t.Fatalf("unsigned POST /_cairn/rpc/join on %s: %d %v", s.addr, status, err)
		}
		// The cluster port speaks TLS only (--cluster-tls=on, the
		// default): a request in clear gets Go's 400. Over TLS, the
		// public API is not there.
		status, _, _, err = timed("GET", "http://"+clusterAddrs[s.url]+"/web/small.txt", nil)
		if err != nil || status != 400 {
			t.Fatalf("GET in clear through the cluster listener of %s: %d %v", s.addr, status, err)
		}
		tc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{ServerName: clusterServerName, InsecureSkipVerify: true}}}
		resp, err := tc.Get("https://" + clusterAddrs[s.url] + "/web/small.txt")
		if err != nil || resp.StatusCode != 404 {
			t.Fatalf("GET a file through the cluster listener of %s over TLS: %v %v", s.addr, resp, err)
		}
		resp.Body.Close()
	}
}
