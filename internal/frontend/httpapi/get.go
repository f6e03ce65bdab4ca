package httpapi

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cairn-fs/cairn/internal/access"
	"github.com/cairn-fs/cairn/internal/frontend/httpapi/fastpath"
	"github.com/cairn-fs/cairn/internal/store"
)

// readHeaders are the request headers a GET or HEAD of a file depends on,
// each the first value of its field ("" when absent). Both the net/http
// handler and the fast path's planner (fastplan.go) fill one, so that the
// decisions made from them (openRead, planObject) have one
// implementation.
type readHeaders struct {
	authorization     string
	rangeSpec         string
	ifRange           string
	ifMatch           string
	ifNoneMatch       string
	ifModifiedSince   string
	ifUnmodifiedSince string
}

// readHeadersOf picks the readHeaders out of a net/http header map.
func readHeadersOf(h http.Header) readHeaders {
	return readHeaders{
		authorization:     headerValue(h, "Authorization"),
		rangeSpec:         headerValue(h, "Range"),
		ifRange:           headerValue(h, "If-Range"),
		ifMatch:           headerValue(h, "If-Match"),
		ifNoneMatch:       headerValue(h, "If-None-Match"),
		ifModifiedSince:   headerValue(h, "If-Modified-Since"),
		ifUnmodifiedSince: headerValue(h, "If-Unmodified-Since"),
	}
}

// readStep is what openRead decided a GET or HEAD of a target leads to.
type readStep uint8

const (
	readFailed   readStep = iota // answer readResult.err
	readRedirect                 // 301 to the path with a slash appended
	readDir                      // a directory (trailing slash): index.html or a listing
	readSidecar                  // not found, but may be a checksum sidecar; else answer err
	readObject                   // readResult.obj is open: plan and send it, then Close it
)

// readResult is the outcome of openRead.
type readResult struct {
	step      readStep
	principal access.Principal
	bucket    store.BucketInfo
	obj       store.Object // set for readObject only
	err       error        // set for readFailed and readSidecar
}

// ConsistentHeader asks, with the value "1" or "true", for a consistent
// (linearizable) read, as the query parameter "consistent" does.
const ConsistentHeader = "X-Cairn-Consistent"

// errNoReadIndex is the public message of a consistent read whose barrier
// failed (a 503: the error also wraps store.ErrUnavailable).
var errNoReadIndex = errors.New("consistent read unavailable: no leader confirmed the read index in time; retry, or read without consistent=1")

// consistentRequested reports whether a GET or HEAD asks for a consistent
// read: "?consistent=1" (or "true"), or the header X-Cairn-Consistent with
// one of those values. The fast path hands every request that names the
// parameter or the header to net/http (fastConsistent, fastpath.Parse),
// so this is the only place that decides.
func consistentRequested(r *http.Request) bool {
	if truthy(headerValue(r.Header, ConsistentHeader)) {
		return true
	}
	return r.URL.RawQuery != "" && truthy(r.URL.Query().Get("consistent"))
}

func truthy(v string) bool { return v == "1" || strings.EqualFold(v, "true") }

// fastConsistent reports whether a raw query string names the parameter
// "consistent" (with any value), as net/http's URL.Query decodes it.
func fastConsistent(rawQuery []byte) bool {
	if !bytes.Contains(rawQuery, []byte("consistent")) && bytes.IndexByte(rawQuery, '%') < 0 {
		return false
	}
	q, _ := url.ParseQuery(string(rawQuery))
	return q.Has("consistent")
}

// openRead authenticates, looks up the bucket, authorizes and opens the
// file of a GET or HEAD of t, in that order (which decides which error a
// request with several faults gets). It never writes a response. For a
// consistent read (ctx marked by store.WithConsistent) it runs the store's
// read barrier once the caller is authenticated, before any lookup.
func (s *Server) openRead(ctx context.Context, authorization string, t target) readResult {
	p, err := s.auth.Authenticate(authorization)
	if err != nil {
		return readResult{principal: p, err: err}
	}
	return s.openReadAs(ctx, p, t)
}

