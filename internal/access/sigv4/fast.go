package sigv4

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"strings"
	"time"
	"unsafe"
)

// Fields is how VerifyHeaderRequest reads a request's header fields from
// where a server parsed them (such as its read buffer), without a header
// map.
type Fields interface {
	// Field returns the value of the first header field named name
	// (lowercase; the match is case-insensitive), trimmed of surrounding
	// spaces and tabs, and how many fields of that name the request has.
	// It must not keep name.
	Field(name string) (value []byte, n int)
}

// HeaderRequest is a request without a body signed in its Authorization
// header (an SDK's GetObject or HeadObject), as a server that parsed it in
// place reads it: VerifyHeaderRequest checks it without an http.Request.
type HeaderRequest struct {
	Method   string // "GET" or "HEAD"
	Path     string // the decoded path, as URL.Path
	RawQuery string // the raw query, without '?'
	Fields   Fields // the header fields, the Authorization one included
	// Host is the value of the request's one Host field, when the caller
	// knows it has exactly one (OneHost); otherwise Fields is asked.
	Host    string
	OneHost bool
}

// headerScratch bounds the canonical request VerifyHeaderRequest builds
// on the stack; a larger one (a long path, many signed fields) is left
// to Verify.
const headerScratch = 2048

// VerifyHeaderRequest checks the SigV4 Authorization header of r as
// Verify checks that of the same request, without allocating: the
// signing key comes from the cache of derived keys, the canonical request
// and the string to sign are built on the stack, and the HMAC is two
// SHA-256 sums. It returns the access key id (a view of r's Authorization
// value: valid while that is) and true only when Verify would accept the
// request. It returns false for every request Verify would refuse and for
// those it does not take: more than one Authorization, x-amz-date or
// x-amz-content-sha256 field, a Date field instead of x-amz-date, a
// streaming payload hash, a signed field that is absent or repeated, a
// query that is not already canonical (unreserved bytes, every key with
// '=', keys in strictly increasing order) or that is a presigned URL's, a
// signature over the path as sent rather than re-encoded, an unknown
// access key id (checked with a dummy secret all the same, so that it
// costs what a known one does), or a canonical request over 2 KiB. The
// caller then gives the request to Verify, which decides and words the
// error. Safe for concurrent use; it blocks only in Config.Lookup.
func (v *Verifier) VerifyHeaderRequest(r *HeaderRequest) (accessKeyID string, ok bool) {
	fields := r.Fields
	av, n := fields.Field("authorization")
	if n != 1 {
		return "", false
	}
	auth, ok := strings.CutPrefix(view(av), Algorithm+" ")
	if !ok {
		return "", false
	}
	var cred, signed, sigHex string
	var seen [3]bool
	for rest := auth; ; {
		part, tail, more := cutByte(rest, ',')
		name, val, ok := cutByte(strings.TrimSpace(part), '=')
		i := -1
		switch name {
		case "Credential":
			i, cred = 0, val
		case "SignedHeaders":
			i, signed = 1, val
		case "Signature":
			i, sigHex = 2, val
		}
		if !ok || i < 0 || seen[i] {
			return "", false
		}
		seen[i] = true
		if !more {
			break
		}
		rest = tail
	}
	if !seen[0] || !seen[1] || !seen[2] {
		return "", false
	}

	// Credential: AKID/YYYYMMDD/REGION/s3/aws4_request.
	var scopeParts [4]string // date, region, service, terminator
	id := cred
	for i := 3; i >= 0; i-- {
		j := strings.LastIndexByte(id, '/')
		if j < 0 {
			return "", false
		}
		id, scopeParts[i] = id[:j], id[j+1:]
	}
	date, region := scopeParts[0], scopeParts[1]
	if id == "" || id[0] == '/' || len(date) != 8 || region == "" ||
		scopeParts[2] != service || scopeParts[3] != scopeTerminator {
		return "", false
	}
	if _, ok := parseDigitsDate(date, ""); !ok {
		return "", false
	}

	if !validSignedHeaders(signed) {
		return "", false
	}
	var want [sha256.Size]byte
	if !decodeHex(want[:], sigHex) {
		return "", false
	}

	dv, n := fields.Field("x-amz-date")
	if n != 1 {
		return "", false
	}
	amzDate := view(dv)
	t, ok := parseDigitsDate(amzDate[:min(8, len(amzDate))], amzDate[min(8, len(amzDate)):])
	if !ok || amzDate[:8] != date {
		return "", false
	}
	if skew := v.now().Sub(t); skew > v.maxSkew || -skew > v.maxSkew {
		return "", false
	}
	pv, n := fields.Field("x-amz-content-sha256")
	payloadHash := view(pv)
	if n != 1 || payloadHash != UnsignedPayload && !isHexSHA256(payloadHash) {
		return "", false
	}
	if !canonicalRawQuery(r.RawQuery) {
		return "", false
	}

	secret, known := v.lookup(id)
	if !known {
		secret = dummySecret
	}
	key := signingKey(secret, date, region, service)

	// The canonical request.
	var cb [headerScratch]byte
	c := append(cb[:0], r.Method...)
	c = append(c, '\n')
	if r.Path == "" {
		c = append(c, '/')
	} else {
		c = appendPath(c, r.Path)
	}
	c = append(c, '\n')
	c = append(c, r.RawQuery...)
	c = append(c, '\n')
	for rest := signed; rest != ""; {
		var name string
		name, rest, _ = cutByte(rest, ';')
		var val []byte
		switch {
		case name == "x-amz-date":
			val = dv // one field, found above
		case name == "x-amz-content-sha256":
			val = pv
		case name == "host" && r.OneHost:
			val = unsafe.Slice(unsafe.StringData(r.Host), len(r.Host))
		default:
			if val, n = fields.Field(name); n != 1 {
				return "", false // absent (net/http may supply one) or repeated (joined)
			}
		}
		c = append(c, name...)
		c = append(c, ':')
		c = appendHeaderValue(c, view(val))
		c = append(c, '\n')
	}
	c = append(c, '\n')
	c = append(c, signed...)
	c = append(c, '\n')
	c = append(c, payloadHash...)
	if len(c) > headerScratch {
		return "", false // it grew off the stack
	}
	sum := sha256.Sum256(c)

	// HMAC-SHA256(key, string to sign), with the key (32 bytes, shorter
	// than SHA-256's block) padded: H(key^opad || H(key^ipad || message)).
	var mb [64 + 256]byte
	m := mb[:64]
	for i := range m {
		m[i] = 0x36
	}
	for i, b := range key {
		m[i] ^= b
	}
	m = append(m, Algorithm+"\n"...)
	m = append(m, amzDate...)
	m = append(m, '\n')
	m = append(m, date...)
	m = append(m, '/')
	m = append(m, region...)
	m = append(m, "/"+service+"/"+scopeTerminator+"\n"...)
	var hx [2 * sha256.Size]byte
	hex.Encode(hx[:], sum[:])
	m = append(m, hx[:]...)
	if len(m) > len(mb) {
		return "", false // a long region: it grew off the stack
	}
	inner := sha256.Sum256(m)
	var ob [64 + sha256.Size]byte
	for i := range 64 {
		ob[i] = 0x5c
	}
	for i, b := range key {
		ob[i] ^= b
	}
	copy(ob[64:], inner[:])
	got := sha256.Sum256(ob[:])
	match := subtle.ConstantTimeCompare(got[:], want[:]) == 1
	if v.afterSign != nil {
		v.afterSign(known)
	}
	return id, known && match
}

