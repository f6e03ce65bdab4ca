package fastpath

import (
	"bufio"
	"bytes"
	"net/http"
	"net/textproto"
	"strings"
	"testing"
)

// FuzzParseFastRequest checks Parse against net/http's reader:
// it must never panic, and whatever it takes (ParseOK) net/http must read
// as the same bodiless request, ending at the same byte, with the same
// first value of every field the fast path reads (Hdr and Field). ParseIncomplete must
// stay a prefix net/http cannot yet have finished.
func FuzzParseFastRequest(f *testing.F) {
	for _, s := range []string{
		"GET /b/f HTTP/1.1\r\nHost: x\r\n\r\n",
		"HEAD /b/f?q HTTP/1.0\r\n\r\n",
		"GET / HTTP/1.0\r\nconnection: Keep-Alive\r\n\r\n",
		"GET / HTTP/1.1\r\nHOST: x\r\nRange:  bytes=1-2 \t\r\nrange: bytes=3-4\r\nContent-Length: 0\r\n\r\n",
		"GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /b HTTP/1.1\r\n",
		"GET / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nContent-Length: 5\r\n\r\nhello",
		"GET / HTTP/1.1\r\nHost: x\r\nX: a\r\n b\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: x\nX: y\r\n\r\n",
		"GET /%2e%2e/x HTTP/1.1\r\nHost: [::1]:80\r\nAuthorization: Bearer k\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: x\r\nIf-None-Match: \"e\"\r\nUser-Agent: \xff\r\n\r\n",
		"GET /b/k HTTP/1.1\r\nHost: h\r\nX-Amz-Date: 20261127T120000Z\r\nx-amz-date:  2 \r\nX-Amz-Content-Sha256: UNSIGNED-PAYLOAD\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, buf []byte) {
		const limit = 1 << 10
		req, verdict := Parse(buf, limit)
		switch verdict {
		case ParseHandoff:
			return
		case ParseIncomplete:
			if len(buf) >= limit {
				t.Fatalf("incomplete with %d bytes, limit %d", len(buf), limit)
			}
			return
		}
		if req.End <= 0 || req.End > len(buf) || req.End > limit {
			t.Fatalf("end %d of %d", req.End, len(buf))
		}
		dec, escOK := req.DecodePath(nil)
		br := bufio.NewReader(bytes.NewReader(buf))
		hr, err := http.ReadRequest(br)
		if err != nil && !escOK {
			return // the connection hands a malformed escape to net/http (400)
		}
		if err != nil {
			t.Fatalf("fast path took a request net/http refuses: %v\n%q", err, buf)
		}
		// What net/http's server checks beyond ReadRequest.
		// (ReadRequest moves Host out of the map; validHost's bytes are a
		// subset of what net/http allows in one.)
		for k, vv := range hr.Header {
			if !isToken(k) {
				t.Fatalf("bad header name %q: %q", k, buf)
			}
			for _, v := range vv {
				if strings.ContainsFunc(v, func(r rune) bool { return (r < ' ' && r != '\t') || r == 0x7f }) {
					t.Fatalf("bad header value %q: %q", v, buf)
				}
			}
		}
		if hr.ContentLength != 0 || len(hr.TransferEncoding) > 0 || hr.Header.Get("Expect") != "" || hr.Header.Get("Upgrade") != "" {
			t.Fatalf("fast path took a request with a body, Expect or Upgrade: %q", buf)
		}
		if consumed := len(buf) - br.Buffered(); consumed != req.End {
			t.Fatalf("fast path ends the request at %d, net/http at %d: %q", req.End, consumed, buf)
		}
		wantMethod := "GET"
		if req.Head {
			wantMethod = "HEAD"
		}
		if hr.Method != wantMethod || hr.RequestURI != string(req.Target) || hr.ProtoMinor == 1 == req.HTTP10 || hr.ProtoMajor != 1 {
			t.Fatalf("request line differs: %s %s %s vs %+v: %q", hr.Method, hr.RequestURI, hr.Proto, req, buf)
		}
		if (req.Query != nil) != (hr.URL.RawQuery != "" || hr.URL.ForceQuery) || string(req.Query) != hr.URL.RawQuery {
			t.Fatalf("query %q (%v), net/http %q", req.Query, req.Query != nil, hr.URL.RawQuery)
		}
		if !strings.HasPrefix(hr.URL.Path, "/") || hr.URL.Host != "" {
			t.Fatalf("target not origin-form for net/http: %+v", hr.URL)
		}
		if !escOK || string(dec) != hr.URL.Path {
			t.Fatalf("decoded path %q (%v), net/http %q", dec, escOK, hr.URL.Path)
		}
		for i, name := range [HdrCount]string{
			HdrAuthorization: "Authorization", HdrRange: "Range", HdrIfRange: "If-Range", HdrIfMatch: "If-Match",
			HdrIfNoneMatch: "If-None-Match", HdrIfModifiedSince: "If-Modified-Since",
			HdrIfUnmodifiedSince: "If-Unmodified-Since", HdrReferer: "Referer", HdrUserAgent: "User-Agent",
			HdrHost: "Host", HdrConnection: "Connection",
		} {
			vv, present := hr.Header[textproto.CanonicalMIMEHeaderKey(name)]
			if name == "Host" {
				if hr.Host != string(req.Hdr[i]) {
					t.Fatalf("Host: fast %q, net/http %q: %q", req.Hdr[i], hr.Host, buf)
				}
				continue
			}
			if present != (req.Hdr[i] != nil) || (present && vv[0] != string(req.Hdr[i])) {
				t.Fatalf("%s: fast %q (%v), net/http %q: %q", name, req.Hdr[i], req.Hdr[i] != nil, vv, buf)
			}
		}
		// Field reads every other field as net/http does: the count of
		// its lines and the first value.
		for k, vv := range hr.Header {
			if v, n := req.Field(strings.ToLower(k)); n != len(vv) || string(v) != vv[0] {
				t.Fatalf("Field(%q) = %q, %d; net/http %q: %q", k, v, n, vv, buf)
			}
		}
		if v, n := req.Field("host"); n > 1 || string(v) != hr.Host { // net/http keeps it out of the map
			t.Fatalf("Field(host) = %q, %d; net/http %q: %q", v, n, hr.Host, buf)
		}
		if hr.Close != req.Close {
			t.Fatalf("close: fast %v, net/http %v: %q", req.Close, hr.Close, buf)
		}
	})
}

func isToken(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isTokenByte(s[i]) {
			return false
		}
	}
	return s != ""
}
