package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-fs/cairn/client"
	"github.com/cairn-fs/cairn/internal/access"
	"github.com/cairn-fs/cairn/internal/frontend/admin"
	"github.com/cairn-fs/cairn/internal/frontend/fuse"
	"github.com/cairn-fs/cairn/internal/store"
	"github.com/cairn-fs/cairn/internal/store/storetest"
)

func TestParseTrashTime(t *testing.T) {
	loc := time.FixedZone("UTC+1", 3600)
	for _, tc := range []struct {
		in, through, exact string // want, in RFC 3339 UTC, with and without through
	}{
		{"2026-11-27T09:04:05.123456789Z", "2026-11-27T09:04:05.123456789Z", "2026-11-27T09:04:05.123456789Z"},
		{"2026-11-27T09:04:05Z", "2026-11-27T09:04:05.999999999Z", "2026-11-27T09:04:05Z"},
		{"2026-11-27T10:04:05+01:00", "2026-11-27T09:04:05.999999999Z", "2026-11-27T09:04:05Z"},
		{"2026-11-27 10:04:05", "2026-11-27T09:04:05.999999999Z", "2026-11-27T09:04:05Z"},
		{" 2026-11-27T10:04:05 ", "2026-11-27T09:04:05.999999999Z", "2026-11-27T09:04:05Z"},
		{"2026-11-27 10:04:05.25", "2026-11-27T09:04:05.25Z", "2026-11-27T09:04:05.25Z"},
		{"2026-11-27 10:04", "2026-11-27T09:04:59.999999999Z", "2026-11-27T09:04:00Z"},
		{"2026-11-27T10:04", "2026-11-27T09:04:59.999999999Z", "2026-11-27T09:04:00Z"},
		{"2026-11-27", "2026-11-27T22:59:59.999999999Z", "2026-11-26T23:00:00Z"},
	} {
		for _, through := range []bool{true, false} {
			want := tc.exact
			if through {
				want = tc.through
			}
			got, err := parseTrashTime(tc.in, through, loc)
			if err != nil || got.UTC().Format(time.RFC3339Nano) != want {
				t.Errorf("parseTrashTime(%q, %t) = %s, %v; want %s", tc.in, through, got.UTC().Format(time.RFC3339Nano), err, want)
			}
		}
	}
	for _, bad := range []string{"", "yesterday", "27/11/2026", "2026-11-27 25:00:00", "10:04:05", "1732700000"} {
		if _, err := parseTrashTime(bad, true, loc); err == nil || !strings.Contains(err.Error(), "not a time: want one as trash list prints it") {
			t.Errorf("parseTrashTime(%q): %v", bad, err)
		}
	}
	// What trash list prints reads back as its second.
	d := time.Date(2026, 11, 27, 9, 4, 5, 987654321, time.UTC)
	back, err := parseTrashTime(d.In(loc).Format(trashTimeLayout), true, loc)
	if err != nil || back.Before(d) || back.Sub(d) >= time.Second {
		t.Errorf("printed %s reads back as %s, %v", d.In(loc).Format(trashTimeLayout), back, err)
	}
}

func TestPrintTrash(t *testing.T) {
	loc := time.FixedZone("UTC+1", 3600)
	d := time.Date(2026, 11, 27, 9, 4, 5, 123, time.UTC)
	var b strings.Builder
	if _, err := printTrash(&b, "web", "site/", slice([]client.TrashEntry{
		{Path: "site/a.php", Deleted: d, Size: 2048, Node: 3, Frontend: "mount"},
		{Path: "site/b.css", Deleted: d.Add(time.Hour), Size: 10, Replaced: true, Node: 2, Frontend: "s3", Key: "AK7"},
		{Path: "site/c.js", Deleted: d, Size: 1},
	}), loc); err != nil {
		t.Fatal(err)
	}
	want := regexp.MustCompile(`^PATH +DELETED +SIZE +KIND +ORIGIN
site/a\.php +2026-11-27 10:04:05 +2\.0 KiB +deleted +3/mount/-
site/b\.css +2026-11-27 11:04:05 +10 B +overwritten +2/s3/AK7
site/c\.js +2026-11-27 10:04:05 +1 B +deleted +-/-/-
the trash of web under site/: 3 entries, 2\.0 KiB
$`)
	if !want.MatchString(b.String()) {
		t.Errorf("table:\n%s", b.String())
	}
	b.Reset()
	printTrash(&b, "web", "", slice[client.TrashEntry](nil), loc)
	if b.String() != "the trash of web holds nothing\n" {
		t.Errorf("empty: %q", b.String())
	}
}

// slice is an each function over list.
func slice[T any](list []T) func(func(T) error) error {
	return func(fn func(T) error) error {
		for _, v := range list {
			if err := fn(v); err != nil {
				return err
			}
		}
		return nil
	}
}

// stubLocal is an admin.Local with nothing to report.
type stubLocal struct{}

