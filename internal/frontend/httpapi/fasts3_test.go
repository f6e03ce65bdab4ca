package httpapi

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/cairn-fs/cairn/internal/access"
	"github.com/cairn-fs/cairn/internal/access/sigv4"
	"github.com/cairn-fs/cairn/internal/frontend/httpapi/fastpath/fastpathtest"
	"github.com/cairn-fs/cairn/internal/frontend/s3"
	"github.com/cairn-fs/cairn/internal/store"
)

// s3Fixture is a real store served, with the real S3 front end, by two
// servers: one through net/http only, one with the fast path.
type s3Fixture struct {
	st             *store.Local
	key            access.Key
	auth           *access.Authorizer
	h              *s3.Handler
	slow, fast     *Server
	slowAddr, addr string
	slowLog        syncBuffer
	fastLog        syncBuffer
}

func newS3Fixture(t *testing.T, sendfile bool) *s3Fixture {
	return newS3FixtureTLS(t, sendfile, nil)
}

// newS3FixtureTLS is newS3Fixture with both servers on HTTPS when
// serverTLS is set.
func newS3FixtureTLS(t *testing.T, sendfile bool, serverTLS *tls.Config) *s3Fixture {
	st := realStore(t)
	ctx := context.Background()
	must(t, st.CreateBucket(ctx, store.BucketInfo{Name: "s3b"}))
	must(t, st.CreateBucket(ctx, store.BucketInfo{Name: "den"}))
	must(t, st.CreateBucket(ctx, store.BucketInfo{Name: "ver", TrashSeconds: store.VersioningSeconds}))
	put := func(bucket, p, body string, o store.PutOptions) {
		o.Size = int64(len(body))
		_, _, err := st.Put(ctx, bucket, p, strings.NewReader(body), o)
		must(t, err)
	}
	put("s3b", "f.txt", "hello world", store.PutOptions{})
	put("s3b", "mid.css", strings.Repeat("body{margin:0}\n", 1000), store.PutOptions{})
	put("s3b", "big.bin", strings.Repeat("0123456789abcdef", 100<<10/16+7), store.PutOptions{})
	put("s3b", "empty", "", store.PutOptions{})
	put("s3b", "typed", "{}", store.PutOptions{ContentType: "application/vnd.test+json"})
	put("s3b", "a b/ü.txt", "unicode", store.PutOptions{})
	put("s3b", "meta.txt", "with metadata", store.PutOptions{Xattrs: map[string][]byte{"user.cairn.x-amz-meta-color": []byte("blue")}})
	put("den", "x.txt", "not yours", store.PutOptions{})
	put("ver", "v.txt", "versioned", store.PutOptions{})

	auth, err := access.New(access.Config{AdminKey: testKey})
	must(t, err)
	var grants []access.Grant
	for _, b := range []string{"s3b", "ver"} {
		g, err := access.ParseGrant(b, access.ActionsOf(access.ActionRead, access.ActionList))
		must(t, err)
		grants = append(grants, g)
	}
	k, err := access.NewKey("reader", grants, time.Now(), time.Time{})
	must(t, err)
	auth.SetKeys([]access.Key{k})
	scfg := s3.DefaultConfig()
	scfg.Store, scfg.Auth = st, auth
	h, err := s3.New(scfg)
	must(t, err)

	f := &s3Fixture{st: st, key: k, auth: auth, h: h}
	f.slow = newServerOnStore(t, st, func(c *Config) {
		c.S3, c.Auth, c.TLS = h, auth, serverTLS
		c.DisableFastPath = true
		c.AccessLog = &f.slowLog
		c.AccessLogFlushInterval = time.Hour
	})
	f.fast = newServerOnStore(t, st, func(c *Config) {
		c.S3, c.Auth, c.TLS = h, auth, serverTLS
		c.DisableSendfile = !sendfile
		c.AccessLog = &f.fastLog
		c.AccessLogFlushInterval = time.Hour
	})
	f.slowAddr = serveServer(t, f.slow)
	f.addr = serveServer(t, f.fast)
	return f
}

// newServerOnStore builds a Server over st.
func newServerOnStore(t testing.TB, st store.Store, mut func(*Config)) *Server {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Store = st
	cfg.AdminKey = testKey
	mut(&cfg)
	s, err := New(cfg)
	must(t, err)
	t.Cleanup(s.Close)
	return s
}

