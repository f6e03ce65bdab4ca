package client_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cairn-fs/cairn/client"
	"github.com/cairn-fs/cairn/client/clienttest"
)

const key = "secret-key"

func newEnv(t *testing.T) (*clienttest.Server, *client.Client) {
	t.Helper()
	srv := clienttest.NewServer(key)
	t.Cleanup(srv.Close)
	c := client.New(srv.URL, key)
	if _, err := c.CreateBucket(context.Background(), client.BucketInfo{Name: "b"}); err != nil {
		t.Fatal(err)
	}
	return srv, c
}

func put(t *testing.T, c *client.Client, p, content string) client.ObjectInfo {
	t.Helper()
	info, err := c.Put(context.Background(), "b", p, strings.NewReader(content), int64(len(content)), client.PutOptions{})
	if err != nil {
		t.Fatalf("put %s: %v", p, err)
	}
	return info
}

func TestBuckets(t *testing.T) {
	ctx := context.Background()
	srv := clienttest.NewServer(key)
	defer srv.Close()
	c := client.New(srv.URL+"/", key) // a trailing slash is tolerated

	b, err := c.CreateBucket(ctx, client.BucketInfo{Name: "site", Public: true, CacheControl: "max-age=60"})
	if err != nil {
		t.Fatal(err)
	}
	if !b.Public || b.CacheControl != "max-age=60" || b.Created.IsZero() {
		t.Fatalf("created bucket = %+v", b)
	}
	_, err = c.CreateBucket(ctx, client.BucketInfo{Name: "site"})
	var ce *client.Error
	if !errors.Is(err, client.ErrConflict) || !errors.As(err, &ce) || ce.Status != 409 || ce.Code != "BucketAlreadyExists" {
		t.Fatalf("second create: %v", err)
	}
	if _, err := c.CreateBucket(ctx, client.BucketInfo{Name: "Bad Name"}); !errors.Is(err, client.ErrBadRequest) {
		t.Fatalf("bad name: %v", err)
	}
	if _, err := c.CreateBucket(ctx, client.BucketInfo{Name: "other"}); err != nil {
		t.Fatal(err)
	}

	cc := "no-cache"
	b, err = c.UpdateBucket(ctx, "site", client.BucketUpdate{CacheControl: &cc})
	if err != nil {
		t.Fatal(err)
	}
	if !b.Public || b.CacheControl != "no-cache" {
		t.Fatalf("partial update changed other fields or missed one: %+v", b)
	}
	f := false
	if b, err = c.UpdateBucket(ctx, "site", client.BucketUpdate{Public: &f}); err != nil || b.Public || b.CacheControl != "no-cache" {
		t.Fatalf("update public: %+v, %v", b, err)
	}
	if _, err := c.UpdateBucket(ctx, "nope", client.BucketUpdate{Public: &f}); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("update missing: %v", err)
	}

	list, err := c.ListBuckets(ctx)
	if err != nil || len(list) != 2 || list[0].Name != "other" || list[1].Name != "site" {
		t.Fatalf("list = %+v, %v", list, err)
	}
	if got, err := c.Bucket(ctx, "site"); err != nil || got.Name != "site" || got.Public {
		t.Fatalf("bucket = %+v, %v", got, err)
	}

	if _, err := c.Put(ctx, "site", "x", strings.NewReader("x"), 1, client.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteBucket(ctx, "site"); !errors.Is(err, client.ErrConflict) {
		t.Fatalf("delete non-empty: %v", err)
	}
	if err := c.Delete(ctx, "site", "x"); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteBucket(ctx, "site"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Bucket(ctx, "site"); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("deleted bucket: %v", err)
	}
}

func TestAuthErrors(t *testing.T) {
	ctx := context.Background()
	srv, _ := newEnv(t)
	_, err := client.New(srv.URL, "").ListBuckets(ctx)
	if !errors.Is(err, client.ErrUnauthorized) || errors.Is(err, client.ErrForbidden) {
		t.Fatalf("no key: %v", err)
	}
	_, err = client.New(srv.URL, "wrong").Put(ctx, "b", "f", strings.NewReader("x"), 1, client.PutOptions{})
	if !errors.Is(err, client.ErrForbidden) {
		t.Fatalf("wrong key: %v", err)
	}
	if strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "403") {
		t.Fatalf("error should be one line with the status: %q", err)
	}
}

