package sigv4

import (
	"bufio"
	"bytes"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// rawFields is a Fields over a raw header block (lines "Name: value\r\n"),
// as a server parsing in place reads it.
type rawFields []byte

func (f rawFields) Field(name string) (value []byte, n int) {
	for rest := []byte(f); len(rest) > 0; {
		var line []byte
		line, rest, _ = bytes.Cut(rest, crlf)
		k, v, ok := bytes.Cut(line, colon)
		if !ok || len(k) != len(name) || !bytes.EqualFold(k, []byte(name)) {
			continue
		}
		if n++; n == 1 {
			value = bytes.Trim(v, " \t")
		}
	}
	return value, n
}

var crlf, colon = []byte("\r\n"), []byte(":")

// wire returns the bytes of r as a client sends it: the request line,
// Host, then its header fields, sorted.
func wire(r *http.Request) string {
	var b strings.Builder
	b.WriteString(r.Method + " " + r.URL.RequestURI() + " HTTP/1.1\r\nHost: " + r.URL.Host + "\r\n")
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range r.Header {
			if !yield(k) {
				return
			}
		}
	}) {
		for _, v := range r.Header[k] {
			b.WriteString(k + ": " + v + "\r\n")
		}
	}
	b.WriteString("\r\n")
	return b.String()
}

// bothVerify parses raw as net/http does and checks it with Verify, and
// as a server parsing in place does and checks it with
// VerifyHeaderRequest; it fails t if the fast check accepts what Verify
// refuses or names another key. It returns both verdicts.
func bothVerify(t *testing.T, v *Verifier, raw string) (slow, fast bool) {
	t.Helper()
	r, err := http.ReadRequest(bufio.NewReader(strings.NewReader(raw)))
	if err != nil {
		return false, false // not a request net/http takes: no fast path either
	}
	res, verr := v.Verify(r)
	hdr, _, _ := strings.Cut(raw, "\r\n\r\n")
	_, block, _ := strings.Cut(hdr, "\r\n")
	hr := &HeaderRequest{Method: r.Method, Path: r.URL.Path, RawQuery: r.URL.RawQuery, Fields: rawFields(block + "\r\n")}
	id, ok := v.VerifyHeaderRequest(hr)
	if ok && (verr != nil || res.AccessKeyID != id) {
		t.Fatalf("fast check accepted (id %q) what Verify answers %v\n%s", id, verr, raw)
	}
	// The same with the Host given, as a caller that knows there is one.
	if _, n := hr.Fields.Field("host"); n == 1 {
		hr.Host, hr.OneHost = r.Host, true
		if id2, ok2 := v.VerifyHeaderRequest(hr); ok2 != ok || id2 != id {
			t.Fatalf("with the Host given: %q %v, without %q %v\n%s", id2, ok2, id, ok, raw)
		}
	}
	return verr == nil, ok
}