// signedGet returns the bytes of a request signed in its Authorization
// header as the AWS SDK signs a GetObject (v4.Signer, the path not
// escaped twice, x-amz-content-sha256 signed): method, target (raw,
// escaped), the fields hdr ("Name: value") signed with it, at time at.
func signedGet(t testing.TB, method, target, id, secret string, at time.Time, payload string, hdr ...string) string {
	t.Helper()
	r, err := http.NewRequest(method, "http://cairn.test"+target, nil)
	must(t, err)
	r.Header.Set("X-Amz-Content-Sha256", payload)
	for _, h := range hdr {
		k, v, _ := strings.Cut(h, ": ")
		r.Header.Add(k, v)
	}
	signer := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
	must(t, signer.SignHTTP(context.Background(), aws.Credentials{AccessKeyID: id, SecretAccessKey: secret}, r, payload, "s3", "us-east-1", at))
	var b strings.Builder
	b.WriteString(method + " " + target + " HTTP/1.1\r\nHost: cairn.test\r\n")
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

var (
	requestIDField = regexp.MustCompile(`(?m)^X-Amz-Request-Id: [0-9A-F]+\r$`)
	requestIDXML   = regexp.MustCompile(`<RequestId>[^<]*</RequestId>`)
	skewTimes      = regexp.MustCompile(`<Message>the request time [^<]*</Message>`)
)

// maskS3 masks the per-request ids of S3 answers, and the times of a
// RequestTimeTooSkewed message (the two servers answer a moment apart).
func maskS3(s string) string {
	s = requestIDField.ReplaceAllString(s, "X-Amz-Request-Id: ID\r")
	s = requestIDXML.ReplaceAllString(s, "<RequestId>ID</RequestId>")
	return skewTimes.ReplaceAllString(s, "<Message>SKEW</Message>")
}

// TestFastPathS3Differential is the contract test of the planner for
// requests signed with SigV4 in their Authorization header (planSigned,
// s3.Handler.PlanSigned): the same bytes as net/http and the S3 front end
// (request ids aside), the fast path answering GetObject and HeadObject
// of plain objects (with and without Range) and handing off everything
// else (errors: a bad or expired signature, an unknown key, a missing
// signed field; denials; conditionals; objects with S3 metadata; other
// operations); then the same access log lines and request metrics.
func TestFastPathS3Differential(t *testing.T) {
	for _, sendfile := range []bool{true, false} {
		t.Run("sendfile="+strconv.FormatBool(sendfile), func(t *testing.T) { testFastPathS3Differential(t, sendfile, false) })
	}
	t.Run("https", func(t *testing.T) { testFastPathS3Differential(t, false, true) })
}

func testFastPathS3Differential(t *testing.T, sendfile, https bool) {
	var srvTLS, cliTLS *tls.Config
	if https {
		ts := httptest.NewUnstartedServer(nil)
		ts.StartTLS()
		cert := ts.TLS.Certificates[0]
		cert.Leaf = ts.Certificate()
		ts.Close()
		srvTLS = &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2", "http/1.1"}, MinVersion: tls.VersionTLS12}
		pool := x509.NewCertPool()
		pool.AddCert(cert.Leaf)
		cliTLS = &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}
	}
	f := newS3FixtureTLS(t, sendfile, srvTLS)
	id, secret := f.key.ID, f.key.Secret
	now := time.Now()
	sign := func(method, target string, hdr ...string) string {
		return signedGet(t, method, target, id, secret, now, sigv4.EmptySHA256, hdr...)
	}
	good := sign("GET", "/s3b/f.txt", "X-Amz-Meta-Note: n")
	var cases []fastpathtest.Case
	for _, tc := range []struct {
		name string
		raw  string
		fast bool
		want string
	}{
		{"get", sign("GET", "/s3b/f.txt"), true, "200"},
		{"head", sign("HEAD", "/s3b/f.txt"), true, "200"},
		{"get 15k", sign("GET", "/s3b/mid.css"), true, "200"},
		{"get 100k", sign("GET", "/s3b/big.bin"), true, "200"},
		{"head 100k", sign("HEAD", "/s3b/big.bin"), true, "200"},
		{"get empty", sign("GET", "/s3b/empty"), true, "200"},
		{"content type stored", sign("GET", "/s3b/typed"), true, "200"},
		{"unicode key", sign("GET", "/s3b/a%20b/%C3%BC.txt"), true, "200"},
		{"unsigned payload", signedGet(t, "GET", "/s3b/f.txt", id, secret, now, sigv4.UnsignedPayload), true, "200"},
		{"x-id", sign("GET", "/s3b/f.txt?x-id=GetObject"), true, "200"},
		{"more signed fields", good, true, "200"},
		{"unsigned fields too", strings.Replace(sign("GET", "/s3b/f.txt"), "\r\n\r\n", "\r\nUser-Agent: aws-sdk-go-v2/1.0\r\nAccept-Encoding: identity\r\n\r\n", 1), true, "200"},
		{"range", sign("GET", "/s3b/f.txt", "Range: bytes=2-4"), true, "206"},
		{"range open", sign("GET", "/s3b/f.txt", "Range: bytes=7-"), true, "206"},
		{"range suffix", sign("GET", "/s3b/f.txt", "Range: bytes=-3"), true, "206"},
		{"range end > size", sign("GET", "/s3b/f.txt", "Range: bytes=3-1000"), true, "206"},
		{"range multi (ignored)", sign("GET", "/s3b/f.txt", "Range: bytes=0-1,4-5"), true, "200"},
		{"range big", sign("GET", "/s3b/big.bin", "Range: bytes=1000-90000"), true, "206"},
		{"head range", sign("HEAD", "/s3b/f.txt", "Range: bytes=2-4"), true, "206"},
		{"range unsignd", strings.Replace(sign("GET", "/s3b/f.txt"), "\r\n\r\n", "\r\nRange: bytes=0-3\r\n\r\n", 1), true, "206"},
		{"http/1.0", strings.Replace(sign("GET", "/s3b/f.txt"), "HTTP/1.1", "HTTP/1.0", 1), true, "200"},
		{"connection close", strings.Replace(sign("GET", "/s3b/f.txt"), "\r\n\r\n", "\r\nConnection: close\r\n\r\n", 1), true, "200"},

		{"range unsatisfiable", sign("GET", "/s3b/f.txt", "Range: bytes=11-"), false, "416"},
		{"bad signature", flipSig(good), false, "403"},
		{"head bad signature", flipSig(sign("HEAD", "/s3b/f.txt")), false, "403"},
		{"wrong secret", signedGet(t, "GET", "/s3b/f.txt", id, "wrong-secret", now, sigv4.EmptySHA256), false, "403"},
		{"unknown key", signedGet(t, "GET", "/s3b/f.txt", "AKIDUNKNOWN", secret, now, sigv4.EmptySHA256), false, "403"},
		{"expired", signedGet(t, "GET", "/s3b/f.txt", id, secret, now.Add(-time.Hour), sigv4.EmptySHA256), false, "403"},
		{"head expired", signedGet(t, "HEAD", "/s3b/f.txt", id, secret, now.Add(-time.Hour), sigv4.EmptySHA256), false, "403"},
		{"in the future", signedGet(t, "GET", "/s3b/f.txt", id, secret, now.Add(time.Hour), sigv4.EmptySHA256), false, "403"},
		{"signed field missing", strings.Replace(good, "X-Amz-Meta-Note: n\r\n", "", 1), false, "403"},
		{"signed field repeated", strings.Replace(good, "X-Amz-Meta-Note: n\r\n", "X-Amz-Meta-Note: n\r\nX-Amz-Meta-Note: n\r\n", 1), false, "403"},
		{"signed value changed", strings.Replace(good, "X-Amz-Meta-Note: n\r\n", "X-Amz-Meta-Note: m\r\n", 1), false, "403"},
		{"two authorizations", strings.Replace(good, "\r\n\r\n", "\r\nAuthorization: AWS4-HMAC-SHA256 x\r\n\r\n", 1), false, "400"},
		{"path changed", strings.Replace(good, "/s3b/f.txt", "/s3b/typed", 1), false, "403"},
		{"missing", sign("GET", "/s3b/nope.txt"), false, "404"},
		{"head missing", sign("HEAD", "/s3b/nope.txt"), false, "404"},
		{"no bucket", sign("GET", "/nob/x"), false, "404"},
		{"denied", sign("GET", "/den/x.txt"), false, "403"},
		{"versioned bucket", sign("GET", "/ver/v.txt"), false, "200"},
		{"stored headers", sign("GET", "/s3b/meta.txt"), false, "200"},
		{"if-none-match", sign("GET", "/s3b/f.txt", "If-None-Match: *"), false, "304"},
		{"if-match", sign("GET", "/s3b/f.txt", `If-Match: "x"`), false, "412"},
		{"if-range", sign("GET", "/s3b/f.txt", "Range: bytes=0-1", `If-Range: "x"`), false, "200"},
		{"acl", sign("GET", "/s3b/f.txt?acl"), false, "200"},
		{"response override", sign("GET", "/s3b/f.txt?response-content-type=text%2Fplain"), false, "200"},
		{"listing", sign("GET", "/s3b/?list-type=2"), false, "200"},
		{"bucket", sign("GET", "/s3b"), false, "200"},
		{"directory key", sign("GET", "/s3b/a%20b/"), false, "200"},
		{"uploads dir", sign("GET", "/s3b/.cairn-uploads/x"), false, "404"},
		{"streaming payload", signedGet(t, "GET", "/s3b/f.txt", id, secret, now, sigv4.StreamingPayload), false, "200"},
		{"presigned-looking query", sign("GET", "/s3b/f.txt?X-Amz-Signature=00"), false, "400"},
	} {
		cases = append(cases, fastpathtest.Case{Name: tc.name, Raw: tc.raw, Fast: tc.fast, Want: tc.want})
	}
	fastpathtest.Run(t, fastpathtest.Servers{Fast: f.fast.fast, FastAddr: f.addr, SlowAddr: f.slowAddr, Mask: maskS3, TLS: cliTLS}, cases)

	// The access logs and the request metrics agree too.
	f.slow.Close()
	f.fast.Close()
	if a, b := maskLog(f.slowLog.String()), maskLog(f.fastLog.String()); a != b || a == "" {
		t.Errorf("access logs differ\nnet/http:\n%s\nfast path:\n%s", a, b)
	}
	if a, b := requestMetrics(t, f.slow), requestMetrics(t, f.fast); a != b {
		t.Errorf("metrics differ\nnet/http:\n%s\nfast path:\n%s", a, b)
	}
}