// openReadAs is openRead for a principal authenticated already (a
// presigned S3 URL on the fast path).
func (s *Server) openReadAs(ctx context.Context, p access.Principal, t target) readResult {
	res := readResult{principal: p}
	if !p.Admin && (t.path == uploadsDir || strings.HasPrefix(t.path, uploadsDir+"/")) {
		// Unfinished S3 multipart uploads are not the bucket's content.
		res.err = fmt.Errorf("%w: %s", store.ErrNotFound, t.path)
		return res
	}
	if t.bucket == "" {
		res.err = fmt.Errorf("%w: no bucket in path", store.ErrNoBucket)
		return res
	}
	if store.IsConsistent(ctx) {
		if bs, ok := s.store.(store.Barrierer); ok {
			if err := bs.Barrier(ctx); err != nil {
				if errors.Is(err, store.ErrUnavailable) {
					err = fmt.Errorf("%w: %w", errNoReadIndex, err)
				}
				res.err = err
				return res
			}
		}
	}
	b, err := s.store.Bucket(ctx, t.bucket)
	if err != nil {
		res.err = err
		return res
	}
	res.bucket = b
	act := access.ActionRead
	if t.slash {
		act = access.ActionList
	}
	if err := s.auth.Authorize(p, act, bucketResource(b, t.path)); err != nil {
		res.err = err
		return res
	}
	switch {
	case t.path == "" && !t.slash:
		res.step = readRedirect
		return res
	case t.slash:
		res.step = readDir
		return res
	}
	obj, err := s.store.Open(ctx, t.bucket, t.path)
	if err != nil {
		switch {
		case errors.Is(err, store.ErrIsDir):
			res.step = readRedirect
		case errors.Is(err, store.ErrNotFound) && b.ChecksumSidecars && sidecarBase(t.path) != "":
			res.step, res.err = readSidecar, err
		default:
			res.err = err
		}
		return res
	}
	if acl := obj.Info().Xattrs[xattrS3ACL]; len(acl) > 0 && (b.Public || b.ACL != "") && !p.Admin {
		// An object whose own S3 ACL (x-amz-acl) is narrower than its
		// bucket's public-read, public-read-write or authenticated-read.
		r := bucketResource(b, t.path)
		r.PublicRead, r.AuthenticatedRead = false, string(acl) == "authenticated-read"
		if string(acl) == "public-read" || string(acl) == "public-read-write" {
			r.PublicRead = true
		}
		if err := s.auth.Authorize(p, act, r); err != nil {
			obj.Close()
			res.err = err
			return res
		}
	}
	res.step, res.obj = readObject, obj
	return res
}

// xattrS3ACL is the extended attribute of an object's S3 canned ACL, and
// uploadsDir the directory of a bucket that holds unfinished S3 multipart
// uploads (internal/frontend/s3).
const (
	xattrS3ACL = "user.cairn.s3.acl"
	uploadsDir = ".cairn-uploads"
)

// bucketResource is the access.Resource of path in bucket b: its public
// flag, owner, and S3 canned ACL.
func bucketResource(b store.BucketInfo, path string) access.Resource {
	return access.Resource{Bucket: b.Name, Path: path, PublicRead: b.Public, Owner: b.Owner,
		AuthenticatedRead: b.ACL == "authenticated-read", PublicWrite: b.ACL == "public-read-write"}
}

// serveRead answers GET and HEAD of files and directories.
func (s *Server) serveRead(rs *reqState, t target) {
	r := rs.req
	if consistentRequested(r) {
		// Every store call of this request (serveDir, serveSidecar too)
		// reads past the caches, after openRead's barrier.
		r = r.WithContext(store.WithConsistent(r.Context()))
		rs.req = r
	}
	res := s.openRead(r.Context(), headerValue(r.Header, "Authorization"), t)
	rs.principal = res.principal
	switch res.step {
	case readFailed:
		s.writeError(rs, res.err)
	case readRedirect:
		s.redirectSlash(rs)
	case readDir:
		s.serveDir(rs, res.bucket, t)
	case readSidecar:
		if !s.serveSidecar(rs, res.bucket, t) {
			s.writeError(rs, res.err)
		}
	case readObject:
		s.serveObject(rs, res.bucket, res.obj)
		_ = res.obj.Close()
	}
}

// redirectSlash answers 301 to the request path with a slash appended.
func (s *Server) redirectSlash(rs *reqState) {
	u := rs.req.URL
	loc := u.EscapedPath() + "/"
	if u.RawQuery != "" {
		loc += "?" + u.RawQuery
	}
	h := rs.w.Header()
	h[hdrLocation] = []string{loc}
	h[hdrContentLength] = []string{"0"}
	rs.w.WriteHeader(http.StatusMovedPermanently)
}

