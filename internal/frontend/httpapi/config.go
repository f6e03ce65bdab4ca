package httpapi

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cairn-fs/cairn/internal/access"
	"github.com/cairn-fs/cairn/internal/access/rules"
	"github.com/cairn-fs/cairn/internal/frontend/httpapi/fastpath"
	"github.com/cairn-fs/cairn/internal/store"
)

// ErrBadConfig is returned (wrapped) by Config.Validate and New.
var ErrBadConfig = errors.New("httpapi: bad config")

// NodePrefix is the path prefix of node endpoints; no bucket can be named
// "_cairn".
const NodePrefix = "/_cairn/"

// S3Handler is the S3 front end as the native server sees it.
type S3Handler interface {
	http.Handler
	// Match reports whether the request with that Host, Authorization,
	// raw query and User-Agent is an S3 request. It must not allocate nor
	// keep its arguments (the fast path passes views of its buffer).
	Match(host, authorization, rawQuery, userAgent string) bool
	// Presigned returns the principal of a GET or HEAD of path (decoded)
	// whose query is a valid presigned URL signing only the host and
	// carrying nothing but X-Amz-* parameters; ok is false for anything
	// else (which net/http then serves through the S3 handler). It must
	// not keep its arguments.
	Presigned(method, host, path, rawQuery string) (p access.Principal, ok bool)
	// HostBucket returns the bucket a virtual-hosted Host names, or "".
	// It must not allocate.
	HostBucket(host string) string
	// PlanSigned plans, on the fast path, the head of S3's answer to a
	// GET or HEAD of an object signed with SigV4 in its Authorization
	// header (p.Path is its decoded path): the bytes its ServeHTTP would
	// send through net/http, appended to p.Buf, with p.Status, p.Off,
	// p.N and p.Source set; it returns the open object, whose body the
	// planner plans. ok is false, with nothing changed, for anything it
	// does not answer so (errors included), which net/http then serves.
	// It must not keep req's bytes.
	PlanSigned(req *fastpath.Request, p *fastpath.Plan) (obj store.Object, ok bool)
}

// Config configures a Server. Fields marked required have no default.
type Config struct {
	// Store is the file store every request is served from. Required.
	Store store.Store
	// AdminKey authorizes writes, admin calls and reads of private buckets
	// (access.MinKeyLen bytes or more). Required.
	AdminKey string
	// S3, when set, serves the requests it matches (S3 requests: a SigV4
	// signature, an S3 query, a virtual-hosted bucket) instead of the
	// native API, on the same listener.
	S3 S3Handler
	// TLS, when set, makes Serve answer HTTPS (HTTP/1.1 and HTTP/2 by
	// ALPN): the fast path runs the handshakes and serves HTTP/1.1 GETs
	// and HEADs through crypto/tls; net/http serves the rest, HTTP/2 and
	// clients that authenticate with a certificate (fastpath/tls.go).
	TLS *tls.Config
	// DAV, when set, serves WebDAV under DAVPrefix ("/_dav/BUCKET/...").
	DAV http.Handler
	// Rules, when set, are the abuse rules checked for every request to a
	// bucket (rules.go). Default nil: none.
	Rules *rules.Engine
	// TrustedProxies are the peers whose X-Forwarded-For gives the client
	// IP (for the rules and the access log). Default none.
	TrustedProxies []netip.Prefix
	// Auth, when set, is the Authorizer to use (the node's, which knows the
	// cluster's access keys); it must have been made with AdminKey.
	// Default: a new one that knows only AdminKey.
	Auth *access.Authorizer
	// Logger receives lifecycle messages and failed requests (5xx). Default:
	// a logger that discards everything.
	Logger *slog.Logger

	// AccessLog receives one line per request in the combined log format.
	// Default nil: no access log. Writes happen on a background goroutine.
	AccessLog io.Writer
	// AccessLogBufferBytes bounds the lines waiting for AccessLog; when it is
	// full, lines are dropped and counted. Default 1 MiB.
	AccessLogBufferBytes int
	// AccessLogFlushInterval is how often buffered lines are written.
	// Default 1 s.
	AccessLogFlushInterval time.Duration

	// Registry serves /_cairn/metrics. Default nil: a new registry, see
	// Server.Registry.
	Registry *prometheus.Registry
	// Metrics are the server's metrics, registered on Registry. Default nil:
	// New creates them with NewMetrics(Registry). Pass one created earlier
	// to let the store call ObserveFsync; then Registry must be set.
	Metrics *Metrics
	// StatsFunc is called at every scrape to export NodeStats gauges.
	// Default nil: no node gauges. It must be safe for concurrent use and fast.
	StatsFunc func() NodeStats
	// HealthFunc reports whether the node can serve: nil error → /_cairn/health
	// answers 200 "ok", else 503 with the error text. Default nil: always healthy.
	HealthFunc func() error
	// HealthInfo, when set, is what /_cairn/health?verbose=1 answers as
	// JSON, with "status" and "error" from HealthFunc added: the node's
	// version, its log version and every member's version. It must be
	// safe for concurrent use.
	HealthInfo func() map[string]any

	// ReadHeaderTimeout bounds reading the request line and headers. Default 10 s.
	ReadHeaderTimeout time.Duration
	// ReadTimeout is how long a request body may make no progress: every
	// read of the body pushes the connection's read deadline this far out,
	// so a slow but steady upload of any size goes on while one that stalls
	// is cut off (408, nothing stored). Default 30 s; negative disables.
	ReadTimeout time.Duration
	// WriteTimeout is how long a response may make no progress: the write
	// deadline is pushed out as body chunks (at most 128 KiB) are written, so
	// a big download goes on while a reader that stops reading is cut off.
	// Default 30 s; negative disables.
	WriteTimeout time.Duration
	// IdleTimeout bounds how long a keep-alive connection waits for its next
	// request. Default 120 s.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds the request line plus headers; larger requests
	// get 431 from net/http (which allows 4 KiB of slack). Default 64 KiB.
	MaxHeaderBytes int

	// DisableFastPath makes Serve hand every connection to net/http
	// instead of answering GETs and HEADs of files on the fast path
	// (doc.go). Default false. For comparison and as an escape hatch.
	DisableFastPath bool
	// DisableSendfile makes the fast path copy bodies through its write
	// buffer (up to 64 KiB) or WriteRangeTo instead of sending them from
	// the volume file with sendfile(2) (doc.go). Default false. For
	// comparison and tests.
	DisableSendfile bool

	// ExtraHandlers serves further node endpoints, such as cluster RPC. Keys
	// are paths under NodePrefix ("/_cairn/rpc/"); a key ending in "/"
	// matches every path below it, others match exactly, the longest key
	// wins. Handlers authenticate requests themselves; the server only adds
	// metrics and the access log. Keys may not shadow health, metrics or
	// buckets. Default nil.
	ExtraHandlers map[string]http.Handler
}