// TestVerifyHeaderRequest: the allocation-free check accepts the SDK's
// header-signed GETs and HEADs that Verify accepts, and never one that
// Verify refuses (a wrong signature, key or secret, an old date, a
// missing or repeated signed field, a tampered value, a query it does not
// take).
func TestVerifyHeaderRequest(t *testing.T) {
	v := newTestVerifier(t, signTime().Add(3*time.Minute))
	sign := func(method, key, q string, ph string, mut func(*http.Request)) *http.Request {
		r := newKeyRequest(t, method, "s3.example.com:9000", key, q, nil)
		if mut != nil {
			mut(r)
		}
		sdkSign(t, r, ph, testSecret, signTime())
		return r
	}
	// Requests both accept.
	for _, tc := range []struct {
		name, method, key, q, ph string
		mut                      func(*http.Request)
	}{
		{"get", "GET", "plain.txt", "", EmptySHA256, nil},
		{"head", "HEAD", "plain.txt", "", EmptySHA256, nil},
		{"unsigned payload", "GET", "d/f.json", "", UnsignedPayload, nil},
		{"x-id", "GET", "d/f.json", "x-id=GetObject", EmptySHA256, nil},
		{"range signed", "GET", "d/f.json", "", EmptySHA256, func(r *http.Request) { r.Header.Set("Range", "bytes=0-9") }},
		{"spaces collapsed", "GET", "d/f.json", "", EmptySHA256, func(r *http.Request) { r.Header.Set("X-Amz-Meta-Note", "a   b  c") }},
		{"unreserved key", "GET", "tilde~dash-underscore_dot.txt", "", EmptySHA256, nil},
		{"unicode key", "GET", "unicode/héllo wörld/日本語.txt", "", EmptySHA256, nil},
		{"plus key", "GET", "plus+sign+.txt", "", EmptySHA256, nil},
		{"empty key", "GET", "", "", EmptySHA256, nil},
	} {
		r := sign(tc.method, tc.key, tc.q, tc.ph, tc.mut)
		if slow, fast := bothVerify(t, v, wire(r)); !slow || !fast {
			t.Errorf("%s: Verify %v, fast %v; want both", tc.name, slow, fast)
		}
	}

	// Requests the fast check leaves to Verify, which may accept them.
	good := wire(sign("GET", "d/f.json", "", EmptySHA256, func(r *http.Request) { r.Header.Set("X-Amz-Meta-Note", "n") }))
	for _, tc := range []struct {
		name string
		raw  string
		slow bool // Verify accepts it
	}{
		{"tricky query", wire(sign("GET", "k", "list-type=2&prefix=a%2Fb", EmptySHA256, nil)), true},
		{"unsorted query", wire(sign("GET", "k", "b=1&a=2", EmptySHA256, nil)), true},
		{"query key without =", wire(sign("GET", "k", "acl", EmptySHA256, nil)), true},
		{"trailing &", wire(sign("GET", "k", "a=1&", EmptySHA256, nil)), true},
		{"wrong signature", flipSignature(good), false},
		{"wrong secret", wire(func() *http.Request {
			r := newKeyRequest(t, "GET", "s3.example.com:9000", "k", "", nil)
			sdkSign(t, r, EmptySHA256, "wrong", signTime())
			return r
		}()), false},
		{"unknown key", strings.Replace(good, testAKID, "AKIDUNKNOWN", 1), false},
		{"tampered signed value", strings.Replace(good, "X-Amz-Meta-Note: n", "X-Amz-Meta-Note: m", 1), false},
		{"signed field missing", strings.Replace(good, "X-Amz-Meta-Note: n\r\n", "", 1), false},
		{"signed field repeated", strings.Replace(good, "X-Amz-Meta-Note: n\r\n", "X-Amz-Meta-Note: n\r\nX-Amz-Meta-Note: n\r\n", 1), false},
		{"two authorizations", strings.Replace(good, "\r\n\r\n", "\r\nAuthorization: x\r\n\r\n", 1), false},
		{"two dates", strings.Replace(good, "\r\n\r\n", "\r\nX-Amz-Date: 20260314T150926Z\r\n\r\n", 1), false},
		{"streaming payload", wire(sign("GET", "k", "", StreamingPayload, nil)), true},
		{"other path", strings.Replace(good, "/bkt/d/f.json", "/bkt/d/g.json", 1), false},
		{"head for get", "HEAD" + strings.TrimPrefix(good, "GET"), false},
		{"path sent as is", wire(func() *http.Request {
			r := newKeyRequest(t, "GET", "s3.example.com:9000", "a~b", "", nil)
			r.Header.Set("X-Amz-Content-Sha256", EmptySHA256)
			if err := (newRawSigner()).sign(r); err != nil {
				t.Fatal(err)
			}
			return r
		}()), true},
	} {
		slow, fast := bothVerify(t, v, tc.raw)
		if fast || slow != tc.slow {
			t.Errorf("%s: Verify %v (want %v), fast %v (want false)", tc.name, slow, tc.slow, fast)
		}
	}

	// Too old, too new.
	for _, at := range []time.Time{signTime().Add(-time.Hour), signTime().Add(time.Hour)} {
		v := newTestVerifier(t, at)
		if slow, fast := bothVerify(t, v, good); slow || fast {
			t.Errorf("clock at %v: Verify %v, fast %v; want neither", at, slow, fast)
		}
	}

	// Random damage to a good request: never accepted by the fast check
	// alone.
	rng := rand.New(rand.NewPCG(1, 2))
	for range 3000 {
		b := []byte(good)
		for range 1 + rng.IntN(3) {
			b[rng.IntN(len(b)-4)] = " -;,=/:\tAaZz09\r"[rng.IntN(15)]
		}
		bothVerify(t, v, string(b))
	}

	// No allocation on success.
	r, _ := http.ReadRequest(bufio.NewReader(strings.NewReader(good)))
	hdr, _, _ := strings.Cut(good, "\r\n\r\n")
	_, block, _ := strings.Cut(hdr, "\r\n")
	hr := &HeaderRequest{Method: "GET", Path: r.URL.Path, Fields: rawFields(block + "\r\n")}
	if a := testing.AllocsPerRun(100, func() {
		if _, ok := v.VerifyHeaderRequest(hr); !ok {
			t.Fatal("not verified")
		}
	}); a != 0 {
		t.Errorf("VerifyHeaderRequest allocates %v times", a)
	}
}