// Fields of objectPlan.vals, in order.
const (
	planETag         = iota // "\"etag\"" or empty
	planLastModified        // HTTP date or empty
	planReprDigest          // "sha-256=:...:" or empty
	planLength              // Content-Length (not for 304, 412, 416)
	planRange               // Content-Range of a 206, else empty
	planFields
)

// objectPlan is the answer to a GET or HEAD of an open file, as decided by
// planObject: the status and the header values, which each front end
// encodes its own way.
type objectPlan struct {
	status       int   // 200, 206, 304 (not modified), 412 or 416
	off, n       int64 // the byte range to send (200 and 206)
	size         int64 // the file's size
	contentType  string
	cacheControl string // the bucket's, or ""
	// vals holds the generated header values back to back; field i is
	// vals[cuts[i]:cuts[i+1]].
	vals []byte
	cuts [planFields + 1]int
}

// field returns generated header value i (planETag...), empty if absent.
func (p *objectPlan) field(i int) []byte { return p.vals[p.cuts[i]:p.cuts[i+1]] }

// rangeError is the error of a 416 answer.
func (p *objectPlan) rangeError(spec string) error {
	return fmt.Errorf("range %q not satisfiable for %d bytes", spec, p.size)
}

// planObject evaluates the conditional and Range headers of a GET or HEAD
// of a file of bucket b and builds the header values into buf (reused as
// the plan's vals; it does not allocate when buf has room, about 200 bytes).
// The semantics: If-Match / If-Unmodified-Since → 412, If-None-Match /
// If-Modified-Since → 304 (RFC 9110 §13.2.2), one satisfiable range → 206,
// an unsatisfiable one → 416, anything else (no, malformed or several
// ranges, or a stale If-Range) → 200 with the whole file.
func planObject(b store.BucketInfo, info store.ObjectInfo, h *readHeaders, buf []byte) objectPlan {
	p := objectPlan{size: info.Size, cacheControl: b.CacheControl}
	if info.ETag != "" {
		buf = append(buf, '"')
		buf = append(buf, info.ETag...)
		buf = append(buf, '"')
	}
	p.cuts[planLastModified] = len(buf)
	if !info.ModTime.IsZero() {
		buf = info.ModTime.UTC().AppendFormat(buf, http.TimeFormat)
	}
	p.cuts[planReprDigest] = len(buf)
	buf = appendReprDigest(buf, info.SHA256)
	p.cuts[planLength] = len(buf)

	finish := func(status int) objectPlan {
		for i := planRange; i <= planFields; i++ {
			if p.cuts[i] < p.cuts[i-1] {
				p.cuts[i] = p.cuts[i-1]
			}
		}
		p.status, p.vals = status, buf
		return p
	}
	switch evalConditions(h, info.ETag, info.ModTime) {
	case condPreconditionFailed:
		return finish(http.StatusPreconditionFailed)
	case condNotModified:
		return finish(http.StatusNotModified)
	}

	p.off, p.n = 0, info.Size
	status := http.StatusOK
	if h.rangeSpec != "" && ifRangeAllows(h.ifRange, info.ETag, info.ModTime) {
		br, kind := parseRange(h.rangeSpec, info.Size)
		switch kind {
		case rangeOne:
			p.off, p.n, status = br.off, br.n, http.StatusPartialContent
		case rangeUnsatisfiable:
			return finish(http.StatusRequestedRangeNotSatisfiable)
		}
	}
	buf = strconv.AppendInt(buf, p.n, 10)
	p.cuts[planRange] = len(buf)
	if status == http.StatusPartialContent {
		buf = append(buf, "bytes "...)
		buf = strconv.AppendInt(buf, p.off, 10)
		buf = append(buf, '-')
		buf = strconv.AppendInt(buf, p.off+p.n-1, 10)
		buf = append(buf, '/')
		buf = strconv.AppendInt(buf, info.Size, 10)
	}
	p.cuts[planFields] = len(buf)
	p.contentType = info.ContentType
	if p.contentType == "" {
		p.contentType = contentTypeByName(info.Path)
	}
	return finish(status)
}

