package httpapi

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/cairn-fs/cairn/internal/access"
	"github.com/cairn-fs/cairn/internal/frontend/httpapi/fastpath"
	"github.com/cairn-fs/cairn/internal/store"
)

// Server serves the native HTTP API. Its methods are safe for concurrent use.
type Server struct {
	cfg     Config
	store   store.Store
	auth    *access.Authorizer
	log     *slog.Logger
	reg     *prometheus.Registry
	metrics *Metrics
	alog    *accessLog  // nil when off
	tls     *tls.Config // HTTPS (Config.TLS with its NextProtos), or nil

	metricsHandler http.Handler
	listing        *template.Template
	extraExact     map[string]http.Handler
	extraPrefix    []prefixHandler // longest first

	hs        *http.Server
	fast      *fastpath.Server // the fast path (doc.go)
	planner   planner          // its planner (fastplan.go)
	pool      sync.Pool        // *reqState
	closeOnce sync.Once
}

type prefixHandler struct {
	prefix string
	h      http.Handler
}

// New validates cfg, fills its defaults and returns a Server. It registers
// metrics on cfg.Registry (or a new registry) and, when cfg.AccessLog is
// set, starts the access log's writer goroutine: call Close or Shutdown to
// flush and stop it.
func New(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	auth := cfg.Auth
	if auth == nil {
		var err error
		if auth, err = access.New(access.Config{AdminKey: cfg.AdminKey}); err != nil {
			return nil, err
		}
	}
	var err error
	s := &Server{cfg: cfg, store: cfg.Store, auth: auth, log: cfg.Logger, reg: cfg.Registry, metrics: cfg.Metrics}
	if s.reg == nil {
		s.reg = prometheus.NewRegistry()
	}
	if s.metrics == nil {
		if s.metrics, err = NewMetrics(s.reg); err != nil {
			return nil, err
		}
	}
	if cfg.StatsFunc != nil {
		if err := s.reg.Register(newStatsCollector(cfg.StatsFunc)); err != nil {
			return nil, err
		}
	}
	s.metricsHandler = promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{})
	s.listing = template.Must(template.New("listing").Parse(listingTemplate))
	s.extraExact = map[string]http.Handler{}
	for k, h := range cfg.ExtraHandlers {
		if strings.HasSuffix(k, "/") {
			s.extraPrefix = append(s.extraPrefix, prefixHandler{k, h})
		} else {
			s.extraExact[k] = h
		}
	}
	sort.Slice(s.extraPrefix, func(i, j int) bool { return len(s.extraPrefix[i].prefix) > len(s.extraPrefix[j].prefix) })
	s.pool.New = func() any { return new(reqState) }
	s.hs = &http.Server{
		Handler:           s,
		ReadHeaderTimeout: cfg.ReadHeaderTimeout,
		IdleTimeout:       cfg.IdleTimeout,
		MaxHeaderBytes:    cfg.MaxHeaderBytes,
		// Client-caused noise (TLS handshakes, malformed requests).
		ErrorLog: slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelDebug),
	}
	s.planner = planner{s: s}
	if cfg.TLS != nil {
		// HTTP/2 and HTTP/1.1 by ALPN, as http.Server.ServeTLS offers
		// them: the fast path runs the handshakes with this configuration,
		// and net/http serves HTTP/2 on the connections handed to it whole
		// (it configures HTTP/2 when its TLSConfig names "h2").
		tc := cfg.TLS.Clone()
		for _, p := range []string{"h2", "http/1.1"} {
			if !slices.Contains(tc.NextProtos, p) {
				tc.NextProtos = append(tc.NextProtos, p)
			}
		}
		s.tls = tc
		s.hs.TLSConfig = tc
		// A connection handed off after the fast path read from it is a
		// plain net.Conn to net/http: its TLS state comes from here.
		s.hs.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
			if cs := fastpath.TLSState(c); cs != nil {
				return context.WithValue(ctx, tlsStateKey{}, cs)
			}
			return ctx
		}
	}
	fcfg := fastpath.DefaultConfig()
	fcfg.Planner, fcfg.Fallback, fcfg.Logger = &s.planner, s.hs, cfg.Logger
	fcfg.ReadHeaderTimeout, fcfg.IdleTimeout, fcfg.WriteTimeout = cfg.ReadHeaderTimeout, cfg.IdleTimeout, cfg.WriteTimeout
	fcfg.MaxHeaderBytes, fcfg.DisableSendfile = cfg.MaxHeaderBytes, cfg.DisableSendfile
	if s.tls != nil {
		// Its own copy: net/http writes to its TLSConfig when it starts
		// (HTTP/2's setup), while the fast path may be handshaking.
		fcfg.TLS = s.tls.Clone()
	}
	if s.fast, err = fastpath.New(fcfg); err != nil {
		return nil, err
	}
	if cfg.AccessLog != nil {
		s.alog = newAccessLog(cfg.AccessLog, cfg.AccessLogBufferBytes, cfg.AccessLogFlushInterval,
			func(n int) { s.metrics.logDropped.Add(float64(n)) }, cfg.Logger)
	}
	return s, nil
}

