package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	sdks3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/cairn-fs/cairn/client"
)

// TestTrashUndo: on a node (a one-node cluster) with a bucket whose trash
// keeps 7 days, three mistakes are undone with cairn trash, each checked
// file by file (content and count): an rm -rf of a tree of 240 files
// through the FUSE mount (restored at the time trash list printed); a
// cairn sync --delete of an empty folder onto a synced tree; and an
// overwrite of 1,000 files through S3, undone as docs/operations.md says
// (note the time, remove the bad versions, restore --at the time: the
// previous versions come back). The trash's usage shows in cairn status
// and the metrics, and emptying it drops it.
func TestTrashUndo(t *testing.T) {
	base := t.TempDir()
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	mnt := ""
	var args []string
	if fuseUsable() {
		mnt = filepath.Join(base, "mnt")
		args = []string{"--mount", "web:" + mnt}
		t.Cleanup(func() { syscall.Unmount(mnt, syscall.MNT_DETACH) })
	}
	n := startCairn(t, "server", filepath.Join(base, "n1"), freeAddr(t), args...)
	if mnt != "" {
		waitFor(t, 30*time.Second, "the mount", func() bool { return mounted(mnt) }, n) // it makes the bucket
	} else {
		waitFor(t, 30*time.Second, "bucket creation", func() bool {
			resp, _ := do(t, "POST", n.url+"/_cairn/buckets", []byte(`{"name":"web"}`), auth()...)
			return resp.StatusCode == 201 || resp.StatusCode == 409
		}, n)
	}
	cli := func(t *testing.T, args ...string) string {
		t.Helper()
		out, err := n.cli(args...)
		if err != nil {
			t.Fatalf("cairn %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	// A new cluster starts at an old log version and raises it at once;
	// until then the trash is refused (409 NotUpgraded).
	var setOut string
	waitFor(t, 30*time.Second, "the trash setting (the cluster's log version)", func() bool {
		out, err := n.cli("bucket", "set", "web", "--trash", "7d")
		setOut = out
		return err == nil || !strings.Contains(out, "NotUpgraded")
	}, n)
	if !strings.Contains(setOut, "trash=7d") {
		t.Fatalf("bucket set --trash 7d: %s", setOut)
	}
	c := client.New(n.url, adminKey)

	// A local tree of 240 files (one empty), uploaded twice by cairn sync.
	local := filepath.Join(base, "local")
	tree := map[string][]byte{}
	rng := rand.New(rand.NewSource(23))
	for i := range 240 {
		rel := fmt.Sprintf("d%02d/%s/f%03d.dat", i%12, []string{"a", "b"}[i%2], i)
		data := make([]byte, (i*997)%20000)
		rng.Read(data)
		tree[rel] = data
		p := filepath.Join(local, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("rm -rf through the mount", func(t *testing.T) {
		if mnt == "" {
			t.Skip("no FUSE here (needs root, /dev/fuse and fusermount3)")
		}
		start := time.Now()
		if out := cli(t, "sync", local, "web/tree", "--no-progress"); !strings.Contains(out, "uploaded 240 files") {
			t.Fatalf("sync: %s", out)
		}
		last := filepath.Join(mnt, "tree", "d11", "b", "f239.dat")
		waitFile(t, 10*time.Second, last, tree["d11/b/f239.dat"], n)
		if out, err := exec.Command("rm", "-rf", filepath.Join(mnt, "tree")).CombinedOutput(); err != nil {
			t.Fatalf("rm -rf: %v %s", err, out)
		}
		syncDir(t, mnt) // publishes the queued unlinks
		checkGone(t, c, "tree")

		// The table, as an operator reads it: every file, deleted through
		// the mount; restore at the newest time it printed.
		out := cli(t, "trash", "list", "web", "tree/")
		rows := trashRows(t, out)
		if len(rows) != 240 || !strings.Contains(out, "the trash of web under tree/: 240 entries") {
			t.Fatalf("trash list: %d rows\n%s", len(rows), out)
		}
		newest, id := "", nodeID(t, n)
		for _, r := range rows {
			if _, ok := tree[strings.TrimPrefix(r.path, "tree/")]; !ok || r.kind != "deleted" {
				t.Fatalf("row %+v", r)
			}
			if o := r.origin; o != id+"/mount/-" {
				t.Fatalf("origin of an rm through the mount: %q", o)
			}
			newest = max(newest, r.deleted)
		}
		if out := cli(t, "trash", "restore", "web", "tree/", "--at", newest); out != "restored 240 files under web/tree/\n" {
			t.Fatalf("restore --at %q: %s", newest, out)
		}
		checkTree(t, c, "tree", tree)
		// And through the mount, once its caches hear of the new files.
		waitFor(t, 10*time.Second, "the restored tree through the mount", func() bool {
			for rel, want := range tree {
				if got, err := os.ReadFile(filepath.Join(mnt, "tree", rel)); err != nil || !bytes.Equal(got, want) {
					return false
				}
			}
			return true
		}, n)
		if out := cli(t, "trash", "list", "web", "tree/"); out != "the trash of web under tree/ holds nothing\n" {
			t.Fatalf("after the restore: %s", out)
		}
		t.Logf("rm -rf of 240 files through the mount undone in %v", time.Since(start).Round(time.Millisecond))
	})

	t.Run("sync --delete of an empty folder", func(t *testing.T) {
		start := time.Now()
		if out := cli(t, "sync", local, "web/synced", "--no-progress"); !strings.Contains(out, "uploaded 240 files") {
			t.Fatalf("sync: %s", out)
		}
		empty := filepath.Join(base, "empty")
		if err := os.Mkdir(empty, 0o755); err != nil {
			t.Fatal(err)
		}
		if out := cli(t, "sync", empty, "web/synced", "--delete", "--no-progress"); !strings.Contains(out, "deleted 240") {
			t.Fatalf("sync --delete: %s", out)
		}
		checkGone(t, c, "synced")
		list, _, err := c.TrashPage(context.Background(), "web", "synced/", "", 0)
		if err != nil || len(list) != 240 {
			t.Fatalf("trash of synced/: %d entries, %v", len(list), err)
		}
		for _, e := range list {
			if e.Node == 0 || e.Frontend != "http" || e.Key != "admin" || e.Replaced {
				t.Fatalf("entry of a sync --delete: %+v", e)
			}
		}
		if out := cli(t, "trash", "restore", "web", "/synced/"); out != "restored 240 files under web/synced/\n" {
			t.Fatalf("restore: %s", out)
		}
		checkTree(t, c, "synced", tree)
		t.Logf("sync --delete of 240 files undone in %v", time.Since(start).Round(time.Millisecond))
	})

	t.Run("overwrite of 1000 files through S3", func(t *testing.T) {
		start := time.Now()
		resp, body := do(t, "POST", n.url+"/_cairn/keys", []byte(`{"name":"deploy","buckets":["web"]}`), auth()...)
		expect(t, resp, body, 201)
		var k struct{ ID, Secret string }
		if err := json.Unmarshal(body, &k); err != nil {
			t.Fatal(err)
		}
		s3c := sdks3.New(sdks3.Options{
			Region: "us-east-1", BaseEndpoint: aws.String(n.url), UsePathStyle: true, RetryMaxAttempts: 1,
			Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
				return aws.Credentials{AccessKeyID: k.ID, SecretAccessKey: k.Secret}, nil
			}),
		})
		const files = 1000
		version := func(v string, i int) []byte {
			return []byte(strings.Repeat(fmt.Sprintf("%s of file %d\n", v, i), 1+i%7))
		}
		v1 := map[string][]byte{}
		for i := range files {
			v1[fmt.Sprintf("k%04d.txt", i)] = version("v1", i)
		}
		putAll := func(v string) {
			t.Helper()
			s3Each(t, files, func(ctx context.Context, i int) error {
				_, err := s3c.PutObject(ctx, &sdks3.PutObjectInput{Bucket: aws.String("web"), Key: aws.String(fmt.Sprintf("s3/k%04d.txt", i)),
					Body: bytes.NewReader(version(v, i))})
				return err
			})
		}
		putAll("v1")
		putAll("v2") // the mistake: every file overwritten

		// 1. Note the time: after the overwrite, before touching anything;
		// the newest DELETED of the overwrite's entries, to the nanosecond.
		var list []client.TrashEntry
		if err := json.Unmarshal([]byte(cli(t, "trash", "list", "web", "s3/", "--json")), &list); err != nil || len(list) != files {
			t.Fatalf("trash list --json: %d entries, %v", len(list), err)
		}
		var at time.Time
		for _, e := range list {
			if !e.Replaced || e.Node == 0 || e.Frontend != "s3" || e.Key != k.ID {
				t.Fatalf("entry of an S3 overwrite: %+v", e)
			}
			if e.Deleted.After(at) {
				at = e.Deleted
			}
		}
		// 2. Remove the bad versions: they go to the trash too, deleted
		// after the noted time.
		if out := cli(t, "rm", "-r", "web/s3"); !strings.Contains(out, "deleted 1000 files") {
			t.Fatalf("rm -r: %s", out)
		}
		checkGone(t, c, "s3")
		// 3. Restore at the noted time: each path's newest entry at or
		// before it is the version the overwrite replaced.
		if out := cli(t, "trash", "restore", "web", "s3/", "--at", at.Format(time.RFC3339Nano)); out != "restored 1000 files under web/s3/\n" {
			t.Fatalf("restore --at: %s", out)
		}
		checkTree(t, c, "s3", v1)
		got := map[string][]byte{}
		var mu sync.Mutex
		s3Each(t, files, func(ctx context.Context, i int) error {
			key := fmt.Sprintf("k%04d.txt", i)
			o, err := s3c.GetObject(ctx, &sdks3.GetObjectInput{Bucket: aws.String("web"), Key: aws.String("s3/" + key)})
			if err != nil {
				return err
			}
			defer o.Body.Close()
			b, err := io.ReadAll(o.Body)
			mu.Lock()
			got[key] = b
			mu.Unlock()
			return err
		})
		for key, want := range v1 {
			if !bytes.Equal(got[key], want) {
				t.Fatalf("S3 GET %s after the restore: %q, want %q", key, got[key], want)
			}
		}
		// The bad versions wait in the trash, in case.
		left, _, err := c.TrashPage(context.Background(), "web", "s3/", "", 0)
		if err != nil || len(left) != files {
			t.Fatalf("the overwriting versions in the trash: %d, %v", len(left), err)
		}
		for _, e := range left {
			if e.Replaced || !e.Deleted.After(at) {
				t.Fatalf("left in the trash: %+v", e)
			}
		}
		t.Logf("overwrite of 1000 files through S3 undone in %v", time.Since(start).Round(time.Millisecond))
	})

	// The space is visible: what the trash holds now (the bad versions of
	// the S3 files), then nothing once emptied.
	held := int64(0)
	if l, _, err := c.TrashPage(context.Background(), "web", "", "", 0); err == nil {
		held = int64(len(l))
	}
	if out := cli(t, "status"); !regexp.MustCompile(`trash of web: keeps 7d: ` + strconv.FormatInt(held, 10) + ` files?, `).MatchString(out) {
		t.Fatalf("status (%d entries):\n%s", held, out)
	}
	metric := func() string {
		_, scrape := do(t, "GET", n.url+"/_cairn/metrics", nil)
		return regexpFind(t, string(scrape), `cairn_trash_entries\{bucket="web"\} ([0-9e+.]+)`)
	}
	if m := metric(); m != strconv.FormatInt(held, 10) {
		t.Fatalf("cairn_trash_entries{bucket=\"web\"} = %q, want %d", m, held)
	}
	if out := cli(t, "trash", "empty", "web"); held > 0 && out != fmt.Sprintf("emptied %d entries from the trash of web\n", held) {
		t.Fatalf("empty: %s", out)
	}
	if m := metric(); m != "0" {
		t.Fatalf("cairn_trash_entries after emptying: %q", m)
	}
}

// trashRow is a row of the table of cairn trash list.
type trashRow struct{ path, deleted, size, kind, origin string }

var trashRowRE = regexp.MustCompile(`^(\S+) +(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) +(\d+(?:\.\d)? \S*B) +(deleted|overwritten) +(\S+)$`)

func trashRows(t *testing.T, out string) []trashRow {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) < 2 || !strings.HasPrefix(lines[0], "PATH ") {
		t.Fatalf("trash list:\n%s", out)
	}
	var rows []trashRow
	for _, l := range lines[1 : len(lines)-1] {
		m := trashRowRE.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("trash list row %q", l)
		}
		rows = append(rows, trashRow{m[1], m[2], m[3], m[4], m[5]})
	}
	return rows
}

// checkGone checks that bucket web has nothing under dir.
func checkGone(t *testing.T, c *client.Client, dir string) {
	t.Helper()
	res, err := c.ListAll(context.Background(), "web", dir, client.ListOptions{Recursive: true})
	if err == nil && len(res.Entries) > 0 {
		t.Fatalf("%s still holds %d files", dir, len(res.Entries))
	}
}

// checkTree checks that web/dir holds exactly the files of want (relative
// paths), each with its content.
func checkTree(t *testing.T, c *client.Client, dir string, want map[string][]byte) {
	t.Helper()
	res, err := c.ListAll(context.Background(), "web", dir, client.ListOptions{Recursive: true})
	if err != nil {
		t.Fatal(err)
	}
	var have []string
	for _, e := range res.Entries {
		if !e.IsDir {
			have = append(have, strings.TrimPrefix(e.Path, dir+"/"))
		}
	}
	sort.Strings(have)
	if len(have) != len(want) {
		t.Fatalf("%s holds %d files, want %d", dir, len(have), len(want))
	}
	for _, rel := range have {
		w, ok := want[rel]
		if !ok {
			t.Fatalf("%s/%s: not expected", dir, rel)
		}
		resp, body := do(t, "GET", c.BaseURL()+"/web/"+dir+"/"+escapePath(rel), nil, auth()...)
		expect(t, resp, body, 200)
		if !bytes.Equal(body, w) {
			t.Fatalf("%s/%s: not the expected content (%d bytes, want %d)", dir, rel, len(body), len(w))
		}
	}
}

// s3Each runs f(i) for i in [0, n) on 16 workers and fails the test at
// the first error.
func s3Each(t *testing.T, n int, f func(ctx context.Context, i int) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	next := make(chan int)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := f(ctx, i); err != nil {
					errs <- fmt.Errorf("item %d: %w", i, err)
				}
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
}