// probeBody reads the byte of obj at off: a body whose first blob no
// replica can serve (or a corrupt one) fails here, before any header is
// sent. For a local blob it is one small read from the page cache; for a
// remote one, a round trip more (the blob cache then usually serves the
// body).
func probeBody(obj store.Object, off int64) error {
	var one [1]byte
	if n, err := obj.ReadAt(one[:], off); n < 1 {
		if err == nil || errors.Is(err, io.EOF) {
			err = fmt.Errorf("%w: short read", store.ErrCorrupt)
		}
		return err
	}
	return nil
}

// smallBodies holds the buffers serveObject reads small bodies into.
var smallBodies = sync.Pool{New: func() any { b := make([]byte, fastpath.MaxBody); return &b }}

// serveObject answers GET or HEAD of an open file: conditionals, range and
// headers from planObject, then the body through WriteRangeTo. This is the
// hot path of the net/http handler: header values are built in one scratch
// buffer and converted to one string, and header slices share one backing
// array.
func (s *Server) serveObject(rs *reqState, b store.BucketInfo, obj store.Object) {
	r := rs.req
	rh := readHeadersOf(r.Header)
	p := planObject(b, obj.Info(), &rh, rs.scratch[:0])
	h := rs.w.Header()
	switch p.status {
	case http.StatusPreconditionFailed:
		s.writeErrorStatus(rs, http.StatusPreconditionFailed, "PreconditionFailed", store.ErrPrecondition)
		return
	case http.StatusRequestedRangeNotSatisfiable:
		h[hdrContentRange] = []string{"bytes */" + strconv.FormatInt(p.size, 10)}
		s.writeErrorStatus(rs, http.StatusRequestedRangeNotSatisfiable, "InvalidRange", p.rangeError(rh.rangeSpec))
		return
	}
	vals := string(p.vals)
	field := func(i int) string { return vals[p.cuts[i]:p.cuts[i+1]] }
	hv := make([]string, 0, 8)
	set := func(k, v string) {
		hv = append(hv, v)
		h[k] = hv[len(hv)-1 : len(hv) : len(hv)]
	}
	if p.status == http.StatusNotModified {
		if v := field(planETag); v != "" {
			set(hdrETag, v)
		}
		if v := field(planLastModified); v != "" {
			set(hdrLastModified, v)
		}
		if p.cacheControl != "" {
			set(hdrCacheControl, p.cacheControl)
		}
		rs.w.WriteHeader(http.StatusNotModified)
		return
	}
	// A small body is read before the headers go out, so that a failed
	// read (no reachable replica, a corrupt needle) is an error answer
	// rather than a 200 with a cut body (as on the fast path).
	var body []byte
	if r.Method != http.MethodHead && p.n > 0 && p.n <= fastpath.MaxBody {
		bp := smallBodies.Get().(*[]byte)
		defer smallBodies.Put(bp)
		body = (*bp)[:p.n]
		if m, err := obj.ReadAt(body, p.off); m < len(body) {
			if err == nil || errors.Is(err, io.EOF) {
				err = fmt.Errorf("%w: short read", store.ErrCorrupt)
			}
			s.logBodyError(r.Context(), r.URL.Path, err)
			s.writeError(rs, err)
			return
		}
	}
	if body == nil && r.Method != http.MethodHead && p.n > 0 {
		// A large body: its first byte is read before the headers go out
		// (see probeBody).
		if err := probeBody(obj, p.off); err != nil {
			s.logBodyError(r.Context(), r.URL.Path, err)
			s.writeError(rs, err)
			return
		}
	}
	set(hdrContentLength, field(planLength))
	set(hdrContentType, p.contentType)
	set(hdrAcceptRanges, "bytes")
	if v := field(planETag); v != "" {
		set(hdrETag, v)
	}
	if v := field(planLastModified); v != "" {
		set(hdrLastModified, v)
	}
	if v := field(planReprDigest); v != "" {
		set(hdrReprDigest, v)
	}
	if v := field(planRange); v != "" {
		set(hdrContentRange, v)
	}
	if p.cacheControl != "" {
		set(hdrCacheControl, p.cacheControl)
	}
	rs.w.WriteHeader(p.status)
	if r.Method == http.MethodHead || p.n == 0 {
		return
	}
	if body != nil {
		_, _ = rs.dl.Write(body) // a write error is the client's going away
		return
	}
	if _, err := obj.WriteRangeTo(&rs.dl, p.off, p.n); err != nil {
		// Headers are out: the connection is closed by net/http because
		// the body is short.
		s.logBodyError(r.Context(), r.URL.Path, err)
	}
}

