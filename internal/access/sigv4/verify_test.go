package sigv4

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/smithy-go/encoding/httpbinding"
)

// trickyKeys are object keys whose encoding trips up SigV4 implementations.
func trickyKeys() []string {
	return []string{
		"plain.txt",
		"with space/and  two  spaces.txt",
		"unicode/héllo wörld/日本語.txt",
		"plus+sign+.txt",
		"percent%20literal%2F%.txt",
		"tilde~dash-underscore_dot.txt",
		"eq=amp&semi;colon:at@dollar$bang!quote'(paren)*star,comma.txt",
		"dir//double-slash/./dot/../dotdot",
		"question?hash#bracket[]{}|^`\"<>\\",
		"",
	}
}

// trickyQueries are raw query strings as clients send them.
func trickyQueries() []string {
	return []string{
		"",
		"acl",
		"list-type=2&prefix=photos%2F2024%2F&delimiter=%2F",
		"prefix=raw/slash/&delimiter=/",
		"a=b%20c&a=b+c",
		"x=%3D%26&y=%2B&z=~&w=%7E",
		"empty=&k2=v&k2=a&flag",
		"uploads&prefix=%E6%97%A5%E6%9C%AC",
		"versionId=3%2FL4kqtJlcpXroDTDmJ%2Bruno&partNumber=1",
		"k=a%2Fb&k=a-b",
		"a=1&&b=2",
	}
}

// newKeyRequest builds a request for key in bucket "bkt" the way the AWS
// S3 client does: the path encoded with the SDK's EscapePath.
func newKeyRequest(t testing.TB, method, host, key, rawQuery string, body []byte) *http.Request {
	t.Helper()
	path := "/bkt/" + key
	u := &url.URL{Scheme: "http", Host: host, Path: path, RawPath: "/bkt/" + httpbinding.EscapePath(key, false), RawQuery: rawQuery}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	r, err := http.NewRequest(method, u.String(), rd)
	if err != nil {
		t.Fatal(err)
	}
	if r.URL.Path != path {
		t.Fatalf("path %q parsed as %q", path, r.URL.Path)
	}
	return r
}

// reencodePath returns path with every byte percent-encoded in lowercase
// hex: a valid encoding of the same path that differs from the canonical
// one, so that only a verifier that re-encodes the decoded path accepts a
// signature made over the canonical form.
func reencodePath(path string) string {
	var b strings.Builder
	for i := 0; i < len(path); i++ {
		if path[i] == '/' {
			b.WriteByte('/')
			continue
		}
		fmt.Fprintf(&b, "%%%02x", path[i])
	}
	return b.String()
}

func payloadHashOf(body []byte) string {
	s := sha256.Sum256(body)
	return hex.EncodeToString(s[:])
}

// addTrickyHeaders sets headers whose canonical form needs trimming,
// collapsing and joining.
func addTrickyHeaders(r *http.Request) {
	r.Header.Set("Content-Type", "text/plain; charset=utf-8")
	r.Header.Set("X-Amz-Meta-Note", "  a   b  c  ")
	r.Header.Add("X-Amz-Meta-Multi", "one")
	r.Header.Add("X-Amz-Meta-Multi", "two  three")
	r.Header.Set("X-Amz-Storage-Class", "STANDARD")
	r.Header.Set("User-Agent", "not-signed/1.0")
}

func TestVerifyHeaderAuthSDK(t *testing.T) {
	v := newTestVerifier(t, signTime().Add(3*time.Minute))
	for _, key := range trickyKeys() {
		for _, q := range trickyQueries() {
			for _, method := range []string{http.MethodGet, http.MethodPut} {
				var body []byte
				if method == http.MethodPut {
					body = []byte("hello, " + key)
				}
				r := newKeyRequest(t, method, "s3.example.com", key, q, body)
				addTrickyHeaders(r)
				ph := payloadHashOf(body)
				sdkSign(t, r, ph, testSecret, signTime())
				res, err := v.Verify(r)
				if err != nil {
					t.Fatalf("%s key %q query %q: %v", method, key, q, err)
				}
				if res.AccessKeyID != testAKID || res.Region != testRegion || res.Service != "s3" ||
					!res.Time.Equal(signTime()) || res.PayloadHash != ph || res.Presigned {
					t.Fatalf("%s key %q query %q: result %+v", method, key, q, res)
				}
				if !slices.Contains(res.SignedHeaders, "x-amz-meta-multi") || !slices.Contains(res.SignedHeaders, "host") {
					t.Fatalf("signed headers %v", res.SignedHeaders)
				}
				if got := string(readAll(t, res, r)); got != string(body) {
					t.Fatalf("body %q, want %q", got, body)
				}
				// The same request sent with a different encoding of the
				// same path still verifies.
				r.URL.RawPath = reencodePath(r.URL.Path)
				if _, err := v.Verify(r); err != nil {
					t.Fatalf("%s key %q query %q, path sent as %s: %v", method, key, q, r.URL.RawPath, err)
				}
			}
		}
	}
}

