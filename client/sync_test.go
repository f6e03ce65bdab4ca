package client_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairn-fs/cairn/client"
	"github.com/cairn-fs/cairn/client/clienttest"
)

var baseTime = time.Unix(1700000000, 250000000)

// writeTree creates files (slash paths -> content) under dir, all with
// mtime baseTime.
func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for p, content := range files {
		writeFile(t, dir, p, content, baseTime)
	}
}

func writeFile(t *testing.T, dir, p, content string, mtime time.Time) {
	t.Helper()
	full := filepath.Join(dir, filepath.FromSlash(p))
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(full, mtime, mtime); err != nil {
		t.Fatal(err)
	}
}

var siteTree = map[string]string{
	"index.html":                 "<h1>home</h1>",
	"css/site.css":               "body{}",
	"img/logo.png":               "\x89PNG....",
	"docs/a/b/c/deep.txt":        "deep",
	"ünïcødé/café ☕.txt":         "coffee",
	"日本語/ファイル名.txt":              "nihongo",
	"odd names/q?x=1#f%20+&.bin": "odd",
	"empty.txt":                  "",
}

// recorder collects Sync's events and warnings.
type recorder struct {
	mu       sync.Mutex
	plan     client.SyncPlan
	events   []client.SyncEvent
	warnings []string
}

func (r *recorder) opts(o client.SyncOptions) client.SyncOptions {
	o.OnPlan = func(p client.SyncPlan) { r.plan = p }
	o.OnEvent = func(e client.SyncEvent) {
		r.mu.Lock()
		r.events = append(r.events, e)
		r.mu.Unlock()
	}
	o.OnWarning = func(p, msg string) {
		r.mu.Lock()
		r.warnings = append(r.warnings, p+": "+msg)
		r.mu.Unlock()
	}
	return o
}

func (r *recorder) paths(op client.SyncOp) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.events {
		if e.Op == op && e.Err == nil {
			out = append(out, e.Path)
		}
	}
	sort.Strings(out)
	return out
}

func runSync(t *testing.T, c *client.Client, o client.SyncOptions) (client.SyncStats, *recorder) {
	t.Helper()
	rec := &recorder{}
	st, err := client.Sync(context.Background(), c, rec.opts(o))
	if err != nil {
		t.Fatalf("sync: %v (stats %+v)", err, st)
	}
	return st, rec
}

func checkRemote(t *testing.T, srv *clienttest.Server, prefix string, want map[string]string) {
	t.Helper()
	var wantPaths []string
	for p := range want {
		wantPaths = append(wantPaths, strings.TrimPrefix(prefix+"/"+p, "/"))
	}
	sort.Strings(wantPaths)
	if got := srv.Paths("b"); strings.Join(got, "|") != strings.Join(wantPaths, "|") {
		t.Fatalf("remote files:\n got %q\nwant %q", got, wantPaths)
	}
	for p, content := range want {
		data, _, _ := srv.File("b", strings.TrimPrefix(prefix+"/"+p, "/"))
		if string(data) != content {
			t.Fatalf("remote %s = %q, want %q", p, data, content)
		}
	}
}

func TestSyncFirstThenNothing(t *testing.T) {
	srv, c := newEnv(t)
	dir := t.TempDir()
	writeTree(t, dir, siteTree)
	opts := client.SyncOptions{LocalDir: dir, Bucket: "b", Prefix: "site/v1", Jobs: 4, PageSize: 3}

	st, rec := runSync(t, c, opts)
	if st.Uploaded != len(siteTree) || st.Skipped != 0 || st.Failed != 0 || st.LocalFiles != len(siteTree) {
		t.Fatalf("first sync stats %+v", st)
	}
	if rec.plan.Candidates != len(siteTree) || len(rec.paths(client.SyncUpload)) != len(siteTree) {
		t.Fatalf("plan %+v, %d upload events", rec.plan, len(rec.paths(client.SyncUpload)))
	}
	checkRemote(t, srv, "site/v1", siteTree)
	_, info, _ := srv.File("b", "site/v1/css/site.css")
	if !info.ModTime.Equal(baseTime) || info.Mode != 0o644 || !strings.HasPrefix(info.ContentType, "text/css") {
		t.Fatalf("uploaded info %+v", info)
	}

	// Second run: everything is skipped, with one paginated listing and no PUT.
	srv.ResetCounts()
	st, _ = runSync(t, c, opts)
	if st.Uploaded != 0 || st.Skipped != len(siteTree) || st.RemoteFiles != len(siteTree) {
		t.Fatalf("second sync stats %+v", st)
	}
	if n := srv.Count("PUT"); n != 0 {
		t.Fatalf("second sync sent %d PUTs", n)
	}
	// 8 files in pages of 3: 3 listing requests, no per-file requests.
	if n, heads := srv.Count("LIST"), srv.Count("HEAD")+srv.Count("GET"); n != 3 || heads != 0 {
		t.Fatalf("second sync: %d listing pages, %d per-file requests", n, heads)
	}
}

