package fastpath

import (
	"bytes"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
)

func TestParseFastRequest(t *testing.T) {
	const limit = 8 << 10
	for _, tc := range []struct {
		name, raw string
		want      Verdict
		check     func(*Request) bool
	}{
		{"get", "GET /b/f HTTP/1.1\r\nHost: x\r\n\r\n", ParseOK, func(r *Request) bool {
			return !r.Head && !r.HTTP10 && !r.Close && string(r.Target) == "/b/f" && r.End == 30 && r.Query == nil
		}},
		{"head 1.0", "HEAD /b/f?q HTTP/1.0\r\n\r\n", ParseOK, func(r *Request) bool {
			return r.Head && r.HTTP10 && r.Close && string(r.Target) == "/b/f?q" && string(r.Query) == "q"
		}},
		{"empty query", "GET /b/f? HTTP/1.1\r\nHost: x\r\n\r\n", ParseOK, func(r *Request) bool {
			return r.Query != nil && len(r.Query) == 0
		}},
		{"1.0 keep-alive", "GET / HTTP/1.0\r\nconnection: Keep-Alive\r\n\r\n", ParseOK, func(r *Request) bool {
			return !r.Close && r.KeepAlive10
		}},
		{"1.1 close", "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", ParseOK, func(r *Request) bool {
			return r.Close && !r.KeepAlive10
		}},
		{"fields", "GET / HTTP/1.1\r\nHOST: x\r\nRange:  bytes=1-2 \t\r\nrange: bytes=3-4\r\nIf-None-Match: \"e\"\r\nUser-Agent: ua\r\nX-Other: 1\r\nContent-Length: 0\r\n\r\n", ParseOK, func(r *Request) bool {
			return string(r.Hdr[HdrRange]) == "bytes=1-2" && string(r.Hdr[HdrIfNoneMatch]) == `"e"` &&
				string(r.Hdr[HdrUserAgent]) == "ua" && string(r.Hdr[HdrHost]) == "x" && r.Hdr[HdrReferer] == nil
		}},
		{"pipelined: only the first", "GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /b HTTP/1.1\r\n", ParseOK, func(r *Request) bool {
			return string(r.Target) == "/a" && r.End == 28
		}},
		{"incomplete line", "GET /b/f HTT", ParseIncomplete, nil},
		{"incomplete header", "GET /b/f HTTP/1.1\r\nHost: x\r\n", ParseIncomplete, nil},
		{"empty", "", ParseIncomplete, nil},
		{"bare LF, incomplete", "GET /b/f HTTP/1.1\nHost", ParseHandoff, nil},
		{"bare LF in block", "GET /b/f HTTP/1.1\r\nHost: x\nY: z\r\n\r\n", ParseHandoff, nil},
		{"too long", "GET /" + strings.Repeat("a", limit) + " HTTP/1.1\r\n\r\n", ParseHandoff, nil},
		{"too long, incomplete", "GET /" + strings.Repeat("a", limit), ParseHandoff, nil},
		{"put", "PUT /b/f HTTP/1.1\r\nHost: x\r\n\r\n", ParseHandoff, nil},
		{"lowercase get", "get /b/f HTTP/1.1\r\nHost: x\r\n\r\n", ParseHandoff, nil},
		{"http/1.2", "GET /b/f HTTP/1.2\r\nHost: x\r\n\r\n", ParseHandoff, nil},
		{"no host", "GET /b/f HTTP/1.1\r\n\r\n", ParseHandoff, nil},
		{"two hosts", "GET /b/f HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n", ParseHandoff, nil},
		{"odd host", "GET /b/f HTTP/1.1\r\nHost: x/y\r\n\r\n", ParseHandoff, nil},
		{"absolute form", "GET http://x/b HTTP/1.1\r\nHost: x\r\n\r\n", ParseHandoff, nil},
		{"asterisk", "GET * HTTP/1.1\r\nHost: x\r\n\r\n", ParseHandoff, nil},
		{"fragment", "GET /b#f HTTP/1.1\r\nHost: x\r\n\r\n", ParseHandoff, nil},
		{"non-ASCII target", "GET /b/\xc3\xbc HTTP/1.1\r\nHost: x\r\n\r\n", ParseHandoff, nil},
		{"extra space", "GET /b/f  HTTP/1.1\r\nHost: x\r\n\r\n", ParseHandoff, nil},
		{"body", "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello", ParseHandoff, nil},
		{"chunked", "GET / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n", ParseHandoff, nil},
		{"expect", "GET / HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n\r\n", ParseHandoff, nil},
		{"upgrade", "GET / HTTP/1.1\r\nHost: x\r\nUpgrade: h2c\r\n\r\n", ParseHandoff, nil},
		{"connection list", "GET / HTTP/1.1\r\nHost: x\r\nConnection: keep-alive, close\r\n\r\n", ParseHandoff, nil},
		{"two connection fields", "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\nConnection: close\r\n\r\n", ParseHandoff, nil},
		{"folded", "GET / HTTP/1.1\r\nHost: x\r\nX: a\r\n b\r\n\r\n", ParseHandoff, nil},
		{"space before colon", "GET / HTTP/1.1\r\nHost : x\r\n\r\n", ParseHandoff, nil},
		{"no colon", "GET / HTTP/1.1\r\nHost x\r\n\r\n", ParseHandoff, nil},
		{"control byte", "GET / HTTP/1.1\r\nHost: x\r\nX: a\x01b\r\n\r\n", ParseHandoff, nil},
		{"leading CRLF", "\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n", ParseHandoff, nil},
	} {
		req, got := Parse([]byte(tc.raw), limit)
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
	if n := testing.AllocsPerRun(100, func() { Parse(raw, 8<<10) }); n != 0 {
		t.Fatalf("%v allocations", n)
	}
}

func TestDecodePath(t *testing.T) {
	for _, tc := range []struct{ raw, path string }{
		{"GET /a%20b?x=%20 HTTP/1.1\r\nHost: h\r\n\r\n", "/a b"},
		{"GET /a%3Fb? HTTP/1.1\r\nHost: h\r\n\r\n", "/a?b"},
		{"GET /plain HTTP/1.1\r\nHost: h\r\n\r\n", "/plain"},
	} {
		req, v := Parse([]byte(tc.raw), 8<<10)
		if v != ParseOK {
			t.Fatalf("%q: %v", tc.raw, v)
		}
		scratch := make([]byte, 0, 64)
		dec, ok := req.DecodePath(scratch)
		if !ok || string(dec) != tc.path || string(req.Path) != tc.path || &dec[0] != &scratch[:1][0] {
			t.Errorf("%q: %q %v (Path %q)", tc.raw, dec, ok, req.Path)
		}
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

// AppendField must write stored values as net/http's Header.Write.
func TestAppendFieldLikeNetHTTP(t *testing.T) {
	for _, v := range []string{"text/css", " padded\t", "a\r\nb", "\nx\ry\n", "", "ü"} {
		var want bytes.Buffer
		if err := (http.Header{"X-Test": {v}}).Write(&want); err != nil {
			t.Fatal(err)
		}
		if got := AppendField(nil, "X-Test: ", v); string(got) != want.String() {
			t.Errorf("%q: got %q, want %q", v, got, want.String())
		}
	}
}

// TestRequestField: Field reads any field of the block, in any case,
// trimmed as Hdr's values, counts repeated fields, and does not allocate.
func TestRequestField(t *testing.T) {
	raw := "GET /b/k HTTP/1.1\r\nHost: h:9000\r\nX-Amz-Date:  20261127T120000Z \t\r\n" +
		"x-amz-content-sha256: UNSIGNED-PAYLOAD\r\nAuthorization: AWS4-HMAC-SHA256 Credential=a/b\r\n" +
		"X-Dup: 1\r\nx-dup: 2\r\nX-Empty:\r\nX-Amz: no\r\n\r\nGET /next HTTP/1.1\r\nX-Later: 1\r\n\r\n"
	req, v := Parse([]byte(raw), 8<<10)
	if v != ParseOK {
		t.Fatalf("verdict %v", v)
	}
	for _, tc := range []struct {
		name string
		want string
		n    int
	}{
		{"host", "h:9000", 1},
		{"x-amz-date", "20261127T120000Z", 1},
		{"X-AMZ-CONTENT-SHA256", "UNSIGNED-PAYLOAD", 1},
		{"authorization", "AWS4-HMAC-SHA256 Credential=a/b", 1},
		{"x-dup", "1", 2},
		{"x-empty", "", 1},
		{"x-amz", "no", 1},        // not a prefix of a longer name
		{"x-am", "", 0},           // nor a prefix of it
		{"x-later", "", 0},        // the next request's
		{"range", "", 0},          // absent
		{"x-amz-date-x", "", 0},   // longer than any
		{"content-sha256", "", 0}, // a suffix
	} {
		v, n := req.Field(tc.name)
		if string(v) != tc.want || n != tc.n || (n > 0) != (v != nil) {
			t.Errorf("Field(%q) = %q, %d; want %q, %d", tc.name, v, n, tc.want, tc.n)
		}
	}
	if a := testing.AllocsPerRun(100, func() { req.Field("x-amz-content-sha256") }); a != 0 {
		t.Errorf("Field allocates %v times", a)
	}
}

// TestValidFieldValue: the word-at-a-time check agrees with the byte
// loop on every byte value at every position, and on random values.
func TestValidFieldValue(t *testing.T) {
	slow := func(v []byte) bool {
		for _, c := range v {
			if (c < ' ' && c != '\t') || c == 0x7f {
				return false
			}
		}
		return true
	}
	base := []byte("AWS4-HMAC-SHA256 Credential=AKID/20261127/us-east-1/s3/aws4_request, SignedHeaders=host")
	for n := 0; n <= len(base); n++ {
		for pos := 0; pos < n; pos++ {
			for c := 0; c < 256; c++ {
				v := append([]byte(nil), base[:n]...)
				v[pos] = byte(c)
				if got, want := validFieldValue(v), slow(v); got != want {
					t.Fatalf("%q: %v, want %v", v, got, want)
				}
			}
		}
	}
	rng := rand.New(rand.NewPCG(9, 10))
	for range 100000 {
		v := make([]byte, rng.IntN(40))
		for i := range v {
			v[i] = byte(rng.IntN(256))
			if rng.IntN(3) > 0 {
				v[i] = byte(' ' + rng.IntN(95))
			}
		}
		if got, want := validFieldValue(v), slow(v); got != want {
			t.Fatalf("%q: %v, want %v", v, got, want)
		}
	}
}
