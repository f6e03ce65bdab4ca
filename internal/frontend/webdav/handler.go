package webdav

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	xwebdav "golang.org/x/net/webdav"

	"github.com/cairn-fs/cairn/internal/access"
	"github.com/cairn-fs/cairn/internal/store"
)

// Prefix is where buckets are served: /_dav/BUCKET/...
const Prefix = "/_dav/"

// maxXMLBody bounds the XML body of a PROPFIND or PROPPATCH.
const maxXMLBody = 1 << 20

var emptyPrefixNS = regexp.MustCompile(`xmlns:[A-Za-z_][-A-Za-z0-9._]*\s*=\s*(""|'')`)

// Config configures a Handler.
type Config struct {
	// Store is the file store. Required.
	Store store.Store
	// Auth authenticates Basic credentials (an access key's id and secret,
	// or the admin key as the password) and authorizes. Required.
	Auth *access.Authorizer
	// Locks is the cluster's lock system. Required.
	Locks *Locks
	// Prefix is the URL prefix of the buckets; default Prefix. A listener
	// of its own (--webdav-listen) serves them at "/".
	Prefix string
	// Logger receives failed requests. Default: discard.
	Logger *slog.Logger
}

// Handler serves buckets over WebDAV (x/net/webdav over the store). Safe
// for concurrent use.
type Handler struct {
	cfg      Config
	mu       sync.Mutex
	handlers map[string]*xwebdav.Handler // by bucket
}

