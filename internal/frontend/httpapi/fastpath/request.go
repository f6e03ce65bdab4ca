package fastpath

import (
	"bytes"
	"encoding/binary"
	"time"
	"unsafe"
)

// Fields of a request the fast path reads (Request.Hdr), by index.
const (
	HdrAuthorization = iota
	HdrRange
	HdrIfRange
	HdrIfMatch
	HdrIfNoneMatch
	HdrIfModifiedSince
	HdrIfUnmodifiedSince
	HdrReferer
	HdrUserAgent
	HdrHost
	HdrConnection
	HdrXForwardedFor
	HdrCount
)

// Request is a GET or HEAD request parsed in place from a connection's
// read buffer by Parse. Its byte slices point into that buffer (Path into
// the connection's scratch): they are valid until the planner returns
// from Done for it, and a planner keeps none of them (View says how to
// read them as strings).
type Request struct {
	Head   bool // HEAD, else GET
	HTTP10 bool // HTTP/1.0, else HTTP/1.1
	// Close: the connection closes after the response (HTTP/1.1 with
	// "Connection: close", HTTP/1.0 without "Connection: keep-alive").
	Close bool
	// KeepAlive10: HTTP/1.0 with "Connection: keep-alive", which net/http
	// answers with "Connection: keep-alive".
	KeepAlive10 bool
	Target      []byte           // the raw origin-form target, query included
	Query       []byte           // the raw query after '?'; nil without one
	Path        []byte           // the target's path, percent-decoded (DecodePath)
	Hdr         [HdrCount][]byte // first value of each field, trimmed; nil if absent
	// Fields is the raw header block after the request line: every
	// field line with its CRLF, as Parse checked them (Field reads it).
	Fields []byte
	End    int // bytes taken by the request line and header block

	// Set by the connection before Plan.
	Start time.Time // when the request was taken: the answer's clock
	Date  []byte    // the Date value of its answer (do not modify)
	Peer  *Peer     // the connection's client
}

// Verdict is the verdict of Parse.
type Verdict uint8

const (
	ParseOK         Verdict = iota // a complete request the fast path serves
	ParseIncomplete                // the header block has not ended yet: read more
	ParseHandoff                   // anything else: net/http serves it
)

var crlfcrlf = []byte("\r\n\r\n")