func TestPutGetRoundTrip(t *testing.T) {
	ctx := context.Background()
	srv, c := newEnv(t)
	names := []string{
		"plain.txt",
		"dir with space/naïve café ☕.html",
		"weird/q?x=1#frag%20+&=;.bin",
		"日本語/ファイル.txt",
	}
	mtime := time.Unix(1700000000, 123456789)
	for i, name := range names {
		content := strings.Repeat(fmt.Sprintf("content %d ", i), 100+i)
		info, err := c.Put(ctx, "b", name, strings.NewReader(content), int64(len(content)),
			client.PutOptions{ContentType: "text/x-test", ModTime: mtime, Mode: 0o640})
		if err != nil {
			t.Fatalf("put %q: %v", name, err)
		}
		md := md5.Sum([]byte(content))
		sh := sha256.Sum256([]byte(content))
		if info.Path != name || info.Size != int64(len(content)) || info.ETag != hex.EncodeToString(md[:]) ||
			info.SHA256 != hex.EncodeToString(sh[:]) || !info.ModTime.Equal(mtime) || info.Mode != 0o640 {
			t.Fatalf("put info for %q = %+v", name, info)
		}
		if data, _, ok := srv.File("b", name); !ok || string(data) != content {
			t.Fatalf("server holds %q for %q", data, name)
		}
		rc, ginfo, err := c.Get(ctx, "b", name)
		if err != nil {
			t.Fatalf("get %q: %v", name, err)
		}
		data, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || string(data) != content {
			t.Fatalf("get %q = %q, %v", name, data, err)
		}
		if ginfo.Size != info.Size || ginfo.ETag != info.ETag || ginfo.SHA256 != info.SHA256 ||
			ginfo.ContentType != "text/x-test" || ginfo.ModTime.Unix() != mtime.Unix() {
			t.Fatalf("get info for %q = %+v", name, ginfo)
		}
	}
	// Replace, conditional writes.
	info := put(t, c, "plain.txt", "v2")
	if _, err := c.Put(ctx, "b", "plain.txt", strings.NewReader("v3"), 2, client.PutOptions{IfMatch: "0000"}); !errors.Is(err, client.ErrPrecondition) {
		t.Fatalf("If-Match mismatch: %v", err)
	}
	if _, err := c.Put(ctx, "b", "plain.txt", strings.NewReader("v3"), 2, client.PutOptions{IfMatch: info.ETag}); err != nil {
		t.Fatalf("If-Match match: %v", err)
	}
	if _, err := c.Put(ctx, "b", "plain.txt", strings.NewReader("v4"), 2, client.PutOptions{IfNoneMatchAny: true}); !errors.Is(err, client.ErrPrecondition) {
		t.Fatalf("If-None-Match: %v", err)
	}
	// Empty file, and unknown length (chunked).
	if info, err := c.Put(ctx, "b", "empty", bytes.NewReader(nil), 0, client.PutOptions{}); err != nil || info.Size != 0 {
		t.Fatalf("empty put: %+v %v", info, err)
	}
	if info, err := c.Put(ctx, "b", "chunked", io.MultiReader(strings.NewReader("ab"), strings.NewReader("cd")), -1, client.PutOptions{}); err != nil || info.Size != 4 {
		t.Fatalf("chunked put: %+v %v", info, err)
	}
	// A body shorter than declared stores nothing.
	if _, err := c.Put(ctx, "b", "short", strings.NewReader("abc"), 10, client.PutOptions{}); err == nil {
		t.Fatal("short body: no error")
	}
	if _, _, ok := srv.File("b", "short"); ok {
		t.Fatal("short body was stored")
	}
	if _, _, err := c.Get(ctx, "b", "missing"); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("get missing: %v", err)
	}
	if _, err := c.Put(ctx, "", "x", nil, 0, client.PutOptions{}); !errors.Is(err, client.ErrInvalidArgument) {
		t.Fatalf("empty bucket: %v", err)
	}
}

func TestGetRange(t *testing.T) {
	ctx := context.Background()
	_, c := newEnv(t)
	put(t, c, "f", "0123456789")
	for _, tc := range []struct {
		off, n int64
		want   string
	}{{0, -1, "0123456789"}, {2, 3, "234"}, {7, -1, "789"}, {8, 100, "89"}, {0, 1, "0"}, {3, 0, ""}} {
		rc, info, err := c.GetRange(ctx, "b", "f", tc.off, tc.n)
		if err != nil {
			t.Fatalf("range %d+%d: %v", tc.off, tc.n, err)
		}
		data, _ := io.ReadAll(rc)
		rc.Close()
		if string(data) != tc.want || info.Size != 10 {
			t.Fatalf("range %d+%d = %q (size %d), want %q", tc.off, tc.n, data, info.Size, tc.want)
		}
	}
	if _, _, err := c.GetRange(ctx, "b", "f", 10, -1); !errors.Is(err, client.ErrRange) {
		t.Fatalf("unsatisfiable range: %v", err)
	}
}