func readAll(t testing.TB, res *Result, r *http.Request) []byte {
	t.Helper()
	b, err := res.Body(r)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(b)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// TestVerifyServerSide sends SDK-signed requests through a real client and
// server, so that the verifier sees them as net/http parses them (Host and
// Content-Length moved out of the header map, the path as sent on the wire).
func TestVerifyServerSide(t *testing.T) {
	v := newTestVerifier(t, signTime().Add(-time.Minute))
	type outcome struct {
		code string
		body string
		path string
	}
	results := make(chan outcome, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o := outcome{path: r.URL.Path}
		res, err := v.Verify(r)
		if err == nil {
			var b *Body
			if b, err = res.Body(r); err == nil {
				var data []byte
				data, err = io.ReadAll(b)
				o.body = string(data)
			}
		}
		if err != nil {
			var e *Error
			if errors.As(err, &e) {
				o.code = e.Code
			} else {
				o.code = err.Error()
			}
		}
		results <- o
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	client := srv.Client()
	send := func(r *http.Request) outcome {
		t.Helper()
		resp, err := client.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return <-results
	}

	for _, key := range trickyKeys() {
		for _, q := range trickyQueries() {
			for _, method := range []string{http.MethodGet, http.MethodPut, http.MethodDelete} {
				var body []byte
				if method == http.MethodPut {
					body = []byte("body of " + key)
				}
				for _, reencode := range []bool{false, true} {
					r := newKeyRequest(t, method, host, key, q, body)
					addTrickyHeaders(r)
					r.Header.Set("Expect", "100-continue")
					sdkSign(t, r, payloadHashOf(body), testSecret, signTime())
					if reencode {
						r.URL.RawPath = reencodePath(r.URL.Path)
					}
					o := send(r)
					if o.code != "" || o.body != string(body) || o.path != "/bkt/"+key {
						t.Fatalf("%s key %q query %q (path sent as %s): %+v", method, key, q, r.URL.EscapedPath(), o)
					}
				}
			}
		}
	}

	// Content-Length signed by the client (the SDK signs it when > 0) and
	// checked against what net/http parsed.
	r := newKeyRequest(t, http.MethodPut, host, "cl", "", []byte("12345"))
	sdkSign(t, r, UnsignedPayload, testSecret, signTime())
	if !strings.Contains(r.Header.Get("Authorization"), "content-length") {
		t.Fatalf("SDK did not sign content-length: %s", r.Header.Get("Authorization"))
	}
	if o := send(r); o.code != "" || o.body != "12345" {
		t.Fatalf("content-length: %+v", o)
	}

	// Failures reach the handler as errors with the right code.
	r = newKeyRequest(t, http.MethodPut, host, "bad", "", []byte("data"))
	sdkSign(t, r, payloadHashOf([]byte("other data")), testSecret, signTime())
	if o := send(r); o.code != "XAmzContentSHA256Mismatch" {
		t.Fatalf("payload mismatch: %+v", o)
	}
	r = newKeyRequest(t, http.MethodGet, host, "bad", "", nil)
	sdkSign(t, r, EmptySHA256, "wrong"+testSecret, signTime())
	if o := send(r); o.code != "SignatureDoesNotMatch" {
		t.Fatalf("wrong secret: %+v", o)
	}

	// A presigned URL followed by a plain client.
	for _, key := range trickyKeys() {
		r := newKeyRequest(t, http.MethodGet, host, key, "response-content-type=text%2Fplain", nil)
		u := sdkPresign(t, r, testSecret, signTime(), time.Hour)
		req, err := http.NewRequest(http.MethodGet, u, nil)
		if err != nil {
			t.Fatal(err)
		}
		if o := send(req); o.code != "" || o.path != "/bkt/"+key {
			t.Fatalf("presigned key %q: %+v (%s)", key, o, u)
		}
	}
}

func TestVerifyHeaderAuthFailures(t *testing.T) {
	at := signTime()
	signed := func(mutate func(r *http.Request)) func(t *testing.T) *http.Request {
		return func(t *testing.T) *http.Request {
			r := newKeyRequest(t, http.MethodGet, "s3.example.com", "some key", "a=1&b=2", nil)
			r.Header.Set("X-Amz-Meta-Signed", "yes")
			sdkSign(t, r, EmptySHA256, testSecret, at)
			if mutate != nil {
				mutate(r)
			}
			return r
		}
	}
	setAuth := func(f func(string) string) func(r *http.Request) {
		return func(r *http.Request) { r.Header.Set("Authorization", f(r.Header.Get("Authorization"))) }
	}
	for _, tc := range []struct {
		name string
		req  func(t *testing.T) *http.Request
		now  time.Time
		want error
		msg  string // a substring of the message
	}{
		{"ok", signed(nil), at, nil, ""},
		{"unsigned header added", signed(func(r *http.Request) { r.Header.Set("X-Amz-Meta-Other", "x") }), at, nil, ""},
		{"skew 14m behind", signed(nil), at.Add(14 * time.Minute), nil, ""},
		{"skew 14m ahead", signed(nil), at.Add(-14 * time.Minute), nil, ""},
		{"skew 20m behind", signed(nil), at.Add(20 * time.Minute), ErrRequestTimeTooSkewed, "20m0s behind the server's clock"},
		{"skew 20m ahead", signed(nil), at.Add(-20 * time.Minute), ErrRequestTimeTooSkewed, "20m0s ahead of the server's clock"},
		{"wrong secret", func(t *testing.T) *http.Request {
			r := newKeyRequest(t, http.MethodGet, "s3.example.com", "k", "", nil)
			sdkSign(t, r, EmptySHA256, testSecret+"x", at)
			return r
		}, at, ErrSignatureDoesNotMatch, ""},
		{"path changed", signed(func(r *http.Request) { r.URL.Path = "/bkt/other key"; r.URL.RawPath = "" }), at, ErrSignatureDoesNotMatch, ""},
		{"query changed", signed(func(r *http.Request) { r.URL.RawQuery = "a=1&b=3" }), at, ErrSignatureDoesNotMatch, ""},
		{"query added", signed(func(r *http.Request) { r.URL.RawQuery += "&c" }), at, ErrSignatureDoesNotMatch, ""},
		{"method changed", signed(func(r *http.Request) { r.Method = http.MethodDelete }), at, ErrSignatureDoesNotMatch, ""},
		{"host changed", signed(func(r *http.Request) { r.Host = "evil.example.com" }), at, ErrSignatureDoesNotMatch, ""},
		{"signed header changed", signed(func(r *http.Request) { r.Header.Set("X-Amz-Meta-Signed", "no") }), at, ErrSignatureDoesNotMatch, ""},
		{"signed header removed", signed(func(r *http.Request) { r.Header.Del("X-Amz-Meta-Signed") }), at, ErrSignatureDoesNotMatch, ""},
		{"payload hash changed", signed(func(r *http.Request) { r.Header.Set("X-Amz-Content-Sha256", UnsignedPayload) }), at, ErrSignatureDoesNotMatch, ""},
		{"date changed", signed(func(r *http.Request) { r.Header.Set("X-Amz-Date", "20260314T150927Z") }), at, ErrSignatureDoesNotMatch, ""},
		{"signature flipped", signed(setAuth(func(a string) string {
			if strings.HasSuffix(a, "0") {
				return a[:len(a)-1] + "1"
			}
			return a[:len(a)-1] + "0"
		})), at, ErrSignatureDoesNotMatch, ""},
		{"missing content sha256", signed(func(r *http.Request) { r.Header.Del("X-Amz-Content-Sha256") }), at, ErrInvalidRequest, "x-amz-content-sha256"},
		{"bad content sha256", signed(func(r *http.Request) {
			r.Header.Set("X-Amz-Content-Sha256", "STREAMING-AWS4-ECDSA-P256-SHA256-PAYLOAD")
		}), at, ErrInvalidArgument, ""},
		{"two dates", signed(func(r *http.Request) { r.Header.Add("X-Amz-Date", r.Header.Get("X-Amz-Date")) }), at, ErrAuthorizationHeaderMalformed, "x-amz-date"},
		{"two payload hashes", signed(func(r *http.Request) { r.Header.Add("X-Amz-Content-Sha256", UnsignedPayload) }), at, ErrInvalidArgument, "x-amz-content-sha256"},
		{"missing date", signed(func(r *http.Request) { r.Header.Del("X-Amz-Date") }), at, ErrAccessDenied, "x-amz-date"},
		{"bad date", signed(func(r *http.Request) { r.Header.Set("X-Amz-Date", "2026-03-14T15:09:26Z") }), at, ErrAuthorizationHeaderMalformed, ""},
		{"scope date mismatch", signed(func(r *http.Request) { r.Header.Set("X-Amz-Date", "20260315T000000Z") }), at, ErrAuthorizationHeaderMalformed, "does not match"},
		{"wrong service", signed(setAuth(func(a string) string { return strings.Replace(a, "/s3/", "/ec2/", 1) })), at, ErrAuthorizationHeaderMalformed, "incorrect service"},
		{"wrong terminal", signed(setAuth(func(a string) string { return strings.Replace(a, "aws4_request", "aws5_request", 1) })), at, ErrAuthorizationHeaderMalformed, ""},
		{"short credential", signed(setAuth(func(a string) string { return strings.Replace(a, "/"+testRegion, "", 1) })), at, ErrAuthorizationHeaderMalformed, ""},
		{"bad credential date", signed(setAuth(func(a string) string { return strings.Replace(a, "/20260314/", "/2026031/", 1) })), at, ErrAuthorizationHeaderMalformed, ""},
		{"short signature", signed(setAuth(func(a string) string { return a[:len(a)-2] })), at, ErrAuthorizationHeaderMalformed, ""},
		{"non-hex signature", signed(setAuth(func(a string) string { return a[:len(a)-1] + "g" })), at, ErrAuthorizationHeaderMalformed, ""},
		{"no signed headers", signed(setAuth(func(a string) string {
			i, j := strings.Index(a, "SignedHeaders="), strings.Index(a, ", Signature=")
			return a[:i] + a[j+2:]
		})), at, ErrAuthorizationHeaderMalformed, ""},
		{"signed headers without host", signed(setAuth(func(a string) string { return strings.Replace(a, "SignedHeaders=host;", "SignedHeaders=", 1) })), at, ErrAuthorizationHeaderMalformed, "host"},
		{"uppercase signed header", signed(setAuth(func(a string) string { return strings.Replace(a, "SignedHeaders=host;", "SignedHeaders=Host;", 1) })), at, ErrAuthorizationHeaderMalformed, ""},
		{"duplicate signed header", signed(setAuth(func(a string) string { return strings.Replace(a, "SignedHeaders=host;", "SignedHeaders=host;host;", 1) })), at, ErrAuthorizationHeaderMalformed, ""},
		{"duplicate component", signed(setAuth(func(a string) string { return a + ", Signature=" + strings.Repeat("0", 64) })), at, ErrAuthorizationHeaderMalformed, "twice"},
		{"unknown component", signed(setAuth(func(a string) string { return a + ", Foo=bar" })), at, ErrAuthorizationHeaderMalformed, ""},
		{"tight spacing accepted", signed(setAuth(func(a string) string { return strings.ReplaceAll(a, ", ", ",") })), at, nil, ""},
		{"two authorization headers", signed(func(r *http.Request) { r.Header.Add("Authorization", r.Header.Get("Authorization")) }), at, ErrAuthorizationHeaderMalformed, ""},
		{"sigv2", signed(func(r *http.Request) { r.Header.Set("Authorization", "AWS "+testAKID+":c2lnbmF0dXJl") }), at, ErrInvalidRequest, "not supported"},
		{"header and query", signed(func(r *http.Request) { r.URL.RawQuery += "&X-Amz-Algorithm=AWS4-HMAC-SHA256" }), at, ErrInvalidRequest, "only one auth mechanism"},
		{"no auth", signed(func(r *http.Request) { r.Header.Del("Authorization") }), at, ErrAccessDenied, "no AWS Signature Version 4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := newTestVerifier(t, tc.now)
			_, err := v.Verify(tc.req(t))
			wantErr(t, tc.name, err, tc.want)
			if tc.msg != "" && !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("message %q lacks %q", err, tc.msg)
			}
			var e *Error
			if tc.want != nil && (!errors.As(err, &e) || e.Code != tc.want.(*Error).Code || e.Status != tc.want.(*Error).Status) {
				t.Fatalf("error %v does not carry code %s", err, tc.want.(*Error).Code)
			}
		})
	}
}

