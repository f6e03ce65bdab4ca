package fastpath_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-fs/cairn/internal/frontend/httpapi/fastpath"
	"github.com/cairn-fs/cairn/internal/frontend/httpapi/fastpath/fastpathtest"
)

// A resource of the toy API, by how the toy planner sends its body.
type resource struct {
	kind  string // inline, read, lend, file, stream, unreadable
	ctype string
	body  []byte
}

// toyAPI serves a few resources, through net/http (ServeHTTP) and as a
// fastpath.Planner that plans the same answers, each body kind its way.
type toyAPI struct {
	res     map[string]*resource
	file    *os.File // holds every "file" body at fileOff
	fileOff int64

	plans, dones, closes, releases, holds atomic.Int64
}

const fileOff = 4099 // an odd offset: sendfile must send from it, not from 0

func newToyAPI(t *testing.T) *toyAPI {
	a := &toyAPI{res: map[string]*resource{}, fileOff: fileOff}
	add := func(path, kind, ctype string, body []byte) { a.res[path] = &resource{kind, ctype, body} }
	add("/inline", "inline", "text/plain; charset=utf-8", []byte("hello world\n"))
	add("/read", "read", "text/css", bytes.Repeat([]byte("body{margin:0}\n"), 1000))
	add("/lend", "lend", "application/octet-stream", bytes.Repeat([]byte("lent"), 5000))
	add("/file", "file", "application/octet-stream", bytes.Repeat([]byte("0123456789abcdef"), fastpath.SendfileMin/16+100))
	add("/stream", "stream", "application/octet-stream", bytes.Repeat([]byte("z"), 300<<10))
	add("/empty", "inline", "text/plain", nil)
	add("/gone", "unreadable", "text/plain", bytes.Repeat([]byte("g"), 1000))
	f, err := os.Create(filepath.Join(t.TempDir(), "volume"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if _, err := f.WriteAt(a.res["/file"].body, fileOff); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("garbage"), 0); err != nil {
		t.Fatal(err)
	}
	a.file = f
	return a
}

const goneBody = "gone: the body could not be read\n"

// ServeHTTP is the reference: what net/http sends is the contract.
func (a *toyAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	res, ok := a.res[r.URL.Path]
	if !ok || (r.Method != http.MethodGet && r.Method != http.MethodHead) {
		http.NotFound(w, r)
		return
	}
	h := w.Header()
	if res.kind == "unreadable" && r.Method == http.MethodGet {
		h["Content-Type"] = []string{"text/plain; charset=utf-8"}
		h["X-Content-Type-Options"] = []string{"nosniff"}
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, goneBody)
		return
	}
	h["Content-Length"] = []string{strconv.Itoa(len(res.body))}
	h["Content-Type"] = []string{res.ctype}
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodGet {
		_, _ = w.Write(res.body)
	}
}

// Plan implements fastpath.Planner.
func (a *toyAPI) Plan(req *fastpath.Request, p *fastpath.Plan) bool {
	res, ok := a.res[string(req.Path)]
	if !ok {
		return false
	}
	a.plans.Add(1)
	p.Status = http.StatusOK
	p.Scratch = strconv.AppendInt(p.Scratch, int64(len(res.body)), 10)
	b := fastpath.AppendStatusLine(p.Buf, req, http.StatusOK)
	b = fastpath.AppendFieldBytes(b, "Content-Length: ", p.Scratch)
	b = fastpath.AppendField(b, "Content-Type: ", res.ctype)
	p.Buf = fastpath.AppendHeadEnd(b, req)
	if req.Head || len(res.body) == 0 {
		return true
	}
	p.N = int64(len(res.body))
	switch res.kind {
	case "inline":
		p.Buf = append(p.Buf, res.body...)
		p.Bytes = p.N
	case "read":
		p.Body, p.Source = fastpath.BodyRead, &source{a: a, b: res.body}
	case "lend":
		if p.CanLend {
			p.Body, p.Lent, p.Hold = fastpath.BodyLent, res.body, (*holdCount)(&a.holds)
		} else {
			p.Body, p.Source = fastpath.BodyRead, &source{a: a, b: res.body}
		}
	case "file":
		if p.CanSendFile {
			p.Body, p.File, p.FileOff = fastpath.BodyFile, a.file, a.fileOff
			p.Release = func() { a.releases.Add(1) }
		} else {
			p.Body, p.Source = fastpath.BodyStream, &source{a: a, b: res.body}
		}
	case "stream":
		p.Body, p.Source = fastpath.BodyStream, &source{a: a, b: res.body}
	case "unreadable":
		p.Body, p.Source = fastpath.BodyRead, &source{a: a, b: res.body, fail: true}
	}
	return true
}