// flipSig changes the last digit of the signature of raw.
func flipSig(raw string) string {
	i := strings.Index(raw, "Signature=") + len("Signature=") + 63
	c := "0"
	if raw[i] == '0' {
		c = "1"
	}
	return raw[:i] + c + raw[i+1:]
}

// TestFastS3SignedAllocs: a header-signed GET of a cached file on the
// fast path allocates as little as a native one (the path string), the
// signature check nothing.
func TestFastS3SignedAllocs(t *testing.T) {
	f := newS3Fixture(t, true)
	raw := []byte(signedGet(t, "GET", "/s3b/mid.css", f.key.ID, f.key.Secret, time.Now(), sigv4.EmptySHA256))
	if raceEnabled {
		t.Skip("the race detector changes allocation counts")
	}
	s := newServerOnStore(t, f.st, func(c *Config) { c.S3, c.Auth = f.h, f.auth }) // no access log
	d := &directConn{pl: &s.planner}
	out, ok := d.answer(raw, make([]byte, 0, 64<<10))
	if !ok || !strings.HasPrefix(string(out), "HTTP/1.1 200 OK\r\n") || !strings.Contains(string(out), "X-Amz-Request-Id: ") {
		t.Fatalf("answer %.200q, planned %v", out, ok)
	}
	if a := testing.AllocsPerRun(200, func() {
		if out, ok = d.answer(raw, out[:0]); !ok {
			t.Fatal("handed off")
		}
	}); a > 1 {
		t.Errorf("a header-signed GET allocates %v times on the fast path", a)
	}
}

