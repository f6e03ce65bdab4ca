package httpapi

import (
	"bytes"
	"unsafe"
)

// Fields of a request the fast path reads (fastReq.hdr), by index.
const (
	fhAuthorization = iota
	fhRange
	fhIfRange
	fhIfMatch
	fhIfNoneMatch
	fhIfModifiedSince
	fhIfUnmodifiedSince
	fhReferer
	fhUserAgent
	fhHost
	fhConnection
	fhXForwardedFor
	fhCount
)

// fastReq is a GET or HEAD request parsed in place from a connection's read
// buffer by parseFastRequest. Its byte slices point into that buffer: they
// are valid until the request's bytes are discarded.
type fastReq struct {
	head   bool // HEAD, else GET
	http10 bool // HTTP/1.0, else HTTP/1.1
	// close: the connection closes after the response (HTTP/1.1 with
	// "Connection: close", HTTP/1.0 without "Connection: keep-alive").
	close bool
	// keepAlive10: HTTP/1.0 with "Connection: keep-alive", which net/http
	// answers with "Connection: keep-alive".
	keepAlive10 bool
	target      []byte          // the raw origin-form target, query included
	hdr         [fhCount][]byte // first value of each field, trimmed; nil if absent
	end         int             // bytes taken by the request line and header block
}

// parseResult is the verdict of parseFastRequest.
type parseResult uint8

const (
	parseOK         parseResult = iota // a complete request the fast path serves
	parseIncomplete                    // the header block has not ended yet: read more
	parseHandoff                       // anything else: net/http serves it
)

var crlfcrlf = []byte("\r\n\r\n")

