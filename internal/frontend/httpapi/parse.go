package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Limits on names, checked on the percent-decoded path before the store is
// called.
const (
	// MaxNameBytes is the longest path segment (file or directory name).
	MaxNameBytes = 255
	// MaxPathBytes is the longest request path, bucket included.
	MaxPathBytes = 4096
)

// Errors for requests refused before the store is called. They are wrapped
// with detail; the status table in errors.go maps each to a status.
var (
	// ErrBadPath: a path with "." / ".." / empty segments, NUL or control
	// bytes, or invalid UTF-8 (400 InvalidPath).
	ErrBadPath = errors.New("httpapi: invalid path")
	// ErrNameTooLong: a segment longer than MaxNameBytes (400 NameTooLong).
	ErrNameTooLong = errors.New("httpapi: name too long")
	// ErrPathTooLong: a path longer than MaxPathBytes (400 PathTooLong).
	ErrPathTooLong = errors.New("httpapi: path too long")
	// ErrBadRequest: a malformed header, query parameter or JSON body (400).
	ErrBadRequest = errors.New("httpapi: bad request")
	// ErrMethodNotAllowed: the method does not apply to the path (405).
	ErrMethodNotAllowed = errors.New("httpapi: method not allowed")
	// ErrBodyTimeout: the request body made no progress for ReadTimeout (408).
	ErrBodyTimeout = errors.New("httpapi: request body stalled")
	// ErrIncompleteBody: the request body ended early or its connection
	// failed (400 IncompleteBody).
	ErrIncompleteBody = errors.New("httpapi: request body incomplete")
)

// target is a parsed file-API path. Strings are substrings of the request
// path: parsing does not allocate on success.
type target struct {
	bucket string // "" only for "/"
	path   string // inside the bucket: no leading or trailing slash; "" is the root
	// slash reports a trailing slash after the bucket or path ("/b/", "/b/d/").
	slash bool
}

// parseTarget validates a percent-decoded request path ("/bucket/a/b") and
// splits it. It refuses, wrapping ErrBadPath, ErrNameTooLong or
// ErrPathTooLong: a path not starting with "/", longer than MaxPathBytes,
// not valid UTF-8, with NUL or other control characters, with empty, "." or
// ".." segments, or with a segment longer than MaxNameBytes.
func parseTarget(p string) (target, error) {
	if len(p) > MaxPathBytes {
		return target{}, fmt.Errorf("%w: %d bytes, limit %d", ErrPathTooLong, len(p), MaxPathBytes)
	}
	if len(p) == 0 || p[0] != '/' {
		return target{}, fmt.Errorf("%w: must start with /", ErrBadPath)
	}
	if err := checkPath(p[1:], true); err != nil {
		return target{}, err
	}
	rest := p[1:]
	var t target
	if rest == "" {
		return t, nil
	}
	if rest[len(rest)-1] == '/' {
		t.slash = true
		rest = rest[:len(rest)-1]
	}
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		t.bucket, t.path = rest[:i], rest[i+1:]
	} else {
		t.bucket = rest
	}
	return t, nil
}

// checkPath validates a relative path "a/b/c" (a trailing slash is allowed
// when trailingSlash is set). The empty path is valid.
func checkPath(p string, trailingSlash bool) error {
	if !utf8.ValidString(p) {
		return fmt.Errorf("%w: not valid UTF-8", ErrBadPath)
	}
	if trailingSlash && len(p) > 0 && p[len(p)-1] == '/' {
		p = p[:len(p)-1]
		if p == "" {
			return fmt.Errorf("%w: empty segment", ErrBadPath)
		}
	}
	if p == "" {
		return nil
	}
	start := 0
	for i := 0; i <= len(p); i++ {
		if i < len(p) {
			c := p[i]
			if c < 0x20 || c == 0x7f {
				if c == 0 {
					return fmt.Errorf("%w: NUL byte", ErrBadPath)
				}
				return fmt.Errorf("%w: control character", ErrBadPath)
			}
			if c != '/' {
				continue
			}
		}
		seg := p[start:i]
		switch {
		case seg == "":
			return fmt.Errorf("%w: empty segment", ErrBadPath)
		case seg == "." || seg == "..":
			return fmt.Errorf("%w: %q segment", ErrBadPath, seg)
		case len(seg) > MaxNameBytes:
			return fmt.Errorf("%w: %d-byte name, limit %d", ErrNameTooLong, len(seg), MaxNameBytes)
		}
		start = i + 1
	}
	return nil
}

// validBucketName reports whether name follows the S3 bucket naming rules,
// which every front end can serve: 3 to 63 bytes of lowercase letters,
// digits, '-' and '.', starting and ending with a letter or digit, without
// "..". Names starting with '_' are reserved (/_cairn/).
func validBucketName(name string) bool {
	if len(name) < 3 || len(name) > 63 || strings.Contains(name, "..") {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		alnum := ('a' <= c && c <= 'z') || ('0' <= c && c <= '9')
		if !alnum && !((c == '-' || c == '.') && i > 0 && i < len(name)-1) {
			return false
		}
	}
	return true
}

