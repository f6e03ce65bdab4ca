package httpapi

import (
	"bytes"
	"net/http"
	"strings"
	"testing"
)

func TestParseFastRequest(t *testing.T) {
	const limit = 8 << 10
	for _, tc := range []struct {
		name, raw string
		want      parseResult
		check     func(*fastReq) bool
	}{
		{"get", "GET /b/f HTTP/1.1\r\nHost: x\r\n\r\n", parseOK, func(r *fastReq) bool {
			return !r.head && !r.http10 && !r.close && string(r.target) == "/b/f" && r.end == 30
		}},
		{"head 1.0", "HEAD /b/f?q HTTP/1.0\r\n\r\n", parseOK, func(r *fastReq) bool {
			return r.head && r.http10 && r.close && string(r.target) == "/b/f?q"
		}},
		{"1.0 keep-alive", "GET / HTTP/1.0\r\nconnection: Keep-Alive\r\n\r\n", parseOK, func(r *fastReq) bool {
			return !r.close && r.keepAlive10
		}},
		{"1.1 close", "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", parseOK, func(r *fastReq) bool {
			return r.close && !r.keepAlive10
		}},
		{"fields", "GET / HTTP/1.1\r\nHOST: x\r\nRange:  bytes=1-2 \t\r\nrange: bytes=3-4\r\nIf-None-Match: \"e\"\r\nUser-Agent: ua\r\nX-Other: 1\r\nContent-Length: 0\r\n\r\n", parseOK, func(r *fastReq) bool {
			return string(r.hdr[fhRange]) == "bytes=1-2" && string(r.hdr[fhIfNoneMatch]) == `"e"` &&
				string(r.hdr[fhUserAgent]) == "ua" && string(r.hdr[fhHost]) == "x" && r.hdr[fhReferer] == nil
		}},
		{"pipelined: only the first", "GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /b HTTP/1.1\r\n", parseOK, func(r *fastReq) bool {
			return string(r.target) == "/a" && r.end == 28
		}},
		{"incomplete line", "GET /b/f HTT", parseIncomplete, nil},
		{"incomplete header", "GET /b/f HTTP/1.1\r\nHost: x\r\n", parseIncomplete, nil},
		{"empty", "", parseIncomplete, nil},
		{"bare LF, incomplete", "GET /b/f HTTP/1.1\nHost", parseHandoff, nil},
		{"bare LF in block", "GET /b/f HTTP/1.1\r\nHost: x\nY: z\r\n\r\n", parseHandoff, nil},
		{"too long", "GET /" + strings.Repeat("a", limit) + " HTTP/1.1\r\n\r\n", parseHandoff, nil},
		{"too long, incomplete", "GET /" + strings.Repeat("a", limit), parseHandoff, nil},
		{"put", "PUT /b/f HTTP/1.1\r\nHost: x\r\n\r\n", parseHandoff, nil},
		{"lowercase get", "get /b/f HTTP/1.1\r\nHost: x\r\n\r\n", parseHandoff, nil},
		{"http/1.2", "GET /b/f HTTP/1.2\r\nHost: x\r\n\r\n", parseHandoff, nil},
		{"no host", "GET /b/f HTTP/1.1\r\n\r\n", parseHandoff, nil},
		{"two hosts", "GET /b/f HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n", parseHandoff, nil},
		{"odd host", "GET /b/f HTTP/1.1\r\nHost: x/y\r\n\r\n", parseHandoff, nil},
		{"absolute form", "GET http://x/b HTTP/1.1\r\nHost: x\r\n\r\n", parseHandoff, nil},
		{"asterisk", "GET * HTTP/1.1\r\nHost: x\r\n\r\n", parseHandoff, nil},
		{"fragment", "GET /b#f HTTP/1.1\r\nHost: x\r\n\r\n", parseHandoff, nil},
		{"non-ASCII target", "GET /b/\xc3\xbc HTTP/1.1\r\nHost: x\r\n\r\n", parseHandoff, nil},
		{"extra space", "GET /b/f  HTTP/1.1\r\nHost: x\r\n\r\n", parseHandoff, nil},
		{"body", "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello", parseHandoff, nil},
		{"chunked", "GET / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n", parseHandoff, nil},
		{"expect", "GET / HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n\r\n", parseHandoff, nil},
		{"upgrade", "GET / HTTP/1.1\r\nHost: x\r\nUpgrade: h2c\r\n\r\n", parseHandoff, nil},
		{"connection list", "GET / HTTP/1.1\r\nHost: x\r\nConnection: keep-alive, close\r\n\r\n", parseHandoff, nil},
		{"two connection fields", "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\nConnection: close\r\n\r\n", parseHandoff, nil},
		{"folded", "GET / HTTP/1.1\r\nHost: x\r\nX: a\r\n b\r\n\r\n", parseHandoff, nil},
		{"space before colon", "GET / HTTP/1.1\r\nHost : x\r\n\r\n", parseHandoff, nil},
		{"no colon", "GET / HTTP/1.1\r\nHost x\r\n\r\n", parseHandoff, nil},
		{"control byte", "GET / HTTP/1.1\r\nHost: x\r\nX: a\x01b\r\n\r\n", parseHandoff, nil},
		{"leading CRLF", "\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n", parseHandoff, nil},
	} {
		req, got := parseFastRequest([]byte(tc.raw), limit)
		if got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
			continue
		}
		if tc.check != nil && !tc.check(&req) {
			t.Errorf("%s: parsed %+v", tc.name, req)
		}
	}
}

func TestParseFastRequestNoAllocs(t *testing.T) {
	raw := []byte("GET /pub/static/site.css HTTP/1.1\r\nHost: cairn\r\nUser-Agent: x\r\nAccept: */*\r\nIf-None-Match: \"abc\"\r\n\r\n")
	if n := testing.AllocsPerRun(100, func() { parseFastRequest(raw, 8<<10) }); n != 0 {
		t.Fatalf("%v allocations", n)
	}
}

func TestUnescapePath(t *testing.T) {
	for _, tc := range []struct {
		in, out string
		ok      bool
	}{
		{"/a/b", "/a/b", true}, {"/a%20b", "/a b", true}, {"/%C3%bc+x", "/ü+x", true},
		{"/a%2Fb", "/a/b", true}, {"/%", "", false}, {"/%2", "", false}, {"/%zz", "", false},
	} {
		got, ok := unescapePath(nil, []byte(tc.in))
		if ok != tc.ok || (ok && string(got) != tc.out) {
			t.Errorf("%q: %q %v", tc.in, got, ok)
		}
	}
}

// appendFieldString must write stored values as net/http's Header.Write.
func TestAppendFieldStringLikeNetHTTP(t *testing.T) {
	for _, v := range []string{"text/css", " padded\t", "a\r\nb", "\nx\ry\n", "", "ü"} {
		var want bytes.Buffer
		must(t, http.Header{"X-Test": {v}}.Write(&want))
		if got := appendFieldString(nil, "X-Test: ", v); string(got) != want.String() {
			t.Errorf("%q: got %q, want %q", v, got, want.String())
		}
	}
}