// validSignedHeaders checks a SignedHeaders list as parseSignedHeaders
// does (or more strictly: a name with a byte outside ASCII is refused),
// without allocating.
func validSignedHeaders(s string) bool {
	if s == "" || strings.Count(s, ";") >= maxSignedHeaders {
		return false
	}
	host := false
	for rest := s; ; {
		name, tail, more := cutByte(rest, ';')
		if name == "" {
			return false
		}
		for i := 0; i < len(name); i++ {
			if c := name[i]; 'A' <= c && c <= 'Z' || c >= 0x80 || c == ' ' || c == '\t' || c == ':' {
				return false
			}
		}
		// A duplicate: the same name earlier in the list.
		for prev := s[:len(s)-len(rest)]; prev != ""; {
			var p string
			p, prev, _ = cutByte(prev, ';')
			if p == name {
				return false
			}
		}
		host = host || name == "host"
		if !more {
			break
		}
		rest = tail
	}
	return host
}

// canonicalRawQuery reports whether a raw query is its own canonical
// query string (canonicalQuery) and is not a presigned URL's: empty, or
// KEY=VALUE pairs of unreserved bytes joined by '&', keys strictly
// increasing, none an X-Amz-Algorithm, X-Amz-Credential or
// X-Amz-Signature.
func canonicalRawQuery(q string) bool {
	if strings.HasSuffix(q, "&") {
		return false // an empty parameter, which the canonical form drops
	}
	prev := ""
	for rest := q; rest != ""; {
		var seg string
		seg, rest, _ = cutByte(rest, '&')
		k, val, ok := cutByte(seg, '=')
		if !ok || k == "" || k <= prev && prev != "" || k == qAlgorithm || k == qCredential || k == qSignature {
			return false
		}
		for i := 0; i < len(seg); i++ {
			if c := seg[i]; !unreserved(c) && c != '=' || c == '=' && i != len(k) {
				return false
			}
		}
		_ = val
		prev = k
	}
	return true
}