// Parse parses the request at the start of buf without consuming or
// copying it; it does not allocate. It answers ParseOK only for what the fast path
// fully supports: "GET" or "HEAD", an origin-form target of printable ASCII
// without '#', "HTTP/1.1" (with one valid Host) or "HTTP/1.0", CRLF line
// ends, well-formed header fields without obsolete folding or control
// bytes, no body (Content-Length absent or 0, no Transfer-Encoding), no
// Expect or Upgrade, at most one Connection field saying "close" or
// "keep-alive", and a request line plus header block of at most limit
// bytes. ParseIncomplete means the block may still become such a request
// (it is shorter than limit and has no bare LF); everything else is
// ParseHandoff, and net/http decides (a 400, a 431, or a normal answer).
// Path is left for DecodePath.
func Parse(buf []byte, limit int) (Request, Verdict) {
	var req Request
	end := bytes.Index(buf, crlfcrlf)
	if end < 0 {
		if len(buf) >= limit || hasBareLF(buf) {
			return req, ParseHandoff
		}
		return req, ParseIncomplete
	}
	end += len(crlfcrlf)
	if end > limit {
		return req, ParseHandoff
	}
	req.End = end
	block := buf[:end-2] // every line, each with its CRLF

	// Request line: METHOD SP TARGET SP VERSION.
	nl := bytes.IndexByte(block, '\n')
	if nl < 1 || block[nl-1] != '\r' {
		return req, ParseHandoff
	}
	line := block[:nl-1]
	rest := block[nl+1:]
	switch {
	case len(line) > 4 && string(line[:4]) == "GET ":
		line = line[4:]
	case len(line) > 5 && string(line[:5]) == "HEAD ":
		req.Head = true
		line = line[5:]
	default:
		return req, ParseHandoff
	}
	sp := bytes.IndexByte(line, ' ')
	if sp <= 0 || line[0] != '/' {
		return req, ParseHandoff
	}
	req.Target, line = line[:sp], line[sp+1:]
	for _, c := range req.Target {
		if c <= ' ' || c >= 0x7f || c == '#' {
			return req, ParseHandoff
		}
	}
	if q := bytes.IndexByte(req.Target, '?'); q >= 0 {
		req.Query = req.Target[q+1:]
	}
	switch string(line) {
	case "HTTP/1.1":
	case "HTTP/1.0":
		req.HTTP10 = true
	default:
		return req, ParseHandoff
	}

	// Header fields: NAME ":" OWS VALUE OWS CRLF.
	req.Fields = rest[:len(rest):len(rest)]
	hosts := 0
	conns := 0
	for len(rest) > 0 {
		nl := bytes.IndexByte(rest, '\n')
		line, rest = rest[:nl], rest[nl+1:]
		if len(line) == 0 || line[len(line)-1] != '\r' {
			return req, ParseHandoff // a bare LF inside the block
		}
		line = line[:len(line)-1]
		colon := bytes.IndexByte(line, ':')
		if colon <= 0 {
			return req, ParseHandoff
		}
		name := line[:colon]
		for _, c := range name {
			if !isTokenByte(c) {
				return req, ParseHandoff
			}
		}
		value := line[colon+1:]
		if !validFieldValue(value) {
			return req, ParseHandoff
		}
		value = trimOWS(value)
		i := -1
		switch len(name) {
		case 4:
			if asciiEqualFold(name, "host") {
				hosts++
				i = HdrHost
			}
		case 5:
			if asciiEqualFold(name, "range") {
				i = HdrRange
			}
		case 6:
			if asciiEqualFold(name, "expect") {
				return req, ParseHandoff
			}
		case 7:
			switch {
			case asciiEqualFold(name, "referer"):
				i = HdrReferer
			case asciiEqualFold(name, "upgrade"):
				return req, ParseHandoff
			}
		case 8:
			switch {
			case asciiEqualFold(name, "if-range"):
				i = HdrIfRange
			case asciiEqualFold(name, "if-match"):
				i = HdrIfMatch
			}
		case 10:
			switch {
			case asciiEqualFold(name, "user-agent"):
				i = HdrUserAgent
			case asciiEqualFold(name, "connection"):
				conns++
				i = HdrConnection
			}
		case 13:
			switch {
			case asciiEqualFold(name, "authorization"):
				i = HdrAuthorization
			case asciiEqualFold(name, "if-none-match"):
				i = HdrIfNoneMatch
			}
		case 14:
			if asciiEqualFold(name, "content-length") && string(value) != "0" {
				return req, ParseHandoff
			}
		case 15:
			if asciiEqualFold(name, "x-forwarded-for") {
				if req.Hdr[HdrXForwardedFor] != nil {
					return req, ParseHandoff // several: net/http joins them for the rules
				}
				i = HdrXForwardedFor
			}
		case 17:
			switch {
			case asciiEqualFold(name, "if-modified-since"):
				i = HdrIfModifiedSince
			case asciiEqualFold(name, "transfer-encoding"):
				return req, ParseHandoff
			}
		case 18:
			if asciiEqualFold(name, "x-cairn-consistent") {
				return req, ParseHandoff // a consistent read: net/http runs the barrier
			}
		case 19:
			if asciiEqualFold(name, "if-unmodified-since") {
				i = HdrIfUnmodifiedSince
			}
		}
		if i >= 0 && req.Hdr[i] == nil {
			req.Hdr[i] = value[:len(value):len(value)]
		}
	}

	if hosts > 1 || (hosts == 0 && !req.HTTP10) || !validHost(req.Hdr[HdrHost]) || conns > 1 {
		return req, ParseHandoff
	}
	switch c := req.Hdr[HdrConnection]; {
	case len(c) == 0:
		req.Close = req.HTTP10
	case asciiEqualFold(c, "close"):
		req.Close = true
	case asciiEqualFold(c, "keep-alive"):
		req.KeepAlive10 = req.HTTP10
	default:
		return req, ParseHandoff
	}
	return req, ParseOK
}

// Field returns the value of the header field name (matched in any
// case), trimmed of white space as Parse trims the Hdr values, and how
// many fields of that name the request has: the first one's value for
// n ≥ 1, nil for n = 0. It reads the header block of a request Parse
// accepted, for the fields Hdr does not keep (a signature's signed
// fields); it does not allocate, and the value is a view as Hdr's are.
func (r *Request) Field(name string) (value []byte, n int) {
	rest := r.Fields
	for len(rest) > 0 {
		nl := bytes.IndexByte(rest, '\n')
		if nl < 0 {
			break // not a block Parse accepted
		}
		line := rest[:nl]
		rest = rest[nl+1:]
		if len(line) <= len(name) || line[len(name)] != ':' || !equalFoldName(line[:len(name)], name) {
			continue
		}
		if n++; n == 1 {
			value = trimOWS(line[len(name)+1 : len(line)-1]) // without the CR
			value = value[:len(value):len(value)]
		}
	}
	return value, n
}