// Handler returns the HTTP handler of the API (the Server itself). Use it
// with your own http.Server, or call Serve. Without Serve's http.Server, the
// header and idle timeouts and MaxHeaderBytes are the caller's to set.
func (s *Server) Handler() http.Handler { return s }

// Registry returns the registry /_cairn/metrics serves, for other packages
// to register their collectors on.
func (s *Server) Registry() *prometheus.Registry { return s.reg }

// Metrics returns the server's metrics (for ObserveFsync).
func (s *Server) Metrics() *Metrics { return s.metrics }

// Serve accepts connections on ln and serves them until Shutdown; it blocks
// and returns http.ErrServerClosed after Shutdown, or the accept error. It
// closes ln when it returns. GETs and HEADs of files are answered by the
// fast path; a connection whose request it does not take is handed to the
// net/http server for the rest of its life (doc.go). With
// Config.DisableFastPath, net/http serves every connection. With
// Config.TLS it serves HTTPS, the fast path over crypto/tls.
func (s *Server) Serve(ln net.Listener) error {
	if s.cfg.DisableFastPath {
		if s.tls != nil {
			return s.hs.ServeTLS(ln, "", "")
		}
		return s.hs.Serve(ln)
	}
	return s.fast.Serve(ln)
}

// tlsStateKey is the context key of a handed-off connection's TLS state.
type tlsStateKey struct{}

// Shutdown stops accepting connections, closes idle ones, waits for the
// requests being answered to end or ctx to expire (returning ctx's error;
// fast-path connections still busy then are closed), then flushes the
// access log. Safe to call more than once.
func (s *Server) Shutdown(ctx context.Context) error {
	var err error
	if !s.cfg.DisableFastPath {
		// First the fast path: until its connections are gone, they may
		// still hand connections to the net/http server.
		err = s.fast.Shutdown(ctx)
	}
	if e := s.hs.Shutdown(ctx); err == nil {
		err = e
	}
	_ = s.fast.Close()
	s.Close()
	return err
}

// Close flushes and stops the access log; it blocks until buffered lines
// are written. Lines of requests that finish later are dropped. It does not
// stop Serve (use Shutdown). Safe to call more than once.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		if s.alog != nil {
			s.alog.Close()
		}
	})
}

// deadliner is what http.ResponseController uses on the connection; the
// net/http ResponseWriters implement it directly, which avoids allocating
// a ResponseController per request.
type deadliner interface {
	SetReadDeadline(time.Time) error
	SetWriteDeadline(time.Time) error
}

func findDeadliner(w http.ResponseWriter) deadliner {
	for range 8 {
		if d, ok := w.(deadliner); ok {
			return d
		}
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return nil
		}
		w = u.Unwrap()
	}
	return nil
}

// reqState is the per-request state, pooled so that the hot path does not
// allocate it.
type reqState struct {
	rw        respWriter
	w         http.ResponseWriter // &rw
	req       *http.Request
	ctl       deadliner // nil when the writer cannot set deadlines
	start     time.Time
	principal access.Principal
	allow     string // Allow header for a 405
	rule      string // the abuse rule that answered, for the access log
	body      bodyReader
	dl        fastpath.DeadlineWriter
	scratch   [320]byte
}

// ServeHTTP implements http.Handler: route → parse → authorize → store →
// map error → encode, then metrics and the access log.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rs := s.pool.Get().(*reqState)
	rs.rw = respWriter{w: w}
	rs.w = &rs.rw
	if r.TLS == nil && s.tls != nil {
		r.TLS, _ = r.Context().Value(tlsStateKey{}).(*tls.ConnectionState)
	}
	rs.req = r
	rs.start = time.Now()
	rs.ctl = findDeadliner(w)
	rs.body = bodyReader{r: r.Body, ctl: rs.ctl, timeout: s.cfg.ReadTimeout}
	rs.dl = fastpath.DeadlineWriter{W: &rs.rw, Ctl: rs.ctl, Timeout: s.cfg.WriteTimeout}
	rs.dl.Extend(rs.start)

	s.route(rs)

	status := rs.rw.status
	if status == 0 {
		status = http.StatusOK
	}
	p := r.URL.Path
	s.metrics.observeRequest(r.Method, status, rs.body.n, rs.rw.n, time.Since(rs.start),
		strings.HasPrefix(p, NodePrefix) || p == "/_cairn")
	if s.alog != nil {
		ln := logLine{
			remoteAddr: r.RemoteAddr, user: rs.principal.Name, t: rs.start,
			method: r.Method, uri: r.RequestURI, proto: r.Proto, status: status, bytes: rs.rw.n,
			referer: headerValue(r.Header, "Referer"), userAgent: headerValue(r.Header, "User-Agent"), rule: rs.rule,
		}
		s.alog.add(&ln)
	}
	*rs = reqState{}
	s.pool.Put(rs)
}