// byteRange is a satisfiable range [off, off+n) of a representation.
type byteRange struct{ off, n int64 }

// rangeKind is the outcome of parseRange.
type rangeKind uint8

const (
	rangeNone          rangeKind = iota // no usable Range: send the whole representation
	rangeOne                            // one satisfiable range: 206
	rangeUnsatisfiable                  // 416 with Content-Range: bytes */size
)

// parseRange interprets a Range header value for a representation of size
// bytes (RFC 9110 §14). It answers rangeNone for an absent, malformed or
// non-bytes header, for several ranges (the whole file is sent, as the
// contract allows), and for an empty representation; rangeUnsatisfiable when
// the single range starts at or past the end or is a zero-length suffix.
func parseRange(h string, size int64) (byteRange, rangeKind) {
	if h == "" || size <= 0 {
		return byteRange{}, rangeNone
	}
	const prefix = "bytes="
	if len(h) < len(prefix) || !strings.EqualFold(h[:len(prefix)], prefix) {
		return byteRange{}, rangeNone
	}
	spec := strings.TrimSpace(h[len(prefix):])
	if strings.IndexByte(spec, ',') >= 0 {
		return byteRange{}, rangeNone
	}
	dash := strings.IndexByte(spec, '-')
	if dash < 0 {
		return byteRange{}, rangeNone
	}
	first, last := strings.TrimSpace(spec[:dash]), strings.TrimSpace(spec[dash+1:])
	if first == "" {
		// Suffix range: the last N bytes.
		n, ok := parseDigits(last)
		if !ok {
			return byteRange{}, rangeNone
		}
		if n == 0 {
			return byteRange{}, rangeUnsatisfiable
		}
		if n > size {
			n = size
		}
		return byteRange{off: size - n, n: n}, rangeOne
	}
	off, ok := parseDigits(first)
	if !ok {
		return byteRange{}, rangeNone
	}
	end := size - 1
	if last != "" {
		e, ok := parseDigits(last)
		if !ok || e < off {
			return byteRange{}, rangeNone
		}
		if e < end {
			end = e
		}
	}
	if off >= size {
		return byteRange{}, rangeUnsatisfiable
	}
	return byteRange{off: off, n: end - off + 1}, rangeOne
}