// TestUnknownKeyComputesSignature proves that an unknown access key id is
// rejected only after a full signature computation, like a wrong secret.
func TestUnknownKeyComputesSignature(t *testing.T) {
	v := newTestVerifier(t, signTime())
	var calls []bool
	v.afterSign = func(known bool) { calls = append(calls, known) }

	r := newKeyRequest(t, http.MethodGet, "s3.example.com", "k", "", nil)
	r.Header.Set("X-Amz-Content-Sha256", EmptySHA256)
	creds := testCreds(testSecret)
	creds.AccessKeyID = "AKIDUNKNOWN"
	sdkSignCreds(t, r, creds)
	_, err := v.Verify(r)
	wantErr(t, "unknown id", err, ErrInvalidAccessKeyID)
	if !slices.Equal(calls, []bool{false}) {
		t.Fatalf("signature computations %v, want one with an unknown key", calls)
	}

	// The same for a presigned URL, and for an unknown id whose signature
	// happens to be right for the dummy secret: still refused.
	calls = nil
	r = newKeyRequest(t, http.MethodGet, "s3.example.com", "k", "", nil)
	creds.SecretAccessKey = dummySecret
	u := sdkPresignCreds(t, r, creds)
	req := httptest.NewRequest(http.MethodGet, u, nil)
	_, err = v.Verify(req)
	wantErr(t, "unknown id with the dummy secret", err, ErrInvalidAccessKeyID)
	if !slices.Equal(calls, []bool{false}) {
		t.Fatalf("signature computations %v, want one with an unknown key", calls)
	}

	// A known id with a wrong secret costs the same computation.
	calls = nil
	r = newKeyRequest(t, http.MethodGet, "s3.example.com", "k", "", nil)
	sdkSign(t, r, EmptySHA256, "wrong", signTime())
	_, err = v.Verify(r)
	wantErr(t, "wrong secret", err, ErrSignatureDoesNotMatch)
	if !slices.Equal(calls, []bool{true}) {
		t.Fatalf("signature computations %v, want one with a known key", calls)
	}
}