func (s *Server) route(rs *reqState) {
	r := rs.req
	e := entrance{host: r.Host, path: r.URL.Path, rawQuery: r.URL.RawQuery}
	if s.cfg.Rules != nil || s.cfg.S3 != nil {
		// Read only by the rules and S3's Match.
		e.authorization = headerValue(r.Header, "Authorization")
		e.hasAuthorization = len(r.Header["Authorization"]) > 0
		e.userAgent = headerValue(r.Header, "User-Agent")
	}
	if s.cfg.Rules != nil {
		e.ip = s.clientIP(r)
	}
	d, decision := s.frontDoor(&e)
	p := r.URL.Path
	switch d {
	case doorRule:
		s.serveRule(rs, decision)
		return
	case doorDAV:
		s.cfg.DAV.ServeHTTP(rs.w, r)
		return
	case doorS3, doorPresigned:
		s.cfg.S3.ServeHTTP(rs.w, r)
		return
	case doorNode:
		s.serveNode(rs, p)
		return
	case doorSnapshot:
		s.serveSnapshot(rs, p)
		return
	}
	t, err := parseTarget(p)
	if err != nil {
		s.writeError(rs, err)
		return
	}
	switch rs.req.Method {
	case http.MethodGet, http.MethodHead:
		s.serveRead(rs, t)
	case http.MethodPut:
		s.servePut(rs, t)
	case http.MethodDelete:
		s.serveDelete(rs, t)
	case http.MethodPost:
		s.servePost(rs, t)
	default:
		rs.allow = "GET, HEAD, PUT, DELETE, POST"
		s.writeError(rs, ErrMethodNotAllowed)
	}
}

// authenticate resolves the request's credentials into rs.principal.
func (s *Server) authenticate(rs *reqState) error {
	p, err := s.auth.Authenticate(headerValue(rs.req.Header, "Authorization"))
	rs.principal = p
	return err
}

// changeCtx is the context of the changes an authorized request makes: it
// names the front end and the access key, which the bucket's trash records
// (store.WithOrigin).
func (s *Server) changeCtx(rs *reqState) context.Context {
	return store.WithOrigin(rs.req.Context(), "http", rs.principal.Name)
}

// authorize authenticates the request and checks act on res.
func (s *Server) authorize(rs *reqState, act access.Action, res access.Resource) error {
	if err := s.authenticate(rs); err != nil {
		return err
	}
	return s.auth.Authorize(rs.principal, act, res)
}

// serveNode serves /_cairn/...: health, metrics, buckets and extra handlers.
func (s *Server) serveNode(rs *reqState, p string) {
	r := rs.req
	switch {
	case p == NodePrefix+"health":
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			rs.allow = "GET, HEAD"
			s.writeError(rs, ErrMethodNotAllowed)
			return
		}
		s.serveHealth(rs)
		return
	case p == NodePrefix+"metrics":
		s.metricsHandler.ServeHTTP(rs.w, r)
		return
	case p == NodePrefix+"buckets" || strings.HasPrefix(p, NodePrefix+"buckets/"):
		s.serveBuckets(rs, strings.TrimPrefix(strings.TrimPrefix(p, NodePrefix+"buckets"), "/"))
		return
	}
	if h, ok := s.extraExact[p]; ok {
		h.ServeHTTP(rs.w, r)
		return
	}
	for _, ph := range s.extraPrefix {
		if strings.HasPrefix(p, ph.prefix) {
			ph.h.ServeHTTP(rs.w, r)
			return
		}
	}
	s.writeErrorStatus(rs, http.StatusNotFound, "NotFound", errors.New("no such node endpoint"))
}