// DefaultConfig returns a Config with every optional field at its default;
// Store and AdminKey must still be set.
func DefaultConfig() Config {
	return Config{
		AccessLogBufferBytes:   1 << 20,
		AccessLogFlushInterval: time.Second,
		ReadHeaderTimeout:      10 * time.Second,
		ReadTimeout:            30 * time.Second,
		WriteTimeout:           30 * time.Second,
		IdleTimeout:            120 * time.Second,
		MaxHeaderBytes:         64 << 10,
	}
}

// withDefaults fills zero optional fields from DefaultConfig.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.AccessLogBufferBytes == 0 {
		c.AccessLogBufferBytes = d.AccessLogBufferBytes
	}
	if c.AccessLogFlushInterval == 0 {
		c.AccessLogFlushInterval = d.AccessLogFlushInterval
	}
	if c.ReadHeaderTimeout == 0 {
		c.ReadHeaderTimeout = d.ReadHeaderTimeout
	}
	if c.ReadTimeout == 0 {
		c.ReadTimeout = d.ReadTimeout
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = d.WriteTimeout
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = d.IdleTimeout
	}
	if c.MaxHeaderBytes == 0 {
		c.MaxHeaderBytes = d.MaxHeaderBytes
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Validate reports a Config that New would refuse, wrapping ErrBadConfig.
// Zero optional fields are valid (they take their defaults).
func (c Config) Validate() error {
	if c.Store == nil {
		return fmt.Errorf("%w: Store is required", ErrBadConfig)
	}
	if err := (access.Config{AdminKey: c.AdminKey}).Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrBadConfig, err)
	}
	if c.Metrics != nil && c.Registry == nil {
		return fmt.Errorf("%w: Metrics given without the Registry they are registered on", ErrBadConfig)
	}
	if c.AccessLogBufferBytes < 0 || c.AccessLogFlushInterval < 0 || c.ReadHeaderTimeout < 0 ||
		c.IdleTimeout < 0 || c.MaxHeaderBytes < 0 {
		return fmt.Errorf("%w: negative size or timeout", ErrBadConfig)
	}
	for k, h := range c.ExtraHandlers {
		if h == nil || !strings.HasPrefix(k, NodePrefix) || len(k) == len(NodePrefix) {
			return fmt.Errorf("%w: extra handler %q: want a non-nil handler under %s", ErrBadConfig, k, NodePrefix)
		}
		name := strings.TrimPrefix(k, NodePrefix)
		for _, reserved := range []string{"health", "metrics", "buckets"} {
			if name == reserved || strings.HasPrefix(name, reserved+"/") || (strings.HasSuffix(name, "/") && strings.HasPrefix(reserved, name)) {
				return fmt.Errorf("%w: extra handler %q shadows /_cairn/%s", ErrBadConfig, k, reserved)
			}
		}
	}
	return nil
}