// parseFastRequest parses the request at the start of buf without
// consuming or copying it. It answers parseOK only for what the fast path
// fully supports: "GET" or "HEAD", an origin-form target of printable ASCII
// without '#', "HTTP/1.1" (with one valid Host) or "HTTP/1.0", CRLF line
// ends, well-formed header fields without obsolete folding or control
// bytes, no body (Content-Length absent or 0, no Transfer-Encoding), no
// Expect or Upgrade, at most one Connection field saying "close" or
// "keep-alive", and a request line plus header block of at most limit
// bytes. parseIncomplete means the block may still become such a request
// (it is shorter than limit and has no bare LF); everything else is
// parseHandoff, and net/http decides (a 400, a 431, or a normal answer).
func parseFastRequest(buf []byte, limit int) (fastReq, parseResult) {
	var req fastReq
	end := bytes.Index(buf, crlfcrlf)
	if end < 0 {
		if len(buf) >= limit || hasBareLF(buf) {
			return req, parseHandoff
		}
		return req, parseIncomplete
	}
	end += len(crlfcrlf)
	if end > limit {
		return req, parseHandoff
	}
	req.end = end
	block := buf[:end-2] // every line, each with its CRLF

	// Request line: METHOD SP TARGET SP VERSION.
	nl := bytes.IndexByte(block, '\n')
	if nl < 1 || block[nl-1] != '\r' {
		return req, parseHandoff
	}
	line := block[:nl-1]
	rest := block[nl+1:]
	switch {
	case len(line) > 4 && string(line[:4]) == "GET ":
		line = line[4:]
	case len(line) > 5 && string(line[:5]) == "HEAD ":
		req.head = true
		line = line[5:]
	default:
		return req, parseHandoff
	}
	sp := bytes.IndexByte(line, ' ')
	if sp <= 0 || line[0] != '/' {
		return req, parseHandoff
	}
	req.target, line = line[:sp], line[sp+1:]
	for _, c := range req.target {
		if c <= ' ' || c >= 0x7f || c == '#' {
			return req, parseHandoff
		}
	}
	switch string(line) {
	case "HTTP/1.1":
	case "HTTP/1.0":
		req.http10 = true
	default:
		return req, parseHandoff
	}

	// Header fields: NAME ":" OWS VALUE OWS CRLF.
	hosts := 0
	conns := 0
	for len(rest) > 0 {
		nl := bytes.IndexByte(rest, '\n')
		line, rest = rest[:nl], rest[nl+1:]
		if len(line) == 0 || line[len(line)-1] != '\r' {
			return req, parseHandoff // a bare LF inside the block
		}
		line = line[:len(line)-1]
		colon := bytes.IndexByte(line, ':')
		if colon <= 0 {
			return req, parseHandoff
		}
		name := line[:colon]
		for _, c := range name {
			if !isTokenByte(c) {
				return req, parseHandoff
			}
		}
		value := line[colon+1:]
		for _, c := range value {
			if (c < ' ' && c != '\t') || c == 0x7f {
				return req, parseHandoff
			}
		}
		value = trimOWS(value)
		i := -1
		switch len(name) {
		case 4:
			if asciiEqualFold(name, "host") {
				hosts++
				i = fhHost
			}
		case 5:
			if asciiEqualFold(name, "range") {
				i = fhRange
			}
		case 6:
			if asciiEqualFold(name, "expect") {
				return req, parseHandoff
			}
		case 7:
			switch {
			case asciiEqualFold(name, "referer"):
				i = fhReferer
			case asciiEqualFold(name, "upgrade"):
				return req, parseHandoff
			}
		case 8:
			switch {
			case asciiEqualFold(name, "if-range"):
				i = fhIfRange
			case asciiEqualFold(name, "if-match"):
				i = fhIfMatch
			}
		case 10:
			switch {
			case asciiEqualFold(name, "user-agent"):
				i = fhUserAgent
			case asciiEqualFold(name, "connection"):
				conns++
				i = fhConnection
			}
		case 13:
			switch {
			case asciiEqualFold(name, "authorization"):
				i = fhAuthorization
			case asciiEqualFold(name, "if-none-match"):
				i = fhIfNoneMatch
			}
		case 14:
			if asciiEqualFold(name, "content-length") && string(value) != "0" {
				return req, parseHandoff
			}
		case 15:
			if asciiEqualFold(name, "x-forwarded-for") {
				if req.hdr[fhXForwardedFor] != nil {
					return req, parseHandoff // several: net/http joins them for the rules
				}
				i = fhXForwardedFor
			}
		case 17:
			switch {
			case asciiEqualFold(name, "if-modified-since"):
				i = fhIfModifiedSince
			case asciiEqualFold(name, "transfer-encoding"):
				return req, parseHandoff
			}
		case 18:
			if asciiEqualFold(name, "x-cairn-consistent") {
				return req, parseHandoff // a consistent read: net/http runs the barrier
			}
		case 19:
			if asciiEqualFold(name, "if-unmodified-since") {
				i = fhIfUnmodifiedSince
			}
		}
		if i >= 0 && req.hdr[i] == nil {
			req.hdr[i] = value[:len(value):len(value)]
		}
	}

	if hosts > 1 || (hosts == 0 && !req.http10) || !validHost(req.hdr[fhHost]) || conns > 1 {
		return req, parseHandoff
	}
	switch c := req.hdr[fhConnection]; {
	case len(c) == 0:
		req.close = req.http10
	case asciiEqualFold(c, "close"):
		req.close = true
	case asciiEqualFold(c, "keep-alive"):
		req.keepAlive10 = req.http10
	default:
		return req, parseHandoff
	}
	return req, parseOK
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

// unescapePath percent-decodes the path part of an origin-form target into
// dst as url.ParseRequestURI does for URL.Path ('+' stays '+'). ok is false
// for a malformed escape, which net/http answers with 400.
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

// view returns b as a string without copying. The fast path uses it only
// for request bytes that it passes to functions of this package which do
// not keep them past the request (the header parsers, planObject, the
// access log, which formats the line at once); the read buffer is not
// changed until the request is done. Anything handed to the store or
// kept longer is a real string.
func view(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(unsafe.SliceData(b), len(b))
}
