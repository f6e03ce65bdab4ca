package httpapi

import (
	"io"
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
