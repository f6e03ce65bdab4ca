package e2e

import (
	"bytes"
	"crypto/md5"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestResumeThroughAnotherNode: a download cut short on one node is
// finished with `curl -C -` and `wget -c` through other nodes of the
// cluster (a Range request for the rest: 206), and the file is whole and
// matches its .md5 sidecar, as the download server's clients check it.
func TestResumeThroughAnotherNode(t *testing.T) {
	for _, tool := range []string{"curl", "wget"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s is needed (Debian package %s)", tool, tool)
			}
			t.Skipf("SKIPPED: %s not installed", tool)
		}
	}
	nodes, _ := startThreeNodes(t, t.TempDir(), `{"name":"downloads","public":true,"checksum_sidecars":true}`)
	data := make([]byte, 2050*1024+17) // the download server's files: 2050 KB
	rand.Read(data)
	putOK(t, nodes[0].url+"/downloads/pkg.tar.gz", data, nodes...)
	sum := md5.Sum(data)
	for _, s := range nodes {
		getOK(t, s.url+"/downloads/pkg.tar.gz", data, nodes...)
	}

	run := func(dir, name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	check := func(file string) {
		t.Helper()
		got, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, data) {
			t.Fatalf("%s: %d bytes, not the file (%d bytes)", file, len(got), len(data))
		}
	}

	// curl: the first 700,000 bytes from node 1 (the cut download), then
	// `curl -C -` through node 2 asks for the rest.
	dir := t.TempDir()
	run(dir, "curl", "-sS", "-f", "-r", "0-699999", "-o", "pkg.tar.gz", nodes[0].url+"/downloads/pkg.tar.gz")
	if fi, _ := os.Stat(filepath.Join(dir, "pkg.tar.gz")); fi == nil || fi.Size() != 700000 {
		t.Fatalf("the cut download: %v", fi)
	}
	code := run(dir, "curl", "-sS", "-f", "-C", "-", "-o", "pkg.tar.gz", "-w", "%{http_code}", nodes[1].url+"/downloads/pkg.tar.gz")
	if code != "206" {
		t.Fatalf("curl -C - through node 2 answered %s, want 206", code)
	}
	check(filepath.Join(dir, "pkg.tar.gz"))
	md5file := run(dir, "curl", "-sS", "-f", nodes[2].url+"/downloads/pkg.tar.gz.md5")
	if want := hex.EncodeToString(sum[:]) + "  pkg.tar.gz\n"; md5file != want {
		t.Fatalf("pkg.tar.gz.md5 = %q, want %q", md5file, want)
	}
	run(dir, "sh", "-c", "printf '%s' \"$1\" > pkg.tar.gz.md5 && md5sum -c pkg.tar.gz.md5", "sh", md5file)

	// wget: a partial file of 1,500,000 bytes, then `wget -c` through
	// node 3 (its server response must be a 206 of the rest).
	dir = t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "pkg.tar.gz"), data[:1500000], 0o644); err != nil {
		t.Fatal(err)
	}
	out := run(dir, "wget", "-c", "-S", "--no-verbose", nodes[2].url+"/downloads/pkg.tar.gz")
	if !strings.Contains(out, "206 Partial Content") || !strings.Contains(out, fmt.Sprintf("Content-Range: bytes 1500000-%d/%d", len(data)-1, len(data))) {
		t.Fatalf("wget -c through node 3 did not get the rest as a 206:\n%s", out)
	}
	check(filepath.Join(dir, "pkg.tar.gz"))
}
