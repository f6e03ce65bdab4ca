package s3

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cairn-fs/cairn/internal/access"
	"github.com/cairn-fs/cairn/internal/access/sigv4"
	"github.com/cairn-fs/cairn/internal/store"
)

// Config configures a Handler. Fields marked required have no default.
type Config struct {
	// Store is the file store. Required.
	Store store.Store
	// Auth authenticates and authorizes (the node's, with its keys). Required.
	Auth *access.Authorizer
	// Domain, when set, enables virtual-hosted style: a request for host
	// BUCKET.Domain addresses BUCKET. Default "": path style only.
	Domain string
	// Region is what GetBucketLocation answers and the LocationConstraint
	// CreateBucket accepts. Default "us-east-1" (answered as "" as S3 does).
	Region string
	// UploadExpiry is how long an unfinished multipart upload lives before
	// its parts are collected. Default 7 days.
	UploadExpiry time.Duration
	// Logger receives failed requests (5xx). Default: discard.
	Logger *slog.Logger
	// Registry receives the handler's metrics. Default: none kept.
	Registry prometheus.Registerer
	// Now is the clock (signatures, expiry). Default time.Now.
	Now func() time.Time
}

// DefaultConfig returns a Config with every optional field at its default.
func DefaultConfig() Config {
	return Config{Region: "us-east-1", UploadExpiry: 7 * 24 * time.Hour}
}

// ErrBadConfig is returned (wrapped) by Validate.
var ErrBadConfig = errors.New("s3: bad config")

// Validate reports a Config that New would refuse.
func (c Config) Validate() error {
	switch {
	case c.Store == nil:
		return fmt.Errorf("%w: Store is required", ErrBadConfig)
	case c.Auth == nil:
		return fmt.Errorf("%w: Auth is required", ErrBadConfig)
	case c.UploadExpiry < 0:
		return fmt.Errorf("%w: negative UploadExpiry", ErrBadConfig)
	case strings.HasPrefix(c.Domain, "."):
		return fmt.Errorf("%w: Domain %q starts with a dot", ErrBadConfig, c.Domain)
	}
	return nil
}

// Handler serves the S3 API. Safe for concurrent use.
type Handler struct {
	cfg     Config
	st      store.Store
	auth    *access.Authorizer
	sig     *sigv4.Verifier
	log     *slog.Logger
	metrics *metrics
	now     func() time.Time
	// policies caches parsed bucket policies (acl.go).
	policies policyCache
	// presigned caches the presigned URLs Presigned verified.
	presigned *presignCache
}

