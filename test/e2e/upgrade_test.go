package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// upgradeFrom is the release a rolling upgrade starts from: the last
// commit before cluster-wide locks (issue 20), whose binaries read log
// versions up to 7 and know nothing of the cluster's log version. The
// test builds it from this repository's history (git worktree) once and
// keeps the binary in the user's cache directory.
const upgradeFrom = "8ad61c53bb7834b76a103a7b90c0eae91b1e159c"

// oldCairn returns the path of the cairn binary built at commit, building
// it when the cache does not hold it.
func oldCairn(t *testing.T, commit string) string {
	t.Helper()
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "cairn-test")
	bin := filepath.Join(dir, "cairn-"+commit[:12])
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	root, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Fatalf("the upgrade test builds an older release from this repository's git history: not in a git checkout: %v", err)
	}
	repo := strings.TrimSpace(string(root))
	if out, err := exec.Command("git", "-C", repo, "cat-file", "-e", commit+"^{commit}").CombinedOutput(); err != nil {
		t.Fatalf("commit %s is not in this clone (a shallow clone? run git fetch --unshallow): %v %s", commit, err, out)
	}
	src := filepath.Join(t.TempDir(), "src")
	if out, err := exec.Command("git", "-C", repo, "worktree", "add", "--detach", src, commit).CombinedOutput(); err != nil {
		t.Fatalf("git worktree add %s: %v\n%s", commit, err, out)
	}
	defer exec.Command("git", "-C", repo, "worktree", "remove", "--force", src).Run()
	tmp := bin + fmt.Sprintf(".tmp%d", os.Getpid())
	build := exec.Command("go", "build", "-trimpath", "-o", tmp, "./cmd/cairn")
	build.Dir = src
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build cairn at %s: %v\n%s", commit, err, out)
	}
	if err := os.Rename(tmp, bin); err != nil {
		t.Fatal(err)
	}
	return bin
}

// newestLogVersion is the newest log version this binary reads (its
// command payload encodings, cairn version --json).
func newestLogVersion(t *testing.T) int {
	t.Helper()
	out, err := exec.Command(cairnBin, "version", "--json").Output()
	if err != nil {
		t.Fatalf("cairn version --json: %v", err)
	}
	var v struct {
		Encodings []struct {
			Name string `json:"name"`
			Max  int    `json:"max"`
		} `json:"log_encodings"`
	}
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("cairn version --json: %v\n%s", err, out)
	}
	for _, e := range v.Encodings {
		if e.Name == "command" {
			return e.Max
		}
	}
	t.Fatalf("cairn version --json names no command encoding: %s", out)
	return 0
}

// healthInfo is the part of /_cairn/health?verbose=1 the test reads. A
// binary from before issue 22 answers "ok" (no JSON): LogVersion -1.
type healthInfo struct {
	LogVersion int `json:"log_version"`
	Members    []struct {
		ID     string `json:"id"`
		LogMax int    `json:"log_max"`
		Known  bool   `json:"known"`
	} `json:"members"`
	Waiting []string `json:"upgrade_waiting_for"`
}

func verboseHealth(s *server) (healthInfo, error) {
	h := healthInfo{LogVersion: -1}
	resp, err := httpc.Get(s.url + "/_cairn/health?verbose=1")
	if err != nil {
		return h, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return h, fmt.Errorf("health %d: %s", resp.StatusCode, b)
	}
	if bytes.HasPrefix(b, []byte("ok")) {
		return h, nil
	}
	return h, json.Unmarshal(b, &h)
}