// flipSignature changes the last hex digit of the signature of raw.
func flipSignature(raw string) string {
	i := strings.Index(raw, "Signature=") + len("Signature=") + 63
	c := byte('0')
	if raw[i] == '0' {
		c = '1'
	}
	return raw[:i] + string(c) + raw[i+1:]
}

// rawSigner signs a request over its path as sent (r.URL.EscapedPath),
// which Verify accepts and the fast check leaves to it.
type rawSigner struct{}

func newRawSigner() rawSigner { return rawSigner{} }

func (rawSigner) sign(r *http.Request) error {
	r.URL.RawPath = strings.ReplaceAll(r.URL.Path, "~", "%7E")
	r.Header.Set("X-Amz-Date", signTime().Format(amzDateFormat))
	signed := "host;x-amz-content-sha256;x-amz-date"
	canonical := "GET\n" + r.URL.RawPath + "\n\nhost:" + r.URL.Host + "\nx-amz-content-sha256:" + EmptySHA256 +
		"\nx-amz-date:" + signTime().Format(amzDateFormat) + "\n\n" + signed + "\n" + EmptySHA256
	scope := refScope(signTime())
	sig := requestSignature(refSigningKey(testSecret, signTime()), signTime().Format(amzDateFormat), scope, []byte(canonical))
	r.Header.Set("Authorization", Algorithm+" Credential="+testAKID+"/"+scope+", SignedHeaders="+signed+", Signature="+hexString(sig[:]))
	return nil
}

func hexString(b []byte) string {
	const digits = "0123456789abcdef"
	out := make([]byte, 0, 2*len(b))
	for _, c := range b {
		out = append(out, digits[c>>4], digits[c&15])
	}
	return string(out)
}

// BenchmarkVerifyHeaderRequest is the fast path's check of an SDK's
// header-signed GET, against Verify's of the same request.
func BenchmarkVerifyHeaderRequest(b *testing.B) {
	v := newTestVerifier(b, signTime().Add(time.Minute))
	r := newKeyRequest(b, "GET", "127.0.0.1:8080", "d19/s2/f000000.json", "", nil)
	sdkSign(b, r, EmptySHA256, testSecret, signTime())
	raw := wire(r)
	hdr, _, _ := strings.Cut(raw, "\r\n\r\n")
	_, block, _ := strings.Cut(hdr, "\r\n")
	b.Run("fast", func(b *testing.B) {
		hr := &HeaderRequest{Method: "GET", Path: r.URL.Path, Fields: rawFields(block + "\r\n")}
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := v.VerifyHeaderRequest(hr); !ok {
				b.Fatal("not verified")
			}
		}
	})
	b.Run("Verify", func(b *testing.B) {
		pr, _ := http.ReadRequest(bufio.NewReader(strings.NewReader(raw)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := v.Verify(pr); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestParseDigitsDate: the same verdict and time as time.Parse, on dates
// near the edges of every field and random damage.
func TestParseDigitsDate(t *testing.T) {
	check := func(s string) {
		want, err := time.Parse(amzDateFormat, s)
		wantOK := err == nil && len(s) == len(amzDateFormat)
		var got time.Time
		var ok bool
		if len(s) >= 8 {
			got, ok = parseDigitsDate(s[:8], s[8:])
		}
		if ok != wantOK || ok && !got.Equal(want) {
			t.Fatalf("%q: got %v %v, time.Parse %v %v", s, got, ok, want, err)
		}
		d := s[:min(8, len(s))]
		want, err = time.Parse("20060102", d)
		got, ok = parseDigitsDate(d, "")
		if ok != (err == nil) || ok && !got.Equal(want) {
			t.Fatalf("day %q: got %v %v, time.Parse %v %v", d, got, ok, want, err)
		}
	}
	for _, s := range []string{"20260314T150926Z", "20240229T000000Z", "20230229T000000Z", "20260431T235959Z",
		"20261231T235959Z", "20260000T000000Z", "20261300T000000Z", "20260101T240000Z", "20260101T006000Z",
		"20260101T000060Z", "00000101T000000Z", "2026031 T150926Z", "20260314T150926", "20260314X150926Z",
		"20260314T150926.5Z", "-0260314T150926Z", "2026+314T150926Z", "20260314T15092+Z"} {
		check(s)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	const alphabet = "0123456789TZ+- ."
	for range 200000 {
		b := []byte("20260314T150926Z")
		for range 1 + rng.IntN(3) {
			i := rng.IntN(len(b))
			if rng.IntN(4) == 0 {
				b[i] = alphabet[rng.IntN(len(alphabet))]
			} else {
				b[i] = byte('0' + rng.IntN(10))
			}
		}
		check(string(b))
	}
}
