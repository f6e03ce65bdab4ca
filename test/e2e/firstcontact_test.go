package e2e

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestJoinWrongSecretExits: a node started with another cluster secret
// than the member it joins exits within seconds, with status 1 and a
// message that names the secret's settings (it used to say "serving" and
// retry a bare 401 forever).
func TestJoinWrongSecretExits(t *testing.T) {
	base := t.TempDir()
	member := startCairn(t, "server", filepath.Join(base, "n1"), freeAddr(t))
	cmd := exec.Command(cairnBin, "server", "--data", filepath.Join(base, "n2"), "--listen", freeAddr(t),
		"--gossip-listen", freeAddr(t), "--join", member.url)
	cmd.Env = append(os.Environ(), "CAIRN_ADMIN_KEY="+adminKey, "CAIRN_CLUSTER_SECRET=another-cluster-secret-0123456789")
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Fatalf("exit: %v, want status 1\n%s", err, &logs)
		}
		want := "cairn: join " + member.url + ": node: the member rejected this node's cluster secret: every node needs the same CAIRN_CLUSTER_SECRET / --secret-file"
		if !strings.Contains(logs.String(), want) {
			t.Fatalf("output lacks %q:\n%s", want, &logs)
		}
	case <-time.After(15 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("the node with the wrong secret still runs after 15 s:\n%s", &logs)
	}
}
