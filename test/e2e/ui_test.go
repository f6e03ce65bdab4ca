package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// uiBrowser finds what the browser test needs: node, Debian's Chromium and
// playwright-core in test/ui/node_modules (`make ui-tools` installs them).
// Without them the test skips, except under CI=true, where it fails.
func uiBrowser(t *testing.T, root string) (nodeBin, chromium string) {
	t.Helper()
	missing := func(what string) {
		msg := "the admin page test needs " + what + ": run `make ui-tools` (as root it installs Debian's chromium; it runs npm ci in test/ui)"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip("SKIPPED: " + msg)
	}
	nodeBin, err := exec.LookPath("node")
	if err != nil {
		missing("Node.js (node)")
	}
	chromium = os.Getenv("CHROMIUM")
	if chromium == "" {
		chromium = "/usr/bin/chromium"
	}
	if _, err := os.Stat(chromium); err != nil {
		missing("Chromium at " + chromium + " (Debian package chromium; or set CHROMIUM)")
	}
	if _, err := os.Stat(filepath.Join(root, "test", "ui", "node_modules", "playwright-core", "package.json")); err != nil {
		missing("playwright-core in test/ui/node_modules")
	}
	return nodeBin, chromium
}

// TestUI drives the admin page in headless Chromium (test/ui/ui.mjs) against
// a 3-node cluster with some traffic: log in through the form, see three
// nodes alive, SIGKILL one and see it dead in the page within 5 s, drain
// another through the page and check through the API that it is draining;
// the sections show their data (the Mounts, File locks and Directory
// owners ones from node 1's mount where FUSE works); the key never appears
// in a URL. With CAIRN_UI_SCREENSHOTS=DIR the script
// also saves the screenshots of docs/admin-ui.md there.
func TestUI(t *testing.T) {
	root := repoRoot(t)
	nodeBin, chromium := uiBrowser(t, root)

	base := t.TempDir()
	a1, a2, a3 := freeAddr(t), freeAddr(t), freeAddr(t)
	g1, g2, g3 := freeAddr(t), freeAddr(t), freeAddr(t)
	// Node 1 mounts a bucket of its own where FUSE works, for the Mounts
	// section (mounting web would create it, private, before the test).
	mnt := ""
	if fuseUsable() {
		if err := os.Chmod(base, 0o755); err != nil {
			t.Fatal(err)
		}
		mnt = filepath.Join(base, "mnt")
		t.Setenv("CAIRN_MOUNT", "site:"+mnt+":flush") // the File locks section takes a lock through it
		t.Cleanup(func() { syscall.Unmount(mnt, syscall.MNT_DETACH) })
	}
	n1 := startGossipNode(t, filepath.Join(base, "n1"), a1, g1, "")
	os.Unsetenv("CAIRN_MOUNT")
	n2 := startGossipNode(t, filepath.Join(base, "n2"), a2, g2, n1.url)
	n3 := startGossipNode(t, filepath.Join(base, "n3"), a3, g3, n1.url)
	nodes := []*server{n1, n2, n3}
	waitVoters(t, n1, 3, nodes...)

	// Buckets, files and steady traffic, so that every section has data.
	for _, b := range []string{`{"name":"web","public":true,"trash_seconds":604800}`, `{"name":"backups","replicas":2,"write_quorum":2,"strict":true}`} {
		waitFor(t, 30*time.Second, "bucket "+b, func() bool {
			resp, _ := do(t, "POST", n1.url+"/_cairn/buckets", []byte(b), auth()...)
			return resp.StatusCode == 201 || resp.StatusCode == 409
		}, nodes...)
	}
	for i := range 30 {
		bucket := []string{"web", "backups"}[i%2]
		data := []byte(strings.Repeat(fmt.Sprintf("file %d|", i), 2000*(1+i%7)))
		resp, body := do(t, "PUT", fmt.Sprintf("%s/%s/f%02d.bin", n1.url, bucket, i), data, auth()...)
		if resp.StatusCode != 201 && resp.StatusCode != 200 {
			t.Fatalf("PUT: %d %s", resp.StatusCode, body)
		}
	}
	// An overwrite for web's trash (the Trash column: 1 file, kept 7d).
	resp, body := do(t, "PUT", n1.url+"/web/f00.bin", []byte("overwritten"), auth()...)
	expect(t, resp, body, 200)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // bounded: ends with the test
		defer wg.Done()
		tc := &http.Client{Timeout: 2 * time.Second}
		for i := 0; ctx.Err() == nil; i++ {
			u := fmt.Sprintf("%s/web/f%02d.bin", n1.url, (i*2)%30)
			if i%9 == 0 {
				u = n1.url + "/web/missing.bin" // some 404s for the 4xx line
			}
			if resp, err := tc.Get(u); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			select {
			case <-ctx.Done():
			case <-time.After(40 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() { cancel(); wg.Wait() })
	if mnt != "" { // some FUSE calls for the Mounts section
		waitFor(t, 30*time.Second, "the mount", func() bool { return mounted(mnt) }, nodes...)
		p := filepath.Join(mnt, "through-the-mount.txt")
		if err := os.WriteFile(p, []byte("hello"), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := os.ReadFile(p); err != nil {
			t.Fatal(err)
		}
		// A directory made through the mount, for the Directory owners
		// section: node 1 owns it (and the mount's root).
		if err := os.Mkdir(filepath.Join(mnt, "owned-here"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(mnt, "owned-here", "f.txt"), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		// A lock held through the mount, for the File locks section.
		lc := startLockClient(t, "ui-lock")
		lc.must("open "+p, "ok")
		lc.must("lock w 0 0", "ok")
	}

	id3 := nodeID(t, n3)
	id2 := nodeID(t, n2)

	rctx, rcancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer rcancel()
	cmd := exec.CommandContext(rctx, nodeBin, filepath.Join(root, "test", "ui", "ui.mjs"))
	cmd.Dir = filepath.Join(root, "test", "ui")
	cmd.Env = append(os.Environ(), "CAIRN_UI_URL="+n1.url, "CAIRN_UI_KEY="+adminKey, "CHROMIUM="+chromium)
	if mnt != "" {
		cmd.Env = append(cmd.Env, "CAIRN_UI_MOUNT="+mnt)
	}
	if dir := os.Getenv("CAIRN_UI_SCREENSHOTS"); dir != "" {
		abs, err := filepath.Abs(dir)
		if err != nil {
			t.Fatal(err)
		}
		cmd.Env = append(cmd.Env, "CAIRN_UI_SCREENSHOTS="+abs)
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start node test/ui/ui.mjs: %v", err)
	}
	answer := func(s string) {
		if _, err := io.WriteString(stdin, s+"\n"); err != nil {
			t.Errorf("write to the script: %v", err)
		}
	}
	done := false
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		line := sc.Text()
		t.Log("ui.mjs: " + line)
		word, rest, _ := strings.Cut(line, " ")
		switch word {
		case "ALIVE3":
			n3.kill()
			answer("KILLED " + id3 + " DRAIN " + id2)
		case "DRAINED":
			if rest != id2 {
				t.Errorf("the script drained %q, want %s", rest, id2)
			}
			resp, body := do(t, "GET", n1.url+"/_cairn/nodes/"+id2, nil, auth()...)
			var nd struct{ State string }
			if err := json.Unmarshal(body, &nd); err != nil || resp.StatusCode != 200 || nd.State != "draining" {
				t.Errorf("after the drain in the page, the API says %d %s", resp.StatusCode, body)
				answer("NO")
			} else {
				answer("OK")
			}
		case "CLIENT?":
			// A client node (issue 36) whose cache served a read.
			c := startCairn(t, "server", filepath.Join(base, "client"), freeAddr(t), "--join", n1.url, "--role", "client", "--cache-size", "10000000")
			hit := regexp.MustCompile(`(?m)^cairn_remote_cache_hits_total [1-9]`)
			waitFor(t, 30*time.Second, "a read through the client served from its cache", func() bool {
				status, _, _, err := timed("GET", c.url+"/web/f04.bin", nil)
				_, metrics, _, _ := timed("GET", c.url+"/_cairn/metrics", nil)
				return err == nil && status == 200 && hit.Match(metrics)
			}, n1, n2, c)
			answer("CLIENT " + nodeID(t, c))
		case "DONE":
			done = true
		}
	}
	stdin.Close()
	err = cmd.Wait()
	if stderr.Len() > 0 {
		t.Logf("ui.mjs stderr:\n%s", stderr.String())
	}
	if err != nil || !done {
		t.Fatalf("the browser test did not finish (DONE=%v): %v", done, err)
	}
}

// nodeID asks s for its node ID.
func nodeID(t *testing.T, s *server) string {
	t.Helper()
	resp, body := do(t, "GET", s.url+"/_cairn/status?local=1", nil, auth()...)
	expect(t, resp, body, 200)
	var v struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(body, &v); err != nil || v.ID == "" {
		t.Fatalf("node ID of %s: %v %s", s.addr, err, body)
	}
	return v.ID
}