// equalFoldName compares a field name of the block with name, ASCII
// case-insensitively.
func equalFoldName(b []byte, name string) bool {
	for i := 0; i < len(b); i++ {
		c, d := b[i], name[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if 'A' <= d && d <= 'Z' {
			d += 'a' - 'A'
		}
		if c != d {
			return false
		}
	}
	return true
}

// validFieldValue reports whether a field value holds no control byte
// but tab (and no DEL), eight bytes at a time: a signed S3 request
// carries a few hundred bytes of fields.
func validFieldValue(v []byte) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	for len(v) >= 8 {
		w := binary.LittleEndian.Uint64(v)
		// A byte below 0x20 (a byte of 0x80 or more is not one), or 0x7f.
		if (w-0x20*ones)&^w&highs != 0 || ((w^0x7f*ones)-ones)&^(w^0x7f*ones)&highs != 0 {
			for _, c := range v[:8] {
				if (c < ' ' && c != '\t') || c == 0x7f {
					return false
				}
			}
		}
		v = v[8:]
	}
	for _, c := range v {
		if (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

// hasBareLF reports an LF not preceded by CR: a client using bare LF line
// ends, which net/http accepts and the fast path does not.
func hasBareLF(b []byte) bool {
	for i := 0; i < len(b); i++ {
		if b[i] == '\n' && (i == 0 || b[i-1] != '\r') {
			return true
		}
	}
	return false
}

// isTokenByte reports a tchar of RFC 9110 §5.6.2.
func isTokenByte(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	switch c {
	case '!', '#', '$', '%', '&', '\'', '*', '+', '-', '.', '^', '_', '`', '|', '~':
		return true
	}
	return false
}

// validHost accepts what a Host field of a name, an IPv4 or a bracketed
// IPv6 address with an optional port can hold; anything else (including
// what net/http would accept) is handed off.
func validHost(h []byte) bool {
	for _, c := range h {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '.' || c == '-' || c == ':' || c == '[' || c == ']' || c == '_':
		default:
			return false
		}
	}
	return true
}

func trimOWS(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}

// asciiEqualFold compares b with lower, an ASCII lowercase string.
func asciiEqualFold(b []byte, lower string) bool {
	if len(b) != len(lower) {
		return false
	}
	for i := 0; i < len(b); i++ {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

// DecodePath percent-decodes the path of r's target (the part before '?')
// into dst[:0] as url.ParseRequestURI does for URL.Path ('+' stays '+'),
// and sets r.Path to it; it returns the decoded bytes (dst, grown if
// needed, for reuse). ok is false for a malformed escape, which net/http
// answers with 400.
func (r *Request) DecodePath(dst []byte) (_ []byte, ok bool) {
	raw := r.Target
	if r.Query != nil {
		raw = raw[:len(raw)-len(r.Query)-1]
	}
	dst, ok = unescapePath(dst[:0], raw)
	r.Path = dst
	return dst, ok
}

// unescapePath percent-decodes p into dst (DecodePath).
func unescapePath(dst, p []byte) ([]byte, bool) {
	for i := 0; i < len(p); i++ {
		c := p[i]
		if c != '%' {
			dst = append(dst, c)
			continue
		}
		if i+2 >= len(p) || !isHexByte(p[i+1]) || !isHexByte(p[i+2]) {
			return dst, false
		}
		dst = append(dst, unhex(p[i+1])<<4|unhex(p[i+2]))
		i += 2
	}
	return dst, true
}

func isHexByte(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case '0' <= c && c <= '9':
		return c - '0'
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10
	default:
		return c - 'A' + 10
	}
}

// View returns b, bytes of a Request, as a string without copying. A
// planner may pass such a view only to functions that do not keep it past
// the request (header parsers, an access log that formats the line at
// once): the buffer is reused for the next request. Anything kept longer
// (by a store, a cache, an error) must be a real string.
func View(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(unsafe.SliceData(b), len(b))
}