// A server that ignores Range still yields the requested bytes.
func TestGetRangeIgnoredByServer(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "0123456789")
	}))
	defer ts.Close()
	rc, _, err := client.New(ts.URL, "").GetRange(context.Background(), "b", "f", 3, 4)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(rc)
	rc.Close()
	if string(data) != "3456" {
		t.Fatalf("got %q", data)
	}
}

func TestStatDeleteRename(t *testing.T) {
	ctx := context.Background()
	srv, c := newEnv(t)
	put(t, c, "d/sub/f.txt", "hello")
	info, err := c.Stat(ctx, "b", "d/sub/f.txt")
	if err != nil || info.IsDir || info.Size != 5 || info.ETag == "" || len(info.SHA256) != 64 {
		t.Fatalf("stat file = %+v, %v", info, err)
	}
	for _, p := range []string{"d/sub", "d/sub/", "", "/d"} {
		if info, err := c.Stat(ctx, "b", p); err != nil || !info.IsDir {
			t.Fatalf("stat dir %q = %+v, %v", p, info, err)
		}
	}
	if _, err := c.Stat(ctx, "b", "nope"); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("stat missing: %v", err)
	}
	if _, _, err := c.Get(ctx, "b", "d"); err == nil {
		t.Fatal("get of a directory succeeded")
	}

	if err := c.Rename(ctx, "b", "d/sub/f.txt", "e/g ü.txt"); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := srv.File("b", "e/g ü.txt"); !ok {
		t.Fatalf("rename target missing; files %v", srv.Paths("b"))
	}
	if _, err := c.Stat(ctx, "b", "d/sub/f.txt"); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("rename source still there: %v", err)
	}

	if err := c.Delete(ctx, "b", "e"); !errors.Is(err, client.ErrConflict) {
		t.Fatalf("delete non-empty dir: %v", err)
	}
	if err := c.Delete(ctx, "b", "e/g ü.txt"); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, "b", "e/"); err != nil {
		t.Fatalf("delete empty dir: %v", err)
	}
	if err := c.Delete(ctx, "b", "e"); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("delete missing: %v", err)
	}
	if err := c.Mkdir(ctx, "b", "new/dir"); err != nil {
		t.Fatal(err)
	}
	if info, err := c.Stat(ctx, "b", "new/dir"); err != nil || !info.IsDir {
		t.Fatalf("mkdir result: %+v %v", info, err)
	}
}