// cutByte is strings.Cut around a one-byte separator, without the
// generic search.
func cutByte(s string, sep byte) (before, after string, found bool) {
	if i := strings.IndexByte(s, sep); i >= 0 {
		return s[:i], s[i+1:], true
	}
	return s, "", false
}

// parseDigitsDate parses day, YYYYMMDD, and clock, "" or "THHMMSSZ", in
// UTC, accepting exactly what time.Parse accepts with the layouts
// "20060102" and amzDateFormat (and a length of 16 for the latter), at a
// fraction of its cost.
func parseDigitsDate(day, clock string) (time.Time, bool) {
	if len(day) != 8 || clock != "" && (len(clock) != 8 || clock[0] != 'T' || clock[7] != 'Z') {
		return time.Time{}, false
	}
	num := func(s string) (int, bool) {
		n := 0
		for i := 0; i < len(s); i++ {
			if s[i] < '0' || s[i] > '9' {
				return 0, false
			}
			n = n*10 + int(s[i]-'0')
		}
		return n, true
	}
	y, ok1 := num(day[:4])
	mo, ok2 := num(day[4:6])
	d, ok3 := num(day[6:8])
	h, mi, sec, ok4, ok5, ok6 := 0, 0, 0, true, true, true
	if clock != "" {
		h, ok4 = num(clock[1:3])
		mi, ok5 = num(clock[3:5])
		sec, ok6 = num(clock[5:7])
	}
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 || !ok6 || mo < 1 || mo > 12 || d < 1 || h > 23 || mi > 59 || sec > 59 {
		return time.Time{}, false
	}
	t := time.Date(y, time.Month(mo), d, h, mi, sec, 0, time.UTC)
	if t.Day() != d { // past the end of its month: normalized into the next
		return time.Time{}, false
	}
	return t, true
}

// appendPath appends the canonical URI of a decoded path as
// appendEncoded(dst, path, true) does, copying it whole when no byte
// needs encoding (the usual path).
func appendPath(dst []byte, path string) []byte {
	for i := 0; i < len(path); i++ {
		if c := path[i]; !unreserved(c) && c != '/' {
			return appendEncoded(dst, path, true)
		}
	}
	return append(dst, path...)
}

// decodeHex decodes 2·len(dst) hex digits of s into dst.
func decodeHex(dst []byte, s string) bool {
	if len(s) != 2*len(dst) {
		return false
	}
	for i := range dst {
		hi, ok1 := fromHex(s[2*i])
		lo, ok2 := fromHex(s[2*i+1])
		if !ok1 || !ok2 {
			return false
		}
		dst[i] = hi<<4 | lo
	}
	return true
}

func fromHex(c byte) (byte, bool) {
	v := hexValue[c]
	return v & 15, v != 0
}

// hexValue maps a hex digit to its value + 16, anything else to 0.
var hexValue = func() (t [256]byte) {
	for c := range 256 {
		switch {
		case '0' <= c && c <= '9':
			t[c] = byte(c-'0') | 16
		case 'a' <= c && c <= 'f':
			t[c] = byte(c-'a'+10) | 16
		case 'A' <= c && c <= 'F':
			t[c] = byte(c-'A'+10) | 16
		}
	}
	return t
}()

// view returns b as a string without copying; the caller keeps it no
// longer than b's bytes stay unchanged.
func view(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(unsafe.SliceData(b), len(b))
}
