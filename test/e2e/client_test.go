package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	sdks3 "github.com/aws/aws-sdk-go-v2/service/s3"
)

// TestClientNode (issue 36): two data nodes and a client node (`cairn
// server --role client`) in a cluster that wants three voters. The
// client is recorded as a client and stays a learner (never promoted,
// though a voter is missing); it serves reads and takes writes over HTTP,
// WebDAV, S3 and its mount, holds no
// blob but the few its cache holds (both data nodes hold every one); a drain of it is refused; when
// it is killed the data nodes take writes as before and hold the same
// blobs (no repair: no copy was ever planned on it).
func TestClientNode(t *testing.T) {
	base := t.TempDir()
	d1 := startCairn(t, "server", filepath.Join(base, "d1"), freeAddr(t))
	d2 := startCairn(t, "server", filepath.Join(base, "d2"), freeAddr(t), "--join", d1.url)
	// A disk cache of about three of the files below; where FUSE works, a
	// mount of bucket site (made by the mount).
	cargs := []string{"--join", d1.url, "--role", "client", "--cache-size", "30000"}
	mnt := ""
	if fuseUsable() {
		mnt = filepath.Join(base, "mnt")
		cargs = append(cargs, "--mount", "site:"+mnt)
		t.Cleanup(func() { syscall.Unmount(mnt, syscall.MNT_DETACH) })
	}
	c := startCairn(t, "server", filepath.Join(base, "c"), freeAddr(t), cargs...)
	all := []*server{d1, d2, c}
	type member struct {
		ID    string `json:"id"`
		URL   string `json:"url"`
		State string `json:"state"`
		Role  string `json:"role"`
	}
	members := func() map[string]member {
		_, body, _, err := timed("GET", d1.url+"/_cairn/nodes", nil, auth()...)
		var v struct {
			Nodes []member `json:"nodes"`
		}
		if err != nil || json.Unmarshal(body, &v) != nil {
			return nil
		}
		out := map[string]member{}
		for _, n := range v.Nodes {
			out[n.URL] = n
		}
		return out
	}
	waitFor(t, 30*time.Second, "two voters and the client recorded", func() bool {
		m := members()
		return m[d1.url].Role == "voter" && m[d2.url].Role == "voter" && m[c.url].State == "client"
	}, all...)
	time.Sleep(3 * time.Second) // several promotion rounds of the leader
	if m := members(); m[c.url].Role != "learner" || m[c.url].State != "client" {
		t.Fatalf("the client node is %+v: want a learner in state client", m[c.url])
	}

	waitFor(t, 30*time.Second, "bucket creation", func() bool {
		resp, _ := do(t, "POST", d1.url+"/_cairn/buckets",
			[]byte(`{"name":"web","public":true,"replicas":2}`), auth()...)
		return resp.StatusCode == 201 || resp.StatusCode == 409
	}, all...)
	files := map[string][]byte{}
	for i := range 6 {
		via := all[i%3]
		p := fmt.Sprintf("f%d.txt", i)
		files[p] = []byte(strings.Repeat(fmt.Sprintf("file %d via %s\n", i, via.addr), 200+i))
		putOK(t, via.url+"/web/"+p, files[p], all...)
	}
	for _, s := range all {
		for p, data := range files {
			getOK(t, s.url+"/web/"+p, data, all...)
		}
	}
	waitFor(t, 20*time.Second, "a copy of every blob on both data nodes", func() bool {
		return nodeBlobs(d1) >= len(files) && nodeBlobs(d2) >= len(files)
	}, all...)
	// The client's blob store is its cache: at most what its bound holds
	// (70% of 30,000 B: three of these files), not a share of the data.
	waitFor(t, 10*time.Second, "the client's cache within its bound", func() bool {
		n := nodeBlobs(c)
		return n >= 0 && n <= 3
	}, all...)
	// Its reads went through its disk cache: hits on a second read, files
	// under DATA/cache within the bound, evictions past it.
	metric := func(name string) int {
		_, body, _, _ := timed("GET", c.url+"/_cairn/metrics", nil)
		m := regexp.MustCompile(`(?m)^` + name + ` (\d+)`).FindSubmatch(body)
		if m == nil {
			t.Fatalf("no metric %s on the client", name)
		}
		n, _ := strconv.Atoi(string(m[1]))
		return n
	}
	// A fetched blob is kept in the background: read until a read hits.
	waitFor(t, 10*time.Second, "a read through the client served from its cache", func() bool {
		getOK(t, c.url+"/web/f5.txt", files["f5.txt"], all...)
		return metric("cairn_remote_cache_hits_total") > 0
	}, all...)
	if metric("cairn_remote_cache_on_disk") != 1 || metric("cairn_remote_cache_hits_total") == 0 || metric("cairn_remote_cache_evictions_total") == 0 {
		t.Fatalf("disk cache: on disk %d, hits %d, evictions %d", metric("cairn_remote_cache_on_disk"),
			metric("cairn_remote_cache_hits_total"), metric("cairn_remote_cache_evictions_total"))
	}
	var cached int64
	filepath.WalkDir(filepath.Join(c.dir, "cache"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if info, ierr := d.Info(); ierr == nil {
				cached += info.Size()
			}
		}
		return nil
	})
	if cached == 0 || cached > 30000 {
		t.Fatalf("%d bytes under the client's cache directory (bound 30000)", cached)
	}
	if out, err := d1.cli("status"); err != nil || !regexp.MustCompile(`(?m)^node \d+'s blob cache \(client\): .* of 29\.3 KiB, .*[1-9]\d* hits, \d+ misses, [1-9]\d* evictions`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^\d+ +`+regexp.QuoteMeta(c.url)+` +client `).MatchString(out) {
		t.Fatalf("cairn status: %v\n%s", err, out)
	}
	// WebDAV and S3 through the client: reads of what the data nodes hold,
	// writes the data nodes serve.
	dav := []string{"Authorization", "Basic " + base64.StdEncoding.EncodeToString([]byte("x:"+adminKey))}
	resp, body := do(t, "GET", c.url+"/_dav/web/f1.txt", nil, dav...)
	if resp.StatusCode != 200 || !bytes.Equal(body, files["f1.txt"]) {
		t.Fatalf("WebDAV GET through the client: %d (%d bytes)", resp.StatusCode, len(body))
	}
	resp, body = do(t, "PUT", c.url+"/_dav/web/dav.txt", []byte("put over WebDAV through the client"), dav...)
	if resp.StatusCode != 201 {
		t.Fatalf("WebDAV PUT through the client: %d %s", resp.StatusCode, body)
	}
	getOK(t, d2.url+"/web/dav.txt", []byte("put over WebDAV through the client"), all...)
	resp, body = do(t, "POST", d1.url+"/_cairn/keys", []byte(`{"name":"client-s3","buckets":["web"]}`), auth()...)
	expect(t, resp, body, 201)
	var key struct{ ID, Secret string }
	if err := json.Unmarshal(body, &key); err != nil {
		t.Fatal(err)
	}
	s3c := sdks3.New(sdks3.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(c.url), UsePathStyle: true, RetryMaxAttempts: 1,
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: key.ID, SecretAccessKey: key.Secret}, nil
		}),
	})
	waitFor(t, 10*time.Second, "the access key on the client", func() bool {
		out, err := s3c.GetObject(context.Background(), &sdks3.GetObjectInput{Bucket: aws.String("web"), Key: aws.String("f3.txt")})
		if err != nil {
			return false
		}
		defer out.Body.Close()
		got, err := io.ReadAll(out.Body)
		return err == nil && bytes.Equal(got, files["f3.txt"])
	}, all...)
	if _, err := s3c.PutObject(context.Background(), &sdks3.PutObjectInput{Bucket: aws.String("web"), Key: aws.String("s3.txt"),
		Body: strings.NewReader("put over S3 through the client")}); err != nil {
		t.Fatalf("S3 PutObject through the client: %v", err)
	}
	getOK(t, d1.url+"/web/s3.txt", []byte("put over S3 through the client"), all...)
	// The mount: a file written through it reaches the data nodes, one
	// written on a data node is read through it.
	if mnt != "" {
		waitFor(t, 30*time.Second, "the client's mount", func() bool { return mounted(mnt) }, all...)
		if err := os.WriteFile(filepath.Join(mnt, "via-mount.txt"), []byte("written through the client's mount"), 0o644); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 10*time.Second, "the mount's file on a data node", func() bool {
			_, got, _, err := timed("GET", d2.url+"/site/via-mount.txt", nil, auth()...)
			return err == nil && string(got) == "written through the client's mount"
		}, all...)
		resp, body := do(t, "PUT", d1.url+"/site/from-d1.txt", []byte("written on data node 1"), auth()...)
		expect(t, resp, body, 201)
		waitFor(t, 10*time.Second, "data node 1's file through the client's mount", func() bool {
			got, err := os.ReadFile(filepath.Join(mnt, "from-d1.txt"))
			return err == nil && string(got) == "written on data node 1"
		}, all...)
	}

	if resp, body := do(t, "POST", d1.url+"/_cairn/nodes/"+members()[c.url].ID+"/drain", nil, auth()...); resp.StatusCode != 409 ||
		!strings.Contains(string(body), "client node") {
		t.Fatalf("drain of the client: %d %s", resp.StatusCode, body)
	}

	// Gone: nothing moves, writes go on.
	b1, b2 := nodeBlobs(d1), nodeBlobs(d2)
	c.kill()
	putOK(t, d1.url+"/web/after.txt", []byte("after the client left"), d1, d2)
	getOK(t, d2.url+"/web/after.txt", []byte("after the client left"), d1, d2)
	time.Sleep(3 * time.Second)
	if n1, n2 := nodeBlobs(d1), nodeBlobs(d2); n1 != b1+1 || n2 != b2+1 {
		t.Fatalf("data nodes hold %d and %d blobs, want %d and %d: something moved", n1, n2, b1+1, b2+1)
	}
	if m := members(); m[c.url].State != "client" {
		t.Fatalf("the client node, down, is %+v", m[c.url])
	}
}
