package s3

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	sdks3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/cairn-fs/cairn/internal/access"
	"github.com/cairn-fs/cairn/internal/access/sigv4"
	"github.com/cairn-fs/cairn/internal/store"
	"github.com/cairn-fs/cairn/internal/store/storetest"
)

const adminKey = "s3-test-admin-key-0123456789"

// env is an S3 handler over an in-memory store, served over HTTP and HTTPS.
type env struct {
	st    *store.Local
	auth  *access.Authorizer
	h     *Handler
	plain *httptest.Server
	tls   *httptest.Server
	key   access.Key // may create buckets (owns what it creates)
}

func newEnv(t testing.TB) *env {
	t.Helper()
	st := storetest.New(t)
	auth, err := access.New(access.Config{AdminKey: adminKey})
	if err != nil {
		t.Fatal(err)
	}
	g, _ := access.ParseGrant("", access.ActionsOf(access.ActionAdmin))
	k, err := access.NewKey("tester", []access.Grant{g}, time.Now(), time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	auth.SetKeys([]access.Key{k})
	cfg := DefaultConfig()
	cfg.Store, cfg.Auth, cfg.Domain = st, auth, "s3.example"
	h, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{st: st, auth: auth, h: h, key: k, plain: httptest.NewServer(h), tls: httptest.NewTLSServer(h)}
	t.Cleanup(func() { e.plain.Close(); e.tls.Close() })
	return e
}

func (e *env) client(srv *httptest.Server, id, secret string) *sdks3.Client {
	return sdks3.New(sdks3.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(srv.URL),
		UsePathStyle: true,
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: id, SecretAccessKey: secret}, nil
		}),
		HTTPClient:                 srv.Client(),
		RetryMaxAttempts:           1,
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenSupported,
	})
}

func errCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// TestSDKOverHTTPAndHTTPS runs aws-sdk-go-v2 as shipped: over HTTPS it
// sends aws-chunked bodies with trailing checksums, over HTTP signed
// payloads with a checksum header. Every checksum algorithm is tried.
func TestSDKOverHTTPAndHTTPS(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	for _, srv := range []*httptest.Server{e.plain, e.tls} {
		c := e.client(srv, e.key.ID, e.key.Secret)
		bucket := "b" + strings.ToLower(hex.EncodeToString([]byte(srv.URL[len(srv.URL)-4:])))
		if _, err := c.CreateBucket(ctx, &sdks3.CreateBucketInput{Bucket: &bucket}); err != nil {
			t.Fatal(err)
		}
		for _, alg := range []types.ChecksumAlgorithm{types.ChecksumAlgorithmCrc32, types.ChecksumAlgorithmCrc32c,
			types.ChecksumAlgorithmSha1, types.ChecksumAlgorithmSha256, types.ChecksumAlgorithmCrc64nvme} {
			body := bytes.Repeat([]byte(string(alg)), 20000)
			key := "sum/" + string(alg)
			if _, err := c.PutObject(ctx, &sdks3.PutObjectInput{Bucket: &bucket, Key: &key, Body: bytes.NewReader(body),
				ChecksumAlgorithm: alg, Metadata: map[string]string{"alg": string(alg)}}); err != nil {
				t.Fatalf("%s put %s: %v", srv.URL, alg, err)
			}
			out, err := c.GetObject(ctx, &sdks3.GetObjectInput{Bucket: &bucket, Key: &key})
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(out.Body)
			out.Body.Close()
			if !bytes.Equal(got, body) || out.Metadata["alg"] != string(alg) {
				t.Fatalf("%s %s: got %d bytes, metadata %v", srv.URL, alg, len(got), out.Metadata)
			}
			if ce := aws.ToString(out.ContentEncoding); strings.Contains(ce, "aws-chunked") {
				t.Fatalf("the request's aws-chunked coding was stored: %q", ce)
			}
		}
		// Multipart: three parts, the last small; ETag = MD5 of part MD5s + "-3".
		key := "big.bin"
		up, err := c.CreateMultipartUpload(ctx, &sdks3.CreateMultipartUploadInput{Bucket: &bucket, Key: &key, ContentType: aws.String("application/x-test")})
		if err != nil {
			t.Fatal(err)
		}
		var parts []types.CompletedPart
		var all []byte
		md := md5.New()
		for i, n := range []int{5 << 20, 5 << 20, 1234} {
			p := bytes.Repeat([]byte{byte('a' + i)}, n)
			all = append(all, p...)
			s := md5.Sum(p)
			md.Write(s[:])
			out, err := c.UploadPart(ctx, &sdks3.UploadPartInput{Bucket: &bucket, Key: &key, UploadId: up.UploadId,
				PartNumber: aws.Int32(int32(i + 1)), Body: bytes.NewReader(p)})
			if err != nil {
				t.Fatal(err)
			}
			parts = append(parts, types.CompletedPart{ETag: out.ETag, PartNumber: aws.Int32(int32(i + 1))})
		}
		lp, err := c.ListParts(ctx, &sdks3.ListPartsInput{Bucket: &bucket, Key: &key, UploadId: up.UploadId})
		if err != nil || len(lp.Parts) != 3 {
			t.Fatalf("list parts: %v %v", lp, err)
		}
		comp, err := c.CompleteMultipartUpload(ctx, &sdks3.CompleteMultipartUploadInput{Bucket: &bucket, Key: &key, UploadId: up.UploadId,
			MultipartUpload: &types.CompletedMultipartUpload{Parts: parts}})
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf(`"%x-3"`, md.Sum(nil)); aws.ToString(comp.ETag) != want {
			t.Fatalf("multipart ETag %s, want %s", aws.ToString(comp.ETag), want)
		}
		out, err := c.GetObject(ctx, &sdks3.GetObjectInput{Bucket: &bucket, Key: &key, Range: aws.String("bytes=5242870-5242889")})
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(out.Body)
		if !bytes.Equal(got, all[5242870:5242890]) || aws.ToString(out.ContentType) != "application/x-test" {
			t.Fatalf("range across parts: %q %q", got, aws.ToString(out.ContentType))
		}
		// The parts are gone: nothing but the object is listed, and the
		// upload no longer exists.
		lo, err := c.ListObjectsV2(ctx, &sdks3.ListObjectsV2Input{Bucket: &bucket, Prefix: aws.String("big")})
		if err != nil || len(lo.Contents) != 1 {
			t.Fatalf("list: %+v %v", lo, err)
		}
		if _, err := c.ListParts(ctx, &sdks3.ListPartsInput{Bucket: &bucket, Key: &key, UploadId: up.UploadId}); errCode(err) != "NoSuchUpload" {
			t.Fatalf("completed upload: %v", err)
		}
	}
}

