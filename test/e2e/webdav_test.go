package e2e

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestWebDAV: litmus's basic, copymove, props, locks and http suites
// against a bucket over WebDAV (Debian's litmus, installed by make test);
// a lock taken through node 1 holds on node 3; Depth: infinity PROPFIND is
// refused; an access key works as Basic credentials; a public bucket is
// readable without.
func TestWebDAV(t *testing.T) {
	litmus, err := exec.LookPath("litmus")
	if err != nil {
		t.Fatal("litmus is not installed: `make test` installs it (Debian: apt-get install litmus)")
	}
	base := t.TempDir()
	n1 := startClusterNode(t, filepath.Join(base, "n1"), freeAddr(t), "")
	n2 := startClusterNode(t, filepath.Join(base, "n2"), freeAddr(t), n1.url)
	n3 := startClusterNode(t, filepath.Join(base, "n3"), freeAddr(t), n1.url)
	nodes := []*server{n1, n2, n3}
	waitFor(t, 30*time.Second, "bucket creation", func() bool {
		resp, _ := do(t, "POST", n1.url+"/_cairn/buckets", []byte(`{"name":"dav"}`), auth()...)
		return resp.StatusCode == 201 || resp.StatusCode == 409
	}, nodes...)
	do(t, "POST", n1.url+"/_cairn/buckets", []byte(`{"name":"davpub","public":true}`), auth()...)

	// litmus talks to node 2, which learns of the buckets when it applies
	// their creation (it joined a moment ago): its first MKCOL came before
	// that now and then and got 404 (make test, 2026-11-27). Wait until
	// node 2's WebDAV answers for both, with litmus's credentials.
	davAuth := []string{"Authorization", "Basic " + base64.StdEncoding.EncodeToString([]byte("anyone:"+adminKey)), "Depth", "0"}
	for _, b := range []string{"dav", "davpub"} {
		waitFor(t, 30*time.Second, "bucket "+b+" in node 2's WebDAV", func() bool {
			resp, _ := do(t, "PROPFIND", n2.url+"/_dav/"+b+"/", nil, davAuth...)
			return resp.StatusCode == 207
		}, nodes...)
	}

	// litmus through node 2, with the admin key as the Basic password.
	cmd := exec.Command(litmus, "-k", n2.url+"/_dav/dav/", "anyone", adminKey)
	cmd.Dir = t.TempDir()
	out, err := cmd.CombinedOutput()
	summary := regexp.MustCompile("summary for `([a-z]+)': of (\\d+) tests run: (\\d+) passed, (\\d+) failed").FindAllStringSubmatch(string(out), -1)
	if len(summary) != 5 {
		t.Fatalf("litmus: %v, %d suites reported:\n%s", err, len(summary), out)
	}
	for _, s := range summary {
		if s[4] != "0" {
			t.Errorf("litmus suite %s: %s of %s failed", s[1], s[4], s[2])
		}
	}
	if t.Failed() {
		t.Logf("litmus output:\n%s", out)
		t.Logf("node 2's log:\n%s", n2.logs.String())
	}

	basic := func(user, pass string) []string {
		return []string{"Authorization", "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))}
	}
	admin := basic("x", adminKey)
	resp, body := do(t, "PUT", n1.url+"/_dav/dav/locked.txt", []byte("v1"), admin...)
	expect(t, resp, body, 201)
	// A lock taken through node 1 ...
	lockBody := []byte(`<?xml version="1.0"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/></D:lockscope><D:locktype><D:write/></D:locktype><D:owner>e2e</D:owner></D:lockinfo>`)
	resp, body = do(t, "LOCK", n1.url+"/_dav/dav/locked.txt", lockBody, append(admin, "Timeout", "Second-60")...)
	expect(t, resp, body, 200)
	token := resp.Header.Get("Lock-Token")
	if token == "" {
		t.Fatal("LOCK without a Lock-Token")
	}
	// ... holds on node 3: a write without the token is refused, with it
	// accepted.
	waitFor(t, 5*time.Second, "the lock on node 3", func() bool {
		resp, _ := do(t, "PUT", n3.url+"/_dav/dav/locked.txt", []byte("intruder"), admin...)
		return resp.StatusCode == 423
	}, nodes...)
	resp, body = do(t, "PUT", n3.url+"/_dav/dav/locked.txt", []byte("v2"), append(admin, "If", "("+token+")")...)
	if resp.StatusCode != 204 && resp.StatusCode != 201 {
		t.Fatalf("PUT with the lock token through node 3: %d %s", resp.StatusCode, body)
	}
	resp, body = do(t, "UNLOCK", n3.url+"/_dav/dav/locked.txt", nil, append(admin, "Lock-Token", token)...)
	expect(t, resp, body, 204)
	waitFor(t, 5*time.Second, "the unlock on node 1", func() bool {
		resp, _ := do(t, "PUT", n1.url+"/_dav/dav/locked.txt", []byte("v3"), admin...)
		return resp.StatusCode == 204 || resp.StatusCode == 201
	}, nodes...)

	// Depth: infinity is refused.
	resp, body = do(t, "PROPFIND", n1.url+"/_dav/dav/", nil, append(admin, "Depth", "infinity")...)
	if resp.StatusCode != 403 || !bytes.Contains(body, []byte("propfind-finite-depth")) {
		t.Fatalf("PROPFIND Depth: infinity: %d %s", resp.StatusCode, body)
	}
	// An access key as Basic credentials; none for a public bucket's reads.
	resp, body = do(t, "POST", n1.url+"/_cairn/keys", []byte(`{"name":"davkey","buckets":["dav"],"allow":"read,list"}`), auth()...)
	expect(t, resp, body, 201)
	var k struct{ ID, Secret string }
	if err := json.Unmarshal(body, &k); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the key on node 3", func() bool {
		resp, body := do(t, "GET", n3.url+"/_dav/dav/locked.txt", nil, basic(k.ID, k.Secret)...)
		return resp.StatusCode == 200 && string(body) == "v3"
	}, nodes...)
	resp, body = do(t, "PUT", n3.url+"/_dav/dav/nope.txt", []byte("x"), basic(k.ID, k.Secret)...)
	expect(t, resp, body, 403)
	resp, body = do(t, "GET", n3.url+"/_dav/dav/locked.txt", nil)
	if resp.StatusCode != 401 || !strings.Contains(resp.Header.Get("Www-Authenticate"), "Basic") {
		t.Fatalf("anonymous read of a private bucket: %d %v", resp.StatusCode, resp.Header)
	}
	resp, body = do(t, "PUT", n1.url+"/davpub/page.html", []byte("<p>pub</p>"), auth()...)
	expect(t, resp, body, 201)
	waitFor(t, 5*time.Second, "a public read over WebDAV", func() bool {
		resp, body := do(t, "GET", n2.url+"/_dav/davpub/page.html", nil)
		return resp.StatusCode == 200 && string(body) == "<p>pub</p>"
	}, nodes...)
	// What WebDAV wrote is what HTTP serves.
	resp, body = do(t, "GET", n2.url+"/dav/locked.txt", nil, auth()...)
	if resp.StatusCode != 200 || string(body) != "v3" {
		t.Fatalf("native GET of a WebDAV file: %d %q", resp.StatusCode, body)
	}
}

