package sigv4

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
)

// fakeS3 is the smallest S3 server that authenticates with a Verifier:
// PUT stores a body, GET returns it. It records how each PUT was sent.
type fakeS3 struct {
	v *Verifier

	mu      sync.Mutex
	objects map[string][]byte
	puts    []putInfo
}

type putInfo struct {
	path        string
	payloadHash string
	checksum    Checksum
}

func (f *fakeS3) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	res, err := f.v.Verify(r)
	if err != nil {
		writeS3Error(w, err)
		return
	}
	switch r.Method {
	case http.MethodPut:
		b, err := res.Body(r)
		if err != nil {
			writeS3Error(w, err)
			return
		}
		data, err := io.ReadAll(b)
		if err != nil {
			writeS3Error(w, err)
			return
		}
		cs, _ := b.Checksum()
		f.mu.Lock()
		f.objects[r.URL.Path] = data
		f.puts = append(f.puts, putInfo{r.URL.Path, res.PayloadHash, cs})
		f.mu.Unlock()
		w.Header().Set("ETag", `"etag"`)
	case http.MethodGet:
		f.mu.Lock()
		data, ok := f.objects[r.URL.Path]
		f.mu.Unlock()
		if !ok {
			http.Error(w, "no such key", http.StatusNotFound)
			return
		}
		w.Write(data)
	default:
		http.Error(w, "method", http.StatusMethodNotAllowed)
	}
}

func (f *fakeS3) lastPut() putInfo {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.puts[len(f.puts)-1]
}

func writeS3Error(w http.ResponseWriter, err error) {
	var e *Error
	if !errors.As(err, &e) {
		e = &Error{Code: "InternalError", Status: http.StatusInternalServerError, Message: err.Error()}
	}
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(e.Status)
	xml.NewEncoder(w).Encode(struct {
		XMLName xml.Name `xml:"Error"`
		Code    string
		Message string
	}{Code: e.Code, Message: e.Message})
}

// newS3Client returns an AWS SDK S3 client of srv with the given secret.
func newS3Client(srv *httptest.Server, secret string) *s3.Client {
	return s3.New(s3.Options{
		Region:       testRegion,
		BaseEndpoint: aws.String(srv.URL),
		UsePathStyle: true,
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return testCreds(secret), nil
		}),
		HTTPClient:       srv.Client(),
		RetryMaxAttempts: 1,
		// What config.LoadDefaultConfig sets: a CRC32 checksum on every
		// upload unless another algorithm is asked for.
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenSupported,
	})
}

// TestS3Client runs the AWS SDK's S3 client against a server that
// authenticates with Verify and reads bodies with Body: over HTTP the SDK
// signs the payload hash and sends a checksum header, over HTTPS it sends
// an aws-chunked body with an unsigned checksum trailer
// (STREAMING-UNSIGNED-PAYLOAD-TRAILER).
func TestS3Client(t *testing.T) {
	if testing.Short() {
		t.Skip("starts servers")
	}
	for _, tls := range []bool{false, true} {
		fake := &fakeS3{v: newS3Verifier(t), objects: map[string][]byte{}}
		var srv *httptest.Server
		if tls {
			srv = httptest.NewTLSServer(fake)
		} else {
			srv = httptest.NewServer(fake)
		}
		defer srv.Close()
		client := newS3Client(srv, testSecret)
		ctx := t.Context()

		algs := []types.ChecksumAlgorithm{"", types.ChecksumAlgorithmCrc32, types.ChecksumAlgorithmCrc32c,
			types.ChecksumAlgorithmCrc64nvme, types.ChecksumAlgorithmSha1, types.ChecksumAlgorithmSha256, types.ChecksumAlgorithmSha512}
		for i, key := range trickyKeys() {
			if key == "" {
				continue
			}
			alg := algs[i%len(algs)]
			for _, size := range []int{0, 1, 70_000, 1 << 20} {
				data := testData(size)
				in := &s3.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String(key), Body: bytes.NewReader(data), ChecksumAlgorithm: alg}
				if _, err := client.PutObject(ctx, in); err != nil {
					t.Fatalf("tls %v key %q size %d alg %q: %v", tls, key, size, alg, err)
				}
				put := fake.lastPut()
				if put.path != "/bkt/"+key {
					t.Fatalf("stored at %q", put.path)
				}
				wantAlg := strings.ToLower(string(alg))
				if wantAlg == "" {
					wantAlg = ChecksumCRC32 // the SDK's default
				}
				if put.checksum.Algorithm != wantAlg {
					t.Fatalf("tls %v size %d alg %q: server verified checksum %+v (payload %s)", tls, size, alg, put.checksum, put.payloadHash)
				}
				if tls && size > 0 && put.payloadHash != StreamingUnsignedTrailer {
					t.Fatalf("HTTPS upload sent as %q; the test expects the SDK's aws-chunked trailer", put.payloadHash)
				}
				if !tls && !isHexSHA256(put.payloadHash) {
					t.Fatalf("HTTP upload sent as %q", put.payloadHash)
				}
				out, err := client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("bkt"), Key: aws.String(key)})
				if err != nil {
					t.Fatal(err)
				}
				got, err := io.ReadAll(out.Body)
				out.Body.Close()
				if err != nil || !bytes.Equal(got, data) {
					t.Fatalf("get %q: %d bytes, %v", key, len(got), err)
				}
			}
		}

		// A body that cannot seek is streamed (over HTTPS) rather than
		// hashed in advance.
		if tls {
			data := testData(300_000)
			_, err := client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String("stream"),
				Body: io.MultiReader(bytes.NewReader(data)), ContentLength: aws.Int64(int64(len(data)))})
			if err != nil {
				t.Fatal(err)
			}
			if put := fake.lastPut(); put.payloadHash != StreamingUnsignedTrailer || !bytes.Equal(fake.objects["/bkt/stream"], data) {
				t.Fatalf("streamed put: %+v", put)
			}
		}

		// A wrong secret and an unknown key id come back as S3 errors.
		_, err := newS3Client(srv, "wrong").GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("bkt"), Key: aws.String("plain.txt")})
		var apiErr smithy.APIError
		if !errors.As(err, &apiErr) || apiErr.ErrorCode() != "SignatureDoesNotMatch" {
			t.Fatalf("wrong secret: %v", err)
		}

		// Presigned GET and PUT from the SDK's presign client, sent by a
		// plain HTTP client.
		presign := s3.NewPresignClient(client)
		preq, err := presign.PresignPutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String("pre signed+é")},
			s3.WithPresignExpires(10*time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest(preq.Method, preq.URL, strings.NewReader("presigned body"))
		for k, v := range preq.SignedHeader {
			if k != "Host" {
				req.Header[k] = v
			}
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("presigned put: %s (%s)", resp.Status, preq.URL)
		}
		greq, err := presign.PresignGetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("bkt"), Key: aws.String("pre signed+é")})
		if err != nil {
			t.Fatal(err)
		}
		resp, err = srv.Client().Get(greq.URL)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || string(got) != "presigned body" {
			t.Fatalf("presigned get: %s %q", resp.Status, got)
		}
	}
}

// newS3Verifier returns a Verifier on the wall clock, which the SDK signs with.
func newS3Verifier(t *testing.T) *Verifier {
	t.Helper()
	v, err := New(Config{Lookup: testLookup})
	if err != nil {
		t.Fatal(err)
	}
	return v
}