func TestVerifyPresigned(t *testing.T) {
	at := signTime()
	for _, tc := range []struct {
		name    string
		method  string
		query   string
		expires time.Duration
		now     time.Time
		mutate  func(u string) string
		want    error
		msg     string
	}{
		{name: "get", method: http.MethodGet, expires: time.Hour, now: at.Add(30 * time.Minute)},
		{name: "put", method: http.MethodPut, expires: time.Hour, now: at},
		{name: "extra query", method: http.MethodGet, query: "response-content-disposition=attachment%3B%20filename%3D%22a%20b.txt%22&versionId=x%2By", expires: time.Hour, now: at},
		{name: "last second", method: http.MethodGet, expires: time.Hour, now: at.Add(time.Hour)},
		{name: "expired", method: http.MethodGet, expires: time.Hour, now: at.Add(time.Hour + time.Second), want: ErrAccessDenied, msg: "Request has expired"},
		{name: "max expiry", method: http.MethodGet, expires: 7 * 24 * time.Hour, now: at.Add(6 * 24 * time.Hour)},
		{name: "expiry over a week", method: http.MethodGet, expires: 7*24*time.Hour + time.Second, now: at, want: ErrAccessDenied, msg: "604800"},
		{name: "future within skew", method: http.MethodGet, expires: time.Minute, now: at.Add(-14 * time.Minute)},
		{name: "future beyond skew", method: http.MethodGet, expires: time.Hour, now: at.Add(-16 * time.Minute), want: ErrAccessDenied, msg: "not valid yet"},
		{name: "tampered path", method: http.MethodGet, expires: time.Hour, now: at, mutate: func(u string) string {
			return strings.Replace(u, "/bkt/", "/bkt2/", 1)
		}, want: ErrSignatureDoesNotMatch},
		{name: "tampered expiry", method: http.MethodGet, expires: time.Hour, now: at, mutate: func(u string) string {
			return strings.Replace(u, "X-Amz-Expires=3600", "X-Amz-Expires=3601", 1)
		}, want: ErrSignatureDoesNotMatch},
		{name: "negative expiry", method: http.MethodGet, expires: time.Hour, now: at, mutate: func(u string) string {
			return strings.Replace(u, "X-Amz-Expires=3600", "X-Amz-Expires=-1", 1)
		}, want: ErrAccessDenied},
		{name: "missing signature", method: http.MethodGet, expires: time.Hour, now: at, mutate: func(u string) string {
			i := strings.Index(u, "&X-Amz-Signature=")
			return u[:i]
		}, want: ErrAuthorizationQueryParametersError, msg: "X-Amz-Signature is missing"},
		{name: "duplicate date", method: http.MethodGet, expires: time.Hour, now: at, mutate: func(u string) string {
			return u + "&X-Amz-Date=20260314T150926Z"
		}, want: ErrAuthorizationQueryParametersError, msg: "appears 2 times"},
		{name: "other algorithm", method: http.MethodGet, expires: time.Hour, now: at, mutate: func(u string) string {
			return strings.Replace(u, "X-Amz-Algorithm=AWS4-HMAC-SHA256", "X-Amz-Algorithm=AWS4-ECDSA-P256-SHA256", 1)
		}, want: ErrAuthorizationQueryParametersError},
		{name: "signature added twice", method: http.MethodGet, expires: time.Hour, now: at, mutate: func(u string) string {
			return u + "&X-Amz-Signature=" + strings.Repeat("0", 64)
		}, want: ErrAuthorizationQueryParametersError},
		{name: "unsigned query parameter added", method: http.MethodGet, expires: time.Hour, now: at, mutate: func(u string) string {
			return u + "&extra=1"
		}, want: ErrSignatureDoesNotMatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, key := range trickyKeys() {
				r := newKeyRequest(t, tc.method, "s3.example.com:9000", key, tc.query, nil)
				u := sdkPresign(t, r, testSecret, at, tc.expires)
				if tc.mutate != nil {
					u = tc.mutate(u)
				}
				req := httptest.NewRequest(tc.method, u, nil)
				v := newTestVerifier(t, tc.now)
				res, err := v.Verify(req)
				wantErr(t, key, err, tc.want)
				if tc.msg != "" && !strings.Contains(err.Error(), tc.msg) {
					t.Fatalf("message %q lacks %q", err, tc.msg)
				}
				if err != nil {
					continue
				}
				if !res.Presigned || res.PayloadHash != UnsignedPayload || !res.Expires.Equal(at.Add(tc.expires)) ||
					res.AccessKeyID != testAKID || res.Region != testRegion {
					t.Fatalf("result %+v", res)
				}
			}
		})
	}
}