// New returns a Handler for cfg.
func New(cfg Config) (*Handler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	d := DefaultConfig()
	if cfg.Region == "" {
		cfg.Region = d.Region
	}
	if cfg.UploadExpiry == 0 {
		cfg.UploadExpiry = d.UploadExpiry
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	scfg := sigv4.DefaultConfig()
	scfg.Lookup = cfg.Auth.SecretFor
	scfg.Now = cfg.Now
	sig, err := sigv4.New(scfg)
	if err != nil {
		return nil, err
	}
	m, err := newMetrics(cfg.Registry)
	if err != nil {
		return nil, err
	}
	return &Handler{cfg: cfg, st: cfg.Store, auth: cfg.Auth, sig: sig, log: cfg.Logger, metrics: m, now: cfg.Now,
		presigned: newPresignCache()}, nil
}

// metrics are the handler's Prometheus metrics.
type metrics struct {
	requests     *prometheus.CounterVec
	authFailures *prometheus.CounterVec
	// getOK and headOK are requests' GetObject and HeadObject 2xx
	// counters, for PlanSigned (no label lookup per request).
	getOK, headOK prometheus.Counter
	// fast counts the requests PlanSigned answered (also in requests).
	fast prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cairn_s3_requests_total",
			Help: "S3 API requests by operation and status class."}, []string{"op", "class"}),
		authFailures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cairn_s3_auth_failures_total",
			Help: "S3 requests refused for their credentials, by S3 error code."}, []string{"code"}),
		fast: prometheus.NewCounter(prometheus.CounterOpts{Name: "cairn_s3_fast_path_requests_total",
			Help: "S3 GetObject and HeadObject requests signed in their Authorization header that the native listener's fast path answered (counted in cairn_s3_requests_total too)."}),
	}
	m.getOK = m.requests.WithLabelValues("GetObject", "2xx")
	m.headOK = m.requests.WithLabelValues("HeadObject", "2xx")
	if reg != nil {
		for _, c := range []prometheus.Collector{m.requests, m.authFailures, m.fast} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

// Match reports whether a request with that Host, Authorization header
// and raw query is an S3 request rather than a native one (the rule of
// docs/s3.md): a virtual-hosted bucket host, a SigV4 signature (header or
// presigned query), or a query naming an S3 sub-resource. It does not
// allocate.
func (h *Handler) Match(host, authorization, rawQuery, userAgent string) bool {
	return IsS3(host, authorization, rawQuery, h.cfg.Domain) || s3Agent(userAgent)
}

// s3Agent reports whether a User-Agent is an S3 SDK's or tool's: their
// unsigned (anonymous) requests are S3 requests too, so that they get the
// answers and XML errors they parse.
func s3Agent(ua string) bool {
	for _, p := range [...]string{"Boto3/", "Botocore/", "aws-cli/", "aws-sdk-", "S3Client", "rclone/", "s3cmd/"} {
		if strings.HasPrefix(ua, p) {
			return true
		}
	}
	return false
}

// IsS3 is Match on the raw parts of a request: its Host, Authorization
// header and raw query. It does not allocate.
func IsS3(host, authorization, rawQuery, domain string) bool {
	if strings.HasPrefix(authorization, "AWS4-HMAC-SHA256") || strings.HasPrefix(authorization, "AWS ") {
		return true
	}
	if domain != "" && bucketFromHost(host, domain) != "" {
		return true
	}
	if rawQuery == "" {
		return false
	}
	for rest := rawQuery; rest != ""; {
		var kv string
		kv, rest, _ = strings.Cut(rest, "&")
		k, _, _ := strings.Cut(kv, "=")
		if s3Param(k) {
			return true
		}
	}
	return false
}

// s3Param reports whether a query key marks an S3 request.
func s3Param(k string) bool {
	switch k {
	case "X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Signature", "AWSAccessKeyId", "Signature",
		"list-type", "uploads", "uploadId", "partNumber", "acl", "location", "delete",
		"versions", "versioning", "versionId", "tagging", "policy", "cors", "lifecycle",
		"website", "encryption", "object-lock", "retention", "legal-hold", "notification",
		"logging", "replication", "requestPayment", "accelerate", "ownershipControls",
		"publicAccessBlock", "policyStatus", "attributes", "restore", "select", "torrent",
		"prefix", "delimiter", "marker", "max-keys", "encoding-type", "continuation-token",
		"start-after", "fetch-owner", "max-uploads", "key-marker", "upload-id-marker",
		"max-parts", "part-number-marker", "version-id-marker":
		return true
	}
	return strings.HasPrefix(k, "response-") || strings.HasPrefix(k, "x-id")
}

// bucketFromHost returns the bucket of a virtual-hosted host
// "BUCKET.domain[:port]", or "".
func bucketFromHost(host, domain string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.ToLower(host)
	if len(host) <= len(domain)+1 || !strings.HasSuffix(host, domain) || host[len(host)-len(domain)-1] != '.' {
		return ""
	}
	return host[:len(host)-len(domain)-1]
}

// request is one parsed S3 request.
type request struct {
	id        string
	bucket    string
	key       string
	query     url.Values
	principal access.Principal
	sig       *sigv4.Result // nil: not signed with SigV4
	op        string
}

func newRequestID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return strings.ToUpper(hex.EncodeToString(b[:]))
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rq := &request{id: newRequestID(), query: r.URL.Query()}
	hdr := w.Header()
	hdr.Set("x-amz-request-id", rq.id)
	hdr.Set("Server", "Cairn")
	rw := &statusWriter{ResponseWriter: w}
	h.serve(rw, r, rq)
	class := "2xx"
	if rw.status >= 300 {
		class = fmt.Sprintf("%dxx", rw.status/100)
	}
	h.metrics.requests.WithLabelValues(rq.op, class).Inc()
}

// statusWriter remembers the status written.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(p []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(p)
}

// ReadFrom keeps sendfile available to the body writer.
func (s *statusWriter) ReadFrom(src io.Reader) (int64, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	if rf, ok := s.ResponseWriter.(io.ReaderFrom); ok {
		return rf.ReadFrom(src)
	}
	return io.Copy(struct{ io.Writer }{s.ResponseWriter}, src)
}

// Unwrap lets http.ResponseController reach the connection.
func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

func (h *Handler) serve(w http.ResponseWriter, r *http.Request, rq *request) {
	// Where the bucket and key are.
	p := r.URL.Path
	if b := bucketFromHost(r.Host, h.cfg.Domain); h.cfg.Domain != "" && b != "" {
		rq.bucket, rq.key = b, strings.TrimPrefix(p, "/")
	} else {
		rq.bucket, rq.key, _ = strings.Cut(strings.TrimPrefix(p, "/"), "/")
	}
	if r.Method == http.MethodOptions {
		// CORS preflight: no bucket has a CORS configuration.
		rq.op = "OPTIONS"
		if r.Header.Get("Origin") == "" {
			h.writeError(w, r, rq, errorf(http.StatusBadRequest, "BadRequest", "Insufficient information. Origin request header needed."))
		} else {
			h.writeError(w, r, rq, errorf(http.StatusForbidden, "CORSResponse", "CORS is not enabled for this bucket."))
		}
		return
	}
	if err := h.authenticate(r, rq); err != nil {
		rq.op = "auth"
		h.writeError(w, r, rq, err)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		// The changes it makes name S3 and the key (the trash records it).
		r = r.WithContext(store.WithOrigin(r.Context(), "s3", rq.principal.Name))
	}
	if rq.bucket == "" {
		if r.Method == http.MethodGet {
			rq.op = "ListBuckets"
			h.listBuckets(w, r, rq)
			return
		}
		rq.op = "service"
		h.writeError(w, r, rq, errMethodNotAllowed)
		return
	}
	if rq.key == "" {
		h.serveBucket(w, r, rq)
		return
	}
	h.serveObject(w, r, rq)
}

