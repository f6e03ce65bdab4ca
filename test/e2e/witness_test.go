package e2e

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

var blobsMetric = regexp.MustCompile(`(?m)^cairn_node_blobs (\d+)`)

// nodeBlobs returns s's cairn_node_blobs gauge (-1 if unreadable).
func nodeBlobs(s *server) int {
	status, body, _, err := timed("GET", s.url+"/_cairn/metrics", nil)
	if err != nil || status != 200 {
		return -1
	}
	m := blobsMetric.FindSubmatch(body)
	if m == nil {
		return -1
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

// TestWitness runs two data nodes and a witness: the witness votes and is
// never given a copy; writes and reads work through every node (the
// witness proxies); when a data node dies (the leader, if a data node
// leads), the survivor and the witness elect a leader and keep taking
// writes to a bucket with R=2 W=1, and every file stays readable.
func TestWitness(t *testing.T) {
	base := t.TempDir()
	d1 := startCairn(t, "server", filepath.Join(base, "d1"), freeAddr(t))
	d2 := startCairn(t, "server", filepath.Join(base, "d2"), freeAddr(t), "--join", d1.url)
	w := startCairn(t, "witness", filepath.Join(base, "w"), freeAddr(t), "--join", d1.url)
	all := []*server{d1, d2, w}
	v := waitMembers(t, d1, 3, all...)
	for _, n := range v.Nodes {
		if (n.URL == w.url) != n.Witness {
			t.Fatalf("node %s: witness=%v", n.URL, n.Witness)
		}
	}

	// Two data nodes: R=2, and W=1 so that either one alone takes writes.
	waitFor(t, 30*time.Second, "bucket creation", func() bool {
		resp, _ := do(t, "POST", d1.url+"/_cairn/buckets",
			[]byte(`{"name":"web","public":true,"replicas":2,"write_quorum":1}`), auth()...)
		return resp.StatusCode == 201 || resp.StatusCode == 409
	}, all...)
	files := map[string][]byte{}
	for i := 0; i < 9; i++ {
		via := all[i%3]
		p := fmt.Sprintf("f%d.txt", i)
		files[p] = []byte(strings.Repeat(fmt.Sprintf("file %d via %s\n", i, via.addr), 100+i))
		putOK(t, via.url+"/web/"+p, files[p], all...)
	}
	for _, s := range all {
		for p, data := range files {
			getOK(t, s.url+"/web/"+p, data, all...)
		}
	}
	// Both data nodes hold every blob (W=1: the second copy follows the
	// acknowledgement); the witness holds none.
	waitFor(t, 20*time.Second, "a copy of every blob on both data nodes", func() bool {
		return nodeBlobs(d1) >= len(files) && nodeBlobs(d2) >= len(files)
	}, all...)
	if n := nodeBlobs(w); n != 0 {
		t.Fatalf("the witness reports %d blobs", n)
	}

	// Kill a data node: the leader if a data node leads.
	victim, survivor := d1, d2
	if v, ok := nodesView(t, d1); ok {
		for _, n := range v.Nodes {
			if n.Leader && n.URL == d2.url {
				victim, survivor = d2, d1
			}
		}
	}
	waitVoters(t, d1, 3, all...)
	victim.kill()
	t.Logf("killed %s; survivor %s", victim.addr, survivor.addr)
	putOK(t, survivor.url+"/web/after.txt", []byte("written by the survivor"), survivor, w)
	putOK(t, w.url+"/web/after-w.txt", []byte("written through the witness"), survivor, w)
	files["after.txt"] = []byte("written by the survivor")
	files["after-w.txt"] = []byte("written through the witness")
	for _, s := range []*server{survivor, w} {
		for p, data := range files {
			getOK(t, s.url+"/web/"+p, data, survivor, w)
		}
	}

	// No blob files on the witness's disk.
	filepath.WalkDir(w.dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && (strings.HasSuffix(p, ".vol") || (d.IsDir() && d.Name() == "blobs")) {
			t.Errorf("the witness has %s on disk", p)
		}
		return nil
	})
	if _, err := os.Stat(filepath.Join(w.dir, "meta")); err != nil {
		t.Errorf("the witness keeps no namespace: %v", err)
	}
}