func TestVerifyPresignedWrongKey(t *testing.T) {
	v := newTestVerifier(t, signTime())
	r := newKeyRequest(t, http.MethodGet, "h", "k", "", nil)
	u := sdkPresign(t, r, "wrong", signTime(), time.Hour)
	_, err := v.Verify(httptest.NewRequest(http.MethodGet, u, nil))
	wantErr(t, "wrong secret", err, ErrSignatureDoesNotMatch)

	r = newKeyRequest(t, http.MethodGet, "h", "k", "", nil)
	creds := testCreds(testSecret)
	creds.AccessKeyID = "AKIDOTHER"
	u = sdkPresignCreds(t, r, creds)
	_, err = v.Verify(httptest.NewRequest(http.MethodGet, u, nil))
	wantErr(t, "unknown id", err, ErrInvalidAccessKeyID)
}

// TestVerifyPresignedContentSHA256 presigns a PUT whose URL pins the
// payload hash with X-Amz-Content-Sha256; Body then checks the body.
func TestVerifyPresignedContentSHA256(t *testing.T) {
	body := []byte("pinned body")
	ph := payloadHashOf(body)
	r := newKeyRequest(t, http.MethodPut, "h", "k", "X-Amz-Content-Sha256="+ph, nil)
	q := r.URL.Query()
	q.Set("X-Amz-Expires", "60")
	r.URL.RawQuery = q.Encode()
	signer := sdkSigner()
	u, _, err := signer.PresignHTTP(t.Context(), testCreds(testSecret), r, ph, "s3", testRegion, signTime())
	if err != nil {
		t.Fatal(err)
	}
	v := newTestVerifier(t, signTime())
	for _, tc := range []struct {
		body []byte
		want error
	}{
		{body, nil},
		{[]byte("other body!"), ErrContentSHA256Mismatch},
	} {
		req := httptest.NewRequest(http.MethodPut, u, bytes.NewReader(tc.body))
		res, err := v.Verify(req)
		if err != nil {
			t.Fatal(err)
		}
		if res.PayloadHash != ph {
			t.Fatalf("payload hash %q", res.PayloadHash)
		}
		b, err := res.Body(req)
		if err != nil {
			t.Fatal(err)
		}
		_, err = io.ReadAll(b)
		wantErr(t, string(tc.body), err, tc.want)
	}
}

