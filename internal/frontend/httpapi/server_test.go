package httpapi

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cairn-fs/cairn/internal/access"
	"github.com/cairn-fs/cairn/internal/store"
)

const testKey = "test-admin-key-0123456789"

type env struct {
	t  testing.TB
	s  *Server
	fs *fakeStore
}

func newEnv(t testing.TB, mut func(*Config)) *env {
	t.Helper()
	fs := newFakeStore()
	cfg := DefaultConfig()
	cfg.Store = fs
	cfg.AdminKey = testKey
	if mut != nil {
		mut(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	ctx := context.Background()
	must(t, fs.CreateBucket(ctx, store.BucketInfo{Name: "pub", Public: true, CacheControl: "public, max-age=60", ChecksumSidecars: true}))
	must(t, fs.CreateBucket(ctx, store.BucketInfo{Name: "priv"}))
	return &env{t: t, s: s, fs: fs}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// req builds a request; hdr is "Key: value" pairs. A "key" pseudo-header
// of "admin" adds the admin key.
func (e *env) do(method, target string, body io.Reader, hdr ...string) *httptest.ResponseRecorder {
	e.t.Helper()
	r := httptest.NewRequest(method, target, body)
	if body == nil {
		r.ContentLength = 0
	}
	for _, h := range hdr {
		k, v, _ := strings.Cut(h, ": ")
		if k == "key" {
			r.Header.Set("Authorization", "Bearer "+testKey)
			continue
		}
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	e.s.Handler().ServeHTTP(w, r)
	return w
}

func (e *env) put(path, body string, hdr ...string) *httptest.ResponseRecorder {
	e.t.Helper()
	w := e.do("PUT", path, strings.NewReader(body), append(hdr, "key: admin")...)
	if w.Code != 200 && w.Code != 201 {
		e.t.Fatalf("PUT %s: %d %s", path, w.Code, w.Body)
	}
	return w
}

func expect(t *testing.T, w *httptest.ResponseRecorder, status int, code string) {
	t.Helper()
	if w.Code != status {
		t.Fatalf("status %d, want %d; body %s", w.Code, status, w.Body)
	}
	if code == "" {
		return
	}
	var eb errorBody
	if err := json.Unmarshal(w.Body.Bytes(), &eb); err != nil {
		t.Fatalf("error body %q: %v", w.Body, err)
	}
	if eb.Code != code || eb.Error == "" {
		t.Fatalf("error body %+v, want code %s", eb, code)
	}
	if ct := w.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("error Content-Type %q", ct)
	}
}

func md5hex(s string) string { m := md5.Sum([]byte(s)); return hex.EncodeToString(m[:]) }

func TestConfigValidate(t *testing.T) {
	good := DefaultConfig()
	good.Store = newFakeStore()
	good.AdminKey = testKey
	must(t, good.Validate())
	for name, mut := range map[string]func(*Config){
		"no store":             func(c *Config) { c.Store = nil },
		"short key":            func(c *Config) { c.AdminKey = "x" },
		"metrics w/o registry": func(c *Config) { c.Metrics = &Metrics{} },
		"negative":             func(c *Config) { c.MaxHeaderBytes = -1 },
		"extra outside":        func(c *Config) { c.ExtraHandlers = map[string]http.Handler{"/rpc": http.NotFoundHandler()} },
		"extra shadows":        func(c *Config) { c.ExtraHandlers = map[string]http.Handler{"/_cairn/health": http.NotFoundHandler()} },
		"extra prefix shadows": func(c *Config) {
			c.ExtraHandlers = map[string]http.Handler{"/_cairn/buckets/x/": http.NotFoundHandler()}
		},
	} {
		c := good
		mut(&c)
		if err := c.Validate(); !errors.Is(err, ErrBadConfig) {
			t.Errorf("%s: got %v, want ErrBadConfig", name, err)
		}
		if _, err := New(c); err == nil {
			t.Errorf("%s: New accepted it", name)
		}
	}
}

func TestPutAndGet(t *testing.T) {
	e := newEnv(t, nil)
	w := e.put("/pub/a/b/hello.txt", "hello world")
	expect(t, w, 201, "")
	etag := `"` + md5hex("hello world") + `"`
	if got := w.Header().Get("ETag"); got != etag {
		t.Fatalf("PUT ETag %q, want %q", got, etag)
	}
	var info store.ObjectInfo
	must(t, json.Unmarshal(w.Body.Bytes(), &info))
	if info.Path != "a/b/hello.txt" || info.Size != 11 {
		t.Fatalf("PUT body %+v", info)
	}
	expect(t, e.put("/pub/a/b/hello.txt", "hello world"), 200, "")

	w = e.do("GET", "/pub/a/b/hello.txt", nil)
	expect(t, w, 200, "")
	want := map[string]string{
		"Content-Length": "11",
		"Content-Type":   "text/plain; charset=utf-8",
		"ETag":           etag,
		"Last-Modified":  "Mon, 06 May 2024 07:08:09 GMT",
		"Accept-Ranges":  "bytes",
		"Repr-Digest":    "sha-256=:uU0nuZNNPgilLlLX2n2r+sSE7+N6U4DukIj3rOLvzek=:",
		"Cache-Control":  "public, max-age=60",
	}
	for k, v := range want {
		if got := w.Header().Get(k); got != v {
			t.Errorf("GET %s = %q, want %q", k, got, v)
		}
	}
	if w.Body.String() != "hello world" {
		t.Fatalf("body %q", w.Body)
	}

	h := e.do("HEAD", "/pub/a/b/hello.txt", nil)
	expect(t, h, 200, "")
	if h.Body.Len() != 0 {
		t.Fatalf("HEAD sent a body: %q", h.Body)
	}
	for k, v := range want {
		if got := h.Header().Get(k); got != v {
			t.Errorf("HEAD %s = %q, want %q", k, got, v)
		}
	}
}

func TestContentType(t *testing.T) {
	e := newEnv(t, nil)
	e.put("/pub/x.bin.unknownext", "a")
	e.put("/pub/page.html", "<p>")
	e.put("/pub/typed", "{}", "Content-Type: application/vnd.test+json")
	for path, want := range map[string]string{
		"/pub/x.bin.unknownext": "application/octet-stream",
		"/pub/page.html":        "text/html; charset=utf-8",
		"/pub/typed":            "application/vnd.test+json",
	} {
		if got := e.do("GET", path, nil).Header().Get("Content-Type"); got != want {
			t.Errorf("%s: Content-Type %q, want %q", path, got, want)
		}
	}
}

func TestPutMetadataHeaders(t *testing.T) {
	e := newEnv(t, nil)
	e.put("/priv/f", "x", "X-Cairn-Mtime: 1700000000.25", "X-Cairn-Mode: 600")
	info, err := e.fs.Stat(context.Background(), "priv", "f")
	must(t, err)
	if !info.ModTime.Equal(time.Unix(1700000000, 250000000)) || info.Mode != 0o600 {
		t.Fatalf("stored %v %o", info.ModTime, info.Mode)
	}
	expect(t, e.do("PUT", "/priv/g", strings.NewReader("x"), "key: admin", "X-Cairn-Mtime: soon"), 400, "BadRequest")
	expect(t, e.do("PUT", "/priv/g", strings.NewReader("x"), "key: admin", "X-Cairn-Mode: 9"), 400, "BadRequest")
	if _, err := e.fs.Stat(context.Background(), "priv", "g"); !errors.Is(err, store.ErrNotFound) {
		t.Fatal("rejected PUT stored a file")
	}
}

func TestAuth(t *testing.T) {
	e := newEnv(t, nil)
	e.put("/priv/secret", "s")
	e.put("/pub/open", "o")

	w := e.do("PUT", "/pub/x", strings.NewReader("x"))
	expect(t, w, 401, "Unauthorized")
	if w.Header().Get("WWW-Authenticate") == "" {
		t.Fatal("401 without WWW-Authenticate")
	}
	expect(t, e.do("PUT", "/pub/x", strings.NewReader("x"), "Authorization: Bearer wrong-key-xxxxxxxxxx"), 403, "AccessDenied")
	expect(t, e.do("DELETE", "/pub/open", nil), 401, "Unauthorized")
	expect(t, e.do("POST", "/pub/open?rename-to=b", nil), 401, "Unauthorized")
	expect(t, e.do("GET", "/priv/secret", nil), 401, "Unauthorized")
	expect(t, e.do("HEAD", "/priv/secret", nil), 401, "")
	expect(t, e.do("GET", "/priv/", nil), 401, "Unauthorized")
	expect(t, e.do("GET", "/priv/secret", nil, "Authorization: Bearer nope"), 403, "AccessDenied")
	expect(t, e.do("GET", "/priv/secret", nil, "key: admin"), 200, "")
	expect(t, e.do("GET", "/pub/open", nil), 200, "")
	expect(t, e.do("GET", "/pub/open", nil, "Authorization: Bearer nope"), 403, "AccessDenied")
	expect(t, e.do("GET", "/_cairn/buckets", nil), 401, "Unauthorized")
	if _, err := e.fs.Stat(context.Background(), "pub", "x"); err == nil {
		t.Fatal("unauthorized PUT stored a file")
	}
}

// shortReader returns its data, then err.
type shortReader struct {
	data string
	err  error
}

func (r *shortReader) Read(p []byte) (int, error) {
	if r.data == "" {
		return 0, r.err
	}
	n := copy(p, r.data)
	r.data = r.data[n:]
	return n, nil
}

func TestPutBadBodies(t *testing.T) {
	e := newEnv(t, nil)
	for name, body := range map[string]io.Reader{
		"short":      &shortReader{data: "0123456789", err: io.EOF},
		"disconnect": &shortReader{data: "0123456789", err: io.ErrUnexpectedEOF},
	} {
		r := httptest.NewRequest("PUT", "/pub/f-"+name, body)
		r.ContentLength = 100
		r.Header.Set("Authorization", "Bearer "+testKey)
		w := httptest.NewRecorder()
		e.s.Handler().ServeHTTP(w, r)
		expect(t, w, 400, "IncompleteBody")
		if _, err := e.fs.Stat(context.Background(), "pub", "f-"+name); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("%s: a file was stored", name)
		}
	}
	// Unknown length (chunked) is fine.
	r := httptest.NewRequest("PUT", "/pub/chunked", strings.NewReader("abc"))
	r.ContentLength = -1
	r.Header.Set("Authorization", "Bearer "+testKey)
	w := httptest.NewRecorder()
	e.s.Handler().ServeHTTP(w, r)
	expect(t, w, 201, "")
}

func TestPutStoreErrors(t *testing.T) {
	e := newEnv(t, nil)
	for _, tc := range []struct {
		err    error
		status int
		code   string
	}{
		{store.ErrNoSpace, 507, "InsufficientStorage"},
		{store.ErrUnavailable, 503, "Unavailable"},
		{store.ErrReadOnly, 503, "ReadOnly"},
		{store.ErrTooLarge, 413, "EntityTooLarge"},
		{fmt.Errorf("wrapped: %w", store.ErrCorrupt), 500, "DataCorrupt"},
		{errors.New("mystery"), 500, "InternalError"},
	} {
		e.fs.putErr = tc.err
		w := e.do("PUT", "/pub/f", strings.NewReader("x"), "key: admin")
		expect(t, w, tc.status, tc.code)
		if tc.status >= 500 && strings.Contains(w.Body.String(), "mystery") {
			t.Fatal("5xx body leaks the internal error")
		}
	}
	e.fs.putErr = nil
	expect(t, e.do("PUT", "/nob/f", strings.NewReader("x"), "key: admin"), 404, "NoSuchBucket")
	e.put("/pub/file", "x")
	expect(t, e.do("PUT", "/pub/file/sub", strings.NewReader("x"), "key: admin"), 409, "NotADirectory")
	e.put("/pub/d/f", "x")
	expect(t, e.do("PUT", "/pub/d", strings.NewReader("x"), "key: admin"), 409, "IsADirectory")
	expect(t, e.do("PUT", "/pub", strings.NewReader("x"), "key: admin"), 405, "MethodNotAllowed")
}

func TestClassifyTable(t *testing.T) {
	for _, tc := range []struct {
		err    error
		status int
	}{
		{store.ErrNotFound, 404}, {store.ErrNoBucket, 404}, {store.ErrBucketExists, 409},
		{store.ErrBucketNotEmpty, 409}, {store.ErrExists, 409}, {store.ErrNotEmpty, 409},
		{store.ErrIsDir, 409}, {store.ErrNotDir, 409}, {store.ErrInvalidName, 400},
		{store.ErrPrecondition, 412}, {store.ErrNoSpace, 507}, {store.ErrShortBody, 400},
		{store.ErrTooLarge, 413}, {store.ErrCorrupt, 500}, {store.ErrUnavailable, 503},
		{store.ErrReadOnly, 503}, {store.ErrNotUpgraded, 409}, {access.ErrUnauthenticated, 401}, {access.ErrForbidden, 403},
		{ErrBadPath, 400}, {ErrNameTooLong, 400}, {ErrPathTooLong, 400}, {ErrBodyTimeout, 408},
		{ErrMethodNotAllowed, 405}, {fmt.Errorf("x: %w", context.Canceled), 499},
	} {
		if got, _ := classify(fmt.Errorf("ctx: %w", tc.err)); got != tc.status {
			t.Errorf("classify(%v) = %d, want %d", tc.err, got, tc.status)
		}
	}
}

func TestPutConditional(t *testing.T) {
	e := newEnv(t, nil)
	e.put("/pub/f", "one")
	etag := `"` + md5hex("one") + `"`
	expect(t, e.do("PUT", "/pub/f", strings.NewReader("two"), "key: admin", "If-None-Match: *"), 412, "PreconditionFailed")
	expect(t, e.do("PUT", "/pub/new", strings.NewReader("two"), "key: admin", "If-None-Match: *"), 201, "")
	expect(t, e.do("PUT", "/pub/f", strings.NewReader("two"), "key: admin", `If-Match: "nope"`), 412, "PreconditionFailed")
	expect(t, e.do("PUT", "/pub/missing", strings.NewReader("two"), "key: admin", `If-Match: *`), 412, "PreconditionFailed")
	expect(t, e.do("PUT", "/pub/f", strings.NewReader("two"), "key: admin", "If-Match: "+etag), 200, "")
	if e.do("GET", "/pub/f", nil).Body.String() != "two" {
		t.Fatal("conditional PUT did not replace")
	}
	expect(t, e.do("DELETE", "/pub/f", nil, "key: admin", "If-Match: "+etag), 412, "PreconditionFailed")
}

func TestMkdirDeleteRename(t *testing.T) {
	e := newEnv(t, nil)
	expect(t, e.do("PUT", "/pub/d/e/", nil, "key: admin"), 201, "")
	expect(t, e.do("PUT", "/pub/d/e/", nil, "key: admin"), 200, "")
	expect(t, e.do("PUT", "/pub/d/x/", strings.NewReader("body"), "key: admin"), 400, "BadRequest")
	if st, err := e.fs.Stat(context.Background(), "pub", "d/e"); err != nil || !st.IsDir {
		t.Fatalf("mkdir: %+v %v", st, err)
	}
	e.put("/pub/d/e/f", "x")
	expect(t, e.do("DELETE", "/pub/d/e", nil, "key: admin"), 409, "DirectoryNotEmpty")
	expect(t, e.do("DELETE", "/pub/d/e/f/", nil, "key: admin"), 409, "NotADirectory")
	expect(t, e.do("POST", "/pub/d/e/f?rename-to=/d/g", nil, "key: admin"), 200, "")
	expect(t, e.do("GET", "/pub/d/g", nil), 200, "")
	expect(t, e.do("GET", "/pub/d/e/f", nil), 404, "NoSuchKey")
	expect(t, e.do("POST", "/pub/d/g", nil, "key: admin"), 400, "BadRequest")
	expect(t, e.do("POST", "/pub/d/g?rename-to=../x", nil, "key: admin"), 400, "InvalidPath")
	expect(t, e.do("POST", "/pub/nothere?rename-to=x", nil, "key: admin"), 404, "NoSuchKey")
	expect(t, e.do("DELETE", "/pub/d/e/", nil, "key: admin"), 204, "")
	expect(t, e.do("DELETE", "/pub/d/g", nil, "key: admin"), 204, "")
	expect(t, e.do("DELETE", "/pub/d/g", nil, "key: admin"), 404, "NoSuchKey")
	expect(t, e.do("DELETE", "/pub/d", nil, "key: admin"), 204, "")
	expect(t, e.do("DELETE", "/pub/", nil, "key: admin"), 405, "MethodNotAllowed")
	w := e.do("PATCH", "/pub/x", nil, "key: admin")
	expect(t, w, 405, "MethodNotAllowed")
	if w.Header().Get("Allow") == "" {
		t.Fatal("405 without Allow")
	}
}

func TestRanges(t *testing.T) {
	e := newEnv(t, nil)
	e.put("/pub/r", "0123456789")
	for _, tc := range []struct {
		rng, body, cr string
		status        int
	}{
		{"bytes=2-4", "234", "bytes 2-4/10", 206},
		{"bytes=7-", "789", "bytes 7-9/10", 206},
		{"bytes=-3", "789", "bytes 7-9/10", 206},
		{"bytes=0-1,4-5", "0123456789", "", 200},
		{"bytes=x", "0123456789", "", 200},
	} {
		w := e.do("GET", "/pub/r", nil, "Range: "+tc.rng)
		if w.Code != tc.status || w.Body.String() != tc.body || w.Header().Get("Content-Range") != tc.cr {
			t.Errorf("Range %s: %d %q %q", tc.rng, w.Code, w.Body, w.Header().Get("Content-Range"))
		}
		if w.Header().Get("Content-Length") != fmt.Sprint(len(tc.body)) {
			t.Errorf("Range %s: Content-Length %s", tc.rng, w.Header().Get("Content-Length"))
		}
	}
	w := e.do("GET", "/pub/r", nil, "Range: bytes=10-")
	expect(t, w, 416, "InvalidRange")
	if got := w.Header().Get("Content-Range"); got != "bytes */10" {
		t.Fatalf("416 Content-Range %q", got)
	}
	// If-Range with a stale validator sends the whole file.
	w = e.do("GET", "/pub/r", nil, "Range: bytes=2-4", `If-Range: "stale"`)
	expect(t, w, 200, "")
	w = e.do("HEAD", "/pub/r", nil, "Range: bytes=2-4")
	if w.Code != 206 || w.Body.Len() != 0 || w.Header().Get("Content-Length") != "3" {
		t.Fatalf("HEAD range: %d %q %q", w.Code, w.Body, w.Header().Get("Content-Length"))
	}
}

func TestConditionalGet(t *testing.T) {
	e := newEnv(t, nil)
	e.put("/pub/c", "content")
	etag := `"` + md5hex("content") + `"`
	lm := e.fs.now.Format(http.TimeFormat)
	old := e.fs.now.Add(-time.Hour).Format(http.TimeFormat)
	for _, tc := range []struct {
		hdr    []string
		status int
	}{
		{[]string{"If-None-Match: " + etag}, 304},
		{[]string{`If-None-Match: "a", W/` + etag}, 304},
		{[]string{"If-None-Match: *"}, 304},
		{[]string{"If-Modified-Since: " + lm}, 304},
		{[]string{"If-Modified-Since: " + old}, 200},
		{[]string{`If-None-Match: "other"`, "If-Modified-Since: " + lm}, 200},
		{[]string{"If-Match: " + etag}, 200},
		{[]string{`If-Match: "other"`}, 412},
		{[]string{"If-Unmodified-Since: " + old}, 412},
		{[]string{"If-Unmodified-Since: " + lm}, 200},
	} {
		w := e.do("GET", "/pub/c", nil, tc.hdr...)
		if w.Code != tc.status {
			t.Errorf("%v: %d, want %d", tc.hdr, w.Code, tc.status)
		}
		if tc.status == 304 {
			if w.Body.Len() != 0 || w.Header().Get("ETag") != etag || w.Header().Get("Cache-Control") == "" {
				t.Errorf("%v: 304 body %q headers %v", tc.hdr, w.Body, w.Header())
			}
		}
	}
}

func TestRedirects(t *testing.T) {
	e := newEnv(t, nil)
	e.put("/pub/dir/f", "x")
	for path, loc := range map[string]string{
		"/pub":             "/pub/",
		"/pub/dir":         "/pub/dir/",
		"/pub/dir?limit=1": "/pub/dir/?limit=1",
	} {
		w := e.do("GET", path, nil)
		if w.Code != 301 || w.Header().Get("Location") != loc {
			t.Errorf("GET %s: %d Location %q, want 301 %q", path, w.Code, w.Header().Get("Location"), loc)
		}
	}
	expect(t, e.do("GET", "/nob", nil), 404, "NoSuchBucket")
	expect(t, e.do("GET", "/", nil), 404, "NoSuchBucket")
}

func TestBadPaths(t *testing.T) {
	e := newEnv(t, nil)
	for _, p := range []string{
		"/pub/%2e%2e/x", "/pub/a/%2E/b", "/pub/a%00b", "/pub/%ff", "/pub/a%0ab",
		"/pub/" + strings.Repeat("n", 256), "/pub/" + strings.Repeat("d/", 2100) + "f",
	} {
		for _, m := range []string{"GET", "PUT"} {
			w := e.do(m, p, strings.NewReader("x"), "key: admin")
			if w.Code != 400 {
				t.Errorf("%s %.40s: %d, want 400", m, p, w.Code)
			}
		}
	}
	if len(e.fs.files["pub"]) != 0 {
		t.Fatalf("bad paths stored files: %v", e.fs.files["pub"])
	}
}

type listing struct {
	Entries        []store.ObjectInfo `json:"entries"`
	CommonPrefixes []string           `json:"common_prefixes"`
	Truncated      bool               `json:"truncated"`
	NextToken      string             `json:"next_token"`
}

func TestDirectoryListing(t *testing.T) {
	e := newEnv(t, nil)
	for _, p := range []string{"d/a", "d/b", "d/c", "d/sub/x", "d/sub/y", "d/<script>.txt"} {
		e.put("/pub/"+p, "x")
	}
	get := func(target string) listing {
		t.Helper()
		w := e.do("GET", target, nil, "Accept: application/json")
		expect(t, w, 200, "")
		var l listing
		must(t, json.Unmarshal(w.Body.Bytes(), &l))
		return l
	}
	l := get("/pub/d/")
	if len(l.Entries) != 4 || len(l.CommonPrefixes) != 1 || l.CommonPrefixes[0] != "d/sub/" || l.Truncated {
		t.Fatalf("listing %+v", l)
	}
	l = get("/pub/d/?limit=2")
	if len(l.Entries) != 2 || !l.Truncated || l.NextToken == "" {
		t.Fatalf("page 1 %+v", l)
	}
	l2 := get("/pub/d/?limit=2&after=" + l.NextToken)
	if len(l2.Entries) != 2 || l2.Entries[0].Path <= l.Entries[1].Path {
		t.Fatalf("page 2 %+v after %+v", l2, l)
	}
	l = get("/pub/d/?recursive=1")
	if len(l.Entries) != 6 || len(l.CommonPrefixes) != 0 {
		t.Fatalf("recursive %+v", l)
	}
	l = get("/pub/d/?prefix=s")
	if len(l.Entries) != 0 || len(l.CommonPrefixes) != 1 {
		t.Fatalf("prefix %+v", l)
	}
	expect(t, e.do("GET", "/pub/nodir/", nil, "Accept: application/json"), 404, "NoSuchKey")
	expect(t, e.do("GET", "/pub/d/a/", nil), 404, "NoSuchKey")
	expect(t, e.do("GET", "/pub/d/?limit=abc", nil), 400, "BadRequest")

	w := e.do("GET", "/pub/d/", nil)
	expect(t, w, 200, "")
	body := w.Body.String()
	if strings.Contains(body, "<script>") || !strings.Contains(body, "&lt;script&gt;.txt") {
		t.Fatalf("HTML listing not escaped:\n%s", body)
	}
	for _, want := range []string{`href="./a"`, `href="./sub/"`, `href="../"`, `href="./%3Cscript%3E.txt"`} {
		if !strings.Contains(body, want) {
			t.Errorf("HTML listing lacks %s:\n%s", want, body)
		}
	}
	if !strings.HasPrefix(w.Header().Get("Content-Type"), "text/html") {
		t.Fatal("HTML listing content type")
	}

	// index.html wins for browsers; JSON still lists.
	e.put("/pub/d/index.html", "<h1>home</h1>")
	w = e.do("GET", "/pub/d/", nil)
	if w.Body.String() != "<h1>home</h1>" || w.Header().Get("Content-Type") != "text/html; charset=utf-8" {
		t.Fatalf("index.html: %q %q", w.Body, w.Header().Get("Content-Type"))
	}
	if l := get("/pub/d/"); len(l.Entries) != 5 {
		t.Fatalf("JSON listing with index.html: %+v", l)
	}
	// The bucket root lists too.
	if l := get("/pub/"); len(l.CommonPrefixes) != 1 || l.CommonPrefixes[0] != "d/" {
		t.Fatalf("root listing %+v", l)
	}
}

func TestListingPaginationLink(t *testing.T) {
	e := newEnv(t, nil)
	for i := range 3 {
		e.put(fmt.Sprintf("/pub/f%d", i), "x")
	}
	body := e.do("GET", "/pub/?limit=2", nil).Body.String()
	if !strings.Contains(body, `href="?after=f1&amp;limit=2"`) {
		t.Fatalf("no next link:\n%s", body)
	}
}

func TestChecksumSidecars(t *testing.T) {
	e := newEnv(t, nil)
	e.put("/pub/dl/file.iso", "abc")
	e.put("/priv/file.iso", "abc")
	w := e.do("GET", "/pub/dl/file.iso.md5", nil)
	expect(t, w, 200, "")
	if want := md5hex("abc") + "  file.iso\n"; w.Body.String() != want {
		t.Fatalf("md5 sidecar %q, want %q", w.Body, want)
	}
	if !strings.HasPrefix(w.Header().Get("Content-Type"), "text/plain") {
		t.Fatal("sidecar content type")
	}
	w = e.do("GET", "/pub/dl/file.iso.sha256", nil)
	if want := "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad  file.iso\n"; w.Body.String() != want {
		t.Fatalf("sha256 sidecar %q", w.Body)
	}
	h := e.do("HEAD", "/pub/dl/file.iso.sha256", nil)
	if h.Code != 200 || h.Body.Len() != 0 || h.Header().Get("Content-Length") != "75" {
		t.Fatalf("HEAD sidecar %d %q %s", h.Code, h.Body, h.Header().Get("Content-Length"))
	}
	// A stored sidecar wins.
	e.put("/pub/dl/file.iso.md5", "stored")
	if e.do("GET", "/pub/dl/file.iso.md5", nil).Body.String() != "stored" {
		t.Fatal("stored .md5 not served")
	}
	expect(t, e.do("GET", "/pub/dl/none.md5", nil), 404, "NoSuchKey")
	expect(t, e.do("GET", "/priv/file.iso.md5", nil, "key: admin"), 404, "NoSuchKey")
}

func TestAdminBuckets(t *testing.T) {
	e := newEnv(t, nil)
	w := e.do("POST", "/_cairn/buckets", strings.NewReader(`{"name":"new-b","public":true,"cache_control":"max-age=5"}`), "key: admin")
	expect(t, w, 201, "")
	var b store.BucketInfo
	must(t, json.Unmarshal(w.Body.Bytes(), &b))
	if b.Name != "new-b" || !b.Public || b.CacheControl != "max-age=5" || b.Created.IsZero() {
		t.Fatalf("created %+v", b)
	}
	expect(t, e.do("POST", "/_cairn/buckets", strings.NewReader(`{"name":"new-b"}`), "key: admin"), 409, "BucketAlreadyExists")
	expect(t, e.do("POST", "/_cairn/buckets", strings.NewReader(`{"name":"Bad_Name"}`), "key: admin"), 400, "InvalidBucketName")
	expect(t, e.do("POST", "/_cairn/buckets", strings.NewReader(`{"name":`), "key: admin"), 400, "BadRequest")
	expect(t, e.do("POST", "/_cairn/buckets", strings.NewReader(`{"name":"abc","bogus":1}`), "key: admin"), 400, "BadRequest")
	expect(t, e.do("POST", "/_cairn/buckets", strings.NewReader(`{"name":"abc"}`)), 401, "Unauthorized")

	w = e.do("GET", "/_cairn/buckets", nil, "key: admin")
	var bs []store.BucketInfo
	must(t, json.Unmarshal(w.Body.Bytes(), &bs))
	if len(bs) != 3 {
		t.Fatalf("buckets %+v", bs)
	}
	expect(t, e.do("GET", "/_cairn/buckets/new-b", nil, "key: admin"), 200, "")
	expect(t, e.do("GET", "/_cairn/buckets/none", nil, "key: admin"), 404, "NoSuchBucket")

	w = e.do("PATCH", "/_cairn/buckets/new-b", strings.NewReader(`{"public":false,"checksum_sidecars":true}`), "key: admin")
	expect(t, w, 200, "")
	must(t, json.Unmarshal(w.Body.Bytes(), &b))
	if b.Public || !b.ChecksumSidecars || b.CacheControl != "max-age=5" {
		t.Fatalf("patched %+v", b)
	}
	expect(t, e.do("PATCH", "/_cairn/buckets/none", strings.NewReader(`{}`), "key: admin"), 404, "NoSuchBucket")
	// The trash's retention: set, kept by a PATCH of another field,
	// turned off; out of bounds refused.
	w = e.do("PATCH", "/_cairn/buckets/new-b", strings.NewReader(`{"trash_seconds":604800}`), "key: admin")
	expect(t, w, 200, "")
	must(t, json.Unmarshal(w.Body.Bytes(), &b))
	if b.TrashSeconds != 604800 || !strings.Contains(w.Body.String(), `"trash_seconds":604800`) {
		t.Fatalf("trash set: %s", w.Body)
	}
	w = e.do("PATCH", "/_cairn/buckets/new-b", strings.NewReader(`{"public":true}`), "key: admin")
	if must(t, json.Unmarshal(w.Body.Bytes(), &b)); b.TrashSeconds != 604800 {
		t.Fatalf("trash lost by another PATCH: %s", w.Body)
	}
	for _, bad := range []string{`-1`, `315360001`, `"7d"`} {
		w = e.do("PATCH", "/_cairn/buckets/new-b", strings.NewReader(`{"trash_seconds":`+bad+`}`), "key: admin")
		expect(t, w, 400, "BadRequest")
		if bad != `"7d"` && !strings.Contains(w.Body.String(), "want 0 (no trash) to 315360000 (3650 days)") {
			t.Fatalf("trash_seconds %s: %s", bad, w.Body)
		}
	}
	w = e.do("PATCH", "/_cairn/buckets/new-b", strings.NewReader(`{"trash_seconds":0,"public":false}`), "key: admin")
	b = store.BucketInfo{}
	if must(t, json.Unmarshal(w.Body.Bytes(), &b)); b.TrashSeconds != 0 || strings.Contains(w.Body.String(), "trash_seconds") {
		t.Fatalf("trash off: %s", w.Body)
	}
	w = e.do("POST", "/_cairn/buckets", strings.NewReader(`{"name":"with-trash","trash_seconds":3600}`), "key: admin")
	if expect(t, w, 201, ""); !strings.Contains(w.Body.String(), `"trash_seconds":3600`) {
		t.Fatalf("created with a trash: %s", w.Body)
	}
	expect(t, e.do("DELETE", "/_cairn/buckets/with-trash", nil, "key: admin"), 204, "")

	e.put("/new-b/f", "x")
	expect(t, e.do("DELETE", "/_cairn/buckets/new-b", nil, "key: admin"), 409, "BucketNotEmpty")
	expect(t, e.do("DELETE", "/new-b/f", nil, "key: admin"), 204, "")
	expect(t, e.do("DELETE", "/_cairn/buckets/new-b", nil, "key: admin"), 204, "")
	expect(t, e.do("PUT", "/_cairn/buckets", nil, "key: admin"), 405, "MethodNotAllowed")
	expect(t, e.do("GET", "/_cairn/nothing", nil), 404, "NotFound")
}

func TestHealthAndMetrics(t *testing.T) {
	healthErr := errors.New("quorum lost")
	var sick bool
	fsyncs := uint64(0)
	e := newEnv(t, func(c *Config) {
		c.HealthFunc = func() error {
			if sick {
				return healthErr
			}
			return nil
		}
		c.StatsFunc = func() NodeStats {
			fsyncs++
			return NodeStats{Blobs: 7, Volumes: 2, DiskUsedBytes: 100, DiskFreeBytes: 900, Fsyncs: fsyncs, LiveBytes: 42, IndexBytes: 4096}
		}
	})
	w := e.do("GET", "/_cairn/health", nil)
	if w.Code != 200 || w.Body.String() != "ok" {
		t.Fatalf("health %d %q", w.Code, w.Body)
	}
	sick = true
	w = e.do("GET", "/_cairn/health", nil)
	if w.Code != 503 || !strings.Contains(w.Body.String(), "quorum lost") {
		t.Fatalf("sick health %d %q", w.Code, w.Body)
	}

	e.put("/pub/m", "12345")
	e.do("GET", "/pub/m", nil)
	e.do("GET", "/pub/missing", nil)
	e.s.Metrics().ObserveFsync(3 * time.Millisecond)

	w = e.do("GET", "/_cairn/metrics", nil)
	expect(t, w, 200, "")
	body := w.Body.String()
	for _, want := range []string{
		`cairn_http_requests_total{code="201",method="PUT"} 1`,
		`cairn_http_requests_total{code="200",method="GET"} 2`,
		`cairn_http_requests_total{code="404",method="GET"} 1`,
		`cairn_http_requests_total{code="503",method="GET"} 1`,
		`cairn_http_request_bytes_total 5`,
		`cairn_http_request_duration_seconds_count{method="GET"}`,
		`cairn_fsync_duration_seconds_count 1`,
		`cairn_node_blobs 7`,
		`cairn_node_disk_free_bytes 900`,
		`cairn_node_live_bytes 42`,
		`cairn_node_blob_index_bytes 4096`,
		`cairn_node_fsyncs_total 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	if strings.Contains(body, "cairn_http_response_bytes_total 0\n") || !strings.Contains(body, "cairn_http_response_bytes_total ") {
		t.Errorf("response bytes not counted")
	}
}

func TestExtraHandlers(t *testing.T) {
	hit := ""
	mk := func(name string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hit = name; w.WriteHeader(202) })
	}
	e := newEnv(t, func(c *Config) {
		c.ExtraHandlers = map[string]http.Handler{
			"/_cairn/rpc/":      mk("rpc"),
			"/_cairn/rpc/blob/": mk("blob"),
			"/_cairn/status":    mk("status"),
		}
	})
	for path, want := range map[string]string{"/_cairn/rpc/x": "rpc", "/_cairn/rpc/blob/y": "blob", "/_cairn/status": "status"} {
		hit = ""
		if w := e.do("POST", path, nil); w.Code != 202 || hit != want {
			t.Errorf("%s: %d hit %q, want %q", path, w.Code, hit, want)
		}
	}
	expect(t, e.do("GET", "/_cairn/status/x", nil), 404, "NotFound")
}

func TestAccessLogThroughServer(t *testing.T) {
	var buf bytes.Buffer
	e := newEnv(t, func(c *Config) { c.AccessLog = &buf; c.AccessLogFlushInterval = time.Hour })
	e.put("/pub/a%20b", "xyz")
	e.do("GET", "/pub/a%20b", nil, `User-Agent: curl "8"`, "Referer: http://ref/")
	e.s.Close()
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("access log %q", buf.String())
	}
	if !strings.HasPrefix(lines[0], "192.0.2.1 - admin [") || !strings.Contains(lines[0], `"PUT /pub/a%20b HTTP/1.1" 201 `) {
		t.Errorf("PUT line %q", lines[0])
	}
	if !strings.Contains(lines[1], `"GET /pub/a%20b HTTP/1.1" 200 3 "http://ref/" "curl \"8\""`) {
		t.Errorf("GET line %q", lines[1])
	}
}

// TestMkdirExclusive: a directory PUT answers 201 once, then 200, or 412
// with If-None-Match: *.
func TestMkdirExclusive(t *testing.T) {
	e := newEnv(t, nil)
	expect(t, e.do("PUT", "/priv/d/", nil, "key: admin"), 201, "")
	expect(t, e.do("PUT", "/priv/d/", nil, "key: admin"), 200, "")
	expect(t, e.do("PUT", "/priv/d/", nil, "key: admin", "If-None-Match: *"), 412, "PreconditionFailed")
	expect(t, e.do("PUT", "/priv/e/", nil, "key: admin", "If-None-Match: *"), 201, "")
}
