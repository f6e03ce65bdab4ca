package httpapi

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// leanWriter is a ResponseWriter that reuses its header map, so that the
// benchmark measures the handler rather than httptest.ResponseRecorder.
type leanWriter struct {
	h      http.Header
	status int
	n      int
}

func (w *leanWriter) Header() http.Header         { return w.h }
func (w *leanWriter) WriteHeader(code int)        { w.status = code }
func (w *leanWriter) Write(p []byte) (int, error) { w.n += len(p); return len(p), nil }

func (w *leanWriter) reset() {
	clear(w.h)
	w.status, w.n = 0, 0
}

func smallGetSetup(tb testing.TB) (http.Handler, *http.Request, *leanWriter) {
	e := newEnv(tb, nil)
	e.put("/pub/static/css/site.css", strings.Repeat("body{margin:0}\n", 1000)) // 15 KB
	r := httptest.NewRequest("GET", "/pub/static/css/site.css", nil)
	r.Header.Set("User-Agent", "bench")
	return e.s.Handler(), r, &leanWriter{h: http.Header{}}
}

// BenchmarkGetSmall measures the handler for a GET of a 15 KB file from a
// public bucket against the in-memory fake store, without network: the
// server's own cost per request, and its allocations.
func BenchmarkGetSmall(b *testing.B) {
	h, r, w := smallGetSetup(b)
	b.ReportAllocs()
	b.SetBytes(15000)
	for b.Loop() {
		w.reset()
		h.ServeHTTP(w, r)
	}
	if w.status != 200 || w.n != 15000 {
		b.Fatalf("status %d, %d bytes", w.status, w.n)
	}
}

// BenchmarkGetSmallLoopback is the same GET through net/http on loopback
// with a keep-alive client: what a real client sees, client cost included.
func BenchmarkGetSmallLoopback(b *testing.B) {
	e := newEnv(b, nil)
	e.put("/pub/static/css/site.css", strings.Repeat("body{margin:0}\n", 1000))
	srv := httptest.NewServer(e.s.Handler())
	defer srv.Close()
	url := srv.URL + "/pub/static/css/site.css"
	b.ReportAllocs()
	b.SetBytes(15000)
	for b.Loop() {
		resp, err := http.Get(url)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatal(resp.Status)
		}
	}
}

// TestGetSmallAllocs holds the hot path to its allocation budget: the one
// string of header values, the one backing array of header slices, and
// the fake store's Object.
func TestGetSmallAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector changes allocation counts")
	}
	h, r, w := smallGetSetup(t)
	allocs := testing.AllocsPerRun(200, func() {
		w.reset()
		h.ServeHTTP(w, r)
	})
	if w.status != 200 || w.n != 15000 {
		t.Fatalf("status %d, %d bytes", w.status, w.n)
	}
	if allocs > 3 {
		t.Fatalf("GET of a small file allocates %v times per request, budget 3", allocs)
	}
	t.Logf("%v allocations per GET", allocs)
}

// fastGetClient sends one GET at a time on a kept-alive loopback
// connection to a Server run with Serve, and reads each answer whole
// without allocating: the answers all have the length of the first.
type fastGetClient struct {
	c    net.Conn
	req  []byte
	buf  []byte
	size int
}

func newFastGetClient(tb testing.TB, addr, target string) *fastGetClient {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	g := &fastGetClient{c: c, req: []byte("GET " + target + " HTTP/1.1\r\nHost: bench\r\nUser-Agent: bench\r\n\r\n")}
	if _, err := c.Write(g.req); err != nil {
		tb.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil) // no pipelining: nothing read ahead
	if err != nil {
		tb.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || len(body) != 15000 {
		tb.Fatalf("status %d, %d bytes", resp.StatusCode, len(body))
	}
	// Measure the whole answer's length with one more exchange.
	if _, err := c.Write(g.req); err != nil {
		tb.Fatal(err)
	}
	g.buf = make([]byte, 64<<10)
	n := 0
	for {
		m, err := c.Read(g.buf[n:])
		if err != nil {
			tb.Fatal(err)
		}
		n += m
		if i := bytes.Index(g.buf[:n], []byte("\r\n\r\n")); i >= 0 && n >= i+4+15000 {
			g.size = i + 4 + 15000
			break
		}
	}
	return g
}

func (g *fastGetClient) get(tb testing.TB) {
	if _, err := g.c.Write(g.req); err != nil {
		tb.Fatal(err)
	}
	if _, err := io.ReadFull(g.c, g.buf[:g.size]); err != nil {
		tb.Fatal(err)
	}
	if string(g.buf[9:12]) != "200" {
		tb.Fatalf("answer %q", g.buf[:40])
	}
}

// BenchmarkFastGetSmall measures a keep-alive GET of a 15 KB file from a
// public bucket (the in-memory fake store) through Serve's fast path on
// loopback, client included; the client does not allocate, so allocs/op
// are the server's (and the fake store's Open, one per request).
func BenchmarkFastGetSmall(b *testing.B) {
	e := newEnv(b, nil)
	e.put("/pub/static/css/site.css", strings.Repeat("body{margin:0}\n", 1000))
	addr := serveReal(b, e)
	g := newFastGetClient(b, addr, "/pub/static/css/site.css")
	b.ReportAllocs()
	b.SetBytes(15000)
	for b.Loop() {
		g.get(b)
	}
}

// TestFastGetSmallAllocs holds the fast path to its allocation budget per
// GET: the request path as a string (the store may keep it) and the fake
// store's Object; the access log, when on, adds none.
func TestFastGetSmallAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector changes allocation counts")
	}
	for _, accessLog := range []bool{false, true} {
		e := newEnv(t, func(c *Config) {
			if accessLog {
				c.AccessLog = io.Discard
			}
		})
		e.put("/pub/static/css/site.css", strings.Repeat("body{margin:0}\n", 1000))
		addr := serveReal(t, e)
		g := newFastGetClient(t, addr, "/pub/static/css/site.css")
		allocs := testing.AllocsPerRun(500, func() { g.get(t) })
		if allocs > 2.5 {
			t.Fatalf("access log %v: a fast-path GET of a small file allocates %v times, budget 2", accessLog, allocs)
		}
		t.Logf("access log %v: %v allocations per GET", accessLog, allocs)
	}
}