// logBodyError logs a response body that failed after its headers were
// sent; a store fault is worth an error line, a client gone a debug one.
func (s *Server) logBodyError(ctx context.Context, path string, err error) {
	lvl := slog.LevelDebug
	if errors.Is(err, store.ErrCorrupt) || errors.Is(err, store.ErrUnavailable) {
		lvl = slog.LevelError
	}
	s.log.LogAttrs(ctx, lvl, "response body failed", slog.String("path", path), slog.Any("err", err))
}

// appendReprDigest appends "sha-256=:BASE64:" for a hex SHA-256, or nothing
// if hexSum is not one.
func appendReprDigest(buf []byte, hexSum string) []byte {
	var sum [32]byte
	if len(hexSum) != 64 {
		return buf
	}
	if _, err := hex.Decode(sum[:], []byte(hexSum)); err != nil {
		return buf
	}
	buf = append(buf, "sha-256=:"...)
	buf = base64.StdEncoding.AppendEncode(buf, sum[:])
	return append(buf, ':')
}

// contentTypeByName guesses a type from the file extension.
func contentTypeByName(name string) string {
	if ext := path.Ext(name); ext != "" {
		if ct := mime.TypeByExtension(ext); ct != "" {
			return ct
		}
	}
	return "application/octet-stream"
}

// serveSidecar answers NAME.md5 / NAME.sha256 from NAME's stored digests,
// reporting false (nothing written) if NAME is not a file with that digest.
func (s *Server) serveSidecar(rs *reqState, b store.BucketInfo, t target) bool {
	base := sidecarBase(t.path)
	if base == "" {
		return false
	}
	info, err := s.store.Stat(rs.req.Context(), t.bucket, base)
	if err != nil || info.IsDir {
		return false
	}
	body, ok := sidecarBody(info, strings.HasSuffix(t.path, ".md5"))
	if !ok {
		return false
	}
	h := rs.w.Header()
	h[hdrContentType] = []string{"text/plain; charset=utf-8"}
	h[hdrContentLength] = []string{strconv.Itoa(len(body))}
	if !info.ModTime.IsZero() {
		h[hdrLastModified] = []string{info.ModTime.UTC().Format(http.TimeFormat)}
	}
	if b.CacheControl != "" {
		h[hdrCacheControl] = []string{b.CacheControl}
	}
	rs.w.WriteHeader(http.StatusOK)
	if rs.req.Method != http.MethodHead {
		_, _ = rs.dl.Write([]byte(body))
	}
	return true
}

// sidecarBody is the body of the checksum sidecar of the file info, as
// md5sum and sha256sum print it ("SUM  NAME\n"), or false when the file
// has no such digest (md5: its ETag, when it is one).
func sidecarBody(info store.ObjectInfo, md5 bool) (string, bool) {
	sum := info.SHA256
	if md5 {
		sum = info.ETag
	}
	if !isHex(sum) || (md5 && len(sum) != 32) || (!md5 && len(sum) != 64) {
		return "", false
	}
	return sum + "  " + path.Base(info.Path) + "\n", true
}

// sidecarBase returns NAME for a path NAME.md5 or NAME.sha256 that could be
// a checksum sidecar, else "".
func sidecarBase(p string) string {
	var base string
	switch {
	case strings.HasSuffix(p, ".md5"):
		base = strings.TrimSuffix(p, ".md5")
	case strings.HasSuffix(p, ".sha256"):
		base = strings.TrimSuffix(p, ".sha256")
	default:
		return ""
	}
	if base == "" || strings.HasSuffix(base, "/") {
		return ""
	}
	return base
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return s != ""
}

