package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cairn-fs/cairn/internal/access/rules"
	"github.com/cairn-fs/cairn/internal/frontend/httpapi/fastpath/fastpathtest"
)

// newServerOn builds a Server over an existing fake store.
func newServerOn(t testing.TB, fs *fakeStore, mut func(*Config)) *Server {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Store = fs
	cfg.AdminKey = testKey
	if mut != nil {
		mut(&cfg)
	}
	s, err := New(cfg)
	must(t, err)
	t.Cleanup(s.Close)
	return s
}

// serveServer runs s.Serve on a loopback listener until the test ends.
func serveServer(t testing.TB, s *Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
	})
	return ln.Addr().String()
}

// diffFixture is a store with the files of the differential tests, served
// by two servers: one through net/http only, one through the fast path.
type diffFixture struct {
	fs             *fakeStore
	slow, fast     *Server
	slowAddr, addr string
	slowLog        syncBuffer
	fastLog        syncBuffer
}

func newDiffFixture(t *testing.T, sendfile bool) *diffFixture {
	e := newEnv(t, nil)
	e.put("/pub/f.txt", "hello world")
	e.put("/pub/mid.css", strings.Repeat("body{margin:0}\n", 1000))
	e.put("/pub/big.bin", strings.Repeat("0123456789abcdef", 100<<10/16+7))
	e.put("/pub/empty", "")
	e.put("/pub/a%20b/%C3%BC.txt", "unicode")
	e.put("/pub/dir/x", "in a dir")
	e.put("/pub/typed", "{}", "Content-Type: application/vnd.test+json")
	e.put("/pub/dl/file.iso", "abc")
	e.put("/priv/secret.txt", "secret")
	d := &diffFixture{fs: e.fs}
	d.slow = newServerOn(t, e.fs, func(c *Config) {
		c.Rules = diffRules(t)
		c.DisableFastPath = true
		c.AccessLog = &d.slowLog
		c.AccessLogFlushInterval = time.Hour
	})
	d.fast = newServerOn(t, e.fs, func(c *Config) {
		c.Rules = diffRules(t)
		c.DisableSendfile = !sendfile
		c.AccessLog = &d.fastLog
		c.AccessLogFlushInterval = time.Hour
	})
	d.slowAddr = serveServer(t, d.slow)
	d.addr = serveServer(t, d.fast)
	return d
}

// diffRules are the abuse rules of the differential tests' servers, each
// its own engine (the throttle's token buckets): paths and a User-Agent
// the other cases do not use.
func diffRules(t *testing.T) *rules.Engine {
	eng, err := rules.New(rules.DefaultConfig())
	must(t, err)
	must(t, eng.Load([]rules.Rule{
		{ID: "r1", Bucket: "pub", PathPrefix: "denied/", Deny: 451},
		{ID: "r2", Bucket: "pub", PathPrefix: "answered/", Respond: &rules.Response{Status: 200, ContentType: "text/plain", Body: []byte("not here\n")}},
		{ID: "r3", Bucket: "pub", PathPrefix: "slow/", Rate: 0.001, Burst: 1},
		{ID: "r4", UserAgent: "badbot", Deny: 403},
	}))
	return eng
}

// TestFastPathDifferential is the contract test of the planner, the seam
// between package fastpath and this one (fastpath.Planner; the check is
// fastpathtest.Run): it sends each request to a server that answers
// through net/http only and to one with the fast path, and requires the
// same bytes back (the Date value aside) and that the fast path answered
// the requests it should (no silent hand-off); then the same access log
// lines and the same request metrics.
func TestFastPathDifferential(t *testing.T) {
	for _, sendfile := range []bool{true, false} {
		t.Run("sendfile="+strconv.FormatBool(sendfile), func(t *testing.T) { testFastPathDifferential(t, sendfile) })
	}
}

