package fastpath_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairn-fs/cairn/internal/frontend/httpapi/fastpath"
)

// serverTLS is a server configuration with net/http's test certificate
// (for 127.0.0.1, from httptest), offering HTTP/2 and HTTP/1.1 by ALPN.
func serverTLS(t testing.TB) *tls.Config {
	t.Helper()
	ts := httptest.NewUnstartedServer(nil)
	ts.StartTLS()
	cert := ts.TLS.Certificates[0]
	cert.Leaf = ts.Certificate()
	ts.Close()
	return &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2", "http/1.1"}, MinVersion: tls.VersionTLS12}
}

// clientTLS trusts the server's certificate and offers no ALPN (as wrk,
// curl --http1.1 and most HTTP/1.1 clients).
func clientTLS(server *tls.Config) *tls.Config {
	pool := x509.NewCertPool()
	pool.AddCert(server.Certificates[0].Leaf)
	return &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}
}

type tlsStateKey struct{}

// tlsRecorder is a Fallback handler that records, for each request, its
// protocol and the TLS state it sees: r.TLS, or the one the fast path
// kept for a connection it handed off (fastpath.TLSState, through the
// server's ConnContext).
type tlsRecorder struct {
	mu   sync.Mutex
	seen []string
}

func (h *tlsRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	how := "none"
	switch cs, _ := r.Context().Value(tlsStateKey{}).(*tls.ConnectionState); {
	case r.TLS != nil && len(r.TLS.PeerCertificates) > 0:
		how = "r.TLS+cert"
	case r.TLS != nil:
		how = "r.TLS"
	case cs != nil && cs.HandshakeComplete:
		how = "kept"
	}
	h.mu.Lock()
	h.seen = append(h.seen, r.Proto+" "+r.Method+" "+r.URL.Path+" "+how)
	h.mu.Unlock()
	_, _ = io.WriteString(w, "fallback\n")
}

func (h *tlsRecorder) last() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.seen) == 0 {
		return ""
	}
	return h.seen[len(h.seen)-1]
}

// TestTLSConnections: over TLS, an HTTP/1.1 client's GETs are the fast
// path's; what it hands off after reading reaches net/http with the
// connection's TLS state; HTTP/2 (ALPN) and clients that present a
// certificate go to net/http whole, as *tls.Conn (r.TLS set, HTTP/2
// served); plain HTTP sent to the port gets net/http's 400; a connection
// that never finishes its handshake does not hold Shutdown.
func TestTLSConnections(t *testing.T) {
	a := newToyAPI(t)
	stls := serverTLS(t)
	stls.ClientAuth = tls.RequestClientCert
	rec := &tlsRecorder{}
	fallback := &http.Server{Handler: rec, TLSConfig: stls.Clone(),
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if cs := fastpath.TLSState(c); cs != nil {
				return context.WithValue(ctx, tlsStateKey{}, cs)
			}
			return ctx
		}}
	cfg := fastpath.DefaultConfig()
	cfg.Planner, cfg.Fallback, cfg.TLS = a, fallback, stls
	cfg.ReadHeaderTimeout, cfg.IdleTimeout = 5*time.Second, time.Minute
	fast, err := fastpath.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- fast.Serve(ln) }()
	url := "https://" + ln.Addr().String()
	ctls := clientTLS(stls)

	get := func(c *http.Client, method, path string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(method, url+path, nil)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}

	// HTTP/1.1: the fast path answers; a POST on the same connection is
	// handed off and net/http sees the connection's TLS state.
	h1 := &http.Client{Transport: &http.Transport{TLSClientConfig: ctls, MaxConnsPerHost: 1}}
	before := fast.Counts()
	for range 3 {
		if resp := get(h1, "GET", "/read"); resp.StatusCode != 200 || resp.ProtoMajor != 1 {
			t.Fatalf("GET over TLS: %d %s", resp.StatusCode, resp.Proto)
		}
	}
	if got := fast.Counts().Served - before.Served; got != 3 {
		t.Fatalf("fast path answered %d of 3 GETs over TLS", got)
	}
	req, _ := http.NewRequest("POST", url+"/form", strings.NewReader(strings.Repeat("x", 5000)))
	if resp, err := h1.Do(req); err != nil {
		t.Fatal(err)
	} else {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if got, want := rec.last(), "HTTP/1.1 POST /form kept"; got != want {
		t.Fatalf("handed-off request saw %q, want %q", got, want)
	}
	if resp := get(h1, "GET", "/read"); resp.StatusCode != 200 {
		t.Fatalf("GET after the hand-off: %d", resp.StatusCode)
	}
	h1.CloseIdleConnections()

	// HTTP/2 by ALPN: net/http serves it whole.
	h2tls := ctls.Clone()
	h2tls.NextProtos = []string{"h2"}
	h2 := &http.Client{Transport: &http.Transport{TLSClientConfig: h2tls, ForceAttemptHTTP2: true}}
	before = fast.Counts()
	if resp := get(h2, "GET", "/read"); resp.ProtoMajor != 2 {
		t.Fatalf("HTTP/2 client answered in %s", resp.Proto)
	}
	if got, want := rec.last(), "HTTP/2.0 GET /read r.TLS"; got != want {
		t.Fatalf("HTTP/2 request saw %q, want %q", got, want)
	}
	if c := fast.Counts(); c.Served != before.Served || c.HandedOff != before.HandedOff+1 {
		t.Fatalf("HTTP/2: served %d, handed off %d", c.Served-before.Served, c.HandedOff-before.HandedOff)
	}
	h2.CloseIdleConnections()

	// A client certificate: net/http serves it whole, with r.TLS.
	certTLS := ctls.Clone()
	certTLS.Certificates = stls.Certificates
	withCert := &http.Client{Transport: &http.Transport{TLSClientConfig: certTLS}}
	if resp := get(withCert, "GET", "/read"); resp.ProtoMajor != 1 {
		t.Fatalf("client with a certificate answered in %s", resp.Proto)
	}
	if got, want := rec.last(), "HTTP/1.1 GET /read r.TLS+cert"; got != want {
		t.Fatalf("client with a certificate: %q, want %q", got, want)
	}
	withCert.CloseIdleConnections()

	// Plain HTTP to the HTTPS port.
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	_, _ = io.WriteString(c, "GET /read HTTP/1.1\r\nHost: x\r\n\r\n")
	out, _ := io.ReadAll(c)
	c.Close()
	if !bytes.HasPrefix(out, []byte("HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.")) {
		t.Fatalf("plain HTTP to the HTTPS port: %q", out)
	}

	// A client that connects and says nothing: Shutdown closes it.
	silent, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	time.Sleep(50 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	start := time.Now()
	if err := fast.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown with a connection in its handshake: %v", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("Shutdown took %v", d)
	}
	_ = fallback.Shutdown(ctx)
	_ = fast.Close()
	if err := <-done; !errors.Is(err, http.ErrServerClosed) {
		t.Fatalf("Serve: %v", err)
	}
	if strings.Contains(rec.last(), "none") {
		t.Fatalf("a request without TLS state: %q", rec.last())
	}
}