// parseDigits parses a non-empty run of ASCII digits; values past int64
// saturate (a huge last-pos is valid and means "to the end").
func parseDigits(s string) (int64, bool) {
	if s == "" {
		return 0, false
	}
	var n int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		if n > (1<<63-1-9)/10 {
			n = 1<<63 - 1
			continue
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// etagMatch reports whether the If-Match / If-None-Match value h (a list of
// entity tags, or "*") matches etag, the current entity tag without quotes.
// With weak set, comparison is weak (W/"x" matches "x"); otherwise a weak tag
// never matches. "*" matches any existing representation (etag may be "").
// A malformed list element ends the scan without a match.
func etagMatch(h, etag string, weak bool) bool {
	for {
		h = strings.TrimLeft(h, " \t,")
		if h == "" {
			return false
		}
		if h[0] == '*' {
			return true
		}
		isWeak := false
		if strings.HasPrefix(h, "W/") {
			isWeak = true
			h = h[2:]
		}
		if h == "" || h[0] != '"' {
			return false
		}
		end := strings.IndexByte(h[1:], '"')
		if end < 0 {
			return false
		}
		tag := h[1 : 1+end]
		h = h[end+2:]
		if etag != "" && tag == etag && (weak || !isWeak) {
			return true
		}
	}
}

// condResult is the outcome of evaluating conditional request headers.
type condResult uint8

const (
	condProceed            condResult = iota // serve normally
	condNotModified                          // 304
	condPreconditionFailed                   // 412
)

// evalConditions applies RFC 9110 §13.2.2 in order for a GET or HEAD of a
// representation with entity tag etag (unquoted) and modification time mod:
// If-Match, else If-Unmodified-Since (412); then If-None-Match, else
// If-Modified-Since (304). Invalid dates are ignored. Date comparisons are at
// one-second resolution, as Last-Modified is sent.
func evalConditions(h *readHeaders, etag string, mod time.Time) condResult {
	mod = mod.Truncate(time.Second)
	if im := h.ifMatch; im != "" {
		if !etagMatch(im, etag, false) {
			return condPreconditionFailed
		}
	} else if ius := h.ifUnmodifiedSince; ius != "" && !mod.IsZero() {
		if t, err := http.ParseTime(ius); err == nil && mod.After(t) {
			return condPreconditionFailed
		}
	}
	if inm := h.ifNoneMatch; inm != "" {
		if etagMatch(inm, etag, true) {
			return condNotModified
		}
	} else if ims := h.ifModifiedSince; ims != "" && !mod.IsZero() {
		if t, err := http.ParseTime(ims); err == nil && !mod.After(t) {
			return condNotModified
		}
	}
	return condProceed
}

// ifRangeAllows reports whether a Range request may be honoured given its
// If-Range value (RFC 9110 §13.1.5): absent, a strong entity tag equal to
// etag, or an HTTP-date equal to mod.
func ifRangeAllows(ir, etag string, mod time.Time) bool {
	if ir == "" {
		return true
	}
	if ir[0] == '"' || strings.HasPrefix(ir, "W/") {
		return !strings.HasPrefix(ir, "W/") && len(ir) >= 2 && ir[len(ir)-1] == '"' && ir[1:len(ir)-1] == etag && etag != ""
	}
	t, err := http.ParseTime(ir)
	return err == nil && !mod.IsZero() && mod.Truncate(time.Second).Equal(t)
}

// headerValue returns the first value of a canonical key without the
// canonicalization that http.Header.Get does.
func headerValue(h http.Header, key string) string {
	if v := h[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// parseMtime parses X-Cairn-Mtime: Unix seconds, optionally with a fraction
// of up to nanosecond precision ("1700000000.25"). Parsed digit by digit so
// that no precision is lost to float64.
func parseMtime(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, fmt.Errorf("%w: empty X-Cairn-Mtime", ErrBadRequest)
	}
	neg := false
	if s[0] == '-' {
		neg = true
		s = s[1:]
	}
	intPart, frac, hasDot := strings.Cut(s, ".")
	sec, ok := parseDigits(intPart)
	if !ok || sec > 1<<40 || (hasDot && (frac == "" || len(frac) > 9)) {
		return time.Time{}, fmt.Errorf("%w: bad X-Cairn-Mtime %q", ErrBadRequest, s)
	}
	var nsec int64
	if hasDot {
		n, ok := parseDigits(frac)
		if !ok {
			return time.Time{}, fmt.Errorf("%w: bad X-Cairn-Mtime %q", ErrBadRequest, s)
		}
		for i := len(frac); i < 9; i++ {
			n *= 10
		}
		nsec = n
	}
	if neg {
		sec, nsec = -sec, -nsec
	}
	return time.Unix(sec, nsec).UTC(), nil
}

// parseMode parses X-Cairn-Mode: octal permission bits, at most 07777.
func parseMode(s string) (uint32, error) {
	m, err := strconv.ParseUint(s, 8, 32)
	if err != nil || m > 0o7777 {
		return 0, fmt.Errorf("%w: bad X-Cairn-Mode %q", ErrBadRequest, s)
	}
	return uint32(m), nil
}

// acceptsJSON reports whether an Accept header value lists application/json
// (with a non-zero q) among its media ranges.
func acceptsJSON(accept string) bool {
	for accept != "" {
		var item string
		item, accept, _ = strings.Cut(accept, ",")
		mt, params, _ := strings.Cut(item, ";")
		if !strings.EqualFold(strings.TrimSpace(mt), "application/json") {
			continue
		}
		q := true
		for params != "" {
			var p string
			p, params, _ = strings.Cut(params, ";")
			k, v, _ := strings.Cut(p, "=")
			if strings.EqualFold(strings.TrimSpace(k), "q") {
				if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil && f == 0 {
					q = false
				}
			}
		}
		if q {
			return true
		}
	}
	return false
}

// listParams are the query parameters of a directory listing.
type listParams struct {
	limit     int
	after     string
	recursive bool
	prefix    string
}

// Listing page sizes.
const (
	defaultListLimit = 1000
	maxListLimit     = 10000
)

// parseListParams reads limit (1..10000, default 1000; larger values are
// clamped), after, recursive ("1" or "true") and prefix from a query.
func parseListParams(q map[string][]string) (listParams, error) {
	get := func(k string) string {
		if v := q[k]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	lp := listParams{limit: defaultListLimit, after: get("after"), prefix: get("prefix")}
	if s := get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			return lp, fmt.Errorf("%w: bad limit %q", ErrBadRequest, s)
		}
		lp.limit = min(n, maxListLimit)
	}
	switch r := get("recursive"); r {
	case "", "0", "false":
	case "1", "true":
		lp.recursive = true
	default:
		return lp, fmt.Errorf("%w: bad recursive %q", ErrBadRequest, r)
	}
	for _, s := range []string{lp.after, lp.prefix} {
		if !utf8.ValidString(s) || strings.IndexByte(s, 0) >= 0 {
			return lp, fmt.Errorf("%w: bad listing parameter", ErrBadRequest)
		}
	}
	return lp, nil
}