// TestVerifyDateHeader checks the Date header fallback with a signature
// built by hand from the reference key derivation.
func TestVerifyDateHeader(t *testing.T) {
	at := signTime()
	date := at.Format(http.TimeFormat)
	canonical := "GET\n/bkt/a%20b\nx=1\n" +
		"date:" + date + "\nhost:s3.example.com\nx-amz-content-sha256:" + EmptySHA256 + "\n\n" +
		"date;host;x-amz-content-sha256\n" + EmptySHA256
	sum := sha256.Sum256([]byte(canonical))
	sts := "AWS4-HMAC-SHA256\n" + at.Format(amzDateFormat) + "\n" + refScope(at) + "\n" + hex.EncodeToString(sum[:])
	m := hmac.New(sha256.New, refSigningKey(testSecret, at))
	m.Write([]byte(sts))
	sig := hex.EncodeToString(m.Sum(nil))

	r := httptest.NewRequest(http.MethodGet, "http://s3.example.com/bkt/a%20b?x=1", nil)
	r.Header.Set("Date", date)
	r.Header.Set("X-Amz-Content-Sha256", EmptySHA256)
	r.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential="+testAKID+"/"+refScope(at)+
		", SignedHeaders=date;host;x-amz-content-sha256, Signature="+sig)
	v := newTestVerifier(t, at)
	res, err := v.Verify(r)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Time.Equal(at) {
		t.Fatalf("time %v", res.Time)
	}
	r.Header.Set("Date", at.Add(time.Second).Format(http.TimeFormat))
	_, err = v.Verify(r)
	wantErr(t, "changed date", err, ErrSignatureDoesNotMatch)
}