func testFastPathDifferential(t *testing.T, sendfile bool) {
	d := newDiffFixture(t, sendfile)
	etag := `"` + md5hex("hello world") + `"`
	lm := d.fs.now.Format(http.TimeFormat)
	old := d.fs.now.Add(-time.Hour).Format(http.TimeFormat)
	key := "Authorization: Bearer " + testKey
	get := func(target string, hdr ...string) string {
		return "GET " + target + " HTTP/1.1\r\nHost: cairn.test\r\n" + join(hdr) + "\r\n"
	}
	head := func(target string, hdr ...string) string {
		return "HEAD " + target + " HTTP/1.1\r\nHost: cairn.test\r\n" + join(hdr) + "\r\n"
	}
	var cases []fastpathtest.Case
	for _, tc := range []struct {
		name string
		raw  string
		fast bool // the fast path answers it (else it hands it off)
		want string
	}{
		{"get", get("/pub/f.txt"), true, "200"},
		{"head", head("/pub/f.txt"), true, "200"},
		{"get 15k", get("/pub/mid.css", "User-Agent: wrk", "Referer: http://r/"), true, "200"},
		{"get 100k sendfile path", get("/pub/big.bin"), true, "200"},
		{"head 100k", head("/pub/big.bin"), true, "200"},
		{"get empty", get("/pub/empty"), true, "200"},
		{"query ignored", get("/pub/f.txt?v=3&x"), true, "200"},
		{"content-type stored", get("/pub/typed"), true, "200"},
		{"content-length 0", get("/pub/f.txt", "Content-Length: 0"), true, "200"},
		{"lowercase names", get("/pub/f.txt", "range: bytes=0-0", "user-agent: x"), true, "206"},

		{"range", get("/pub/f.txt", "Range: bytes=2-4"), true, "206"},
		{"range open", get("/pub/f.txt", "Range: bytes=7-"), true, "206"},
		{"range suffix", get("/pub/f.txt", "Range: bytes=-3"), true, "206"},
		{"range suffix > size", get("/pub/f.txt", "Range: bytes=-100"), true, "206"},
		{"range end > size", get("/pub/f.txt", "Range: bytes=3-1000"), true, "206"},
		{"range multi", get("/pub/f.txt", "Range: bytes=0-1,4-5"), true, "200"},
		{"range malformed", get("/pub/f.txt", "Range: bytes=x"), true, "200"},
		{"range other unit", get("/pub/f.txt", "Range: items=1-2"), true, "200"},
		{"range unsatisfiable", get("/pub/f.txt", "Range: bytes=11-"), true, "416"},
		{"range zero suffix", get("/pub/f.txt", "Range: bytes=-0"), true, "416"},
		{"head range unsatisfiable", head("/pub/f.txt", "Range: bytes=50-"), true, "416"},
		{"head range", head("/pub/f.txt", "Range: bytes=2-4"), true, "206"},
		{"range big", get("/pub/big.bin", "Range: bytes=1000-90000"), true, "206"},
		{"range small of big", get("/pub/big.bin", "Range: bytes=-100"), true, "206"},
		{"range on empty", get("/pub/empty", "Range: bytes=0-"), true, "200"},
		{"if-range stale", get("/pub/f.txt", "Range: bytes=2-4", `If-Range: "stale"`), true, "200"},
		{"if-range etag", get("/pub/f.txt", "Range: bytes=2-4", "If-Range: "+etag), true, "206"},
		{"if-range date", get("/pub/f.txt", "Range: bytes=2-4", "If-Range: "+lm), true, "206"},
		{"if-range old date", get("/pub/f.txt", "Range: bytes=2-4", "If-Range: "+old), true, "200"},

		{"inm", get("/pub/f.txt", "If-None-Match: "+etag), true, "304"},
		{"inm list weak", get("/pub/f.txt", `If-None-Match: "a", W/`+etag), true, "304"},
		{"inm star", get("/pub/f.txt", "If-None-Match: *"), true, "304"},
		{"inm miss", get("/pub/f.txt", `If-None-Match: "other"`), true, "200"},
		{"head inm", head("/pub/f.txt", "If-None-Match: "+etag), true, "304"},
		{"ims same", get("/pub/f.txt", "If-Modified-Since: "+lm), true, "304"},
		{"ims old", get("/pub/f.txt", "If-Modified-Since: "+old), true, "200"},
		{"ims garbage", get("/pub/f.txt", "If-Modified-Since: yesterday"), true, "200"},
		{"inm miss beats ims", get("/pub/f.txt", `If-None-Match: "other"`, "If-Modified-Since: "+lm), true, "200"},
		{"im match", get("/pub/f.txt", "If-Match: "+etag), true, "200"},
		{"im miss", get("/pub/f.txt", `If-Match: "other"`), true, "412"},
		{"head im miss", head("/pub/f.txt", `If-Match: "other"`), true, "412"},
		{"ius old", get("/pub/f.txt", "If-Unmodified-Since: "+old), true, "412"},
		{"ius same", get("/pub/f.txt", "If-Unmodified-Since: "+lm), true, "200"},
		{"im then inm", get("/pub/f.txt", "If-Match: "+etag, "If-None-Match: "+etag), true, "304"},
		{"conditional and range", get("/pub/f.txt", "If-Match: "+etag, "Range: bytes=0-2"), true, "206"},
		{"first of repeated field wins", get("/pub/f.txt", "Range: bytes=0-1", "Range: bytes=2-3"), true, "206"},

		{"missing", get("/pub/nope.txt"), true, "404"},
		{"head missing", head("/pub/nope.txt"), true, "404"},
		{"no bucket", get("/nob/x"), true, "404"},
		{"root", get("/"), true, "404"},
		{"sidecar-like missing, sidecars off", get("/priv/nope.md5", key), true, "404"},
		{"private no key", get("/priv/secret.txt"), true, "401"},
		{"head private no key", head("/priv/secret.txt"), true, "401"},
		{"private wrong key", get("/priv/secret.txt", "Authorization: Bearer wrong-key-xxxxxxxxxx"), true, "403"},
		{"private right key", get("/priv/secret.txt", key), true, "200"},
		{"private other scheme", get("/priv/secret.txt", "Authorization: Digest username=\"x\""), true, "401"},
		{"private wrong basic", get("/priv/secret.txt", "Authorization: Basic eDp5"), true, "403"},
		{"public wrong key", get("/pub/f.txt", "Authorization: Bearer nope"), true, "403"},
		{"private missing no key", get("/priv/nope"), true, "401"},

		{"escaped unicode", get("/pub/a%20b/%C3%BC.txt"), true, "200"},
		{"escaped slash", get("/pub/dir%2Fx"), true, "200"},
		{"dot-dot", get("/pub/%2e%2e/x"), true, "400"},
		{"dot", get("/pub/a/%2E/b"), true, "400"},
		{"nul", get("/pub/a%00b"), true, "400"},
		{"bad utf-8", get("/pub/%ff"), true, "400"},
		{"empty segment", get("/pub//x"), true, "400"},
		{"name too long", get("/pub/" + strings.Repeat("n", 256)), true, "400"},
		{"bad escape", get("/pub/%zz"), false, "400"},
		{"raw utf-8", get("/pub/a b/ü.txt"), false, "400"},

		{"http/1.0", "GET /pub/f.txt HTTP/1.0\r\n\r\n", true, "200"},
		{"http/1.0 keep-alive", "GET /pub/f.txt HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", true, "200"},
		{"http/1.0 Keep-Alive head", "HEAD /pub/f.txt HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", true, "200"},
		{"http/1.0 keep-alive 404", "GET /pub/nope HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", true, "404"},
		{"http/1.0 keep-alive 304", "GET /pub/f.txt HTTP/1.0\r\nConnection: keep-alive\r\nIf-None-Match: *\r\n\r\n", true, "304"},
		{"http/1.0 keep-alive head 401", "HEAD /priv/secret.txt HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", true, "401"},
		{"http/1.0 close", "GET /pub/f.txt HTTP/1.0\r\nConnection: close\r\n\r\n", true, "200"},
		{"http/1.1 close", get("/pub/f.txt", "Connection: close"), true, "200"},
		{"http/1.1 close 404", get("/pub/nope", "Connection: close"), true, "404"},
		{"http/1.1 keep-alive", get("/pub/f.txt", "Connection: keep-alive"), true, "200"},

		{"redirect bucket", get("/pub"), false, "301"},
		{"redirect dir", get("/pub/dir?limit=1"), false, "301"},
		{"listing", get("/pub/dir/"), false, "200"},
		{"sidecar", get("/pub/dl/file.iso.md5"), true, "200"},
		{"sidecar again (memo)", get("/pub/dl/file.iso.md5"), true, "200"},
		{"sidecar sha256", get("/pub/dl/file.iso.sha256"), true, "200"},
		{"sidecar head", head("/pub/dl/file.iso.md5"), true, "200"},
		{"sidecar with a range (ignored)", get("/pub/dl/file.iso.md5", "Range: bytes=0-3"), true, "200"},
		{"sidecar http/1.0", "GET /pub/dl/file.iso.md5 HTTP/1.0\r\n\r\n", true, "200"},
		{"sidecar of a missing file", get("/pub/dl/nope.iso.md5"), true, "404"},
		{"sidecar of a directory", get("/pub/dir.md5"), true, "404"},
		{"rule deny", get("/pub/denied/x"), true, "451"},
		{"head rule deny", head("/pub/denied/x"), true, "451"},
		{"rule deny http/1.0 keep-alive", "GET /pub/denied/x HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", true, "451"},
		{"rule deny, consistent", get("/pub/denied/x?consistent=1"), true, "451"},
		{"rule respond", get("/pub/answered/x", "Connection: close"), true, "200"},
		{"rule user-agent", get("/pub/f.txt", "User-Agent: a badbot/1"), true, "403"},
		{"rule throttle, first", get("/pub/slow/x"), true, "404"},
		{"rule throttle", get("/pub/slow/x"), true, "429"},
		{"head rule throttle", head("/pub/slow/x"), true, "429"},
		{"rule spares the node", get("/_cairn/health", "User-Agent: badbot"), false, "200"},
		{"health", get("/_cairn/health"), false, "200"},
		{"node escaped", get("/_cairn%2Fhealth"), false, "200"},
		{"no host", "GET /pub/f.txt HTTP/1.1\r\n\r\n", false, "400"},
		{"two hosts", "GET /pub/f.txt HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", false, "400"},
		{"bare LF", "GET /pub/f.txt HTTP/1.1\nHost: x\n\n", false, "200"},
		{"connection upgrade", get("/pub/f.txt", "Connection: upgrade"), false, "200"},
		{"absolute form", "GET http://x/pub/f.txt HTTP/1.1\r\nHost: x\r\n\r\n", false, "200"},
		{"folded header", get("/pub/f.txt", "X-A: 1", " 2"), false, "200"},
		{"post", "POST /pub/f.txt HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n", false, "401"},
		{"get with body", get("/pub/f.txt", "Content-Length: 3") + "abc", false, "200"},
		{"expect", get("/pub/f.txt", "Expect: 100-continue"), false, "200"},
		{"lowercase method", "get /pub/f.txt HTTP/1.1\r\nHost: x\r\n\r\n", false, "405"},
		{"http/2 preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", false, "400"},
	} {
		cases = append(cases, fastpathtest.Case{Name: tc.name, Raw: tc.raw, Fast: tc.fast, Want: tc.want})
	}
	fastpathtest.Run(t, fastpathtest.Servers{Fast: d.fast.fast, FastAddr: d.addr, SlowAddr: d.slowAddr}, cases)

	if got := d.fast.fast.Counts().SentFile; (got > 0) != sendfile {
		t.Errorf("%d bodies sent with sendfile; sendfile on: %v", got, sendfile)
	}

	// The access logs and the request metrics agree too.
	d.slow.Close()
	d.fast.Close()
	if a, b := maskLog(d.slowLog.String()), maskLog(d.fastLog.String()); a != b || a == "" {
		t.Errorf("access logs differ\nnet/http:\n%s\nfast path:\n%s", a, b)
	}
	if a, b := requestMetrics(t, d.slow), requestMetrics(t, d.fast); a != b {
		t.Errorf("metrics differ\nnet/http:\n%s\nfast path:\n%s", a, b)
	}
}

