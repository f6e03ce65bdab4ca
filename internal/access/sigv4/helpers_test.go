package sigv4

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// Test credentials. The secret contains '/' and '+' on purpose.
const (
	testAKID   = "AKIDCAIRNTEST0001"
	testSecret = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
	testRegion = "eu-west-3"
)

// signTime is the signing time of most tests.
func signTime() time.Time { return time.Date(2026, 3, 14, 15, 9, 26, 0, time.UTC) }

func testCreds(secret string) aws.Credentials {
	return aws.Credentials{AccessKeyID: testAKID, SecretAccessKey: secret}
}

func testLookup(id string) (string, bool) {
	if id == testAKID {
		return testSecret, true
	}
	return "", false
}

// newTestVerifier returns a Verifier whose clock stands at now.
func newTestVerifier(t testing.TB, now time.Time) *Verifier {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Lookup = testLookup
	cfg.Now = func() time.Time { return now }
	v, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// sdkSigner returns the SDK's signer configured as the S3 client uses it:
// the path is signed as r.URL.EscapedPath, not escaped again.
func sdkSigner() *v4.Signer {
	return v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
}

// sdkSignCreds signs r with creds at signTime; x-amz-content-sha256 must be set.
func sdkSignCreds(t testing.TB, r *http.Request, creds aws.Credentials) {
	t.Helper()
	if err := sdkSigner().SignHTTP(context.Background(), creds, r, r.Header.Get("X-Amz-Content-Sha256"), "s3", testRegion, signTime()); err != nil {
		t.Fatal(err)
	}
}

// sdkPresignCreds presigns r with creds at signTime for an hour.
func sdkPresignCreds(t testing.TB, r *http.Request, creds aws.Credentials) string {
	t.Helper()
	r.URL.RawQuery = "X-Amz-Expires=3600"
	u, _, err := sdkSigner().PresignHTTP(context.Background(), creds, r, UnsignedPayload, "s3", testRegion, signTime())
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// sdkSign signs r in place with the AWS SDK's signer, as the S3 client does
// (no extra path escaping), setting x-amz-content-sha256 to payloadHash.
// r's raw query is left as it was.
func sdkSign(t testing.TB, r *http.Request, payloadHash, secret string, at time.Time) {
	t.Helper()
	r.Header.Set("X-Amz-Content-Sha256", payloadHash)
	// The signer rewrites the query in canonical form; send it as it was,
	// as other clients do, so that the verifier must canonicalize it.
	raw := r.URL.RawQuery
	if err := sdkSigner().SignHTTP(context.Background(), testCreds(secret), r, payloadHash, "s3", testRegion, at); err != nil {
		t.Fatal(err)
	}
	r.URL.RawQuery = raw
}

// sdkPresign presigns r with the AWS SDK's signer for expires, as the S3
// presign client does (UNSIGNED-PAYLOAD, no extra path escaping).
func sdkPresign(t testing.TB, r *http.Request, secret string, at time.Time, expires time.Duration) string {
	t.Helper()
	q := r.URL.Query()
	q.Set("X-Amz-Expires", fmt.Sprint(int64(expires/time.Second)))
	r.URL.RawQuery = q.Encode()
	u, _, err := sdkSigner().PresignHTTP(context.Background(), testCreds(secret), r, UnsignedPayload, "s3", testRegion, at)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// seedSignature extracts the Signature= of a signed request.
func seedSignature(t testing.TB, r *http.Request) []byte {
	t.Helper()
	auth := r.Header.Get("Authorization")
	i := strings.Index(auth, "Signature=")
	if i < 0 {
		t.Fatalf("no signature in %q", auth)
	}
	b, err := hex.DecodeString(auth[i+len("Signature="):])
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// refSigningKey derives a signing key independently of the package (and
// is checked against the SDK's stream signer in TestRefSigningKey).
func refSigningKey(secret string, at time.Time) []byte {
	mac := func(k []byte, s string) []byte {
		m := hmac.New(sha256.New, k)
		m.Write([]byte(s))
		return m.Sum(nil)
	}
	k := mac([]byte("AWS4"+secret), at.UTC().Format("20060102"))
	k = mac(k, testRegion)
	k = mac(k, "s3")
	return mac(k, "aws4_request")
}

func refScope(at time.Time) string {
	return at.UTC().Format("20060102") + "/" + testRegion + "/s3/aws4_request"
}

// refTrailerSignature computes a trailer signature independently of the package.
func refTrailerSignature(secret string, at time.Time, prev []byte, trailers string) []byte {
	h := sha256.Sum256([]byte(trailers))
	sts := "AWS4-HMAC-SHA256-TRAILER\n" + at.UTC().Format("20060102T150405Z") + "\n" + refScope(at) + "\n" +
		hex.EncodeToString(prev) + "\n" + hex.EncodeToString(h[:])
	m := hmac.New(sha256.New, refSigningKey(secret, at))
	m.Write([]byte(sts))
	return m.Sum(nil)
}

// wantErr fails t unless err matches want (nil for success).
func wantErr(t testing.TB, what string, err, want error) {
	t.Helper()
	switch {
	case want == nil && err != nil:
		t.Fatalf("%s: unexpected error %v", what, err)
	case want != nil && !errors.Is(err, want):
		t.Fatalf("%s: got error %v, want %v", what, err, want)
	}
}