func TestSyncChangedFiles(t *testing.T) {
	srv, c := newEnv(t)
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"same.txt": "aaaa", "touched.txt": "bbbb", "grown.txt": "cc", "sneaky.txt": "dddd"})
	opts := client.SyncOptions{LocalDir: dir, Bucket: "b"}
	runSync(t, c, opts)

	// Same size, new mtime: uploaded. New size, same mtime: uploaded.
	// Same size and mtime but new content: skipped by default, uploaded with
	// --checksum. A sub-second mtime change in the same second: skipped.
	writeFile(t, dir, "touched.txt", "BBBB", baseTime.Add(time.Hour))
	writeFile(t, dir, "grown.txt", "cccccc", baseTime)
	writeFile(t, dir, "sneaky.txt", "DDDD", baseTime)
	writeFile(t, dir, "same.txt", "aaaa", baseTime.Add(100*time.Millisecond))

	st, rec := runSync(t, c, opts)
	if got := strings.Join(rec.paths(client.SyncUpload), ","); got != "grown.txt,touched.txt" || st.Skipped != 2 {
		t.Fatalf("uploaded %s, stats %+v", got, st)
	}
	if data, _, _ := srv.File("b", "sneaky.txt"); string(data) != "dddd" {
		t.Fatalf("sneaky.txt should not have been re-sent without --checksum: %q", data)
	}

	opts.Checksum = true
	st, rec = runSync(t, c, opts)
	if got := strings.Join(rec.paths(client.SyncUpload), ","); got != "sneaky.txt" || st.Skipped != 3 {
		t.Fatalf("checksum run uploaded %s, stats %+v", got, st)
	}
	// Candidates of a checksum run are hashed: reported as skips.
	if got := len(rec.paths(client.SyncSkip)); got != 3 {
		t.Fatalf("checksum run: %d skip events, want 3", got)
	}
	checkRemote(t, srv, "", map[string]string{"same.txt": "aaaa", "touched.txt": "BBBB", "grown.txt": "cccccc", "sneaky.txt": "DDDD"})
}

func TestSyncDelete(t *testing.T) {
	srv, c := newEnv(t)
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"keep.txt": "k", "gone.txt": "g", "old/a/b/x.txt": "x", "old/y.txt": "y", "mixed/keep": "m", "mixed/gone": "g"})
	opts := client.SyncOptions{LocalDir: dir, Bucket: "b", Prefix: "p"}
	runSync(t, c, opts)
	// A remote file outside the prefix is never touched.
	put(t, c, "outside.txt", "o")

	for _, p := range []string{"gone.txt", "old", "mixed/gone"} {
		if err := os.RemoveAll(filepath.Join(dir, p)); err != nil {
			t.Fatal(err)
		}
	}
	// Without --delete, nothing disappears.
	st, _ := runSync(t, c, opts)
	if st.Deleted != 0 || len(srv.Paths("b")) != 7 {
		t.Fatalf("sync without --delete: %+v, remote %v", st, srv.Paths("b"))
	}
	opts.Delete = true
	st, rec := runSync(t, c, opts)
	if st.Deleted != 4 || st.DeletedDirs != 3 || rec.plan.Deletes != 4 {
		t.Fatalf("delete stats %+v, plan %+v, dirs %v", st, rec.plan, rec.paths(client.SyncDeleteDir))
	}
	if got := strings.Join(rec.paths(client.SyncDeleteDir), ","); got != "p/old,p/old/a,p/old/a/b" {
		t.Fatalf("deleted dirs %s", got)
	}
	if got := strings.Join(srv.Paths("b"), ","); got != "outside.txt,p/keep.txt,p/mixed/keep" {
		t.Fatalf("remote after --delete: %s", got)
	}
	if got := strings.Join(srv.Dirs("b"), ","); got != "p,p/mixed" {
		t.Fatalf("remote dirs after --delete: %s", got)
	}
}

func TestSyncDryRun(t *testing.T) {
	srv, c := newEnv(t)
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"new.txt": "n", "sub/new2.txt": "n2"})
	put(t, c, "stale/old.txt", "o")
	srv.ResetCounts()
	st, rec := runSync(t, c, client.SyncOptions{LocalDir: dir, Bucket: "b", Delete: true, DryRun: true})
	if !st.DryRun || st.Uploaded != 2 || st.UploadedBytes != 3 || st.Deleted != 1 || st.DeletedDirs != 1 {
		t.Fatalf("dry-run stats %+v", st)
	}
	if got := strings.Join(rec.paths(client.SyncDelete), ","); got != "stale/old.txt" {
		t.Fatalf("dry-run deletes %s", got)
	}
	for _, kind := range []string{"PUT", "PUT dir", "DELETE", "POST"} {
		if n := srv.Count(kind); n != 0 {
			t.Fatalf("dry run sent %d %s requests", n, kind)
		}
	}
	if got := strings.Join(srv.Paths("b"), ","); got != "stale/old.txt" {
		t.Fatalf("dry run changed the remote: %s", got)
	}
}

