package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cairn-fs/cairn/client"
	"github.com/cairn-fs/cairn/client/clienttest"
	"github.com/cairn-fs/cairn/internal/store"
)

const cliTestKey = "k3y"

// run executes the cairn command line with args against srv and returns
// stdout, stderr and the error.
func cliRun(t *testing.T, srv *clienttest.Server, stdin string, args ...string) (string, string, error) {
	t.Helper()
	root := newRootCmd()
	var out, errw bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errw)
	root.SetIn(strings.NewReader(stdin))
	if srv != nil {
		args = append(args, "--server", srv.URL, "--key", cliTestKey)
	}
	root.SetArgs(args)
	err := root.ExecuteContext(context.Background())
	return out.String(), errw.String(), err
}

func cliMustRun(t *testing.T, srv *clienttest.Server, args ...string) string {
	t.Helper()
	out, errOut, err := cliRun(t, srv, "", args...)
	if err != nil {
		t.Fatalf("cairn %s: %v\nstderr: %s", strings.Join(args, " "), err, errOut)
	}
	return out
}

func newFakeServer(t *testing.T) *clienttest.Server {
	t.Helper()
	srv := clienttest.NewServer(cliTestKey)
	t.Cleanup(srv.Close)
	return srv
}

func TestBucketCommands(t *testing.T) {
	srv := newFakeServer(t)
	cliMustRun(t, srv, "bucket", "create", "www", "--public", "--cache-control", "max-age=60")
	cliMustRun(t, srv, "bucket", "create", "priv", "--checksum-sidecars")
	if _, _, err := cliRun(t, srv, "", "bucket", "create", "www"); err == nil || !strings.Contains(err.Error(), "409") {
		t.Fatalf("duplicate create: %v", err)
	}
	out := cliMustRun(t, srv, "bucket", "set", "www", "public=false", "cache-control=no-cache")
	if !strings.Contains(out, "public=false") || !strings.Contains(out, "cache-control=no-cache") {
		t.Fatalf("set output %q", out)
	}
	out = cliMustRun(t, srv, "bucket", "list")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "NAME") ||
		!regexp.MustCompile(`^priv\s+false\s+true\s+-`).MatchString(lines[1]) ||
		!regexp.MustCompile(`^www\s+false\s+false\s+no-cache`).MatchString(lines[2]) {
		t.Fatalf("bucket list:\n%s", out)
	}
	// The trash: an option and a flag; shown by set, show and list.
	if out := cliMustRun(t, srv, "bucket", "set", "www", "trash=7d"); !strings.Contains(out, "trash=7d") {
		t.Fatalf("set trash=7d: %q", out)
	}
	if out := cliMustRun(t, srv, "bucket", "show", "www"); !strings.Contains(out, "bucket www: ") || !strings.Contains(out, "trash=7d") {
		t.Fatalf("show: %q", out)
	}
	if out := cliMustRun(t, srv, "bucket", "list"); !regexp.MustCompile(`(?m)^www\s+false\s+false\s+no-cache\s+7d\s`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^priv\s+false\s+true\s+-\s+off\s`).MatchString(out) || !strings.Contains(out, "TRASH") {
		t.Fatalf("list with a trash:\n%s", out)
	}
	if out := cliMustRun(t, srv, "bucket", "set", "www", "--trash", "off"); !strings.Contains(out, "trash=off") {
		t.Fatalf("--trash off: %q", out)
	}
	if _, _, err := cliRun(t, srv, "", "bucket", "set", "www", "--trash", "4000d"); err == nil || !strings.Contains(err.Error(), "--trash \"4000d\": at most 3650d") {
		t.Fatalf("--trash 4000d: %v", err)
	}
	for _, bad := range [][]string{{"www", "color=red"}, {"www", "public=maybe"}, {"www", "public"}, {"www", "trash=7"}, {"www", "trash=-1h"}} {
		if _, _, err := cliRun(t, srv, "", append([]string{"bucket", "set"}, bad...)...); err == nil {
			t.Fatalf("bucket set %v accepted", bad)
		}
	}
	cliMustRun(t, srv, "bucket", "delete", "priv")
	if out := cliMustRun(t, srv, "ls"); out != "www/\n" {
		t.Fatalf("ls of buckets = %q", out)
	}
}

func TestParseBucketSettings(t *testing.T) {
	u, err := parseBucketSettings([]string{"public=true", "checksum_sidecars=0", "cache-control=public, max-age=3600"})
	if err != nil || u.Public == nil || !*u.Public || u.ChecksumSidecars == nil || *u.ChecksumSidecars ||
		u.CacheControl == nil || *u.CacheControl != "public, max-age=3600" {
		t.Fatalf("got %+v, %v", u, err)
	}
	if u, err := parseBucketSettings([]string{"cache-control="}); err != nil || u.CacheControl == nil || *u.CacheControl != "" || u.Public != nil {
		t.Fatalf("clearing cache-control: %+v, %v", u, err)
	}
}

func TestParseRemote(t *testing.T) {
	for _, tc := range []struct{ in, bucket, path string }{
		{"b/x/y.txt", "b", "x/y.txt"}, {"/b/x/", "b", "x/"}, {"b", "b", ""}, {"b/", "b", ""},
	} {
		b, p, err := parseRemote(tc.in)
		if err != nil || b != tc.bucket || p != tc.path {
			t.Errorf("parseRemote(%q) = %q, %q, %v", tc.in, b, p, err)
		}
	}
	if _, _, err := parseRemote("/"); err == nil {
		t.Error("parseRemote(\"/\") accepted")
	}
}

func TestPutGetStatLsRm(t *testing.T) {
	srv := newFakeServer(t)
	cliMustRun(t, srv, "bucket", "create", "b")
	dir := t.TempDir()
	local := filepath.Join(dir, "page é.html")
	mtime := time.Unix(1700000000, 0)
	if err := os.WriteFile(local, []byte("<p>hi</p>"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(local, mtime, mtime); err != nil {
		t.Fatal(err)
	}
	cliMustRun(t, srv, "put", local, "b/site/")
	data, info, ok := srv.File("b", "site/page é.html")
	if !ok || string(data) != "<p>hi</p>" || !strings.HasPrefix(info.ContentType, "text/html") ||
		!info.ModTime.Equal(mtime) || info.Mode != 0o640 {
		t.Fatalf("stored %q %+v %v", data, info, ok)
	}
	if _, _, err := cliRun(t, srv, "from stdin\n", "put", "-", "b/site/in.txt"); err != nil {
		t.Fatal(err)
	}
	if data, _, _ := srv.File("b", "site/in.txt"); string(data) != "from stdin\n" {
		t.Fatalf("stdin put stored %q", data)
	}
	if _, _, err := cliRun(t, srv, "x", "put", "-", "b/site/"); err == nil {
		t.Fatal("stdin put without a name accepted")
	}

	// get: into a directory, to a file name, to stdout.
	out := t.TempDir()
	cliMustRun(t, srv, "get", "b/site/page é.html", out)
	got := filepath.Join(out, "page é.html")
	if data, err := os.ReadFile(got); err != nil || string(data) != "<p>hi</p>" {
		t.Fatalf("get wrote %q, %v", data, err)
	}
	if st, _ := os.Stat(got); !st.ModTime().Equal(mtime) {
		t.Fatalf("get mtime %v", st.ModTime())
	}
	if entries, _ := os.ReadDir(out); len(entries) != 1 {
		t.Fatalf("temp files left behind: %v", entries)
	}
	if s := cliMustRun(t, srv, "get", "b/site/in.txt", "-"); s != "from stdin\n" {
		t.Fatalf("get - = %q", s)
	}
	if _, _, err := cliRun(t, srv, "", "get", "b/site/missing", filepath.Join(out, "m")); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("get missing: %v", err)
	}
	if _, err := os.Stat(filepath.Join(out, "m")); !os.IsNotExist(err) {
		t.Fatal("failed get left a file")
	}

	s := cliMustRun(t, srv, "stat", "b/site/page é.html")
	for _, want := range []string{"size:   9", "etag:   ", "sha256: ", "type:   text/html", "mtime:  "} {
		if !strings.Contains(s, want) {
			t.Fatalf("stat output lacks %q:\n%s", want, s)
		}
	}
	if s := cliMustRun(t, srv, "stat", "b/site"); !strings.Contains(s, "directory") {
		t.Fatalf("stat dir: %s", s)
	}

	cliMustRun(t, srv, "put", local, "b/site/sub/deeper/x.html")
	if s := cliMustRun(t, srv, "ls", "b/site"); s != "in.txt\npage é.html\nsub/\n" {
		t.Fatalf("ls = %q", s)
	}
	if s := cliMustRun(t, srv, "ls", "-r", "b/site/"); s != "in.txt\npage é.html\nsub/deeper/x.html\n" {
		t.Fatalf("ls -r = %q", s)
	}
	if s := cliMustRun(t, srv, "ls", "-l", "b/site"); !regexp.MustCompile(`(?m)^-rw-r-----\s+9\s+\d{4}-\d\d-\d\d \d\d:\d\d:\d\d  page é.html$`).MatchString(s) {
		t.Fatalf("ls -l = %q", s)
	}
	if s := cliMustRun(t, srv, "ls", "b/site/in.txt"); s != "in.txt\n" {
		t.Fatalf("ls of a file = %q", s)
	}

	if _, _, err := cliRun(t, srv, "", "rm", "b/site"); err == nil || !strings.Contains(err.Error(), "use -r") {
		t.Fatalf("rm of a non-empty dir: %v", err)
	}
	cliMustRun(t, srv, "rm", "b/site/in.txt")
	if _, _, ok := srv.File("b", "site/in.txt"); ok {
		t.Fatal("rm left the file")
	}
	if s := cliMustRun(t, srv, "rm", "-r", "b/site"); !strings.Contains(s, "deleted 2 files, 3 directories") {
		t.Fatalf("rm -r: %q", s)
	}
	if p, d := srv.Paths("b"), srv.Dirs("b"); len(p)+len(d) != 0 {
		t.Fatalf("left %v %v", p, d)
	}
}

func TestEnvDefaults(t *testing.T) {
	srv := newFakeServer(t)
	t.Setenv("CAIRN_SERVER", strings.TrimPrefix(srv.URL, "http://")) // a scheme is optional
	t.Setenv("CAIRN_ADMIN_KEY", cliTestKey)
	if _, errOut, err := cliRun(t, nil, "", "bucket", "create", "envb"); err != nil {
		t.Fatalf("env defaults: %v %s", err, errOut)
	}
	t.Setenv("CAIRN_ADMIN_KEY", "")
	if _, _, err := cliRun(t, nil, "", "bucket", "list"); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("no key: %v", err)
	}
}

var summaryRE = regexp.MustCompile(`^(dry run, nothing changed: )?uploaded (\d+) files \([\d.]+ MB\), skipped (\d+) unchanged, deleted (\d+), failed (\d+) in [\d.]+ s \(\d+ files/s, [\d.]+ MB/s\)$`)

func TestSyncCommand(t *testing.T) {
	srv := newFakeServer(t)
	cliMustRun(t, srv, "bucket", "create", "b")
	dir := t.TempDir()
	for _, p := range []string{"a.txt", "sub/b.txt", "sub/ü/c.txt"} {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte("content of "+p), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("a.txt", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	summary := func(out string) []string {
		lines := strings.Split(strings.TrimSpace(out), "\n")
		m := summaryRE.FindStringSubmatch(lines[len(lines)-1])
		if m == nil {
			t.Fatalf("no summary line in %q", out)
		}
		return m[1:]
	}

	out, errOut, err := cliRun(t, srv, "", "sync", dir, "b/www", "--jobs", "2")
	if err != nil {
		t.Fatalf("sync: %v %s", err, errOut)
	}
	if got := summary(out); got[1] != "3" || got[2] != "0" {
		t.Fatalf("first sync summary %v", got)
	}
	if !strings.Contains(errOut, "warning: ") || !strings.Contains(errOut, "symlink") {
		t.Fatalf("no symlink warning: %q", errOut)
	}
	if got := strings.Join(srv.Paths("b"), ","); got != "www/a.txt,www/sub/b.txt,www/sub/ü/c.txt" {
		t.Fatalf("remote %s", got)
	}

	out = cliMustRun(t, srv, "sync", dir, "b/www", "--no-progress")
	if got := summary(out); got[1] != "0" || got[2] != "3" {
		t.Fatalf("second sync summary %v", got)
	}

	if err := os.RemoveAll(filepath.Join(dir, "sub")); err != nil {
		t.Fatal(err)
	}
	out = cliMustRun(t, srv, "sync", dir, "b/www", "--delete", "--dry-run")
	if got := summary(out); got[0] == "" || got[3] != "2" || !strings.Contains(out, "would delete www/sub/b.txt") {
		t.Fatalf("dry run output %q", out)
	}
	if len(srv.Paths("b")) != 3 {
		t.Fatal("dry run deleted files")
	}
	out = cliMustRun(t, srv, "sync", dir, "b/www", "--delete")
	if got := summary(out); got[3] != "2" || strings.Join(srv.Paths("b"), ",") != "www/a.txt" {
		t.Fatalf("delete run: %v, remote %v", got, srv.Paths("b"))
	}

	// A failed upload: listed on stderr, non-zero exit, still a summary.
	if err := os.WriteFile(filepath.Join(dir, "new.txt"), []byte("n"), 0o644); err != nil {
		t.Fatal(err)
	}
	srv.FailPut(func(_, p string) int {
		if p == "www/new.txt" {
			return 507
		}
		return 0
	})
	out, errOut, err = cliRun(t, srv, "", "sync", dir, "b/www")
	if err == nil || !strings.Contains(errOut, "failed: upload www/new.txt: ") || !strings.Contains(errOut, "507 Insufficient Storage") {
		t.Fatalf("failed sync: err %v, stderr %q", err, errOut)
	}
	if got := summary(out); got[4] != "1" {
		t.Fatalf("failed sync summary %v", got)
	}
}

func TestSyncSummaryFormat(t *testing.T) {
	s := syncSummary(client.SyncStats{Uploaded: 10, UploadedBytes: 5e6, Skipped: 3, Deleted: 1, Failed: 2, Elapsed: 2 * time.Second})
	want := "uploaded 10 files (5.0 MB), skipped 3 unchanged, deleted 1, failed 2 in 2.0 s (5 files/s, 2.5 MB/s)"
	if s != want {
		t.Fatalf("got  %q\nwant %q", s, want)
	}
}

func TestParseRetention(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		err  string
	}{
		{in: "7d", want: 7 * 86400},
		{in: "7D", want: 7 * 86400},
		{in: "36h", want: 36 * 3600},
		{in: "90m", want: 5400},
		{in: "45s", want: 45},
		{in: "1d12h", want: 36 * 3600},
		{in: "1h30m", want: 5400},
		{in: "1.5h", want: 5400},
		{in: "3650d", want: 3650 * 86400},
		{in: "0", want: 0},
		{in: "off", want: 0},
		{in: "0d", want: 0},
		{in: "0s", want: 0},
		{in: "3651d", err: `"3651d": at most 3650d (10 years)`},
		{in: "3650d1s", err: "at most 3650d"},
		{in: "100000h", err: "at most 3650d"},
		{in: "9999999999999h", err: "not a duration"},
		{in: "7", err: `"7": not a duration (a duration such as 7d, 36h or 90m; 0 or off for no trash)`},
		{in: "1.5d", err: "days must be a whole number"},
		{in: "-1h", err: "negative"},
		{in: "-1d", err: "days must be a whole number"},
		{in: "500ms", err: "at least 1s"},
		{in: "1500ms", err: "whole seconds only"},
		{in: "", err: "empty"},
		{in: "week", err: "not a duration"},
	} {
		got, err := parseRetention(tc.in)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("parseRetention(%q) = %d, %v; want an error with %q", tc.in, got, err, tc.err)
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("parseRetention(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
		if tc.err == "" && tc.want > 0 {
			if back, err := parseRetention(formatRetention(got)); err != nil || back != got {
				t.Errorf("formatRetention(%d) = %q reads back as %d, %v", got, formatRetention(got), back, err)
			}
		}
	}
	for secs, want := range map[int64]string{0: "off", 604800: "7d", 129600: "1d12h", 5400: "1h30m", 90061: "1d1h1m1s", 59: "59s",
		store.VersioningSeconds: "forever"} {
		if got := formatRetention(secs); got != want {
			t.Errorf("formatRetention(%d) = %q, want %q", secs, got, want)
		}
	}
}