func TestListAndPagination(t *testing.T) {
	ctx := context.Background()
	srv, c := newEnv(t)
	for _, p := range []string{"a/1", "a/2", "a/x/3", "a/x/y/4", "a/z/5", "b1", "a/é"} {
		put(t, c, p, "data")
	}
	if err := c.Mkdir(ctx, "b", "a/empty"); err != nil {
		t.Fatal(err)
	}
	page, err := c.List(ctx, "b", "a", client.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range page.Entries {
		got = append(got, e.Path)
	}
	if strings.Join(got, ",") != "a/1,a/2,a/é" || strings.Join(page.CommonPrefixes, ",") != "a/empty/,a/x/,a/z/" || page.Truncated {
		t.Fatalf("list a = %v %v %v", got, page.CommonPrefixes, page.Truncated)
	}

	srv.ResetCounts()
	all, err := c.ListAll(ctx, "b", "a/", client.ListOptions{Recursive: true, Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	got = got[:0]
	for _, e := range all.Entries {
		got = append(got, e.Path)
	}
	if strings.Join(got, ",") != "a/1,a/2,a/x/3,a/x/y/4,a/z/5,a/é" {
		t.Fatalf("recursive = %v", got)
	}
	if n := srv.Count("LIST"); n != 3 {
		t.Fatalf("6 entries in pages of 2 took %d requests, want 3", n)
	}

	page, err = c.List(ctx, "b", "", client.ListOptions{Recursive: true, Prefix: "a/x"})
	if err != nil || len(page.Entries) != 2 {
		t.Fatalf("prefix listing = %+v, %v", page, err)
	}
	if _, err := c.List(ctx, "b", "nope", client.ListOptions{}); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("list missing dir: %v", err)
	}
}

func TestListProtocolErrors(t *testing.T) {
	ctx := context.Background()
	html := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = io.WriteString(w, "<html>index</html>")
	}))
	defer html.Close()
	if _, err := client.New(html.URL, "").List(ctx, "b", "", client.ListOptions{}); !errors.Is(err, client.ErrProtocol) {
		t.Fatalf("index.html instead of a listing: %v", err)
	}
	loop := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"entries":[{"path":"x"}],"truncated":true,"next_token":"x"}`)
	}))
	defer loop.Close()
	if _, err := client.New(loop.URL, "").ListAll(ctx, "b", "", client.ListOptions{}); !errors.Is(err, client.ErrProtocol) {
		t.Fatalf("a listing that does not advance: %v", err)
	}
}

func TestRemoveAll(t *testing.T) {
	ctx := context.Background()
	srv, c := newEnv(t)
	for _, p := range []string{"t/1", "t/a/2", "t/a/b/3", "t/c/4", "keep"} {
		put(t, c, p, "x")
	}
	if err := c.Mkdir(ctx, "b", "t/a/empty"); err != nil {
		t.Fatal(err)
	}
	files, dirs, err := c.RemoveAll(ctx, "b", "t")
	if err != nil {
		t.Fatal(err)
	}
	// dirs: t, t/a, t/a/b, t/a/empty, t/c
	if files != 4 || dirs != 5 {
		t.Fatalf("removed %d files, %d dirs", files, dirs)
	}
	if p := srv.Paths("b"); len(p) != 1 || p[0] != "keep" {
		t.Fatalf("left %v", p)
	}
	if d := srv.Dirs("b"); len(d) != 0 {
		t.Fatalf("left dirs %v", d)
	}
	if files, dirs, err := c.RemoveAll(ctx, "b", "keep"); err != nil || files != 1 || dirs != 0 {
		t.Fatalf("remove file: %d %d %v", files, dirs, err)
	}
	if _, _, err := c.RemoveAll(ctx, "b", "keep"); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("remove missing: %v", err)
	}
}

func TestMtimeFormat(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Time
	}{
		{"1700000000", time.Unix(1700000000, 0)},
		{"1700000000.5", time.Unix(1700000000, 500000000)},
		{"1700000000.123456789", time.Unix(1700000000, 123456789)},
		{"1700000000.1234567891", time.Unix(1700000000, 123456789)},
		{"-1.5", time.Unix(-2, 500000000)},
	} {
		got, err := client.ParseMtime(tc.in)
		if err != nil || !got.Equal(tc.want) {
			t.Errorf("ParseMtime(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
		back, err := client.ParseMtime(client.FormatMtime(tc.want))
		if err != nil || !back.Equal(tc.want) {
			t.Errorf("round trip of %v via %q = %v, %v", tc.want, client.FormatMtime(tc.want), back, err)
		}
	}
	for _, bad := range []string{"", "x", "1.x", "1.-5"} {
		if _, err := client.ParseMtime(bad); err == nil {
			t.Errorf("ParseMtime(%q) accepted", bad)
		}
	}
}

func TestMtimeEqual(t *testing.T) {
	base := time.Unix(1700000000, 0)
	for _, tc := range []struct {
		a, b time.Time
		want bool
	}{
		{base, base, true},
		{base.Add(900 * time.Millisecond), base, true},     // same second
		{base.Add(999999999), base.Add(time.Second), true}, // float rounding across the boundary
		{base.Add(-time.Millisecond), base, false},         // previous second, 1 ms apart
		{base.Add(1500 * time.Millisecond), base, false},   // next second
		{base.Add(time.Hour), base, false},
	} {
		if got := client.MtimeEqual(tc.a, tc.b); got != tc.want {
			t.Errorf("MtimeEqual(%v, %v) = %v", tc.a, tc.b, got)
		}
	}
}

func TestDefaultTransport(t *testing.T) {
	tr := client.DefaultTransport()
	if tr.MaxIdleConnsPerHost < 64 || tr.DisableKeepAlives {
		t.Fatalf("transport: %d idle per host, keep-alive disabled %v", tr.MaxIdleConnsPerHost, tr.DisableKeepAlives)
	}
}

// A PUT answer without a JSON body still yields the file's info.
func TestPutWithoutJSONAnswer(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("ETag", `"abc"`)
		w.WriteHeader(http.StatusCreated)
	}))
	defer ts.Close()
	mt := time.Unix(1700000000, 5)
	info, err := client.New(ts.URL, "").Put(context.Background(), "b", "/x/y.css", strings.NewReader("body"), 4,
		client.PutOptions{ContentType: "text/css", ModTime: mt})
	if err != nil {
		t.Fatal(err)
	}
	if info.Bucket != "b" || info.Path != "x/y.css" || info.Size != 4 || info.ETag != "abc" ||
		info.ContentType != "text/css" || !info.ModTime.Equal(mt) {
		t.Fatalf("info %+v", info)
	}
}