func TestSyncFailuresReported(t *testing.T) {
	srv, c := newEnv(t)
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"ok1": "1", "bad/full.bin": "2", "ok2": "3", "bad/err.bin": "4"})
	srv.FailPut(func(_, p string) int {
		switch p {
		case "bad/full.bin":
			return http.StatusInsufficientStorage
		case "bad/err.bin":
			return http.StatusInternalServerError
		}
		return 0
	})
	rec := &recorder{}
	st, err := client.Sync(context.Background(), c, rec.opts(client.SyncOptions{LocalDir: dir, Bucket: "b", Jobs: 2}))
	if !errors.Is(err, client.ErrSyncFailed) {
		t.Fatalf("err = %v", err)
	}
	if st.Uploaded != 2 || st.Failed != 2 || len(st.Failures) != 2 {
		t.Fatalf("stats %+v", st)
	}
	byPath := map[string]error{}
	for _, f := range st.Failures {
		byPath[f.Path] = f.Err
	}
	if !errors.Is(byPath["bad/full.bin"], client.ErrNoSpace) || !errors.Is(byPath["bad/err.bin"], client.ErrServer) {
		t.Fatalf("failures %v", st.Failures)
	}
	// The next run retries just the failed files.
	srv.FailPut(nil)
	st, rec = runSync(t, c, client.SyncOptions{LocalDir: dir, Bucket: "b"})
	if got := strings.Join(rec.paths(client.SyncUpload), ","); got != "bad/err.bin,bad/full.bin" || st.Skipped != 2 {
		t.Fatalf("retry uploaded %s, %+v", got, st)
	}
}

func TestSyncSymlinksSkipped(t *testing.T) {
	srv, c := newEnv(t)
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"real/file.txt": "r"})
	if err := os.Symlink("real", filepath.Join(dir, "linkdir")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("real/file.txt", filepath.Join(dir, "link.txt")); err != nil {
		t.Fatal(err)
	}
	// Remote counterparts of skipped links are protected from --delete.
	put(t, c, "link.txt", "remote copy")
	put(t, c, "linkdir/file.txt", "remote copy")

	// The root itself may be a symlink (a "current" release link).
	root := filepath.Join(t.TempDir(), "current")
	if err := os.Symlink(dir, root); err != nil {
		t.Fatal(err)
	}
	st, rec := runSync(t, c, client.SyncOptions{LocalDir: root, Bucket: "b", Delete: true})
	if st.Uploaded != 1 || st.Warnings != 2 || len(rec.warnings) != 2 || st.Deleted != 0 {
		t.Fatalf("stats %+v, warnings %v", st, rec.warnings)
	}
	if got := strings.Join(srv.Paths("b"), ","); got != "link.txt,linkdir/file.txt,real/file.txt" {
		t.Fatalf("remote %s", got)
	}
}

func TestSyncTypeClash(t *testing.T) {
	srv, c := newEnv(t)
	dir := t.TempDir()
	// Remote has a file "a" and a directory "d"; locally "a" is a directory
	// and "d" a file.
	put(t, c, "a", "old file")
	put(t, c, "d/inner/x", "old")
	writeTree(t, dir, map[string]string{"a/new.txt": "n", "d": "now a file"})
	st, _ := runSync(t, c, client.SyncOptions{LocalDir: dir, Bucket: "b", Delete: true})
	if st.Uploaded != 2 || st.Deleted != 2 {
		t.Fatalf("stats %+v", st)
	}
	checkRemote(t, srv, "", map[string]string{"a/new.txt": "n", "d": "now a file"})
}

func TestSyncErrors(t *testing.T) {
	_, c := newEnv(t)
	ctx := context.Background()
	dir := t.TempDir()
	if _, err := client.Sync(ctx, c, client.SyncOptions{LocalDir: dir, Bucket: "nope", Prefix: "x"}); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("missing bucket: %v", err)
	}
	if _, err := client.Sync(ctx, c, client.SyncOptions{LocalDir: filepath.Join(dir, "missing"), Bucket: "b"}); err == nil {
		t.Fatal("missing local dir accepted")
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	writeTree(t, dir, map[string]string{"f": "x"})
	if _, err := client.Sync(cctx, c, client.SyncOptions{LocalDir: dir, Bucket: "b"}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
}