func (stubLocal) Report() admin.LocalStatus       { return admin.LocalStatus{} }
func (stubLocal) Scrub() admin.Scrub              { return admin.Scrub{} }
func (stubLocal) StartScrub() (admin.Scrub, bool) { return admin.Scrub{}, false }
func (stubLocal) Mounts() []fuse.Stats            { return nil }
func (stubLocal) LockStats() store.LockStats      { return store.LockStats{} }
func (stubLocal) Owners(int) (store.OwnerStats, []store.OwnedDir) {
	return store.OwnerStats{}, nil
}

// TestTrashCommands runs cairn trash list, restore and empty, and the
// trash lines of cairn status, against the real admin API over a real
// store.
func TestTrashCommands(t *testing.T) {
	const key = "trash-cli-test-key-0123456789"
	auth, err := access.New(access.Config{AdminKey: key})
	if err != nil {
		t.Fatal(err)
	}
	st := storetest.New(t)
	cfg := admin.DefaultConfig()
	cfg.Auth, cfg.Store, cfg.Local, cfg.URL, cfg.Logger = auth, st, stubLocal{}, "http://lone", slog.New(slog.DiscardHandler)
	h, err := admin.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	mux := http.NewServeMux()
	for p, hh := range h.Routes() {
		mux.Handle(p, hh)
	}
	// The native API's bucket answer, for the hint of a bucket without a
	// trash (httpapi serves it in a node).
	mux.HandleFunc("/_cairn/buckets/", func(w http.ResponseWriter, r *http.Request) {
		b, err := st.Bucket(r.Context(), strings.TrimPrefix(r.URL.Path, "/_cairn/buckets/"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(b)
	})
	var pages atomic.Int64 // trash listing pages served
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/_cairn/trash/") {
			pages.Add(1)
		}
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	run := func(args ...string) (string, error) {
		t.Helper()
		root := newRootCmd()
		var out, errw bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&errw)
		root.SetArgs(append(args, "--server", srv.URL, "--key", key))
		err := root.ExecuteContext(context.Background())
		return out.String(), err
	}

	ctx := store.WithOrigin(context.Background(), "http", "AKCLI")
	if err := st.CreateBucket(ctx, store.BucketInfo{Name: "web", TrashSeconds: 7 * 86400}); err != nil {
		t.Fatal(err)
	}
	put := func(p, body string) {
		t.Helper()
		if _, _, err := st.Put(ctx, "web", p, strings.NewReader(body), store.PutOptions{Size: int64(len(body))}); err != nil {
			t.Fatal(err)
		}
	}
	read := func(p string) string {
		t.Helper()
		o, err := st.Open(context.Background(), "web", p)
		if err != nil {
			t.Fatalf("open %s: %v", p, err)
		}
		defer o.Close()
		b := make([]byte, o.Info().Size)
		if _, err := o.ReadAt(b, 0); err != nil && err != io.EOF {
			t.Fatal(err)
		}
		return string(b)
	}
	put("a.txt", "first")
	put("a.txt", "second")
	for _, p := range []string{"d/x.txt", "d/y.txt"} {
		put(p, "body of "+p)
		if err := st.Delete(ctx, "web", p, ""); err != nil {
			t.Fatal(err)
		}
	}

	out, err := run("trash", "list", "web")
	if err != nil || !regexp.MustCompile(`(?m)^a\.txt +\d{4}-\d\d-\d\d \d\d:\d\d:\d\d +5 B +overwritten +1/http/AKCLI$`).MatchString(out) ||
		!strings.Contains(out, "the trash of web: 3 entries, 35 B") {
		t.Fatalf("trash list: %v\n%s", err, out)
	}
	aDeleted := regexp.MustCompile(`(?m)^a\.txt +(\S+ \S+)`).FindStringSubmatch(out)[1]
	out, err = run("trash", "list", "web", "/d/", "--json")
	var list []client.TrashEntry
	if err != nil || json.Unmarshal([]byte(out), &list) != nil || len(list) != 2 || list[0].Path != "d/x.txt" || list[0].Frontend != "http" {
		t.Fatalf("trash list --json: %v\n%s", err, out)
	}
	if !strings.Contains(out, `"deleted": "`+list[0].Deleted.Format(time.RFC3339Nano)+`"`) {
		t.Fatalf("--json times in RFC 3339 to the nanosecond:\n%s", out)
	}
	if out, err = run("status"); err != nil || !strings.Contains(out, "trash of web: keeps 7d: 3 files, 35 B") {
		t.Fatalf("status: %v\n%s", err, out)
	}

	// A directory named without its slash, as after rm -rf d, when the
	// trash has no entry for d itself: the tree under it (issue 36).
	if out, err = run("trash", "restore", "web", "d", "--to", "/copy/", "--at", "2099-01-01"); err != nil || out != "restored 2 files under web/d/ to web/copy/\n" {
		t.Fatalf("restore d --to copy/: %v\n%s", err, out)
	}
	if read("copy/x.txt") != "body of d/x.txt" {
		t.Fatal("copy/x.txt not restored")
	}
	for _, p := range []string{"x.txt", "y.txt"} {
		if err := st.Delete(ctx, "web", "copy/"+p, ""); err != nil {
			t.Fatal(err)
		}
	}
	if out, err = run("trash", "restore", "web", "copy", "--to", "d", "-v"); err != nil ||
		out != "restored web/d/x.txt\nrestored web/d/y.txt\nrestored 2 files under web/copy/ to web/d/\n" {
		t.Fatalf("restore copy/ --to d -v: %v\n%s", err, out)
	}
	if read("d/y.txt") != "body of d/y.txt" {
		t.Fatal("d/y.txt not restored")
	}
	// Never over a live file; to another path, at the time list printed.
	if _, err = run("trash", "restore", "web", "a.txt"); err == nil || !strings.Contains(err.Error(), "409") || !strings.Contains(err.Error(), "a restore never overwrites") {
		t.Fatalf("restore over a file: %v", err)
	}
	if _, err = run("trash", "restore", "web", "a.txt", "--at", "2001-01-01"); err == nil || !strings.Contains(err.Error(), "deleted at or before 2001-01-01T") {
		t.Fatalf("restore before anything: %v", err)
	}
	if out, err = run("trash", "restore", "web", "a.txt", "--at", aDeleted, "--to", "old/a.txt"); err != nil || out != "restored web/old/a.txt\n" {
		t.Fatalf("restore --at %q --to: %v\n%s", aDeleted, err, out)
	}
	if read("old/a.txt") != "first" || read("a.txt") != "second" {
		t.Fatal("restored the wrong version")
	}
	if _, err = run("trash", "restore", "web", "a.txt", "--at", "noon"); err == nil || !strings.Contains(err.Error(), `--at "noon": not a time`) {
		t.Fatalf("bad --at: %v", err)
	}

	// Empty.
	if err := st.Delete(ctx, "web", "d/x.txt", ""); err != nil {
		t.Fatal(err)
	}
	if out, err = run("trash", "empty", "web", "--before", "2001-01-01"); err != nil || !strings.HasPrefix(out, "emptied 0 entries from the trash of web deleted before 2001-01-01T00:00:00") {
		t.Fatalf("empty --before: %v\n%s", err, out)
	}
	if out, err = run("trash", "empty", "web"); err != nil || out != "emptied 1 entry from the trash of web\n" {
		t.Fatalf("empty: %v\n%s", err, out)
	}
	if out, err = run("trash", "list", "web"); err != nil || out != "the trash of web holds nothing\n" {
		t.Fatalf("list after empty: %v\n%s", err, out)
	}
	if err := st.CreateBucket(ctx, store.BucketInfo{Name: "plain"}); err != nil {
		t.Fatal(err)
	}
	if out, err = run("trash", "list", "plain"); err != nil || out != "the trash of plain holds nothing\n(bucket plain keeps no trash: cairn bucket set plain --trash 7d)\n" {
		t.Fatalf("list of a bucket without a trash: %v\n%s", err, out)
	}
	if _, err = run("trash", "list", "nope"); err == nil || !strings.Contains(err.Error(), `404 Not Found: no bucket "nope" (NoSuchBucket)`) {
		t.Fatalf("list of no bucket: %v", err)
	}

	// A trash of 2,500 entries is listed page by page (1,000 entries a
	// request at most), in text and in JSON, every entry once.
	const big = 2500
	var files []store.FilePut
	var cs []store.Change
	for i := range big {
		p := fmt.Sprintf("big/%02d/f%04d", i/100, i)
		files = append(files, store.FilePut{Path: p, Data: []byte("x"), Opts: store.PutOptions{Size: 1}})
		cs = append(cs, store.Change{Kind: store.ChangeDelete, Path: p})
	}
	for _, r := range st.PutFiles(ctx, "web", files) {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	for _, err := range st.ChangeMany(ctx, "web", cs) {
		if err != nil {
			t.Fatal(err)
		}
	}
	pages.Store(0)
	out, err = run("trash", "list", "web", "big/", "--json")
	list = nil
	if err != nil || json.Unmarshal([]byte(out), &list) != nil || len(list) != big || list[big-1].Path != "big/24/f2499" {
		t.Fatalf("trash list --json of %d entries: %v, %d entries", big, err, len(list))
	}
	if n := pages.Load(); n != 3 {
		t.Errorf("trash list --json of %d entries took %d requests, want 3 pages", big, n)
	}
	pages.Store(0)
	if out, err = run("trash", "list", "web", "big/"); err != nil || !strings.Contains(out, "the trash of web under big/: 2500 entries, 2.4 KiB") ||
		strings.Count(out, "\n") != big+2 || pages.Load() != 3 {
		t.Fatalf("trash list of %d entries: %v, %d lines, %d requests:\n%.300s", big, err, strings.Count(out, "\n"), pages.Load(), out)
	}
}
