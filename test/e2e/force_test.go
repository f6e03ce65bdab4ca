package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestForceNewCluster: a 3-node cluster loses two nodes for good; the
// survivor cannot write; stopped, it is forced into a new one-node cluster
// with `cairn recover --force-new-cluster --yes-i-know` (refused without
// the confirmation, and while it runs); restarted, it elects itself, keeps
// every file, and takes writes once the bucket's write quorum is one.
func TestForceNewCluster(t *testing.T) {
	base := t.TempDir()
	n1 := startCairn(t, "server", filepath.Join(base, "n1"), freeAddr(t))
	n2 := startCairn(t, "server", filepath.Join(base, "n2"), freeAddr(t), "--join", n1.url)
	n3 := startCairn(t, "server", filepath.Join(base, "n3"), freeAddr(t), "--join", n1.url)
	all := []*server{n1, n2, n3}
	waitMembers(t, n1, 3, all...)
	waitFor(t, 30*time.Second, "bucket creation", func() bool {
		resp, _ := do(t, "POST", n1.url+"/_cairn/buckets", []byte(`{"name":"web","public":true}`), auth()...)
		return resp.StatusCode == 201 || resp.StatusCode == 409
	}, all...)
	files := map[string][]byte{}
	for i := 0; i < 6; i++ {
		p := fmt.Sprintf("f%d.txt", i)
		files[p] = []byte(strings.Repeat(fmt.Sprintf("file %d before the disaster\n", i), 50+i))
		putOK(t, all[i%3].url+"/web/"+p, files[p], all...)
	}
	// R=3 on three nodes: the survivor gets every blob (the third copy
	// follows the acknowledgement).
	waitFor(t, 20*time.Second, "every blob on node 1", func() bool { return nodeBlobs(n1) >= len(files) }, all...)

	n2.kill()
	n3.kill()
	for i := 0; i < 3; i++ {
		status, _, _, err := timed("PUT", n1.url+"/web/lonely.txt", []byte("no quorum"), auth()...)
		if err == nil && (status == 200 || status == 201) {
			t.Fatalf("the survivor took a write without a quorum (%d)", status)
		}
	}

	recov := func(args ...string) (string, error) {
		cmd := exec.Command(cairnBin, append([]string{"recover", "--data", n1.dir, "--force-new-cluster"}, args...)...)
		cmd.Env = os.Environ()
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := recov("--yes-i-know"); err == nil || !strings.Contains(out, "still running") {
		t.Fatalf("recover while the node runs: %v\n%s", err, out)
	}
	n1.stop()
	out, err := recov()
	if err == nil || !strings.Contains(out, "FORCE NEW CLUSTER") || !strings.Contains(out, "--yes-i-know") {
		t.Fatalf("recover without confirmation: %v\n%s", err, out)
	}
	out, err = recov("--yes-i-know")
	if err != nil || !strings.Contains(out, "forced a new cluster") {
		t.Fatalf("recover: %v\n%s", err, out)
	}
	t.Logf("cairn recover:\n%s", out)
	if _, err := os.Stat(filepath.Join(n1.dir, "force-new-cluster.log")); err != nil {
		t.Errorf("no record of the recovery: %v", err)
	}

	n1 = startCairn(t, "server", n1.dir, n1.addr)
	v := waitMembers(t, n1, 1, n1)
	if !v.Nodes[0].Self || !v.Nodes[0].Leader {
		t.Fatalf("after the recovery: %+v", v)
	}
	for p, data := range files {
		getOK(t, n1.url+"/web/"+p, data, n1)
	}
	// One node cannot hold W=2 of R=3: the procedure lowers the quorum.
	if out, err := n1.cli("bucket", "set", "web", "write-quorum=1"); err != nil {
		t.Fatalf("bucket set: %v\n%s", err, out)
	}
	putOK(t, n1.url+"/web/after.txt", []byte("alone and writing"), n1)
	getOK(t, n1.url+"/web/after.txt", []byte("alone and writing"), n1)
}