// Unreadable implements fastpath.Planner.
func (a *toyAPI) Unreadable(req *fastpath.Request, p *fastpath.Plan, err error) {
	p.Body, p.Status = fastpath.BodyNone, http.StatusServiceUnavailable
	b := fastpath.AppendStatusLine(p.Buf, req, http.StatusServiceUnavailable)
	b = append(b, "Content-Type: text/plain; charset=utf-8\r\nX-Content-Type-Options: nosniff\r\n"...)
	b = fastpath.AppendDate(b, req)
	b = append(b, "Content-Length: "+strconv.Itoa(len(goneBody))+"\r\n"...)
	b = fastpath.AppendConnection(b, req)
	b = append(b, "\r\n"+goneBody...)
	p.Buf, p.Bytes = b, int64(len(goneBody))
}

// Done implements fastpath.Planner.
func (a *toyAPI) Done(req *fastpath.Request, p *fastpath.Plan) {
	a.dones.Add(1)
	if p.Source != nil {
		_ = p.Source.Close()
	}
}

// source is a Source over bytes; fail makes every read fail.
type source struct {
	a    *toyAPI
	b    []byte
	fail bool
}

var errGone = errors.New("toy: gone")

func (s *source) ReadAt(p []byte, off int64) (int, error) {
	if s.fail {
		return 0, errGone
	}
	return copy(p, s.b[off:]), nil
}

func (s *source) WriteRangeTo(w io.Writer, off, n int64) (int64, error) {
	m, err := w.Write(s.b[off : off+n])
	return int64(m), err
}

func (s *source) Close() error { s.a.closes.Add(1); return nil }

type holdCount atomic.Int64

func (h *holdCount) Release() { (*atomic.Int64)(h).Add(1) }

// startToy serves the toy API through the fast path and through net/http
// alone, until the test ends.
// With serverTLS, both serve HTTPS with it (tls_test.go).
func startToy(t *testing.T, a *toyAPI, sendfile bool, serverTLS *tls.Config) fastpathtest.Servers {
	fallback := &http.Server{Handler: a, TLSConfig: serverTLS.Clone()}
	cfg := fastpath.DefaultConfig()
	cfg.Planner, cfg.Fallback = a, fallback
	cfg.ReadHeaderTimeout, cfg.IdleTimeout, cfg.WriteTimeout = 10*time.Second, time.Minute, 10*time.Second
	cfg.DisableSendfile = !sendfile
	cfg.TLS = serverTLS
	fast, err := fastpath.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	fln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	slow := &http.Server{Handler: a, TLSConfig: serverTLS.Clone()}
	done := make(chan error, 1)
	go func() { done <- fast.Serve(fln) }()
	go func() {
		if serverTLS != nil {
			_ = slow.ServeTLS(sln, "", "")
		} else {
			_ = slow.Serve(sln)
		}
	}()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := fast.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		_ = fallback.Shutdown(ctx)
		_ = fast.Close()
		_ = slow.Close()
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
	})
	srv := fastpathtest.Servers{Fast: fast, FastAddr: fln.Addr().String(), SlowAddr: sln.Addr().String()}
	if serverTLS != nil {
		srv.TLS = clientTLS(serverTLS)
	}
	return srv
}