// serveDir answers GET/HEAD of DIR/: index.html unless the client asks for
// JSON, else a listing.
func (s *Server) serveDir(rs *reqState, b store.BucketInfo, t target) {
	r := rs.req
	ctx := r.Context()
	wantJSON := acceptsJSON(r.Header.Get("Accept"))
	if !wantJSON {
		obj, err := s.store.Open(ctx, t.bucket, joinPath(t.path, "index.html"))
		if err == nil {
			s.serveObject(rs, b, obj)
			_ = obj.Close()
			return
		}
		if !errors.Is(err, store.ErrNotFound) && !errors.Is(err, store.ErrIsDir) {
			s.writeError(rs, err)
			return
		}
	}
	if t.path != "" {
		info, err := s.store.Stat(ctx, t.bucket, t.path)
		if err != nil {
			s.writeError(rs, err)
			return
		}
		if !info.IsDir {
			s.writeError(rs, fmt.Errorf("%w: %s is a file", store.ErrNotFound, t.path))
			return
		}
	}
	lp, err := parseListParams(r.URL.Query())
	if err != nil {
		s.writeError(rs, err)
		return
	}
	dirPrefix := ""
	if t.path != "" {
		dirPrefix = t.path + "/"
	}
	opts := store.ListOptions{Prefix: dirPrefix + lp.prefix, StartAfter: lp.after, Limit: lp.limit, Delimiter: "/"}
	if lp.recursive {
		opts.Delimiter = ""
	}
	res, err := s.store.List(ctx, t.bucket, opts)
	if err != nil {
		s.writeError(rs, err)
		return
	}
	if res.Entries == nil {
		res.Entries = []store.ObjectInfo{}
	}
	h := rs.w.Header()
	h[hdrCacheControl] = []string{"no-cache"}
	if wantJSON {
		h[hdrContentType] = []string{"application/json"}
		h["Vary"] = []string{"Accept"}
		rs.w.WriteHeader(http.StatusOK)
		if r.Method != http.MethodHead {
			_ = json.NewEncoder(&rs.dl).Encode(res)
		}
		return
	}
	h[hdrContentType] = []string{"text/html; charset=utf-8"}
	h["Vary"] = []string{"Accept"}
	h["X-Content-Type-Options"] = []string{"nosniff"}
	rs.w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		if err := s.listing.Execute(&rs.dl, listingPage(t, dirPrefix, lp, res)); err != nil {
			s.log.Debug("listing write failed", slog.Any("err", err))
		}
	}
}

func joinPath(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

const listingTemplate = `<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>Index of {{.Dir}}</title>
<style>body{font-family:sans-serif}td{padding:0 1em 0 0}td.n{text-align:right}</style></head>
<body><h1>Index of {{.Dir}}</h1>
<table>
<tr><th>Name</th><th>Size</th><th>Modified</th></tr>
{{if .Parent}}<tr><td><a href="../">../</a></td><td></td><td></td></tr>
{{end}}{{range .Rows}}<tr><td><a href="{{.Href}}">{{.Name}}</a></td><td class="n">{{.Size}}</td><td>{{.Mod}}</td></tr>
{{end}}</table>
{{if .Next}}<p><a href="{{.Next}}">Next page</a></p>
{{end}}</body></html>
`

type listingRow struct {
	Name, Href, Size, Mod string
}

type listingData struct {
	Dir    string
	Parent bool
	Rows   []listingRow
	Next   string
}

// listingPage builds the HTML listing's data. Hrefs are relative, start
// with "./" (so that a name like "javascript:x" stays a path) and have
// every segment percent-escaped; the template HTML-escapes the rest.
func listingPage(t target, dirPrefix string, lp listParams, res store.ListResult) listingData {
	d := listingData{Dir: "/" + t.bucket + "/" + dirPrefix, Parent: t.path != ""}
	for _, p := range res.CommonPrefixes {
		name := strings.TrimPrefix(p, dirPrefix)
		d.Rows = append(d.Rows, listingRow{Name: name, Href: "./" + escapeSegments(name), Size: "-"})
	}
	for _, e := range res.Entries {
		name := strings.TrimPrefix(e.Path, dirPrefix)
		row := listingRow{Name: name, Href: "./" + escapeSegments(name), Size: strconv.FormatInt(e.Size, 10)}
		if e.IsDir {
			row.Name += "/"
			row.Href += "/"
			row.Size = "-"
		}
		if !e.ModTime.IsZero() {
			row.Mod = e.ModTime.UTC().Format(time.DateTime)
		}
		d.Rows = append(d.Rows, row)
	}
	if res.Truncated && res.NextToken != "" {
		q := url.Values{"after": {res.NextToken}}
		if lp.limit != defaultListLimit {
			q.Set("limit", strconv.Itoa(lp.limit))
		}
		if lp.recursive {
			q.Set("recursive", "1")
		}
		if lp.prefix != "" {
			q.Set("prefix", lp.prefix)
		}
		d.Next = "?" + q.Encode()
	}
	return d
}

// escapeSegments percent-escapes each segment of a slash-separated path.
func escapeSegments(p string) string {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.Join(segs, "/")
}
