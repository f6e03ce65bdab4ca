package e2e

import (
	"bytes"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

var summaryRE = regexp.MustCompile(`uploaded (\d+) files .*skipped (\d+) unchanged, deleted (\d+), failed (\d+)`)

func syncCounts(t *testing.T, out string) (up, skipped, deleted, failed int) {
	t.Helper()
	m := summaryRE.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no sync summary in:\n%s", out)
	}
	fmt.Sscan(m[1], &up)
	fmt.Sscan(m[2], &skipped)
	fmt.Sscan(m[3], &deleted)
	fmt.Sscan(m[4], &failed)
	return
}

// TestSyncAgainstServer drives `cairn sync` against the real server.
func TestSyncAgainstServer(t *testing.T) {
	s := startServer(t, t.TempDir(), freeAddr(t))
	if out, err := s.cli("bucket", "create", "site", "--public"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	local := t.TempDir()
	rng := rand.New(rand.NewSource(7))
	var paths []string
	for i := 0; i < 60; i++ {
		p := filepath.Join(local, fmt.Sprintf("d%d", i%4), fmt.Sprintf("sub%d", i%3), fmt.Sprintf("f%d-%s", i, names[i%len(names)]))
		os.MkdirAll(filepath.Dir(p), 0o755)
		data := make([]byte, rng.Intn(50_000))
		rng.Read(data)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	out, err := s.cli("sync", local, "site/www", "--no-progress")
	if err != nil {
		t.Fatalf("sync: %v\n%s", err, out)
	}
	if up, _, _, failed := syncCounts(t, out); up != 60 || failed != 0 {
		t.Fatalf("first sync: %s", out)
	}
	// Every file is served with the same bytes.
	for _, p := range paths {
		rel, _ := filepath.Rel(local, p)
		want, _ := os.ReadFile(p)
		resp, body := do(t, "GET", s.url+"/site/www/"+escapePath(filepath.ToSlash(rel)), nil)
		expect(t, resp, body, 200)
		if !bytes.Equal(body, want) {
			t.Fatalf("%s differs after sync", rel)
		}
	}
	out, err = s.cli("sync", local, "site/www", "--no-progress")
	if err != nil {
		t.Fatalf("resync: %v\n%s", err, out)
	}
	if up, skipped, _, _ := syncCounts(t, out); up != 0 || skipped != 60 {
		t.Fatalf("second sync should skip everything: %s", out)
	}
	// Change one, delete one, then mirror with --delete.
	os.WriteFile(paths[0], []byte("changed"), 0o644)
	os.Chtimes(paths[0], time.Now().Add(time.Hour), time.Now().Add(time.Hour))
	os.Remove(paths[1])
	out, err = s.cli("sync", local, "site/www", "--no-progress", "--delete")
	if err != nil {
		t.Fatalf("sync --delete: %v\n%s", err, out)
	}
	if up, skipped, deleted, _ := syncCounts(t, out); up != 1 || skipped != 58 || deleted != 1 {
		t.Fatalf("sync --delete: %s", out)
	}
	rel1, _ := filepath.Rel(local, paths[1])
	resp, body := do(t, "GET", s.url+"/site/www/"+escapePath(filepath.ToSlash(rel1)), nil)
	expect(t, resp, body, 404)
	rel0, _ := filepath.Rel(local, paths[0])
	if out, err := s.cli("get", "site/www/"+filepath.ToSlash(rel0), "-"); err != nil || out != "changed" {
		t.Fatalf("cairn get: %v %q", err, out)
	}
}

// TestDiskFull fills a small tmpfs: writes get 507, no partial file is
// visible, reads keep working, and writes work again once space is freed.
func TestDiskFull(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a tmpfs")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=96m", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount tmpfs: %v %s", err, out)
	}
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
	s := startServer(t, dir, freeAddr(t), "--min-free-bytes", "16777216", "--gc-grace", "1s", "--gc-interval", "300ms", "--max-volume-size", "8388608")
	resp, body := do(t, "POST", s.url+"/_cairn/buckets", []byte(`{"name":"full","public":true}`), auth()...)
	expect(t, resp, body, 201)
	rng := rand.New(rand.NewSource(1))
	var stored []string
	var full bool
	for i := 0; i < 100; i++ {
		data := make([]byte, 5<<20)
		rng.Read(data)
		p := fmt.Sprintf("f%d", i)
		resp, body := do(t, "PUT", s.url+"/full/"+p, data, auth()...)
		if resp.StatusCode == 507 {
			full = true
			r2, b2 := do(t, "HEAD", s.url+"/full/"+p, nil)
			expect(t, r2, b2, 404)
			break
		}
		expect(t, resp, body, 201)
		stored = append(stored, p)
	}
	if !full {
		t.Fatal("never got 507 on a 96 MiB file system")
	}
	for _, p := range stored {
		resp, body := do(t, "GET", s.url+"/full/"+p, nil)
		expect(t, resp, body, 200)
	}
	resp, body = do(t, "GET", s.url+"/_cairn/health", nil)
	expect(t, resp, body, 200)
	if !strings.Contains(string(body), "ok") {
		t.Fatalf("health: %s", body)
	}
	// Free space by deleting files: after the GC grace period and a
	// compaction, writes succeed again.
	for _, p := range stored {
		resp, body := do(t, "DELETE", s.url+"/full/"+p, nil, auth()...)
		expect(t, resp, body, 204)
	}
	data := make([]byte, 5<<20)
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, body := do(t, "PUT", s.url+"/full/again", data, auth()...)
		if resp.StatusCode == 201 {
			break
		}
		if resp.StatusCode != 507 || time.Now().After(deadline) {
			t.Fatalf("write after freeing space: %d %s\n%s", resp.StatusCode, body, s.logs)
		}
		time.Sleep(200 * time.Millisecond) // waiting on the server's GC timer
	}
}