// TestDavfs2Untar: davfs2 mounts a bucket's WebDAV URL and an untar of
// 5,000 files through it lands in the bucket (davfs2 uploads each file
// with a LOCK, a PUT and an UNLOCK). davfs2's directory listings fail on
// this kernel with any server (rclone's too): the test does not list
// through the mount; it checks the bucket through the native API.
func TestDavfs2Untar(t *testing.T) {
	needFuse(t)
	mountDavfs, err := exec.LookPath("mount.davfs")
	if err != nil {
		t.Skip("no mount.davfs (Debian package davfs2; make test installs it as root)")
	}
	work := t.TempDir()
	s := startServer(t, filepath.Join(work, "data"), freeAddr(t))
	resp, body := do(t, "POST", s.url+"/_cairn/buckets", []byte(`{"name":"davfs"}`), auth()...)
	expect(t, resp, body, 201)

	// A tree of 5,000 small files, 50 directories of 100.
	src := filepath.Join(work, "src")
	for d := range 50 {
		dir := filepath.Join(src, fmt.Sprintf("d%02d", d))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for f := range 100 {
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%03d.txt", f)), []byte(fmt.Sprintf("file %d/%d\n", d, f)), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	tarball := filepath.Join(work, "t.tar")
	if out, err := exec.Command("tar", "-cf", tarball, "-C", src, ".").CombinedOutput(); err != nil {
		t.Fatalf("tar -c: %v %s", err, out)
	}

	// davfs2 runs as its own user: its cache must be reachable and
	// writable by it (t.TempDir's parent is private).
	pub, err := os.MkdirTemp("", "cairn-davfs2-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(pub) })
	os.Chmod(pub, 0o755)
	cache, mnt := filepath.Join(pub, "cache"), filepath.Join(pub, "mnt")
	for _, d := range []string{cache, mnt} {
		if err := os.MkdirAll(d, 0o777); err != nil {
			t.Fatal(err)
		}
		os.Chmod(d, 0o777)
	}
	davURL := s.url + "/_dav/davfs/"
	secrets := filepath.Join(work, "secrets")
	if err := os.WriteFile(secrets, []byte(davURL+" anyone "+adminKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(work, "davfs2.conf")
	if err := os.WriteFile(conf, []byte("cache_dir "+cache+"\nsecrets "+secrets+"\ndelay_upload 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mount := exec.Command(mountDavfs, "-o", "conf="+conf, davURL, mnt)
	if out, err := mount.CombinedOutput(); err != nil {
		t.Fatalf("mount.davfs: %v %s", err, out)
	}
	mounted := true
	t.Cleanup(func() {
		if mounted {
			exec.Command("umount", mnt).Run()
		}
	})
	start := time.Now()
	untar := exec.Command("tar", "-xf", tarball, "-C", mnt)
	if out, err := untar.CombinedOutput(); err != nil {
		t.Fatalf("tar -x into the davfs2 mount: %v %s", err, out)
	}
	// umount waits for davfs2 to upload what it still holds.
	if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
		t.Fatalf("umount: %v %s", err, out)
	}
	mounted = false
	t.Logf("untar of 5,000 files through davfs2 and umount: %v", time.Since(start).Round(time.Millisecond))

	n, err := countFiles(s.url, "davfs")
	if err != nil || n != 5000 {
		t.Fatalf("the bucket holds %d files (%v), want 5000", n, err)
	}
	// Every file holds what was written. Empty files were seen twice
	// (2026-11-27): a LOCK's token was dropped from the node's memory by
	// a lock reload that had listed the records before the LOCK applied,
	// so davfs2's PUT with that token got 412 and the file stayed as the
	// LOCK created it, empty (webdav.Locks.Generation fixes it).
	var bad []string
	for d := range 50 {
		for f := range 100 {
			p := fmt.Sprintf("d%02d/f%03d.txt", d, f)
			resp, body := do(t, "GET", s.url+"/davfs/"+p, nil, auth()...)
			if want := fmt.Sprintf("file %d/%d\n", d, f); resp.StatusCode != 200 || string(body) != want {
				bad = append(bad, fmt.Sprintf("%s: %d %q", p, resp.StatusCode, body))
			}
		}
	}
	if len(bad) > 0 {
		dumpLogs(t, s)
		t.Fatalf("%d of 5000 files written through davfs2 read wrong, first: %v", len(bad), bad[:min(5, len(bad))])
	}
}

// countFiles counts the files of a bucket through the native listing.
func countFiles(base, bucket string) (int, error) {
	n, after := 0, ""
	for range 1000 {
		resp, body := doQuiet(base+"/"+bucket+"/?recursive=1&limit=10000&after="+url.QueryEscape(after), "Authorization", "Bearer "+adminKey, "Accept", "application/json")
		if resp == nil || resp.StatusCode != 200 {
			return n, fmt.Errorf("listing: %v", resp)
		}
		var page struct {
			Entries []struct {
				IsDir bool `json:"is_dir"`
			} `json:"entries"`
			Truncated bool   `json:"truncated"`
			Next      string `json:"next_token"`
		}
		if err := json.Unmarshal(body, &page); err != nil {
			return n, err
		}
		for _, e := range page.Entries {
			if !e.IsDir {
				n++
			}
		}
		if !page.Truncated {
			return n, nil
		}
		after = page.Next
	}
	return n, fmt.Errorf("too many pages")
}

// doQuiet is a GET that returns nil on a transport error.
func doQuiet(u string, hdr ...string) (*http.Response, []byte) {
	req, err := http.NewRequest("GET", u, nil)
	if err != nil {
		return nil, nil
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := httpc.Do(req)
	if err != nil {
		return nil, nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}
