package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestMountOwnerKilled: node 1 owns a directory (it made it) and has
// changes there it acknowledged but has not published yet when it is
// SIGKILLed. After its lock lease, node 2 creates in that directory.
// Every file node 1 fsynced is there; every name there is one node 1
// acknowledged (or node 2 made): nothing it never acknowledged appears.
func TestMountOwnerKilled(t *testing.T) {
	needFuse(t)
	const lease = 2 * time.Second
	nodes, mnts := startMountClusterWith(t, 3, "", "--lock-lease", lease.String())
	a, b := mnts[0], mnts[1]
	d := "owned"
	if err := os.Mkdir(filepath.Join(a, d), 0o755); err != nil {
		t.Fatal(err)
	}
	const synced = 40
	for i := range synced {
		f, err := os.Create(filepath.Join(a, d, fmt.Sprintf("synced-%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(f, "fsynced %d", i)
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	// A burst of creates, acknowledged (closed) but not fsynced, cut by
	// the kill.
	var mu sync.Mutex
	acked := map[string]bool{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for j := 0; ; j++ {
			select {
			case <-stop:
				return
			default:
			}
			name := fmt.Sprintf("burst-%d", j)
			if err := os.WriteFile(filepath.Join(a, d, name), []byte(name), 0o644); err != nil {
				return // the node is gone
			}
			mu.Lock()
			acked[name] = true
			mu.Unlock()
		}
	}()
	time.Sleep(300 * time.Millisecond)
	nodes[0].kill()
	close(stop)
	wg.Wait()
	killedAt := time.Now()
	mu.Lock()
	t.Logf("node 1 acknowledged %d creates after the fsynced ones before it was killed", len(acked))
	mu.Unlock()

	// Node 2 takes the directory once node 1's lease runs out.
	waitFor(t, 30*time.Second, "node 2's create in the dead node's directory", func() bool {
		return os.WriteFile(filepath.Join(b, d, "after"), []byte("node 2"), 0o644) == nil
	}, nodes[1:]...)
	took := time.Since(killedAt)
	t.Logf("node 2 created in the directory %v after the kill (lease %v)", took.Round(time.Millisecond), lease)
	if took > 4*lease+5*time.Second {
		t.Errorf("node 2 waited %v for the directory; the lease is %v", took, lease)
	}
	dd, err := os.Open(filepath.Join(b, d))
	if err != nil {
		t.Fatal(err)
	}
	dd.Sync()
	dd.Close()
	es, err := os.ReadDir(filepath.Join(b, d))
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	burst := 0
	for _, e := range es {
		n := e.Name()
		have[n] = true
		switch {
		case n == "after" || strings.HasPrefix(n, "synced-"):
		case acked[n]:
			burst++
		default:
			t.Errorf("%s is in the directory, but node 1 never acknowledged it", n)
		}
	}
	for i := range synced {
		n := fmt.Sprintf("synced-%d", i)
		if !have[n] {
			t.Errorf("%s was fsynced on node 1 and is lost", n)
			continue
		}
		if got, err := os.ReadFile(filepath.Join(b, d, n)); err != nil || string(got) != fmt.Sprintf("fsynced %d", i) {
			t.Errorf("%s: %q %v", n, got, err)
		}
	}
	if !have["after"] {
		t.Error("node 2's create is not listed")
	}
	t.Logf("of node 1's %d acknowledged, unsynced creates, %d reached the cluster", len(acked), burst)
}

// TestMountOwnerPartitioned: node 3, cut off from the others by its
// network namespace, owns a directory. Node 1 takes the directory over
// after node 3's lease; from then on node 3 cannot change it: its creates
// there fail (an error, not a silent loss), and what it queued before
// the cut never lands on top of node 1's changes.
func TestMountOwnerPartitioned(t *testing.T) {
	needFuse(t)
	if _, err := exec.LookPath("nsenter"); err != nil {
		t.Skip("nsenter (util-linux) not installed")
	}
	topo := setupNetns(t, 3)
	base := t.TempDir()
	for _, d := range []string{filepath.Dir(base), base} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	const lease = 2 * time.Second
	var nodes []*server
	var mnts []string
	for i, ip := range topo.ips {
		mnt := filepath.Join(base, fmt.Sprintf("mnt%d", i+1))
		args := []string{"server", "--data", filepath.Join(base, fmt.Sprintf("n%d", i+1)), "--listen", ip + ":7070",
			"--gossip-listen", ip + ":7170", "--log-level", "info", "--mount", "web:" + mnt, "--lock-lease", lease.String()}
		if i > 0 {
			args = append(args, "--join", nodes[0].url)
		}
		s := &server{t: t, dir: filepath.Join(base, fmt.Sprintf("n%d", i+1)), addr: ip + ":7070", url: "http://" + ip + ":7070", logs: &bytes.Buffer{}}
		// nsenter --net keeps the mount namespace: the FUSE mount is the
		// test's to use.
		s.cmd = exec.Command("nsenter", append([]string{"--net=/run/netns/" + topo.ns[i], cairnBin}, args...)...)
		s.cmd.Env = append(os.Environ(), "CAIRN_ADMIN_KEY="+adminKey, "CAIRN_CLUSTER_SECRET="+clusterSecret)
		s.cmd.Stdout, s.cmd.Stderr = s.logs, s.logs
		if err := s.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.stop(); syscall.Unmount(mnt, syscall.MNT_DETACH) })
		waitHealthy(t, s, httpc, "node "+ip)
		nodes = append(nodes, s)
		mnts = append(mnts, mnt)
	}
	waitMembers(t, nodes[0], 3, nodes...)
	for _, m := range mnts {
		waitFor(t, 30*time.Second, "the mount "+m, func() bool { return mounted(m) }, nodes...)
	}
	d := "cut"
	if err := os.Mkdir(filepath.Join(mnts[2], d), 0o755); err != nil { // node 3 owns it
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(mnts[2], d, "before"), []byte("3"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "node 3's file on node 1", func() bool {
		_, err := os.Stat(filepath.Join(mnts[0], d, "before"))
		return err == nil
	}, nodes...)

	topo.cut(2)
	healed := false
	t.Cleanup(func() {
		if !healed {
			topo.heal(2)
		}
	})
	cutAt := time.Now()
	// Node 1 takes the directory once node 3's lease ran out.
	waitFor(t, 30*time.Second, "node 1's create in the cut-off owner's directory", func() bool {
		return os.WriteFile(filepath.Join(mnts[0], d, "x"), []byte("node 1"), 0o644) == nil
	}, nodes[:2]...)
	t.Logf("node 1 created in the directory %v after the cut (lease %v)", time.Since(cutAt).Round(time.Millisecond), lease)
	// Node 3 cannot change it any more: its create fails.
	err := os.WriteFile(filepath.Join(mnts[2], d, "x"), []byte("node 3"), 0o644)
	if err == nil {
		f, ferr := os.Open(filepath.Join(mnts[2], d))
		if ferr == nil {
			err = f.Sync() // the queued create's fate
			f.Close()
		}
	}
	if err == nil {
		t.Fatal("node 3, cut off after node 1 took its directory, created a file there without an error")
	}
	t.Logf("node 3's create in the lost directory: %v", err)
	if !errors.Is(err, syscall.EIO) && !errors.Is(err, syscall.ETIMEDOUT) {
		t.Errorf("node 3's create failed with %v, want EIO", err)
	}
	topo.heal(2)
	healed = true
	// After healing, node 1's file is the one every node reads.
	for _, m := range mnts {
		waitFor(t, 20*time.Second, "node 1's x on "+m, func() bool {
			got, err := os.ReadFile(filepath.Join(m, d, "x"))
			return err == nil && string(got) == "node 1"
		}, nodes...)
	}
}