// TestVerifyRawPathSignature accepts a client that signed the path as it
// sent it instead of re-encoding it ('!' and '(' left raw).
func TestVerifyRawPathSignature(t *testing.T) {
	r, err := http.NewRequest(http.MethodGet, "http://h/bkt/a!b(c).txt", nil)
	if err != nil {
		t.Fatal(err)
	}
	signer := sdkSigner()
	r.Header.Set("X-Amz-Content-Sha256", EmptySHA256)
	// The SDK signs the path as EscapedPath, which leaves '!' and '(' raw.
	if err := signer.SignHTTP(t.Context(), testCreds(testSecret), r, EmptySHA256, "s3", testRegion, signTime()); err != nil {
		t.Fatal(err)
	}
	if EncodePath(r.URL.Path) == r.URL.EscapedPath() {
		t.Fatal("test needs a path whose raw and canonical forms differ")
	}
	v := newTestVerifier(t, signTime())
	if _, err := v.Verify(r); err != nil {
		t.Fatal(err)
	}
}

func TestIsSigned(t *testing.T) {
	for _, tc := range []struct {
		auth, query string
		want        bool
	}{
		{"AWS4-HMAC-SHA256 Credential=x", "", true},
		{"AWS4-HMAC-SHA256", "", false},
		{"Bearer x", "", false},
		{"AWS AKID:sig", "", false},
		{"", "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=a", true},
		{"", "a=1&X-Amz-Credential=a", true},
		{"", "x-amz-algorithm=AWS4-HMAC-SHA256", false},
		{"", "a=1", false},
		{"", "", false},
	} {
		r := httptest.NewRequest(http.MethodGet, "http://h/b/k?"+tc.query, nil)
		if tc.auth != "" {
			r.Header.Set("Authorization", tc.auth)
		}
		if got := IsSigned(r); got != tc.want {
			t.Errorf("IsSigned(auth %q, query %q) = %v", tc.auth, tc.query, got)
		}
		if n := testing.AllocsPerRun(100, func() { IsSigned(r) }); n != 0 {
			t.Errorf("IsSigned allocates %v times", n)
		}
	}
}

func TestEncodePath(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", "/"},
		{"/", "/"},
		{"/bkt/a b", "/bkt/a%20b"},
		{"/bkt/a+b", "/bkt/a%2Bb"},
		{"/bkt/a%b", "/bkt/a%25b"},
		{"/bkt/~-_.", "/bkt/~-_."},
		{"/bkt/é", "/bkt/%C3%A9"},
		{"/bkt//x", "/bkt//x"},
		{"/bkt/=&?#", "/bkt/%3D%26%3F%23"},
	} {
		if got := EncodePath(tc.in); got != tc.want {
			t.Errorf("EncodePath(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if tc.in != "" {
			if sdk := httpbinding.EscapePath(tc.in, false); sdk != tc.want {
				t.Errorf("SDK EscapePath(%q) = %q, want %q", tc.in, sdk, tc.want)
			}
		}
	}
}

func TestCanonicalQuery(t *testing.T) {
	for _, tc := range []struct{ raw, want string }{
		{"", ""},
		{"acl", "acl="},
		{"b=2&a=1", "a=1&b=2"},
		{"a=b+c&a=b%20c", "a=b%20c&a=b%20c"},
		{"k=a%2Fb&k=a-b", "k=a%2Fb&k=a-b"},
		{"x=%3D%26&y=%2b", "x=%3D%26&y=%2B"},
		{"a=1&&b", "a=1&b="},
		{"bad=%zz", "bad=%25zz"},
		{"p=a/b", "p=a%2Fb"},
		{"X-Amz-Signature=abc&a=1", "a=1"},
	} {
		if got := canonicalQuery(parseQuery(tc.raw), qSignature); got != tc.want {
			t.Errorf("canonicalQuery(%q) = %q, want %q", tc.raw, got, tc.want)
		}
	}
}

// TestHeaderValues covers the headers net/http moves out of r.Header on
// the server side.
func TestHeaderValues(t *testing.T) {
	r := &http.Request{
		Host:             "h:1",
		URL:              &url.URL{Host: "u"},
		ContentLength:    42,
		TransferEncoding: []string{"chunked"},
		Header:           http.Header{"X-Amz-Meta-A": {"1", "2"}, "x-amz-meta-a": {"3"}},
	}
	for _, tc := range []struct {
		name string
		want []string
	}{
		{"host", []string{"h:1"}},
		{"content-length", []string{"42"}},
		{"transfer-encoding", []string{"chunked"}},
		{"x-amz-meta-a", []string{"1", "2", "3"}},
		{"x-amz-meta-b", nil},
	} {
		if got := headerValues(r, tc.name); !slices.Equal(got, tc.want) {
			t.Errorf("headerValues(%q) = %q, want %q", tc.name, got, tc.want)
		}
	}
	r.Header.Set("Content-Length", "7")
	r.Host = ""
	if got := headerValues(r, "content-length"); !slices.Equal(got, []string{"7"}) {
		t.Errorf("content-length from the header: %q", got)
	}
	if got := headerValues(r, "host"); !slices.Equal(got, []string{"u"}) {
		t.Errorf("host from the URL: %q", got)
	}
}