// TestContract runs the contract test on the toy planner: every body
// kind, whole or as a HEAD, in both HTTP versions, leaves as net/http
// sends the same answer; what the planner hands off (and what the parser
// does) is answered by net/http.
func TestContract(t *testing.T) {
	for _, v := range []struct {
		name          string
		sendfile, tls bool
	}{{"sendfile=true", true, false}, {"sendfile=false", false, false}, {"tls", true, true}} {
		t.Run(v.name, func(t *testing.T) {
			a := newToyAPI(t)
			var stls *tls.Config
			if v.tls {
				stls = serverTLS(t)
			}
			srv := startToy(t, a, v.sendfile, stls)
			sendfile, lend := v.sendfile && !v.tls, !v.tls // over TLS, crypto/tls copies every body
			var cases []fastpathtest.Case
			for _, p := range []string{"/inline", "/read", "/lend", "/file", "/stream", "/empty", "/gone"} {
				want := "200"
				if p == "/gone" {
					want = "503"
				}
				cases = append(cases,
					fastpathtest.Case{Name: "get " + p, Raw: "GET " + p + " HTTP/1.1\r\nHost: x\r\n\r\n", Fast: true, Want: want},
					fastpathtest.Case{Name: "head " + p, Raw: "HEAD " + p + " HTTP/1.1\r\nHost: x\r\n\r\n", Fast: true, Want: "200"},
					fastpathtest.Case{Name: "get 1.0 " + p, Raw: "GET " + p + " HTTP/1.0\r\n\r\n", Fast: true, Want: want},
					fastpathtest.Case{Name: "get 1.0 keep-alive " + p, Raw: "GET " + p + " HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", Fast: true, Want: want},
					fastpathtest.Case{Name: "get close " + p, Raw: "GET " + p + "?q=1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", Fast: true, Want: want},
				)
			}
			cases = append(cases,
				fastpathtest.Case{Name: "planner hands off", Raw: "GET /nothing HTTP/1.1\r\nHost: x\r\n\r\n", Want: "404"},
				fastpathtest.Case{Name: "escaped path", Raw: "GET /inl%69ne HTTP/1.1\r\nHost: x\r\n\r\n", Fast: true, Want: "200"},
				fastpathtest.Case{Name: "bad escape", Raw: "GET /inline%zz HTTP/1.1\r\nHost: x\r\n\r\n", Want: "400"},
				fastpathtest.Case{Name: "post", Raw: "POST /inline HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n", Want: "404"},
			)
			fastpathtest.Run(t, srv, cases)

			c := srv.Fast.Counts()
			if c.Served != a.plans.Load() || a.dones.Load() != a.plans.Load() {
				t.Errorf("%d planned, %d done, %d served", a.plans.Load(), a.dones.Load(), c.Served)
			}
			if (c.SentFile > 0) != sendfile || a.releases.Load() != c.SentFile {
				t.Errorf("%d bodies sent with sendfile (sendfile %v), %d files released", c.SentFile, sendfile, a.releases.Load())
			}
			if (c.SentLent > 0) != lend || a.holds.Load() != c.SentLent {
				t.Errorf("%d bodies lent, %d holds released", c.SentLent, a.holds.Load())
			}
		})
	}
}

// TestContractPipelined: the answers to requests sent together on one
// connection, batched by the fast path and sent each body its way, and
// then, after a hand-off, by net/http, are the bytes net/http sends.
func TestContractPipelined(t *testing.T) {
	t.Run("tcp", func(t *testing.T) { testContractPipelined(t, nil) })
	t.Run("tls", func(t *testing.T) { testContractPipelined(t, serverTLS(t)) })
}

func testContractPipelined(t *testing.T, stls *tls.Config) {
	a := newToyAPI(t)
	srv := startToy(t, a, true, stls)
	var all strings.Builder
	for range 3 {
		for _, p := range []string{"/inline", "/lend", "/file", "/read", "/gone", "/stream", "/empty", "/read"} {
			all.WriteString("GET " + p + " HTTP/1.1\r\nHost: x\r\n\r\n")
			all.WriteString("HEAD " + p + " HTTP/1.1\r\nHost: x\r\n\r\n")
		}
	}
	all.WriteString("GET /nothing HTTP/1.1\r\nHost: x\r\n\r\n") // the hand-off
	all.WriteString("GET /read HTTP/1.1\r\nHost: x\r\n\r\n")    // net/http's
	before := srv.Fast.Counts()
	slow := fastpathtest.ExchangeTLS(t, srv.SlowAddr, all.String(), srv.TLS)
	fast := fastpathtest.ExchangeTLS(t, srv.FastAddr, all.String(), srv.TLS)
	if fastpathtest.MaskDate(slow) != fastpathtest.MaskDate(fast) {
		t.Fatalf("answers differ\nnet/http:\n%s\nfast path:\n%s", fastpathtest.Clip(slow), fastpathtest.Clip(fast))
	}
	after := srv.Fast.Counts()
	if got := after.Served - before.Served; got != 3*16 || after.HandedOff-before.HandedOff != 1 {
		t.Fatalf("fast path answered %d of %d, handed off %d", got, 3*16, after.HandedOff-before.HandedOff)
	}
}