// TestRollingUpgrade: a 3-node cluster on the previous release is
// upgraded one node at a time to this binary while a writer and readers
// run; one node is downgraded and upgraded again on the way. No read
// fails, no acknowledged write is lost, every node serves the whole tree,
// and the cluster's log version moves up only once the last node runs the
// new binary. After that, a node on the old release cannot join.
func TestRollingUpgrade(t *testing.T) {
	old := oldCairn(t, upgradeFrom)
	newest := newestLogVersion(t)
	base := t.TempDir()
	type slot struct {
		dir, addr, join string
		s               *server
		in              atomic.Bool // in the readers' and writer's rotation (a load balancer's view)
	}
	slots := make([]*slot, 3)
	for i := range slots {
		slots[i] = &slot{dir: filepath.Join(base, fmt.Sprintf("n%d", i+1)), addr: freeAddr(t)}
	}
	slots[0].s = startClusterNodeBin(t, old, slots[0].dir, slots[0].addr, "")
	for _, sl := range slots[1:] {
		sl.join = slots[0].s.url
		sl.s = startClusterNodeBin(t, old, sl.dir, sl.addr, sl.join)
	}
	servers := func() []*server {
		var out []*server
		for _, sl := range slots {
			out = append(out, sl.s)
		}
		return out
	}
	waitFor(t, 30*time.Second, "bucket creation", func() bool {
		resp, _ := do(t, "POST", slots[0].s.url+"/_cairn/buckets", []byte(`{"name":"web","public":true}`), auth()...)
		return resp.StatusCode == 201 || resp.StatusCode == 409
	}, servers()...)
	tree := map[string][]byte{}
	for i := range 120 {
		p := fmt.Sprintf("site/d%d/page%03d.php", i%6, i)
		data := []byte(fmt.Sprintf("<?php // page %d\n%s", i, strings.Repeat("x", i*37)))
		tree[p] = data
		waitFor(t, 20*time.Second, "PUT "+p, func() bool {
			resp, _ := do(t, "PUT", slots[i%3].s.url+"/web/"+p, data, auth()...)
			return resp.StatusCode == 201 || resp.StatusCode == 200
		}, servers()...)
	}
	serves := func(s *server) bool {
		for p, data := range tree {
			resp, err := httpc.Get(s.url + "/web/" + p)
			if err != nil {
				return false
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || !bytes.Equal(b, data) {
				return false
			}
		}
		return true
	}
	for _, sl := range slots {
		waitFor(t, 20*time.Second, "the tree on "+sl.addr, func() bool { return serves(sl.s) }, servers()...)
		sl.in.Store(true)
	}

	// A writer and two readers through the nodes in rotation.
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	hc := &http.Client{Timeout: 10 * time.Second}
	pick := func(k int) *slot {
		for j := range 3 {
			if sl := slots[(k+j)%3]; sl.in.Load() {
				return sl
			}
		}
		return nil
	}
	var (
		mu        sync.Mutex
		acked     = map[string][]byte{}
		readFails []string
		reads     atomic.Int64
		wg        sync.WaitGroup
	)
	wg.Add(1)
	go func() { // writer: a write is acknowledged by a 2xx answer
		defer wg.Done()
		for i := 0; ctx.Err() == nil && i < 5000; i++ {
			p := fmt.Sprintf("uploads/w%04d.txt", i)
			data := []byte(fmt.Sprintf("write %d at %s", i, time.Now().Format(time.RFC3339Nano)))
			for try := 0; try < 20 && ctx.Err() == nil; try++ {
				sl := pick(i + try)
				if sl == nil {
					time.Sleep(50 * time.Millisecond)
					continue
				}
				req, _ := http.NewRequest("PUT", sl.s.url+"/web/"+p, bytes.NewReader(data))
				req.Header.Set("Authorization", "Bearer "+adminKey)
				resp, err := hc.Do(req)
				if err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode/100 == 2 {
						mu.Lock()
						acked[p] = data
						mu.Unlock()
						break
					}
				}
				time.Sleep(50 * time.Millisecond)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	paths := make([]string, 0, len(tree))
	for p := range tree {
		paths = append(paths, p)
	}
	for r := range 2 {
		wg.Add(1)
		go func() { // reader: every read of the tree through a node in rotation must succeed
			defer wg.Done()
			for i := 0; ctx.Err() == nil && i < 200000; i++ {
				sl := pick(r + i)
				if sl == nil {
					time.Sleep(10 * time.Millisecond)
					continue
				}
				p := paths[(i*7+r)%len(paths)]
				resp, err := hc.Get(sl.s.url + "/web/" + p)
				reads.Add(1)
				if err != nil {
					mu.Lock()
					readFails = append(readFails, fmt.Sprintf("%s via %s: %v", p, sl.addr, err))
					mu.Unlock()
					continue
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || !bytes.Equal(b, tree[p]) {
					mu.Lock()
					readFails = append(readFails, fmt.Sprintf("%s via %s: %d, %d bytes", p, sl.addr, resp.StatusCode, len(b)))
					mu.Unlock()
				}
				time.Sleep(2 * time.Millisecond)
			}
		}()
	}

	// replace takes a node out of the rotation, lets its requests finish,
	// stops it and starts bin on its data; it is back in the rotation once
	// healthy and serving the whole tree.
	replace := func(k int, bin string) {
		t.Helper()
		sl := slots[k]
		sl.in.Store(false)
		time.Sleep(300 * time.Millisecond)
		sl.s.stop()
		sl.s = startClusterNodeBin(t, bin, sl.dir, sl.addr, sl.join)
		waitFor(t, 30*time.Second, "the tree on the restarted "+sl.addr, func() bool { return serves(sl.s) }, servers()...)
		sl.in.Store(true)
		time.Sleep(time.Second) // traffic through it
	}
	// expectVersion checks the log version on the nodes running this
	// binary (the old one does not report it).
	expectVersion := func(want int, new ...int) {
		t.Helper()
		for _, k := range new {
			h, err := verboseHealth(slots[k].s)
			if err != nil || h.LogVersion != want {
				t.Fatalf("node %d: log version %d (%v), want %d; %+v", k+1, h.LogVersion, err, want, h)
			}
			if want < newest && len(h.Waiting) == 0 {
				t.Fatalf("node %d: log version %d and nothing named as waited for", k+1, want)
			}
		}
	}
	replace(2, cairnBin)
	expectVersion(7, 2)
	replace(1, cairnBin)
	time.Sleep(2 * time.Second) // several rounds of the leader's check
	expectVersion(7, 1, 2)
	// A downgrade before the version moves works.
	replace(1, old)
	expectVersion(7, 2)
	replace(1, cairnBin)
	time.Sleep(2 * time.Second)
	expectVersion(7, 1, 2)
	replace(0, cairnBin)
	waitFor(t, 30*time.Second, fmt.Sprintf("log version %d on every node", newest), func() bool {
		for _, sl := range slots {
			if h, err := verboseHealth(sl.s); err != nil || h.LogVersion != newest || len(h.Members) != 3 {
				return false
			}
		}
		return true
	}, servers()...)
	time.Sleep(time.Second)
	stop()
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	if len(readFails) > 0 {
		t.Fatalf("%d of %d reads failed during the upgrade, first: %v", len(readFails), reads.Load(), readFails[:min(5, len(readFails))])
	}
	if len(acked) < 50 {
		t.Fatalf("only %d writes acknowledged during the upgrade", len(acked))
	}
	for _, sl := range slots {
		for p, data := range acked {
			waitFor(t, 10*time.Second, "acknowledged "+p+" on "+sl.addr, func() bool {
				resp, err := httpc.Get(sl.s.url + "/web/" + p)
				if err != nil {
					return false
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				return resp.StatusCode == 200 && bytes.Equal(b, data)
			}, servers()...)
		}
		if !serves(sl.s) {
			t.Fatalf("%s does not serve the whole tree after the upgrade", sl.addr)
		}
	}
	t.Logf("upgrade: %d reads, 0 failed; %d writes acknowledged, all on every node", reads.Load(), len(acked))

	// The old release cannot join the upgraded cluster: its join is
	// refused, and it never enters the cluster map.
	late := &server{t: t, dir: filepath.Join(base, "n4"), addr: freeAddr(t), logs: &bytes.Buffer{}}
	late.url = "http://" + late.addr
	late.cmd = exec.Command(old, "server", "--data", late.dir, "--listen", late.addr, "--join", slots[0].s.url)
	late.cmd.Env = append(os.Environ(), "CAIRN_ADMIN_KEY="+adminKey, "CAIRN_CLUSTER_SECRET="+clusterSecret)
	late.cmd.Stdout, late.cmd.Stderr = late.logs, late.logs
	if err := late.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(late.stop)
	time.Sleep(4 * time.Second)
	if h, err := verboseHealth(slots[0].s); err != nil || len(h.Members) != 3 {
		t.Fatalf("after an old node's join: %+v, %v", h, err)
	}
	late.stop()
	if !strings.Contains(late.logs.String(), "reads log versions up to 7") {
		t.Fatalf("the old node's log does not say why its join was refused:\n%s", late.logs)
	}
}