// BenchmarkServeFastS3Signed is BenchmarkServeFastRealStore's GET (a
// random 10–20 KB file of 2,000 over a real store, no network) as a
// native GET and as an S3 GetObject signed in its Authorization header
// (a signature per file, checked in full on every request: nothing is
// cached per signature).
func BenchmarkServeFastS3Signed(b *testing.B) {
	st := realStore(b)
	paths, data := realCorpus(b, st, 2000)
	auth, err := access.New(access.Config{AdminKey: testKey})
	must(b, err)
	g, err := access.ParseGrant("pub", access.ActionsOf(access.ActionRead))
	must(b, err)
	k, err := access.NewKey("reader", []access.Grant{g}, time.Now(), time.Time{})
	must(b, err)
	auth.SetKeys([]access.Key{k})
	scfg := s3.DefaultConfig()
	scfg.Store, scfg.Auth = st, auth
	h, err := s3.New(scfg)
	must(b, err)
	s := newServerOnStore(b, st, func(c *Config) { c.S3, c.Auth = h, auth })
	native := make([][]byte, len(paths))
	signed := make([][]byte, len(paths))
	now := time.Now()
	for i, p := range paths {
		native[i] = []byte("GET /pub/" + p + " HTTP/1.1\r\nHost: cairn.test\r\nUser-Agent: wrk\r\n\r\n")
		signed[i] = []byte(signedGet(b, "GET", "/pub/"+p, k.ID, k.Secret, now, sigv4.EmptySHA256))
	}
	for _, tc := range []struct {
		name string
		reqs [][]byte
	}{{"native", native}, {"s3-header-signed", signed}} {
		b.Run(tc.name, func(b *testing.B) {
			fc := &directConn{pl: &s.planner}
			wb := make([]byte, 0, 64<<10+16<<10)
			rng := rand.New(rand.NewPCG(3, 4))
			b.ReportAllocs()
			for b.Loop() {
				i := rng.IntN(len(paths))
				var ok bool
				if wb, ok = fc.answer(tc.reqs[i], wb[:0]); !ok || len(wb) < len(data[paths[i]]) {
					b.Fatalf("%s: %d bytes, planned %v", paths[i], len(wb), ok)
				}
			}
		})
	}
}