func join(hdr []string) string {
	var b strings.Builder
	for _, h := range hdr {
		b.WriteString(h)
		b.WriteString("\r\n")
	}
	return b.String()
}

var logTime = regexp.MustCompile(`^(\S+) - (\S+) \[[^\]]*\]`)

// maskLog removes the times from access log lines.
func maskLog(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = logTime.ReplaceAllString(l, "$1 - $2 [T]")
	}
	return strings.Join(lines, "\n")
}

// requestMetrics returns the request counters and byte counters of s.
func requestMetrics(t *testing.T, s *Server) string {
	t.Helper()
	mfs, err := s.Registry().Gather()
	must(t, err)
	var b bytes.Buffer
	for _, mf := range mfs {
		switch mf.GetName() {
		case "cairn_http_requests_total", "cairn_http_response_bytes_total", "cairn_http_request_bytes_total":
		case "cairn_http_request_duration_seconds":
			for _, m := range mf.GetMetric() {
				b.WriteString(m.GetLabel()[0].GetValue())
				b.WriteString(" count ")
				b.WriteString(itoa(int64(m.GetHistogram().GetSampleCount())))
				b.WriteString("\n")
			}
			continue
		default:
			continue
		}
		for _, m := range mf.GetMetric() {
			b.WriteString(mf.GetName())
			for _, l := range m.GetLabel() {
				b.WriteString(" " + l.GetName() + "=" + l.GetValue())
			}
			b.WriteString(" ")
			b.WriteString(itoa(int64(m.GetCounter().GetValue())))
			b.WriteString("\n")
		}
	}
	return b.String()
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// readResp reads one response from br for a request of method.
func readResp(t testing.TB, br *bufio.Reader, method string) (*http.Response, string) {
	t.Helper()
	resp, err := http.ReadResponse(br, &http.Request{Method: method})
	must(t, err)
	body, err := io.ReadAll(resp.Body)
	must(t, err)
	resp.Body.Close()
	return resp, string(body)
}