func (s *Server) serveHealth(rs *reqState) {
	h := rs.w.Header()
	h[hdrContentType] = []string{"text/plain; charset=utf-8"}
	h[hdrCacheControl] = []string{"no-store"}
	body, status := "ok", http.StatusOK
	var herr error
	if s.cfg.HealthFunc != nil {
		if herr = s.cfg.HealthFunc(); herr != nil {
			body, status = "unavailable: "+herr.Error()+"\n", http.StatusServiceUnavailable
		}
	}
	if s.cfg.HealthInfo != nil && rs.req.URL.Query().Get("verbose") == "1" {
		v := s.cfg.HealthInfo()
		v["status"] = "ok"
		if herr != nil {
			v["status"], v["error"] = "unavailable", herr.Error()
		}
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			b = []byte(`{"status":"unavailable","error":"health info: ` + err.Error() + `"}`)
			status = http.StatusInternalServerError
		}
		h[hdrContentType] = []string{"application/json"}
		body = string(b) + "\n"
	}
	rs.w.WriteHeader(status)
	if rs.req.Method != http.MethodHead {
		_, _ = io.WriteString(rs.w, body)
	}
}

// Canonical header keys, set directly into the header map.
const (
	hdrContentType     = "Content-Type"
	hdrContentLength   = "Content-Length"
	hdrContentRange    = "Content-Range"
	hdrETag            = "Etag"
	hdrLastModified    = "Last-Modified"
	hdrAcceptRanges    = "Accept-Ranges"
	hdrReprDigest      = "Repr-Digest"
	hdrCacheControl    = "Cache-Control"
	hdrLocation        = "Location"
	hdrWWWAuthenticate = "Www-Authenticate"
)

// respWriter records the status and body bytes of a response. It keeps
// io.ReaderFrom (sendfile) and Unwrap (http.ResponseController) working.
type respWriter struct {
	w      http.ResponseWriter
	status int
	n      int64
}

// Header implements http.ResponseWriter.
func (w *respWriter) Header() http.Header { return w.w.Header() }

// WriteHeader implements http.ResponseWriter.
func (w *respWriter) WriteHeader(code int) {
	if w.status == 0 && code >= 200 {
		w.status = code
	}
	w.w.WriteHeader(code)
}

// Write implements http.ResponseWriter.
func (w *respWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.w.Write(p)
	w.n += int64(n)
	return n, err
}

// ReadFrom implements io.ReaderFrom, passing sendfile-capable readers on.
func (w *respWriter) ReadFrom(r io.Reader) (int64, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	var n int64
	var err error
	if rf, ok := w.w.(io.ReaderFrom); ok {
		n, err = rf.ReadFrom(r)
	} else {
		n, err = io.Copy(struct{ io.Writer }{w.w}, r)
	}
	w.n += n
	return n, err
}

// Flush implements http.Flusher.
func (w *respWriter) Flush() {
	if f, ok := w.w.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap returns the wrapped writer for http.ResponseController.
func (w *respWriter) Unwrap() http.ResponseWriter { return w.w }

// bodyReader reads a request body, extending the connection's read deadline
// while bytes flow and remembering the first read error.
type bodyReader struct {
	r       io.Reader
	ctl     deadliner
	timeout time.Duration
	last    time.Time
	n       int64
	eof     bool
	err     error
}

// Read implements io.Reader.
func (b *bodyReader) Read(p []byte) (int, error) {
	if b.eof {
		return 0, io.EOF
	}
	if b.r == nil {
		b.eof = true
		return 0, io.EOF
	}
	if b.ctl != nil && b.timeout > 0 {
		// Never after EOF: net/http then reads the connection in the
		// background and a deadline would cancel the request's context.
		if now := time.Now(); b.last.IsZero() || now.Sub(b.last) >= b.timeout/4 {
			_ = b.ctl.SetReadDeadline(now.Add(b.timeout))
			b.last = now
		}
	}
	n, err := b.r.Read(p)
	b.n += int64(n)
	if err == io.EOF {
		b.eof = true
	} else if err != nil && b.err == nil {
		b.err = err
	}
	return n, err
}

// bodyError turns the first body read error into ErrBodyTimeout or
// ErrIncompleteBody; nil if the body read cleanly.
func (b *bodyReader) bodyError() error {
	if b.err == nil {
		return nil
	}
	var ne net.Error
	if errors.Is(b.err, os.ErrDeadlineExceeded) || (errors.As(b.err, &ne) && ne.Timeout()) {
		return fmt.Errorf("%w: %w", ErrBodyTimeout, b.err)
	}
	return fmt.Errorf("%w: %w", ErrIncompleteBody, b.err)
}

// DAVPrefix is where Config.DAV serves buckets.
const DAVPrefix = "/_dav/"

// isDAV reports whether a path is WebDAV's.
func isDAV(p string) bool { return p == "/_dav" || strings.HasPrefix(p, DAVPrefix) }
