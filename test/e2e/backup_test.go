package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"math/rand"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestBackup: cairn backup copies a bucket of 300 files (a few large
// enough to be streamed, one to go to S3 in parts) to a directory while a
// writer keeps changing the bucket, and the directory holds exactly the
// snapshot the backup took, file by file; a second backup after 12
// changes copies 10 files and deletes 2; the checks notice a damaged and
// a missing copy (and --verify repairs the first); cairn restore brings
// the backup into a new bucket with contents, modes and mtimes, skips
// identical files and refuses to overwrite a different one without
// --force; the same snapshot goes to a second node over the native API
// (cairn://) and over S3 (s3://, an access key of that node; --verify
// reads every object's digest back), and is restored from S3.
func TestBackup(t *testing.T) {
	start := time.Now()
	base := t.TempDir()
	src := startServer(t, filepath.Join(base, "src"), freeAddr(t))
	dst := startServer(t, filepath.Join(base, "dst"), freeAddr(t))
	cli := func(t *testing.T, s *server, env []string, args ...string) string {
		t.Helper()
		cmd := exec.Command(cairnBin, args...)
		cmd.Env = append(append(os.Environ(), "CAIRN_ADMIN_KEY="+adminKey, "CAIRN_SERVER="+s.url), env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("cairn %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	for _, b := range []string{"web", "restored", "restored3"} {
		cli(t, src, nil, "bucket", "create", b)
	}
	for _, b := range []string{"bak", "s3bak"} {
		cli(t, dst, nil, "bucket", "create", b)
	}

	// The site: 300 files, small ones with odd names, two of 5 MiB
	// (streamed, not in a bulk upload) and one of 17 MiB (S3 multipart),
	// some of mode 0600; uploaded with cairn sync.
	rng := rand.New(rand.NewSource(23))
	local := filepath.Join(base, "site")
	var paths []string
	for i := range 300 {
		size := rng.Intn(20 << 10)
		switch i {
		case 10, 20:
			size = 5 << 20
		case 30:
			size = 17 << 20
		}
		p := fmt.Sprintf("site/d%d/%03d-%s", i%6, i, names[i%len(names)])
		if i%50 == 7 {
			p = fmt.Sprintf("site/d%d/deep/er/%03d.dat", i%6, i)
		}
		data := make([]byte, size)
		rng.Read(data)
		full := filepath.Join(local, filepath.FromSlash(p))
		mode := os.FileMode(0o644)
		if i%40 == 3 {
			mode = 0o600
		}
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, data, mode); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	cli(t, src, nil, "sync", local, "web", "--no-progress")

	// A writer changes the bucket all along the first backup: overwrites,
	// new files, deletes.
	var writes atomic.Int64
	stop := make(chan struct{})
	var writer sync.WaitGroup
	writer.Go(func() {
		wr := rand.New(rand.NewSource(1))
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			method, p, body := "PUT", paths[wr.Intn(len(paths))], []byte(fmt.Sprintf("rewritten %d", i))
			switch i % 5 {
			case 3:
				p = fmt.Sprintf("site/new/w%05d.txt", i)
			case 4:
				method, p, body = "DELETE", fmt.Sprintf("site/new/w%05d.txt", i-1), nil
			}
			req, _ := http.NewRequest(method, src.url+"/web/"+escapePath(p), strings.NewReader(string(body)))
			req.Header.Set("Authorization", "Bearer "+adminKey)
			resp, err := httpc.Do(req)
			if err != nil {
				t.Errorf("writer: %s %s: %v", method, p, err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode >= 300 {
				t.Errorf("writer: %s %s: %d", method, p, resp.StatusCode)
				return
			}
			writes.Add(1)
		}
	})
	waitFor(t, 10*time.Second, "the writer's first writes", func() bool { return writes.Load() > 20 }, src)

	dir := filepath.Join(base, "backup")
	before := writes.Load()
	out := cli(t, src, nil, "backup", "web", dir, "--keep-snapshot", "--no-progress")
	during := writes.Load() - before
	snap1 := snapshotOf(t, out)
	want1 := snapshotTree(t, src, "web", snap1)
	if err := dirMismatch(dir, want1); err != nil {
		t.Fatalf("the backup is not the snapshot: %v\n%s", err, out)
	}
	if n := copiedOf(t, out); n != len(want1) {
		t.Fatalf("the first backup copied %d files, the snapshot has %d:\n%s", n, len(want1), out)
	}
	// The writer's changes went on during the backup, and the bucket is no
	// longer the snapshot: the copy held to the snapshot.
	close(stop)
	writer.Wait()
	if during == 0 {
		t.Fatal("no write during the backup: the test proves nothing about consistency")
	}
	if bucketMismatch(t, src, "web", "", want1) == nil {
		t.Fatal("the live bucket equals the snapshot: the writer changed nothing")
	}
	cli(t, src, nil, "snapshot", "delete", "web", snap1)
	t.Logf("first backup: %d files while the writer made %d writes; %s", len(want1), during, lastLine(out))
	// Catch up with what the writer did after the snapshot.
	cli(t, src, nil, "backup", "web", dir, "--no-progress")

	// 12 changes: 7 files rewritten, 3 new, 2 deleted.
	live := liveTree(t, src, "web")
	var livePaths []string
	for p := range live {
		livePaths = append(livePaths, p)
	}
	sort.Strings(livePaths)
	for i := range 7 {
		resp, b := do(t, "PUT", src.url+"/web/"+escapePath(livePaths[i*13]), []byte(fmt.Sprintf("second version %d", i)), auth()...)
		expect(t, resp, b, 200)
	}
	for i := range 3 {
		resp, b := do(t, "PUT", src.url+"/web/site/added/"+strconv.Itoa(i)+".txt", []byte("added"), auth()...)
		expect(t, resp, b, 201)
	}
	for _, p := range []string{livePaths[5], livePaths[6]} {
		resp, b := do(t, "DELETE", src.url+"/web/"+escapePath(p), nil, auth()...)
		expect(t, resp, b, 204)
	}
	out = cli(t, src, nil, "backup", "web", dir, "--keep-snapshot", "--no-progress")
	snap2 := snapshotOf(t, out)
	want2 := snapshotTree(t, src, "web", snap2)
	if n := copiedOf(t, out); n != 10 || !strings.Contains(out, "deleted 2,") {
		t.Fatalf("the second backup did not copy only the 10 changed files and delete 2:\n%s", out)
	}
	if err := dirMismatch(dir, want2); err != nil {
		t.Fatalf("the second backup is not its snapshot: %v", err)
	}

	// The checks notice a wrong or a missing copy: damage one file, remove
	// another. --verify finds the damaged one; a plain run the missing one.
	damaged := filepath.Join(dir, filepath.FromSlash(paths[10]))
	b, err := os.ReadFile(damaged)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0xff
	if err := os.WriteFile(damaged, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := dirMismatch(dir, want2); err == nil || !strings.Contains(err.Error(), paths[10]) {
		t.Fatalf("a damaged copy passes the check: %v", err)
	}
	if out := cli(t, src, nil, "backup", "web", dir, "--snapshot", snap2, "--verify", "--no-progress"); copiedOf(t, out) != 1 {
		t.Fatalf("--verify did not copy the damaged file again:\n%s", out)
	}
	if err := os.Remove(filepath.Join(dir, filepath.FromSlash(paths[20]))); err != nil {
		t.Fatal(err)
	}
	if err := dirMismatch(dir, want2); err == nil || !strings.Contains(err.Error(), paths[20]) {
		t.Fatalf("a missing copy passes the check: %v", err)
	}
	if out := cli(t, src, nil, "backup", "web", dir, "--snapshot", snap2, "--no-progress"); copiedOf(t, out) != 1 {
		t.Fatalf("the missing file was not copied again:\n%s", out)
	}
	if err := dirMismatch(dir, want2); err != nil {
		t.Fatal(err)
	}

	// Restore into a new bucket: contents, modes and mtimes.
	out = cli(t, src, nil, "restore", dir, "restored", "--no-progress")
	if !strings.Contains(out, fmt.Sprintf("restored %d files", len(want2))) {
		t.Fatalf("restore:\n%s", out)
	}
	if err := bucketMismatch(t, src, "restored", "", want2); err != nil {
		t.Fatalf("the restored bucket is not the snapshot: %v", err)
	}
	restored := liveTree(t, src, "restored")
	modes := 0
	for p, w := range want2 {
		if g := restored[p]; g.Mode != w.Mode || !g.Mtime.Equal(w.Mtime) {
			t.Fatalf("restored %s: mode %o mtime %v, want %o %v", p, g.Mode, g.Mtime, w.Mode, w.Mtime)
		}
		if w.Mode == 0o600 {
			modes++
		}
	}
	if modes == 0 {
		t.Fatal("no file of mode 0600 in the snapshot: the mode check proves nothing")
	}
	if out := cli(t, src, nil, "restore", dir, "restored", "--no-progress"); !strings.Contains(out, fmt.Sprintf("restored 0 files (0.0 MB) of the backup of web (snapshot %s) into restored, %d identical skipped", snap2, len(want2))) {
		t.Fatalf("a second restore:\n%s", out)
	}
	resp, body := do(t, "PUT", src.url+"/restored/"+escapePath(paths[0]), []byte("changed in the bucket"), auth()...)
	expect(t, resp, body, 200)
	cmd := exec.Command(cairnBin, "restore", dir, "restored", "--no-progress")
	cmd.Env = append(os.Environ(), "CAIRN_ADMIN_KEY="+adminKey, "CAIRN_SERVER="+src.url)
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "1 files at restored differ from the backup and would be overwritten (--force replaces them)") {
		t.Fatalf("restore over a different file: %v\n%s", err, out)
	}
	if resp, body := do(t, "GET", src.url+"/restored/"+escapePath(paths[0]), nil, auth()...); string(body) != "changed in the bucket" {
		t.Fatalf("a refused restore overwrote the file: %d %q", resp.StatusCode, body)
	}
	if out := cli(t, src, nil, "restore", dir, "restored", "--force", "--no-progress"); !strings.Contains(out, "restored 1 files") || !strings.Contains(out, "1 replaced (--force)") {
		t.Fatalf("restore --force:\n%s", out)
	}
	if err := bucketMismatch(t, src, "restored", "", want2); err != nil {
		t.Fatal(err)
	}

	// To a second node: the native API, then S3.
	dkey := []string{"CAIRN_DEST_KEY=" + adminKey}
	out = cli(t, src, dkey, "backup", "web", "cairn://"+dst.addr+"/bak/site-backup", "--snapshot", snap2, "--no-progress")
	if copiedOf(t, out) != len(want2) {
		t.Fatalf("backup to another node:\n%s", out)
	}
	if err := bucketMismatch(t, dst, "bak", "site-backup", want2); err != nil {
		t.Fatalf("the backup on the second node: %v", err)
	}
	if out := cli(t, src, dkey, "backup", "web", "cairn://"+dst.addr+"/bak/site-backup", "--snapshot", snap2, "--no-progress"); copiedOf(t, out) != 0 {
		t.Fatalf("an unchanged backup to another node copied something:\n%s", out)
	}
	resp, body = do(t, "POST", dst.url+"/_cairn/keys", []byte(`{"name":"backup","buckets":["s3bak"]}`), auth()...)
	expect(t, resp, body, 201)
	var k struct{ ID, Secret string }
	if err := json.Unmarshal(body, &k); err != nil {
		t.Fatal(err)
	}
	s3env := []string{"AWS_ACCESS_KEY_ID=" + k.ID, "AWS_SECRET_ACCESS_KEY=" + k.Secret, "AWS_REGION=us-east-1",
		"AWS_ENDPOINT_URL=", "AWS_ENDPOINT_URL_S3=", "AWS_SESSION_TOKEN="}
	out = cli(t, src, s3env, "backup", "web", "s3://s3bak/pre", "--s3-endpoint", dst.url, "--snapshot", snap2, "--no-progress")
	if copiedOf(t, out) != len(want2) {
		t.Fatalf("backup to S3:\n%s", out)
	}
	if err := bucketMismatch(t, dst, "s3bak", "pre", want2); err != nil {
		t.Fatalf("the backup in S3: %v", err)
	}
	if out := cli(t, src, s3env, "backup", "web", "s3://s3bak/pre", "--s3-endpoint", dst.url, "--snapshot", snap2, "--no-progress"); copiedOf(t, out) != 0 {
		t.Fatalf("an unchanged backup to S3 copied something:\n%s", out)
	}
	// --verify reads every object's x-amz-meta-cairn-sha256 back.
	out = cli(t, src, s3env, "backup", "web", "s3://s3bak/pre", "--s3-endpoint", dst.url, "--snapshot", snap2, "--verify", "--no-progress")
	if copiedOf(t, out) != 0 || !strings.Contains(out, fmt.Sprintf("(%d checked at the destination)", len(want2))) {
		t.Fatalf("backup to S3 --verify:\n%s", out)
	}
	out = cli(t, src, s3env, "restore", "s3://s3bak/pre", "restored3", "--s3-endpoint", dst.url, "--no-progress")
	if !strings.Contains(out, fmt.Sprintf("restored %d files", len(want2))) {
		t.Fatalf("restore from S3:\n%s", out)
	}
	if err := bucketMismatch(t, src, "restored3", "", want2); err != nil {
		t.Fatalf("restored from S3: %v", err)
	}
	cli(t, src, nil, "snapshot", "delete", "web", snap2)
	t.Logf("backups, restores and checks in %v", time.Since(start).Round(time.Millisecond))
}

// fileSum is a file of a listing: its content address and metadata.
type fileSum struct {
	SHA256 string    `json:"sha256"`
	Size   int64     `json:"size"`
	Mtime  time.Time `json:"mtime"`
	Mode   uint32    `json:"mode"`
	Path   string    `json:"path"`
	IsDir  bool      `json:"is_dir"`
}

var (
	snapshotRE = regexp.MustCompile(`\(snapshot (\S+)\)`)
	copiedRE   = regexp.MustCompile(`copied (\d+) files`)
)

func snapshotOf(t *testing.T, out string) string {
	t.Helper()
	m := snapshotRE.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no snapshot named in:\n%s", out)
	}
	return m[1]
}

func copiedOf(t *testing.T, out string) int {
	t.Helper()
	m := copiedRE.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no count of copied files in:\n%s", out)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	return s[strings.LastIndex(s, "\n")+1:]
}

// listTree lists every file under u (a listing URL ending in "/") with
// raw HTTP, following pages, by path relative to rel.
func listTree(t *testing.T, u, rel string) map[string]fileSum {
	t.Helper()
	out := map[string]fileSum{}
	after := ""
	for page := 0; ; page++ {
		if page > 1000 {
			t.Fatal("listing does not end")
		}
		resp, body := do(t, "GET", u+"?recursive=1&limit=1000&after="+url.QueryEscape(after), nil,
			append(auth(), "Accept", "application/json")...)
		expect(t, resp, body, 200)
		var l struct {
			Entries   []fileSum `json:"entries"`
			Truncated bool      `json:"truncated"`
			NextToken string    `json:"next_token"`
		}
		if err := json.Unmarshal(body, &l); err != nil {
			t.Fatal(err)
		}
		for _, e := range l.Entries {
			p, ok := strings.CutPrefix(e.Path, rel)
			if e.IsDir || !ok || strings.HasPrefix(p, ".cairn-backup/") {
				continue
			}
			out[p] = e
		}
		if !l.Truncated {
			return out
		}
		after = l.NextToken
	}
}

// snapshotTree is the snapshot's files, each read back and checked
// against the listing's digest.
func snapshotTree(t *testing.T, s *server, bucket, name string) map[string]fileSum {
	t.Helper()
	base := s.url + "/_snapshots/" + bucket + "/" + url.PathEscape(name) + "/"
	files := listTree(t, base, "")
	if len(files) < 300 {
		t.Fatalf("snapshot %s holds %d files", name, len(files))
	}
	for p, f := range files {
		if got := getSum(t, base+escapePath(p)); got != f.SHA256 {
			t.Fatalf("snapshot %s: %s reads as %s, listed %s", name, p, got, f.SHA256)
		}
	}
	return files
}

// liveTree is a bucket's files as listed.
func liveTree(t *testing.T, s *server, bucket string) map[string]fileSum {
	t.Helper()
	return listTree(t, s.url+"/"+bucket+"/", "")
}

func getSum(t *testing.T, u string) string {
	t.Helper()
	req, _ := http.NewRequest("GET", u, nil)
	req.Header.Set("Authorization", "Bearer "+adminKey)
	resp, err := httpc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d", u, resp.StatusCode)
	}
	h := sha256.New()
	if _, err := io.Copy(h, resp.Body); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// dirMismatch says how dir differs from want (nil: it holds exactly
// want's files, each with its content), reading every file.
func dirMismatch(dir string, want map[string]fileSum) error {
	got := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() && rel == ".cairn-backup" {
			return fs.SkipDir
		}
		if d.IsDir() {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		s := sha256.Sum256(data)
		got[rel] = hex.EncodeToString(s[:])
		if w, ok := want[rel]; !ok {
			return nil // sumsMismatch names it
		} else if info, err := d.Info(); err == nil && uint32(info.Mode().Perm()) != w.Mode&0o777 {
			return fmt.Errorf("%s: mode %o, want %o", rel, info.Mode().Perm(), w.Mode)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return sumsMismatch(got, want)
}

// bucketMismatch says how bucket/prefix of s differs from want, reading
// every file.
func bucketMismatch(t *testing.T, s *server, bucket, prefix string, want map[string]fileSum) error {
	t.Helper()
	u := s.url + "/" + bucket + "/"
	rel := ""
	if prefix != "" {
		u += escapePath(prefix) + "/"
		rel = prefix + "/"
	}
	got := map[string]string{}
	for p := range listTree(t, u, rel) {
		got[p] = getSum(t, u+escapePath(p))
	}
	return sumsMismatch(got, want)
}

func sumsMismatch(got map[string]string, want map[string]fileSum) error {
	for p, w := range want {
		g, ok := got[p]
		switch {
		case !ok:
			return fmt.Errorf("%s is missing", p)
		case g != w.SHA256:
			return fmt.Errorf("%s holds %s, want %s", p, g, w.SHA256)
		}
	}
	for p := range got {
		if _, ok := want[p]; !ok {
			return fmt.Errorf("%s is not in the snapshot", p)
		}
	}
	return nil
}