func TestErrorsAndAuth(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := e.client(e.plain, e.key.ID, e.key.Secret)
	b := "errs"
	if _, err := c.CreateBucket(ctx, &sdks3.CreateBucketInput{Bucket: &b}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetObject(ctx, &sdks3.GetObjectInput{Bucket: &b, Key: aws.String("nope")}); errCode(err) != "NoSuchKey" {
		t.Fatalf("missing key: %v", err)
	}
	if _, err := c.GetObject(ctx, &sdks3.GetObjectInput{Bucket: aws.String("nobucket"), Key: aws.String("k")}); errCode(err) != "NoSuchBucket" {
		t.Fatalf("missing bucket: %v", err)
	}
	if _, err := c.PutObject(ctx, &sdks3.PutObjectInput{Bucket: &b, Key: aws.String("k"), Body: strings.NewReader("abc")}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteBucket(ctx, &sdks3.DeleteBucketInput{Bucket: &b}); errCode(err) != "BucketNotEmpty" {
		t.Fatalf("non-empty bucket: %v", err)
	}
	if _, err := c.GetObject(ctx, &sdks3.GetObjectInput{Bucket: &b, Key: aws.String("k"), IfMatch: aws.String(`"nope"`)}); errCode(err) != "PreconditionFailed" {
		t.Fatalf("If-Match: %v", err)
	}
	if _, err := c.GetObject(ctx, &sdks3.GetObjectInput{Bucket: &b, Key: aws.String("k"), Range: aws.String("bytes=10-20")}); errCode(err) != "InvalidRange" {
		t.Fatalf("range: %v", err)
	}
	bad := e.client(e.plain, e.key.ID, "wrong-secret-wrong-secret-wrong-secret!")
	if _, err := bad.GetObject(ctx, &sdks3.GetObjectInput{Bucket: &b, Key: aws.String("k")}); errCode(err) != "SignatureDoesNotMatch" {
		t.Fatalf("wrong secret: %v", err)
	}
	unknown := e.client(e.plain, "CKNOSUCHKEY000000000", e.key.Secret)
	if _, err := unknown.GetObject(ctx, &sdks3.GetObjectInput{Bucket: &b, Key: aws.String("k")}); errCode(err) != "InvalidAccessKeyId" {
		t.Fatalf("unknown key: %v", err)
	}
	// Another key with no grant on the bucket.
	g, _ := access.ParseGrant("other", access.DefaultActions)
	k2, _ := access.NewKey("other", []access.Grant{g}, time.Now(), time.Time{})
	e.auth.SetKeys([]access.Key{e.key, k2})
	c2 := e.client(e.plain, k2.ID, k2.Secret)
	if _, err := c2.GetObject(ctx, &sdks3.GetObjectInput{Bucket: &b, Key: aws.String("k")}); errCode(err) != "AccessDenied" {
		t.Fatalf("no grant: %v", err)
	}
	lb, err := c2.ListBuckets(ctx, &sdks3.ListBucketsInput{})
	if err != nil || len(lb.Buckets) != 0 {
		t.Fatalf("a key sees only its buckets: %+v %v", lb, err)
	}
	// Anonymous: refused on a private bucket, served on a public one.
	resp, err := http.Get(e.plain.URL + "/errs/k?list-type=2")
	if err != nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("anonymous list: %v %v", resp, err)
	}
	resp.Body.Close()
	if _, err := c.PutBucketAcl(ctx, &sdks3.PutBucketAclInput{Bucket: &b, ACL: types.BucketCannedACLPublicRead}); err != nil {
		t.Fatal(err)
	}
	resp, err = http.Get(e.plain.URL + "/errs?list-type=2")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("anonymous list of a public bucket: %v %v", resp, err)
	}
	resp.Body.Close()
	acl, err := c.GetBucketAcl(ctx, &sdks3.GetBucketAclInput{Bucket: &b})
	if err != nil || len(acl.Grants) != 2 || aws.ToString(acl.Owner.ID) != e.key.ID {
		t.Fatalf("acl: %+v %v", acl, err)
	}
	// Virtual-hosted style: the bucket in the Host.
	req, _ := http.NewRequest(http.MethodGet, e.plain.URL+"/k", nil)
	req.Host = "errs.s3.example"
	resp, err = http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("virtual-hosted GET: %v %v", resp, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "abc" {
		t.Fatalf("virtual-hosted GET body %q", body)
	}
}

// TestListDelimiters lists with "/" (the store's own listing), another
// delimiter (grouped here), pages, and url encoding.
func TestListDelimiters(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := e.client(e.plain, e.key.ID, e.key.Secret)
	b := "lists"
	if _, err := c.CreateBucket(ctx, &sdks3.CreateBucketInput{Bucket: &b}); err != nil {
		t.Fatal(err)
	}
	keys := []string{"asdf", "boo/bar", "boo/baz/xyzzy", "cquux/thud", "cquux/bla", "a b", "a+b"}
	for _, k := range keys {
		if _, err := c.PutObject(ctx, &sdks3.PutObjectInput{Bucket: &b, Key: aws.String(k), Body: strings.NewReader(k)}); err != nil {
			t.Fatal(err)
		}
	}
	list := func(in *sdks3.ListObjectsV2Input) (keys, prefixes []string) {
		in.Bucket = &b
		out, err := c.ListObjectsV2(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range out.Contents {
			keys = append(keys, aws.ToString(o.Key))
		}
		for _, p := range out.CommonPrefixes {
			prefixes = append(prefixes, aws.ToString(p.Prefix))
		}
		return keys, prefixes
	}
	k, p := list(&sdks3.ListObjectsV2Input{Delimiter: aws.String("/")})
	if fmt.Sprint(k, p) != "[a b a+b asdf] [boo/ cquux/]" {
		t.Fatalf("delimiter /: %v %v", k, p)
	}
	k, p = list(&sdks3.ListObjectsV2Input{Delimiter: aws.String("a")})
	if fmt.Sprint(k, p) != "[cquux/thud] [a boo/ba cquux/bla]" {
		t.Fatalf("delimiter a: %v %v", k, p)
	}
	k, p = list(&sdks3.ListObjectsV2Input{Prefix: aws.String("boo/"), Delimiter: aws.String("/")})
	if fmt.Sprint(k, p) != "[boo/bar] [boo/baz/]" {
		t.Fatalf("prefix boo/: %v %v", k, p)
	}
	var all []string
	pg := sdks3.NewListObjectsV2Paginator(c, &sdks3.ListObjectsV2Input{Bucket: &b, MaxKeys: aws.Int32(2)})
	pages := 0
	for pg.HasMorePages() {
		out, err := pg.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, o := range out.Contents {
			all = append(all, aws.ToString(o.Key))
		}
	}
	if len(all) != len(keys) || pages != 4 {
		t.Fatalf("pages: %d, keys %v", pages, all)
	}
	out, err := c.ListObjectsV2(ctx, &sdks3.ListObjectsV2Input{Bucket: &b, EncodingType: types.EncodingTypeUrl, Prefix: aws.String("a")})
	if err != nil || len(out.Contents) != 3 {
		t.Fatalf("url encoding: %+v %v", out, err)
	}
}

func TestParsers(t *testing.T) {
	for _, tc := range []struct {
		host, auth, query string
		want              bool
	}{
		{"h", "", "", false},
		{"h", "Bearer x", "", false},
		{"h", "AWS4-HMAC-SHA256 Credential=...", "", true},
		{"h", "", "list-type=2", true},
		{"h", "", "v=123", false},
		{"h", "", "X-Amz-Credential=a&X-Amz-Signature=b", true},
		{"h", "", "AWSAccessKeyId=a&Expires=1&Signature=b", true},
		{"b.s3.example:8080", "", "", true},
		{"s3.example", "", "", false},
	} {
		if got := IsS3(tc.host, tc.auth, tc.query, "s3.example"); got != tc.want {
			t.Errorf("IsS3(%q, %q, %q) = %v", tc.host, tc.auth, tc.query, got)
		}
	}
	for _, tc := range []struct {
		spec       string
		off, n     int64
		ok, failed bool
	}{
		{"bytes=0-9", 0, 10, true, false},
		{"bytes=5-", 5, 95, true, false},
		{"bytes=-10", 90, 10, true, false},
		{"bytes=90-200", 90, 10, true, false},
		{"bytes=100-", 0, 0, false, true},
		{"bytes=0-1,5-6", 0, 0, false, false},
		{"items=0-1", 0, 0, false, false},
		{"bytes=5-2", 0, 0, false, false},
	} {
		off, n, ok, err := parseRange(tc.spec, 100)
		if off != tc.off || n != tc.n || ok != tc.ok || (err != nil) != tc.failed {
			t.Errorf("parseRange(%q) = %d, %d, %v, %v", tc.spec, off, n, ok, err)
		}
	}
	if b, k, v, err := copySource("/src%20b/a%2Fb%20c?versionId=null"); err != nil || b != "src b" || k != "a/b c" || v != "null" {
		t.Errorf("copySource: %q %q %q %v", b, k, v, err)
	}
	if _, _, _, err := copySource("bucketonly"); err == nil {
		t.Error("copySource without key")
	}
	if got := stripAWSChunked("aws-chunked,gzip"); got != "gzip" {
		t.Errorf("stripAWSChunked = %q", got)
	}
}

// TestPresignedCache: the fast path's cache of verified presigned URLs
// honours expiry and revocation, and never accepts a URL whose signature
// does not verify.
func TestPresignedCache(t *testing.T) {
	e := newEnv(t)
	now := time.Now()
	cfg := e.h.cfg
	cfg.Now = func() time.Time { return now }
	cfg.Registry = nil
	h, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	u, err := sigv4.Presign("GET", "http://127.0.0.1:8080/b/k.txt", e.key.ID, e.key.Secret, "us-east-1", now, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	q := u[strings.IndexByte(u, '?')+1:]
	for i := 0; i < 2; i++ { // a miss, then a hit
		if p, ok := h.Presigned("GET", "127.0.0.1:8080", "/b/k.txt", q); !ok || p.Name != e.key.ID {
			t.Fatalf("round %d: valid URL refused", i)
		}
	}
	for _, bad := range []struct{ method, host, path, q string }{
		{"GET", "127.0.0.1:8080", "/b/other.txt", q},                     // another object
		{"PUT", "127.0.0.1:8080", "/b/k.txt", q},                         // another method
		{"GET", "127.0.0.1:9090", "/b/k.txt", q},                         // another host
		{"GET", "127.0.0.1:8080", "/b/k.txt", q[:len(q)-2] + "00"},       // tampered signature
		{"GET", "127.0.0.1:8080", "/b/k.txt", q + "&response-expires=x"}, // not X-Amz-only
	} {
		if _, ok := h.Presigned(bad.method, bad.host, bad.path, bad.q); ok {
			t.Errorf("accepted %+v", bad)
		}
	}
	now = now.Add(2 * time.Minute)
	if _, ok := h.Presigned("GET", "127.0.0.1:8080", "/b/k.txt", q); ok {
		t.Fatal("an expired URL was served from the cache")
	}
	now = now.Add(-2 * time.Minute)
	e.auth.SetKeys(nil)
	if _, ok := h.Presigned("GET", "127.0.0.1:8080", "/b/k.txt", q); ok {
		t.Fatal("a URL of a revoked key was served from the cache")
	}
}

// TestContentMD5: a PUT whose body does not match its Content-MD5 is
// BadDigest and stores nothing; a bad header is InvalidDigest.
func TestContentMD5(t *testing.T) {
	e := newEnv(t)
	c := e.client(e.plain, e.key.ID, e.key.Secret)
	b := "md5s"
	if _, err := c.CreateBucket(context.Background(), &sdks3.CreateBucketInput{Bucket: &b}); err != nil {
		t.Fatal(err)
	}
	put := func(key, md5 string) (int, string) {
		req, _ := http.NewRequest(http.MethodPut, e.plain.URL+"/md5s/"+key+"?x-id=PutObject", strings.NewReader("bar"))
		req.Header.Set("Authorization", "Bearer "+e.key.ID+":"+e.key.Secret)
		req.Header.Set("Content-MD5", md5)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, string(body)
	}
	if st, body := put("a", "rL0Y20xC+Fzt72VPzMSk2A=="); st != 400 || !strings.Contains(body, "<Code>BadDigest</Code>") {
		t.Fatalf("wrong MD5: %d %s", st, body)
	}
	if st, body := put("b", "not base64!"); st != 400 || !strings.Contains(body, "<Code>InvalidDigest</Code>") {
		t.Fatalf("bad header: %d %s", st, body)
	}
	if st, _ := put("c", "N7UdGUp1E+RbVvZSTy1R8g=="); st != 200 { // MD5 of "bar"
		t.Fatalf("right MD5: %d", st)
	}
	if _, err := e.st.Stat(context.Background(), "md5s", "a"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a refused body was stored: %v", err)
	}
}

// TestMultipartErrorsAndExpiry: part order, size and ETag checks, and an
// unfinished upload collected with its parts after the expiry.
func TestMultipartErrorsAndExpiry(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := e.client(e.plain, e.key.ID, e.key.Secret)
	b, key := "parts", "obj"
	if _, err := c.CreateBucket(ctx, &sdks3.CreateBucketInput{Bucket: &b}); err != nil {
		t.Fatal(err)
	}
	up, err := c.CreateMultipartUpload(ctx, &sdks3.CreateMultipartUploadInput{Bucket: &b, Key: &key})
	if err != nil {
		t.Fatal(err)
	}
	var parts []types.CompletedPart
	for i := 1; i <= 2; i++ {
		out, err := c.UploadPart(ctx, &sdks3.UploadPartInput{Bucket: &b, Key: &key, UploadId: up.UploadId,
			PartNumber: aws.Int32(int32(i)), Body: strings.NewReader(strings.Repeat("x", 100))})
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, types.CompletedPart{ETag: out.ETag, PartNumber: aws.Int32(int32(i))})
	}
	complete := func(ps []types.CompletedPart) error {
		_, err := c.CompleteMultipartUpload(ctx, &sdks3.CompleteMultipartUploadInput{Bucket: &b, Key: &key, UploadId: up.UploadId,
			MultipartUpload: &types.CompletedMultipartUpload{Parts: ps}})
		return err
	}
	if err := complete(parts); errCode(err) != "EntityTooSmall" {
		t.Fatalf("a first part under 5 MiB: %v", err)
	}
	if err := complete([]types.CompletedPart{parts[1], parts[0]}); errCode(err) != "InvalidPartOrder" {
		t.Fatalf("parts out of order: %v", err)
	}
	if err := complete([]types.CompletedPart{{ETag: aws.String(`"0123"`), PartNumber: aws.Int32(1)}}); errCode(err) != "InvalidPart" {
		t.Fatalf("a wrong ETag: %v", err)
	}
	// Nothing collects an upload before its expiry; after it, the parts go.
	if n := e.h.CollectUploads(ctx); n != 0 {
		t.Fatalf("collected %d uploads before their expiry", n)
	}
	cfg := e.h.cfg
	cfg.Registry = nil
	cfg.Now = func() time.Time { return time.Now().Add(cfg.UploadExpiry + time.Hour) }
	later, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if n := later.CollectUploads(ctx); n != 1 {
		t.Fatalf("collected %d expired uploads, want 1", n)
	}
	if _, err := e.st.Stat(ctx, b, internalDir); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the upload directory is still there: %v", err)
	}
	if _, err := c.ListParts(ctx, &sdks3.ListPartsInput{Bucket: &b, Key: &key, UploadId: up.UploadId}); errCode(err) != "NoSuchUpload" {
		t.Fatalf("a collected upload: %v", err)
	}
}

// TestReviewFindings: holes a review found, each closed.
func TestReviewFindings(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	owner := e.client(e.plain, e.key.ID, e.key.Secret)
	for _, b := range []string{"priv", "pub"} {
		if _, err := owner.CreateBucket(ctx, &sdks3.CreateBucketInput{Bucket: aws.String(b)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := owner.PutBucketAcl(ctx, &sdks3.PutBucketAclInput{Bucket: aws.String("pub"), ACL: types.BucketCannedACLPublicRead}); err != nil {
		t.Fatal(err)
	}
	gw, _ := access.ParseGrant("priv/up/", access.ActionsOf(access.ActionWrite))
	writer, _ := access.NewKey("writer", []access.Grant{gw}, time.Now(), time.Time{})
	// other reads "pub" only as anyone does (it is public-read).
	gw2, _ := access.ParseGrant("mine", access.DefaultActions)
	other, _ := access.NewKey("other", []access.Grant{gw2}, time.Now(), time.Time{})
	e.auth.SetKeys([]access.Key{e.key, writer, other})

	// A write-only key cannot publish what it writes.
	w := e.client(e.plain, writer.ID, writer.Secret)
	_, err := w.PutObject(ctx, &sdks3.PutObjectInput{Bucket: aws.String("priv"), Key: aws.String("up/x"), Body: strings.NewReader("leak"), ACL: types.ObjectCannedACLPublicRead})
	if errCode(err) != "AccessDenied" {
		t.Fatalf("a write-only key set public-read: %v", err)
	}
	if _, err := w.PutObject(ctx, &sdks3.PutObjectInput{Bucket: aws.String("priv"), Key: aws.String("up/x"), Body: strings.NewReader("ok")}); err != nil {
		t.Fatal(err)
	}

	// A private object of a public bucket cannot be copied out by another key.
	if _, err := owner.PutObject(ctx, &sdks3.PutObjectInput{Bucket: aws.String("pub"), Key: aws.String("secret"), Body: strings.NewReader("top secret"), ACL: types.ObjectCannedACLPrivate}); err != nil {
		t.Fatal(err)
	}
	if err := e.st.CreateBucket(ctx, store.BucketInfo{Name: "mine"}); err != nil {
		t.Fatal(err)
	}
	o := e.client(e.plain, other.ID, other.Secret)
	if _, err := o.GetObject(ctx, &sdks3.GetObjectInput{Bucket: aws.String("pub"), Key: aws.String("secret")}); errCode(err) != "AccessDenied" {
		t.Fatalf("read of a private object: %v", err)
	}
	if _, err := o.CopyObject(ctx, &sdks3.CopyObjectInput{Bucket: aws.String("mine"), Key: aws.String("stolen"), CopySource: aws.String("pub/secret")}); errCode(err) != "AccessDenied" {
		t.Fatalf("copy of a private object: %v", err)
	}

	// A policy whose condition Cairn does not evaluate is refused.
	pol := `{"Statement":[{"Effect":"Deny","Principal":"*","Action":"s3:*","Resource":"arn:aws:s3:::priv/*","Condition":{"NotIpAddress":{"aws:SourceIp":"10.0.0.0/8"}}}]}`
	if _, err := owner.PutBucketPolicy(ctx, &sdks3.PutBucketPolicyInput{Bucket: aws.String("priv"), Policy: aws.String(pol)}); errCode(err) != "MalformedPolicy" {
		t.Fatalf("a policy with an unsupported condition: %v", err)
	}
	// A Deny by operation name applies (s3:DeleteBucket is not s3:PutBucketAcl).
	pol = `{"Statement":[{"Effect":"Deny","Principal":"*","Action":"s3:DeleteBucket","Resource":"arn:aws:s3:::mine"}]}`
	if err := e.st.UpdateBucket(ctx, store.BucketInfo{Name: "mine", Owner: e.key.ID}); err != nil {
		t.Fatal(err)
	}
	if _, err := owner.PutBucketPolicy(ctx, &sdks3.PutBucketPolicyInput{Bucket: aws.String("mine"), Policy: aws.String(pol)}); err != nil {
		t.Fatal(err)
	}
	if _, err := owner.DeleteBucket(ctx, &sdks3.DeleteBucketInput{Bucket: aws.String("mine")}); errCode(err) != "AccessDenied" {
		t.Fatalf("DeleteBucket under a Deny of s3:DeleteBucket: %v", err)
	}
	// A presigned GET of a bucket with a policy is not for the fast path.
	u, _ := sigv4.Presign("GET", "http://h/mine/k", e.key.ID, e.key.Secret, "us-east-1", time.Now(), time.Minute)
	if _, ok := e.h.Presigned("GET", "h", "/mine/k", u[strings.IndexByte(u, '?')+1:]); ok {
		t.Fatal("the fast path would skip a bucket policy")
	}

	// ListMultipartUploads pages through several uploads of one key.
	for i := 0; i < 3; i++ {
		if _, err := owner.CreateMultipartUpload(ctx, &sdks3.CreateMultipartUploadInput{Bucket: aws.String("priv"), Key: aws.String("k")}); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]bool{}
	in := &sdks3.ListMultipartUploadsInput{Bucket: aws.String("priv"), MaxUploads: aws.Int32(2)}
	for {
		out, err := owner.ListMultipartUploads(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		for _, up := range out.Uploads {
			seen[aws.ToString(up.UploadId)] = true
		}
		if !aws.ToBool(out.IsTruncated) {
			break
		}
		in.KeyMarker, in.UploadIdMarker = out.NextKeyMarker, out.NextUploadIdMarker
	}
	if len(seen) != 3 {
		t.Fatalf("paging saw %d of 3 uploads", len(seen))
	}
}

// TestOnlyStoredHeaders: extended attributes that are not S3 headers
// (WebDAV properties, ACLs) never become answer headers.
func TestOnlyStoredHeaders(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := e.client(e.plain, e.key.ID, e.key.Secret)
	if _, err := c.CreateBucket(ctx, &sdks3.CreateBucketInput{Bucket: aws.String("hdrs")}); err != nil {
		t.Fatal(err)
	}
	x := map[string][]byte{"user.cairn.x-amz-meta-a": []byte("1"), "user.cairn.cache-control": []byte("max-age=9"),
		"user.cairn.dav.ZXg.prop": []byte("<b>\nxml</b>"), "user.cairn.s3.acl": []byte("private")}
	if _, _, err := e.st.Put(ctx, "hdrs", "k", strings.NewReader("v"), store.PutOptions{Size: 1, Xattrs: x}); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodGet, e.plain.URL+"/hdrs/k?x-id=GetObject", nil)
	req.Header.Set("Authorization", "Bearer "+e.key.ID+":"+e.key.Secret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("x-amz-meta-a") != "1" || resp.Header.Get("Cache-Control") != "max-age=9" {
		t.Fatalf("stored headers: %d %v", resp.StatusCode, resp.Header)
	}
	for k := range resp.Header {
		if strings.HasPrefix(strings.ToLower(k), "dav.") || strings.HasPrefix(strings.ToLower(k), "s3.") {
			t.Fatalf("an attribute became a header: %s", k)
		}
	}
}
