package e2e

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSnapshots: a snapshot taken with the CLI stays exactly as taken
// while the live tree changes (its digest, over HTTP and through the
// mount's .snapshots/NAME/), the mount's .snapshots is hidden from
// listings and refuses writes with EROFS, and a node that joins the
// cluster afterwards serves the snapshot too.
func TestSnapshots(t *testing.T) {
	needFuse(t)
	nodes, mnts := startMountCluster(t, 1)
	n1, mnt := nodes[0], mnts[0]
	// A tree written through the mount.
	tree := map[string][]byte{}
	for i := range 120 {
		p := fmt.Sprintf("site/d%d/page%03d.php", i%5, i)
		tree[p] = []byte(fmt.Sprintf("<?php // page %d %s", i, strings.Repeat("x", i*13)))
		full := filepath.Join(mnt, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, tree[p], 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Published and visible over HTTP before the snapshot.
	for p, data := range tree {
		waitFor(t, 20*time.Second, "GET "+p, func() bool {
			resp, body := do(t, "GET", n1.url+"/web/"+p, nil, auth()...)
			return resp.StatusCode == 200 && bytes.Equal(body, data)
		}, n1)
	}
	if out, err := n1.cli("snapshot", "create", "web", "before"); err != nil || !strings.Contains(out, "snapshot before of web taken") {
		t.Fatalf("cairn snapshot create: %v\n%s", err, out)
	}
	// The live tree changes: a hacked plugin rewrites every PHP file of
	// one directory, another directory goes, a file is added.
	for p := range tree {
		switch {
		case strings.HasPrefix(p, "site/d0/"):
			if err := os.WriteFile(filepath.Join(mnt, p), []byte("<?php eval($_GET['x']);"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := os.RemoveAll(filepath.Join(mnt, "site/d1")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(mnt, "site/backdoor.php"), []byte("<?php system($_GET['c']);"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the changes published", func() bool {
		resp, _ := do(t, "GET", n1.url+"/web/site/backdoor.php", nil, auth()...)
		return resp.StatusCode == 200
	}, n1)
	digest := func(files map[string][]byte) string {
		var keys []string
		for k := range files {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		h := sha256.New()
		for _, k := range keys {
			fmt.Fprintf(h, "%s\x00%x\n", k, sha256.Sum256(files[k]))
		}
		return fmt.Sprintf("%x", h.Sum(nil))
	}
	want := digest(tree)
	// Over HTTP: every file, and the listing holds nothing more.
	readHTTP := func(s *server) map[string][]byte {
		got := map[string][]byte{}
		for p := range tree {
			resp, body := do(t, "GET", s.url+"/_snapshots/web/before/"+p, nil, auth()...)
			if resp.StatusCode != 200 {
				t.Fatalf("GET snapshot %s on %s: %d %s", p, s.addr, resp.StatusCode, body)
			}
			got[p] = body
		}
		resp, body := do(t, "GET", s.url+"/_snapshots/web/before/site/?recursive=1&limit=1000", nil, auth()...)
		if resp.StatusCode != 200 || strings.Count(string(body), `"path"`) != len(tree) || strings.Contains(string(body), "backdoor") {
			t.Fatalf("snapshot listing on %s: %d %s", s.addr, resp.StatusCode, body)
		}
		return got
	}
	if got := digest(readHTTP(n1)); got != want {
		t.Fatalf("snapshot digest over HTTP %s, want %s", got, want)
	}
	// Through the mount.
	got := map[string][]byte{}
	for p := range tree {
		b, err := os.ReadFile(filepath.Join(mnt, ".snapshots/before", p))
		if err != nil {
			t.Fatalf("read the snapshot through the mount: %v", err)
		}
		got[p] = b
	}
	if d := digest(got); d != want {
		t.Fatalf("snapshot digest through the mount %s, want %s", d, want)
	}
	if _, err := os.Stat(filepath.Join(mnt, ".snapshots/before/site/backdoor.php")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a file made after the snapshot is in it: %v", err)
	}
	ents, err := os.ReadDir(mnt)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.Name() == ".snapshots" {
			t.Fatal(".snapshots is listed at the mount's root")
		}
	}
	snaps, err := os.ReadDir(filepath.Join(mnt, ".snapshots"))
	if err != nil || len(snaps) != 1 || snaps[0].Name() != "before" {
		t.Fatalf("ls .snapshots: %v %v", snaps, err)
	}
	for what, err := range map[string]error{
		"write":  os.WriteFile(filepath.Join(mnt, ".snapshots/before/site/d0/page000.php"), []byte("x"), 0o644),
		"create": os.WriteFile(filepath.Join(mnt, ".snapshots/before/new.txt"), []byte("x"), 0o644),
		"mkdir":  os.Mkdir(filepath.Join(mnt, ".snapshots/before/newdir"), 0o755),
		"unlink": os.Remove(filepath.Join(mnt, ".snapshots/before/site/d2/page002.php")),
		"chmod":  os.Chmod(filepath.Join(mnt, ".snapshots/before/site/d2/page002.php"), 0o600),
	} {
		if !errors.Is(err, syscall.EROFS) {
			t.Fatalf("%s in a snapshot: %v, want EROFS", what, err)
		}
	}
	// A node that joins afterwards serves the snapshot (the Raft snapshot
	// or log carries the overlays).
	n2 := startCairn(t, "server", filepath.Join(t.TempDir(), "n2"), freeAddr(t), "--join", n1.url)
	waitMembers(t, n1, 2, n1, n2)
	waitFor(t, 30*time.Second, "the snapshot on the new node", func() bool {
		resp, _ := do(t, "GET", n2.url+"/_snapshots/web/before/site/d0/page000.php", nil, auth()...)
		return resp.StatusCode == 200
	}, n1, n2)
	if got := digest(readHTTP(n2)); got != want {
		t.Fatalf("snapshot digest on the new node %s, want %s", got, want)
	}
	if out, err := n1.cli("snapshot", "list", "web"); err != nil || !strings.Contains(out, "before") {
		t.Fatalf("cairn snapshot list: %v\n%s", err, out)
	}
	// Undo the hack: the tree as it was, the backdoor gone, on every
	// node and through the mount.
	out, err := n1.cli("snapshot", "restore", "web", "before", "site", "--delete")
	if err != nil || !strings.Contains(out, "restored 48 files from snapshot before (72 unchanged, 1 directories made") || !strings.Contains(out, "1 deleted") {
		t.Fatalf("cairn snapshot restore: %v\n%s", err, out)
	}
	for _, s := range []*server{n1, n2} {
		live := map[string][]byte{}
		for p := range tree {
			waitFor(t, 10*time.Second, "restored "+p+" on "+s.addr, func() bool {
				resp, body := do(t, "GET", s.url+"/web/"+p, nil, auth()...)
				live[p] = body
				return resp.StatusCode == 200 && bytes.Equal(body, tree[p])
			}, n1, n2)
		}
		if d := digest(live); d != want {
			t.Fatalf("live digest after the restore on %s: %s, want %s", s.addr, d, want)
		}
		if resp, _ := do(t, "GET", s.url+"/web/site/backdoor.php", nil, auth()...); resp.StatusCode != 404 {
			t.Fatalf("the backdoor after the restore on %s: %d", s.addr, resp.StatusCode)
		}
	}
	waitFile(t, 10*time.Second, filepath.Join(mnt, "site/d1/page001.php"), tree["site/d1/page001.php"], n1)
	if out, err := n1.cli("snapshot", "schedule", "web", "hourly=24", "daily=7"); err != nil || out != "web: keeps 24 hourly, 7 daily, 0 weekly snapshots\n" {
		t.Fatalf("cairn snapshot schedule: %v\n%s", err, out)
	}
	if out, err := n2.cli("snapshot", "schedule", "web"); err != nil || out != "web: keeps 24 hourly, 7 daily, 0 weekly snapshots\n" {
		t.Fatalf("the schedule seen through node 2: %v\n%s", err, out)
	}
	if out, err := n1.cli("snapshot", "schedule", "web", "hourly=x"); err == nil {
		t.Fatalf("a bad schedule was taken: %s", out)
	}
	if out, err := n1.cli("snapshot", "delete", "web", "before"); err != nil {
		t.Fatalf("cairn snapshot delete: %v\n%s", err, out)
	}
	if resp, _ := do(t, "GET", n1.url+"/_snapshots/web/before/site/d0/page000.php", nil, auth()...); resp.StatusCode != 404 {
		t.Fatalf("a deleted snapshot answers %d", resp.StatusCode)
	}
}