// authenticate sets rq.principal from the request's credentials: a SigV4
// signature (header or presigned), a Bearer key, or none.
func (h *Handler) authenticate(r *http.Request, rq *request) error {
	authz := r.Header.Get("Authorization")
	signed, v2 := sigv4.IsSigned(r), false
	if !signed && sigv4.IsSignedV2(r) {
		signed, v2 = true, true
	}
	if signed {
		var res *sigv4.Result
		var err error
		if v2 {
			hb := ""
			if h.cfg.Domain != "" {
				hb = bucketFromHost(r.Host, h.cfg.Domain)
			}
			res, err = h.sig.VerifyV2(r, hb)
		} else {
			res, err = h.sig.Verify(r)
		}
		if err != nil {
			h.auth.CountFailure("bad_key")
			return err
		}
		p, err := h.auth.PrincipalFor(res.AccessKeyID)
		if err != nil {
			return errorf(http.StatusForbidden, "InvalidAccessKeyId", "%v", err)
		}
		rq.principal, rq.sig = p, res
		return nil
	}
	p, err := h.auth.Authenticate(authz)
	if err != nil {
		return err
	}
	rq.principal = p
	return nil
}

// authorize checks act on bucket/key for the request's principal, with the
// bucket's ACL and policy (acl.go). For ActionList, key is the listing's
// prefix. A missing bucket is NoSuchBucket, for anonymous callers too (as
// S3 answers).
func (h *Handler) authorize(ctx context.Context, rq *request, act access.Action, bucket, key string) (store.BucketInfo, error) {
	b, err := h.st.Bucket(ctx, bucket)
	if err != nil {
		return b, err
	}
	prefix := ""
	if act == access.ActionList {
		prefix = key
	}
	return b, h.authorizeObject(ctx, rq, act, b, key, "", prefix)
}

// ownerOf returns the S3 owner of a bucket: its creating key, or the
// admin key's identity.
func ownerOf(b store.BucketInfo, names func(string) string) owner {
	id := b.Owner
	if id == "" {
		id = access.AdminKeyID
	}
	return owner{ID: id, DisplayName: names(id)}
}

// owner is S3's Owner element.
type owner struct {
	ID          string `xml:"ID"`
	DisplayName string `xml:"DisplayName"`
}

// displayName returns the name of an access key id (the id when unknown).
func (h *Handler) displayName(id string) string {
	return h.auth.KeyName(id)
}

// Presigned implements httpapi.S3Handler: the principal of a valid
// presigned GET or HEAD that signs only the host and carries only X-Amz-*
// parameters (no response-* overrides nor sub-resources), for the native
// fast path to serve. Anything else, an invalid signature included, is
// !ok and left to ServeHTTP, which answers it as S3 does.
func (h *Handler) Presigned(method, host, path, rawQuery string) (access.Principal, bool) {
	if h.cfg.Domain != "" && bucketFromHost(host, h.cfg.Domain) != "" {
		return access.Principal{}, false
	}
	signedHostOnly := false
	for rest := rawQuery; rest != ""; {
		var kv string
		kv, rest, _ = strings.Cut(rest, "&")
		if !strings.HasPrefix(kv, "X-Amz-") {
			return access.Principal{}, false
		}
		if kv == "X-Amz-SignedHeaders=host" {
			signedHostOnly = true
		}
	}
	if !signedHostOnly {
		return access.Principal{}, false
	}
	// A bucket with a policy is served by ServeHTTP, which evaluates it.
	if bucket, _, _ := strings.Cut(strings.TrimPrefix(path, "/"), "/"); h.bucketPolicy(context.Background(), bucket) != nil {
		return access.Principal{}, false
	}
	var kb [512]byte
	key := presignKey(kb[:0], method, host, path, rawQuery)
	id, ok := h.presigned.get(key, h.now())
	if !ok {
		r := &http.Request{Method: method, Host: host, URL: &url.URL{Path: path, RawQuery: rawQuery}, Header: http.Header{}}
		res, err := h.sig.Verify(r)
		if err != nil || !res.Presigned {
			return access.Principal{}, false
		}
		id = res.AccessKeyID
		h.presigned.put(key, id, res.Expires)
	}
	p, err := h.auth.PrincipalFor(id)
	if err != nil {
		return access.Principal{}, false
	}
	return p, true
}

// HostBucket implements httpapi.S3Handler: the bucket a virtual-hosted
// Host names ("" without --s3-domain or for another host).
func (h *Handler) HostBucket(host string) string {
	if h.cfg.Domain == "" {
		return ""
	}
	return bucketFromHost(host, h.cfg.Domain)
}
