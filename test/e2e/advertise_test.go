package e2e

import (
	"net"
	"path/filepath"
	"testing"
	"time"
)

// A node listening on every interface records the URL given by
// --advertise, and its cluster listener (also a wildcard) the same host:
// peers reach it there, so a write through the other node replicates and
// reads back through it.
func TestAdvertiseWildcardListener(t *testing.T) {
	base := t.TempDir()
	_, port, _ := net.SplitHostPort(freeAddr(t))
	_, cport, _ := net.SplitHostPort(freeAddr(t))
	n1 := startCairn(t, "server", filepath.Join(base, "n1"), "0.0.0.0:"+port,
		"--advertise", "http://127.0.0.1:"+port, "--cluster-listen", "0.0.0.0:"+cport)
	n1.url = "http://127.0.0.1:" + port
	n2 := startCairn(t, "server", filepath.Join(base, "n2"), freeAddr(t), "--join", n1.url)
	v := waitMembers(t, n1, 2, n1, n2)
	found := false
	for _, n := range v.Nodes {
		if n.URL == n1.url {
			found = true
			if want := "http://127.0.0.1:" + cport; n.ClusterURL != want {
				t.Fatalf("cluster_url %q, want %q", n.ClusterURL, want)
			}
		}
	}
	if !found {
		t.Fatalf("no member recorded at the advertised URL %s: %+v", n1.url, v.Nodes)
	}
	waitFor(t, 30*time.Second, "bucket creation", func() bool {
		resp, _ := do(t, "POST", n1.url+"/_cairn/buckets", []byte(`{"name":"web","public":true,"replicas":2}`), auth()...)
		return resp.StatusCode == 201 || resp.StatusCode == 409
	}, n1, n2)
	putOK(t, n2.url+"/web/a.txt", []byte("through node 2"), n1, n2)
	getOK(t, n1.url+"/web/a.txt", []byte("through node 2"), n1, n2)
}
