package s3

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	sdks3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/cairn-fs/cairn/internal/access/sigv4"
	"github.com/cairn-fs/cairn/internal/store"
)

// recordingStore is a store.Store that records the ContentSHA256 of every
// Put it passes on.
type recordingStore struct {
	store.Store
	mu   sync.Mutex
	sums [][]byte
}

func (s *recordingStore) Put(ctx context.Context, bucket, path string, r io.Reader, opts store.PutOptions) (store.ObjectInfo, bool, error) {
	s.mu.Lock()
	s.sums = append(s.sums, opts.ContentSHA256)
	s.mu.Unlock()
	return s.Store.Put(ctx, bucket, path, r, opts)
}

// last returns the ContentSHA256 of the last Put.
func (s *recordingStore) last() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.sums) == 0 {
		return nil
	}
	return s.sums[len(s.sums)-1]
}

// signedPut sends PUT url with body, header-signed by e.key with
// x-amz-content-sha256 payloadHash, and returns the status and body.
func (e *env) signedPut(t *testing.T, srv *httptest.Server, path string, body []byte, payloadHash string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPut, srv.URL+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Amz-Content-Sha256", payloadHash)
	signer := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
	creds := aws.Credentials{AccessKeyID: e.key.ID, SecretAccessKey: e.key.Secret}
	if err := signer.SignHTTP(context.Background(), creds, req, payloadHash, "s3", "us-east-1", time.Now()); err != nil {
		t.Fatal(err)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out)
}

func hexSHA256(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// TestSignedPayloadHashToStore: the x-amz-content-sha256 a PUT (and an
// UploadPart) was signed with is handed to the store as the expected
// SHA-256, and sigv4 no longer hashes the payload itself: the store checks
// it while computing the hash it computes anyway. A body that does not
// match is XAmzContentSHA256Mismatch and stores nothing; a matching one is
// stored once with that SHA-256 as its content hash. UNSIGNED-PAYLOAD hands
// nothing over.
func TestSignedPayloadHashToStore(t *testing.T) {
	e := newEnv(t)
	rec := &recordingStore{Store: e.st}
	cfg := e.h.cfg
	cfg.Store, cfg.Registry = rec, nil
	h, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	ctx := context.Background()
	b := "sums"
	if _, err := e.client(e.plain, e.key.ID, e.key.Secret).CreateBucket(ctx, &sdks3.CreateBucketInput{Bucket: &b}); err != nil {
		t.Fatal(err)
	}
	body := bytes.Repeat([]byte("cairn "), 2500) // 15 KB

	st, out := e.signedPut(t, srv, "/sums/good", body, hexSHA256(body))
	if st != http.StatusOK {
		t.Fatalf("PUT with the right payload hash: %d %s", st, out)
	}
	if got := hex.EncodeToString(rec.last()); got != hexSHA256(body) {
		t.Fatalf("the store was handed ContentSHA256 %q, want the signed payload hash %s", got, hexSHA256(body))
	}
	info, err := e.st.Stat(ctx, b, "good")
	if err != nil {
		t.Fatal(err)
	}
	if info.SHA256 != hexSHA256(body) || info.Size != int64(len(body)) {
		t.Fatalf("stored sha256 %s size %d, want %s %d", info.SHA256, info.Size, hexSHA256(body), len(body))
	}

	// Signed for other bytes: the signature is valid (the hash is part of
	// it), the body is not what was signed.
	other := append([]byte(nil), body...)
	other[len(other)/2] ^= 1
	st, out = e.signedPut(t, srv, "/sums/bad", other, hexSHA256(body))
	if st != http.StatusBadRequest || !strings.Contains(out, "<Code>XAmzContentSHA256Mismatch</Code>") {
		t.Fatalf("PUT of a body that is not the signed one: %d %s", st, out)
	}
	if _, err := e.st.Stat(ctx, b, "bad"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a refused body was stored: %v", err)
	}

	// UNSIGNED-PAYLOAD: nothing to hand over.
	if st, out := e.signedPut(t, srv, "/sums/unsigned", body, sigv4.UnsignedPayload); st != http.StatusOK {
		t.Fatalf("unsigned payload: %d %s", st, out)
	}
	if got := rec.last(); got != nil {
		t.Fatalf("UNSIGNED-PAYLOAD handed ContentSHA256 %x to the store", got)
	}

	// UploadPart: the same.
	c := e.client(srv, e.key.ID, e.key.Secret)
	key := "multi"
	up, err := c.CreateMultipartUpload(ctx, &sdks3.CreateMultipartUploadInput{Bucket: &b, Key: &key})
	if err != nil {
		t.Fatal(err)
	}
	partURL := "/sums/multi?partNumber=1&uploadId=" + *up.UploadId
	if st, out := e.signedPut(t, srv, partURL, other, hexSHA256(body)); st != http.StatusBadRequest || !strings.Contains(out, "XAmzContentSHA256Mismatch") {
		t.Fatalf("UploadPart of a body that is not the signed one: %d %s", st, out)
	}
	if st, out := e.signedPut(t, srv, partURL, body, hexSHA256(body)); st != http.StatusOK {
		t.Fatalf("UploadPart with the right payload hash: %d %s", st, out)
	}
	if got := hex.EncodeToString(rec.last()); got != hexSHA256(body) {
		t.Fatalf("UploadPart handed ContentSHA256 %q, want %s", got, hexSHA256(body))
	}
}

// BenchmarkPutObjectSigned measures the S3 handler's PUT of a 15 KB object
// with a signed payload hash (as the aws CLI and SDKs send over HTTP),
// over an in-memory store, without the network: the server's CPU per PUT.
func BenchmarkPutObjectSigned(b *testing.B) {
	e := newEnv(b)
	ctx := context.Background()
	bk := "bench"
	if _, err := e.client(e.plain, e.key.ID, e.key.Secret).CreateBucket(ctx, &sdks3.CreateBucketInput{Bucket: &bk}); err != nil {
		b.Fatal(err)
	}
	body := bytes.Repeat([]byte("cairn "), 2500)
	signer := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
	creds := aws.Credentials{AccessKeyID: e.key.ID, SecretAccessKey: e.key.Secret}
	// Sign the requests first: the client's work is not the server's.
	reqs := make([]*http.Request, b.N)
	for i := range reqs {
		body := append([]byte(nil), body...)
		body[0] = byte(i) // distinct blobs, as distinct files
		ph := hexSHA256(body)
		r := httptest.NewRequest(http.MethodPut, "/bench/k"+strings.Repeat("x", i%3)+hex.EncodeToString([]byte{byte(i >> 16), byte(i >> 8), byte(i)}), bytes.NewReader(body))
		r.Header.Set("X-Amz-Content-Sha256", ph)
		r.Host = "localhost"
		if err := signer.SignHTTP(ctx, creds, r, ph, "s3", "us-east-1", time.Now()); err != nil {
			b.Fatal(err)
		}
		reqs[i] = r
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		w := httptest.NewRecorder()
		e.h.ServeHTTP(w, reqs[i])
		if w.Code != http.StatusOK {
			b.Fatalf("PUT: %d %s", w.Code, w.Body)
		}
	}
}
