package httpapi

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-fs/cairn/internal/access"
	"github.com/cairn-fs/cairn/internal/store"
)

// serveRead answers GET and HEAD of files and directories.
func (s *Server) serveRead(rs *reqState, t target) {
	r := rs.req
	ctx := r.Context()
	if err := s.authenticate(rs); err != nil {
		s.writeError(rs, err)
		return
	}
	if t.bucket == "" {
		s.writeError(rs, fmt.Errorf("%w: no bucket in path", store.ErrNoBucket))
		return
	}
	b, err := s.store.Bucket(ctx, t.bucket)
	if err != nil {
		s.writeError(rs, err)
		return
	}
	act := access.ActionRead
	if t.slash {
		act = access.ActionList
	}
	if err := s.auth.Authorize(rs.principal, act, access.Resource{Bucket: t.bucket, Path: t.path, PublicRead: b.Public}); err != nil {
		s.writeError(rs, err)
		return
	}
	if t.path == "" && !t.slash {
		s.redirectSlash(rs)
		return
	}
	if t.slash {
		s.serveDir(rs, b, t)
		return
	}
	obj, err := s.store.Open(ctx, t.bucket, t.path)
	if err != nil {
		switch {
		case errors.Is(err, store.ErrIsDir):
			s.redirectSlash(rs)
		case errors.Is(err, store.ErrNotFound) && b.ChecksumSidecars && s.serveSidecar(rs, b, t):
		default:
			s.writeError(rs, err)
		}
		return
	}
	s.serveObject(rs, b, obj)
	_ = obj.Close()
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

// serveObject answers GET or HEAD of an open file: conditionals, range and
// headers, then the body through WriteRangeTo. This is the hot path: header
// values are built in one scratch buffer and converted to one string, and
// header slices share one backing array.
func (s *Server) serveObject(rs *reqState, b store.BucketInfo, obj store.Object) {
	info := obj.Info()
	r := rs.req
	h := rs.w.Header()
	buf := rs.scratch[:0]

	// Validators and digest: [etag | last-modified | repr-digest | length | range].
	var cuts [6]int
	if info.ETag != "" {
		buf = append(buf, '"')
		buf = append(buf, info.ETag...)
		buf = append(buf, '"')
	}
	cuts[1] = len(buf)
	if !info.ModTime.IsZero() {
		buf = info.ModTime.UTC().AppendFormat(buf, http.TimeFormat)
	}
	cuts[2] = len(buf)
	buf = appendReprDigest(buf, info.SHA256)
	cuts[3] = len(buf)

	switch evalConditions(r.Header, info.ETag, info.ModTime) {
	case condPreconditionFailed:
		s.writeErrorStatus(rs, http.StatusPreconditionFailed, "PreconditionFailed", store.ErrPrecondition)
		return
	case condNotModified:
		vals := string(buf)
		if cuts[1] > 0 {
			h[hdrETag] = []string{vals[:cuts[1]]}
		}
		if cuts[2] > cuts[1] {
			h[hdrLastModified] = []string{vals[cuts[1]:cuts[2]]}
		}
		if b.CacheControl != "" {
			h[hdrCacheControl] = []string{b.CacheControl}
		}
		rs.w.WriteHeader(http.StatusNotModified)
		return
	}

	size := info.Size
	off, n, status := int64(0), size, http.StatusOK
	if rh := headerValue(r.Header, "Range"); rh != "" && ifRangeAllows(headerValue(r.Header, "If-Range"), info.ETag, info.ModTime) {
		br, kind := parseRange(rh, size)
		switch kind {
		case rangeOne:
			off, n, status = br.off, br.n, http.StatusPartialContent
		case rangeUnsatisfiable:
			h[hdrContentRange] = []string{"bytes */" + strconv.FormatInt(size, 10)}
			s.writeErrorStatus(rs, http.StatusRequestedRangeNotSatisfiable, "InvalidRange",
				fmt.Errorf("range %q not satisfiable for %d bytes", rh, size))
			return
		}
	}
	buf = strconv.AppendInt(buf, n, 10)
	cuts[4] = len(buf)
	if status == http.StatusPartialContent {
		buf = append(buf, "bytes "...)
		buf = strconv.AppendInt(buf, off, 10)
		buf = append(buf, '-')
		buf = strconv.AppendInt(buf, off+n-1, 10)
		buf = append(buf, '/')
		buf = strconv.AppendInt(buf, size, 10)
	}
	cuts[5] = len(buf)
	vals := string(buf)

	ct := info.ContentType
	if ct == "" {
		ct = contentTypeByName(info.Path)
	}
	hv := make([]string, 0, 8)
	set := func(k, v string) {
		hv = append(hv, v)
		h[k] = hv[len(hv)-1 : len(hv) : len(hv)]
	}
	set(hdrContentLength, vals[cuts[3]:cuts[4]])
	set(hdrContentType, ct)
	set(hdrAcceptRanges, "bytes")
	if cuts[1] > 0 {
		set(hdrETag, vals[:cuts[1]])
	}
	if cuts[2] > cuts[1] {
		set(hdrLastModified, vals[cuts[1]:cuts[2]])
	}
	if cuts[3] > cuts[2] {
		set(hdrReprDigest, vals[cuts[2]:cuts[3]])
	}
	if cuts[5] > cuts[4] {
		set(hdrContentRange, vals[cuts[4]:cuts[5]])
	}
	if b.CacheControl != "" {
		set(hdrCacheControl, b.CacheControl)
	}
	rs.w.WriteHeader(status)
	if r.Method == http.MethodHead || n == 0 {
		return
	}
	if _, err := obj.WriteRangeTo(&rs.dl, off, n); err != nil {
		// Headers are out: the connection is closed by net/http because
		// the body is short. A store fault is worth a log line.
		lvl := slog.LevelDebug
		if errors.Is(err, store.ErrCorrupt) || errors.Is(err, store.ErrUnavailable) {
			lvl = slog.LevelError
		}
		s.log.LogAttrs(r.Context(), lvl, "response body failed", slog.String("path", r.URL.Path), slog.Any("err", err))
	}
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
	var base string
	var md5 bool
	switch {
	case strings.HasSuffix(t.path, ".md5"):
		base, md5 = strings.TrimSuffix(t.path, ".md5"), true
	case strings.HasSuffix(t.path, ".sha256"):
		base = strings.TrimSuffix(t.path, ".sha256")
	default:
		return false
	}
	if base == "" || strings.HasSuffix(base, "/") {
		return false
	}
	info, err := s.store.Stat(rs.req.Context(), t.bucket, base)
	if err != nil || info.IsDir {
		return false
	}
	sum := info.SHA256
	if md5 {
		sum = info.ETag
	}
	if !isHex(sum) || (md5 && len(sum) != 32) || (!md5 && len(sum) != 64) {
		return false
	}
	body := sum + "  " + path.Base(base) + "\n"
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
