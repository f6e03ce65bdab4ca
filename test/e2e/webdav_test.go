package e2e

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
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