func TestConfig(t *testing.T) {
	if err := DefaultConfig().Validate(); !errors.Is(err, ErrBadConfig) {
		t.Fatalf("no Lookup: %v", err)
	}
	ok := DefaultConfig()
	ok.Lookup = testLookup
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, mutate := range map[string]func(c *Config){
		"negative skew": func(c *Config) { c.MaxSkew = -time.Second },
		"expiry 8 days": func(c *Config) { c.MaxPresignExpiry = 8 * 24 * time.Hour },
		"expiry 1ms":    func(c *Config) { c.MaxPresignExpiry = time.Millisecond },
		"nil lookup":    func(c *Config) { c.Lookup = nil },
		"nil clock":     func(c *Config) { c.Now = nil },
	} {
		c := ok
		mutate(&c)
		if err := c.Validate(); !errors.Is(err, ErrBadConfig) {
			t.Errorf("%s: %v", name, err)
		}
	}
	// New fills zero fields with defaults.
	if _, err := New(Config{Lookup: testLookup}); err != nil {
		t.Fatal(err)
	}
}

// TestVerifyMaxSkewConfig checks that a configured MaxSkew is honoured.
func TestVerifyMaxSkewConfig(t *testing.T) {
	r := newKeyRequest(t, http.MethodGet, "h", "k", "", nil)
	sdkSign(t, r, EmptySHA256, testSecret, signTime())
	v, err := New(Config{Lookup: testLookup, MaxSkew: time.Minute, Now: func() time.Time { return signTime().Add(2 * time.Minute) }})
	if err != nil {
		t.Fatal(err)
	}
	_, err = v.Verify(r)
	wantErr(t, "skew", err, ErrRequestTimeTooSkewed)
	if !strings.Contains(err.Error(), "2m0s behind") || !strings.Contains(err.Error(), "at most 1m0s") {
		t.Fatalf("message %q", err)
	}
}

// TestVerifyServerMovedHeaders signs (by hand, with the reference key
// derivation) headers that net/http moves or keeps on the server side:
// transfer-encoding (into r.TransferEncoding) and expect (kept in r.Header),
// and sends the request with a chunked body through a real server.
func TestVerifyServerMovedHeaders(t *testing.T) {
	v := newTestVerifier(t, signTime())
	errs := make(chan error, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := r.Header["Transfer-Encoding"]; ok || len(r.TransferEncoding) == 0 {
			errs <- fmt.Errorf("net/http did not move Transfer-Encoding: %v %v", r.Header, r.TransferEncoding)
			return
		}
		res, err := v.Verify(r)
		if err == nil {
			var b *Body
			if b, err = res.Body(r); err == nil {
				_, err = io.ReadAll(b)
			}
		}
		errs <- err
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")

	at := signTime()
	canonical := "PUT\n/bkt/te\n\n" +
		"expect:100-continue\nhost:" + host + "\ntransfer-encoding:chunked\n" +
		"x-amz-content-sha256:" + UnsignedPayload + "\nx-amz-date:" + at.Format(amzDateFormat) + "\n\n" +
		"expect;host;transfer-encoding;x-amz-content-sha256;x-amz-date\n" + UnsignedPayload
	sum := sha256.Sum256([]byte(canonical))
	m := hmac.New(sha256.New, refSigningKey(testSecret, at))
	m.Write([]byte("AWS4-HMAC-SHA256\n" + at.Format(amzDateFormat) + "\n" + refScope(at) + "\n" + hex.EncodeToString(sum[:])))
	auth := "AWS4-HMAC-SHA256 Credential=" + testAKID + "/" + refScope(at) +
		", SignedHeaders=expect;host;transfer-encoding;x-amz-content-sha256;x-amz-date, Signature=" + hex.EncodeToString(m.Sum(nil))

	for _, tc := range []struct {
		expect string
		want   error
	}{
		{"100-continue", nil},
		{"", ErrSignatureDoesNotMatch},
	} {
		r, err := http.NewRequest(http.MethodPut, srv.URL+"/bkt/te", io.MultiReader(strings.NewReader("chunked body")))
		if err != nil {
			t.Fatal(err)
		}
		r.ContentLength = -1
		if tc.expect != "" {
			r.Header.Set("Expect", tc.expect)
		}
		r.Header.Set("X-Amz-Date", at.Format(amzDateFormat))
		r.Header.Set("X-Amz-Content-Sha256", UnsignedPayload)
		r.Header.Set("Authorization", auth)
		resp, err := srv.Client().Do(r)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		wantErr(t, "expect "+tc.expect, <-errs, tc.want)
	}
}