// New returns a Handler.
func New(cfg Config) (*Handler, error) {
	if cfg.Store == nil || cfg.Auth == nil || cfg.Locks == nil {
		return nil, errors.New("webdav: Store, Auth and Locks are required")
	}
	if cfg.Prefix == "" {
		cfg.Prefix = Prefix
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Handler{cfg: cfg, handlers: map[string]*xwebdav.Handler{}}, nil
}

func (h *Handler) bucketHandler(bucket string) *xwebdav.Handler {
	h.mu.Lock()
	defer h.mu.Unlock()
	if x, ok := h.handlers[bucket]; ok {
		return x
	}
	fsys := &fileSystem{st: h.cfg.Store, bucket: bucket}
	x := &xwebdav.Handler{
		Prefix:     strings.TrimSuffix(h.cfg.Prefix, "/") + "/" + bucket,
		FileSystem: fsys,
		LockSystem: bucketLocks{h.cfg.Locks, bucket, fsys},
		Logger: func(r *http.Request, err error) {
			if err != nil && !errors.Is(err, xwebdav.ErrConfirmationFailed) {
				h.cfg.Logger.Debug("webdav", "method", r.Method, "path", r.URL.Path, "err", err)
			}
		},
	}
	h.handlers[bucket] = x
	return x
}

// actionOf is what a WebDAV method does, for the grants.
func actionOf(method string) access.Action {
	switch method {
	case "GET", "HEAD", "OPTIONS", "PROPFIND":
		return access.ActionRead
	case "DELETE":
		return access.ActionDelete
	}
	return access.ActionWrite // PUT, MKCOL, PROPPATCH, COPY, MOVE, LOCK, UNLOCK
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(r.URL.Path, strings.TrimSuffix(h.cfg.Prefix, "/"))
	bucket, p, _ := strings.Cut(strings.TrimPrefix(rest, "/"), "/")
	if bucket == "" {
		http.Error(w, "WebDAV serves buckets: /_dav/BUCKET/", http.StatusNotFound)
		return
	}
	b, err := h.cfg.Store.Bucket(r.Context(), bucket)
	if err != nil {
		http.Error(w, "no such bucket", http.StatusNotFound)
		return
	}
	if r.Method == "PROPFIND" {
		// Depth: infinity walks the whole tree: refused, as RFC 4918 allows.
		if d := r.Header.Get("Depth"); d == "" || strings.EqualFold(d, "infinity") {
			w.Header().Set("Content-Type", "application/xml; charset=utf-8")
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprint(w, `<?xml version="1.0" encoding="utf-8"?>`+"\n"+`<D:error xmlns:D="DAV:"><D:propfind-finite-depth/></D:error>`)
			return
		}
	}
	var xmlBody []byte
	if r.Method == "PROPFIND" || r.Method == "PROPPATCH" {
		// encoding/xml accepts a prefix bound to the empty namespace name
		// (xmlns:foo=""), which Namespaces in XML forbids: refuse it.
		body, err := io.ReadAll(io.LimitReader(r.Body, maxXMLBody+1))
		if err != nil || len(body) > maxXMLBody {
			http.Error(w, "request body too large or unreadable", http.StatusBadRequest)
			return
		}
		if emptyPrefixNS.Match(body) {
			http.Error(w, "invalid XML namespace declaration: a prefix bound to the empty name", http.StatusBadRequest)
			return
		}
		r.Body, xmlBody = io.NopCloser(bytes.NewReader(body)), body
	}
	pr, err := h.principal(r)
	if err != nil {
		h.deny(w, err)
		return
	}
	res := access.Resource{Bucket: b.Name, Path: strings.Trim(p, "/"), PublicRead: b.Public, Owner: b.Owner,
		AuthenticatedRead: b.ACL == "authenticated-read", PublicWrite: b.ACL == "public-read-write"}
	if err := h.cfg.Auth.Authorize(pr, actionOf(r.Method), res); err != nil {
		h.deny(w, err)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		// The changes it makes name WebDAV and the key (the trash records it).
		r = r.WithContext(store.WithOrigin(r.Context(), "webdav", pr.Name))
	}
	if r.Method == "COPY" || r.Method == "MOVE" {
		// The destination must be writable too, and in the same bucket.
		if dst, ok := destination(r, h.cfg.Prefix); ok {
			db, dp, _ := strings.Cut(dst, "/")
			if db != bucket {
				http.Error(w, "COPY and MOVE stay inside a bucket", http.StatusBadGateway)
				return
			}
			res.Path, res.PublicRead, res.AuthenticatedRead = strings.Trim(dp, "/"), false, false
			if err := h.cfg.Auth.Authorize(pr, access.ActionWrite, res); err != nil {
				h.deny(w, err)
				return
			}
		}
	}
	if r.Method == "LOCK" && r.ContentLength != 0 {
		body, err := io.ReadAll(io.LimitReader(r.Body, maxXMLBody+1))
		if err != nil || len(body) > maxXMLBody {
			http.Error(w, "request body too large or unreadable", http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		if li, ok := parseSharedLock(body); ok {
			h.lockShared(w, r, bucket, p, li)
			return
		}
	}
	if r.Method == http.MethodPut && r.ContentLength >= 0 {
		r = r.WithContext(context.WithValue(r.Context(), bodySizeKey{}, r.ContentLength))
	}
	if r.Method == http.MethodPut && strings.TrimSpace(r.Header.Get("If-None-Match")) == "*" {
		// Create only: refused in the log if the file exists, so that
		// two clients on two nodes never both create it (x/net/webdav
		// would answer 405: the answer is 412).
		fsys := &fileSystem{st: h.cfg.Store, bucket: bucket}
		if _, err := fsys.Stat(r.Context(), "/"+strings.Trim(p, "/")); err == nil {
			http.Error(w, "Precondition Failed: the resource exists (If-None-Match: *)", http.StatusPreconditionFailed)
			return
		}
		ex := &exclusivePut{}
		r = r.WithContext(context.WithValue(r.Context(), exclusiveKey{}, ex))
		w = &preconditionWriter{ResponseWriter: w, ex: ex}
	}
	x := h.bucketHandler(bucket)
	if r.Method == "PROPFIND" && r.Header.Get("Depth") == "1" &&
		propfindMembers(w, r, x, &fileSystem{st: h.cfg.Store, bucket: bucket}, strings.Trim(p, "/"), xmlBody) {
		return
	}
	x.ServeHTTP(w, r)
}

// preconditionWriter answers 412 instead of x/net/webdav's 405 when an
// exclusive PUT found the file created meanwhile.
type preconditionWriter struct {
	http.ResponseWriter
	ex      *exclusivePut
	rewrote bool
}

func (p *preconditionWriter) WriteHeader(code int) {
	if code == http.StatusMethodNotAllowed && p.ex.existed.Load() {
		p.rewrote = true
		p.ResponseWriter.Header().Set("Content-Type", "text/plain; charset=utf-8")
		p.ResponseWriter.WriteHeader(http.StatusPreconditionFailed)
		p.ResponseWriter.Write([]byte("Precondition Failed: the resource exists (If-None-Match: *)\n"))
		return
	}
	p.ResponseWriter.WriteHeader(code)
}

func (p *preconditionWriter) Write(b []byte) (int, error) {
	if p.rewrote {
		return len(b), nil // x/net/webdav's "Method Not Allowed" text
	}
	return p.ResponseWriter.Write(b)
}

// lockInfo is a LOCK request's body.
type lockInfo struct {
	XMLName   xml.Name `xml:"DAV: lockinfo"`
	LockScope struct {
		Shared    *struct{} `xml:"DAV: shared"`
		Exclusive *struct{} `xml:"DAV: exclusive"`
	} `xml:"DAV: lockscope"`
	Owner struct {
		InnerXML string `xml:",innerxml"`
	} `xml:"DAV: owner"`
}

// parseSharedLock reports whether a LOCK body asks for a shared lock.
func parseSharedLock(body []byte) (lockInfo, bool) {
	var li lockInfo
	if err := xml.Unmarshal(body, &li); err != nil {
		return li, false
	}
	return li, li.LockScope.Shared != nil
}

// lockShared answers a LOCK asking for a shared write lock (x/net/webdav
// supports exclusive locks only): the lock goes to the cluster's log like
// any other; shared locks coexist, an exclusive one conflicts with them.
func (h *Handler) lockShared(w http.ResponseWriter, r *http.Request, bucket, p string, li lockInfo) {
	ctx := r.Context()
	depth := r.Header.Get("Depth")
	zeroDepth := depth == "0"
	if depth != "" && depth != "0" && !strings.EqualFold(depth, "infinity") {
		http.Error(w, "invalid Depth", http.StatusBadRequest)
		return
	}
	duration := time.Duration(-1)
	if t := strings.TrimSpace(strings.Split(r.Header.Get("Timeout"), ",")[0]); strings.HasPrefix(t, "Second-") {
		if n, err := strconv.ParseInt(strings.TrimPrefix(t, "Second-"), 10, 64); err == nil && n >= 0 {
			duration = time.Duration(n) * time.Second
		}
	}
	fsys := &fileSystem{st: h.cfg.Store, bucket: bucket}
	name := "/" + strings.Trim(p, "/")
	created := false
	if _, err := fsys.Stat(ctx, name); err != nil {
		// Locking an unmapped URL makes an empty resource (RFC 4918 7.3).
		f, err := fsys.OpenFile(ctx, name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			http.Error(w, "cannot create the locked resource", http.StatusConflict)
			return
		}
		if err := f.Close(); err != nil {
			http.Error(w, "cannot create the locked resource", http.StatusInternalServerError)
			return
		}
		created = true
	}
	ls := bucketLocks{h.cfg.Locks, bucket, fsys}
	token, err := h.cfg.Locks.CreateShared(time.Now(), xwebdav.LockDetails{Root: ls.q(name), Duration: duration, OwnerXML: li.Owner.InnerXML, ZeroDepth: zeroDepth})
	if err != nil {
		if errors.Is(err, xwebdav.ErrLocked) {
			http.Error(w, "locked", http.StatusLocked)
			return
		}
		http.Error(w, "lock failed", http.StatusInternalServerError)
		return
	}
	timeout, d := "Infinite", "infinity"
	if duration >= 0 {
		timeout = "Second-" + strconv.FormatInt(int64(duration/time.Second), 10)
	}
	if zeroDepth {
		d = "0"
	}
	root := strings.TrimSuffix(h.cfg.Prefix, "/") + "/" + bucket + name
	w.Header().Set("Lock-Token", "<"+token+">")
	w.Header().Set("Content-Type", "application/xml; charset=utf-8")
	if created {
		w.WriteHeader(http.StatusCreated)
	}
	var esc bytes.Buffer
	_ = xml.EscapeText(&esc, []byte(root))
	fmt.Fprintf(w, `<?xml version="1.0" encoding="utf-8"?>`+"\n"+
		`<D:prop xmlns:D="DAV:"><D:lockdiscovery><D:activelock>`+
		`<D:locktype><D:write/></D:locktype><D:lockscope><D:shared/></D:lockscope>`+
		`<D:depth>%s</D:depth><D:owner>%s</D:owner><D:timeout>%s</D:timeout>`+
		`<D:locktoken><D:href>%s</D:href></D:locktoken><D:lockroot><D:href>%s</D:href></D:lockroot>`+
		`</D:activelock></D:lockdiscovery></D:prop>`, d, li.Owner.InnerXML, timeout, token, esc.String())
}

// principal authenticates a request: Basic with an access key's id and
// secret, or any user name with the admin key as the password; Bearer as
// the native API; none is anonymous (access.Authorizer.Authenticate).
func (h *Handler) principal(r *http.Request) (access.Principal, error) {
	return h.cfg.Auth.Authenticate(r.Header.Get("Authorization"))
}

// deny answers an authentication or authorization failure: 401 asks for
// Basic credentials.
func (h *Handler) deny(w http.ResponseWriter, err error) {
	if errors.Is(err, access.ErrUnauthenticated) {
		w.Header().Set("WWW-Authenticate", `Basic realm="cairn"`)
		http.Error(w, "credentials required", http.StatusUnauthorized)
		return
	}
	http.Error(w, err.Error(), http.StatusForbidden)
}

// destination returns the "bucket/path" of a COPY or MOVE's Destination.
func destination(r *http.Request, prefix string) (string, bool) {
	u, err := url.Parse(r.Header.Get("Destination"))
	if err != nil || u.Path == "" {
		return "", false
	}
	rest, ok := strings.CutPrefix(u.Path, strings.TrimSuffix(prefix, "/")+"/")
	return rest, ok
}

// bucketLocks is one bucket's view of the cluster's locks: names are
// qualified with the bucket, so that buckets do not share lock names.
type bucketLocks struct {
	ls     *Locks
	bucket string
	fs     *fileSystem
}

func (b bucketLocks) q(name string) string {
	if name == "" {
		return ""
	}
	return "/" + b.bucket + slashClean(name)
}

// Confirm checks the If header's ETag conditions against the resource
// here (the lock system knows no content), then the token conditions.
func (b bucketLocks) Confirm(now time.Time, name0, name1 string, conditions ...xwebdav.Condition) (func(), error) {
	var tokens []xwebdav.Condition
	for _, c := range conditions {
		if c.ETag == "" {
			tokens = append(tokens, c)
			continue
		}
		tag := ""
		if info, err := b.fs.Stat(context.Background(), name0); err == nil {
			if e, ok := info.(fileInfo); ok {
				tag, _ = e.ETag(context.Background())
			}
		}
		if (tag == c.ETag) == c.Not {
			return nil, xwebdav.ErrConfirmationFailed
		}
	}
	return b.ls.Confirm(now, b.q(name0), b.q(name1), tokens...)
}

func (b bucketLocks) Create(now time.Time, d xwebdav.LockDetails) (string, error) {
	d.Root = b.q(d.Root)
	return b.ls.Create(now, d)
}

func (b bucketLocks) Refresh(now time.Time, token string, duration time.Duration) (xwebdav.LockDetails, error) {
	d, err := b.ls.Refresh(now, token, duration)
	d.Root = slashClean(strings.TrimPrefix(d.Root, "/"+b.bucket))
	return d, err
}

func (b bucketLocks) Unlock(now time.Time, token string) error { return b.ls.Unlock(now, token) }
