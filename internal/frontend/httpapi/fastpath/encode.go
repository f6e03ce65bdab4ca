package fastpath

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// The encoders of an answer's head, byte for byte as net/http writes it
// (its response writer's order: the handler's fields sorted by name, then
// Date, then, for a body it buffered whole, Content-Length, then
// Connection). A planner appends its own fields between AppendStatusLine
// and AppendHeadEnd (or AppendDate and AppendConnection).

// AppendStatusLine appends the status line of code as net/http writes it,
// in req's HTTP version.
func AppendStatusLine(b []byte, req *Request, code int) []byte {
	if req.HTTP10 {
		b = append(b, "HTTP/1.0 "...)
	} else {
		b = append(b, "HTTP/1.1 "...)
	}
	text := http.StatusText(code)
	if text == "" {
		return fmt.Appendf(b, "%03d status code %d\r\n", code, code)
	}
	b = strconv.AppendInt(b, int64(code), 10)
	b = append(b, ' ')
	b = append(b, text...)
	return append(b, "\r\n"...)
}

// AppendDate appends the Date field of req's answer.
func AppendDate(b []byte, req *Request) []byte {
	b = append(b, "Date: "...)
	b = append(b, req.Date...)
	return append(b, "\r\n"...)
}

// AppendConnection appends the Connection field net/http adds:
// "keep-alive" for an HTTP/1.0 keep-alive request (every fast-path answer
// has a length or no body), "close" for an HTTP/1.1 request that asked
// for it; nothing otherwise.
func AppendConnection(b []byte, req *Request) []byte {
	switch {
	case req.KeepAlive10:
		return append(b, "Connection: keep-alive\r\n"...)
	case req.Close && !req.HTTP10:
		return append(b, "Connection: close\r\n"...)
	}
	return b
}

// AppendHeadEnd ends a head after the handler's fields: Date, Connection
// and the blank line.
func AppendHeadEnd(b []byte, req *Request) []byte {
	b = AppendDate(b, req)
	b = AppendConnection(b, req)
	return append(b, "\r\n"...)
}

// AppendFieldBytes appends "Name: " + v + CRLF for a value built by the
// planner (nothing to sanitize).
func AppendFieldBytes(b []byte, nameColon string, v []byte) []byte {
	b = append(b, nameColon...)
	b = append(b, v...)
	return append(b, "\r\n"...)
}

// AppendField appends "Name: " + v + CRLF for a stored value (a content
// type, a bucket's Cache-Control), sanitized as net/http's Header.Write
// does: CR and LF become spaces, surrounding white space goes.
func AppendField(b []byte, nameColon string, v string) []byte {
	b = append(b, nameColon...)
	for len(v) > 0 && isASCIISpace(v[0]) {
		v = v[1:]
	}
	for len(v) > 0 && isASCIISpace(v[len(v)-1]) {
		v = v[:len(v)-1]
	}
	for {
		i := strings.IndexAny(v, "\r\n")
		if i < 0 {
			break
		}
		b = append(b, v[:i]...)
		b = append(b, ' ')
		v = v[i+1:]
	}
	b = append(b, v...)
	return append(b, "\r\n"...)
}

func isASCIISpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
