package sigv4

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// chunked describes an aws-chunked request to build.
type chunked struct {
	mode       string // StreamingPayload, StreamingPayloadTrailer or StreamingUnsignedTrailer
	data       []byte
	chunkSize  int
	trailerAlg string // declared checksum trailer; "" for none
	// Optional corruptions and variations.
	trailerValue string // sent instead of the right checksum
	extraTrailer string // an extra trailer line, before the signature
	noTrailerSig bool   // leave out x-amz-trailer-signature
	noFinalCRLF  bool   // leave out the CRLF that ends the body
	declaredLen  string // x-amz-decoded-content-length; "" for len(data), "-" for none
	secret       string // signing secret; "" for testSecret
}

// sigFunc returns the signature of the next chunk.
type sigFunc func(chunk []byte) []byte

// encode writes the aws-chunked body of c with chunk signatures from sig
// (nil for unsigned) and the trailer signature from trailerSig.
func (c chunked) encode(sig sigFunc, trailerSig func(trailers string) []byte) []byte {
	var b bytes.Buffer
	writeChunk := func(p []byte) {
		if sig != nil {
			fmt.Fprintf(&b, "%x;chunk-signature=%x\r\n", len(p), sig(p))
		} else {
			fmt.Fprintf(&b, "%x\r\n", len(p))
		}
		if len(p) > 0 {
			b.Write(p)
			b.WriteString("\r\n")
		}
	}
	for data := c.data; len(data) > 0; {
		n := min(c.chunkSize, len(data))
		writeChunk(data[:n])
		data = data[n:]
	}
	writeChunk(nil)
	if c.mode != StreamingPayload {
		var trailers string
		if c.trailerAlg != "" {
			val := c.trailerValue
			if val == "" {
				h, err := NewChecksum(c.trailerAlg)
				if err != nil {
					panic(err)
				}
				h.Write(c.data)
				val = EncodeChecksum(h)
			}
			trailers = ChecksumHeaderPrefix + c.trailerAlg + ":" + val + "\n"
		}
		if c.extraTrailer != "" {
			trailers += c.extraTrailer + "\n"
		}
		b.WriteString(strings.ReplaceAll(trailers, "\n", "\r\n"))
		if c.mode == StreamingPayloadTrailer && !c.noTrailerSig {
			fmt.Fprintf(&b, "x-amz-trailer-signature:%x\r\n", trailerSig(trailers))
		}
	}
	if !c.noFinalCRLF {
		b.WriteString("\r\n")
	}
	return b.Bytes()
}

// request builds, signs (with the AWS SDK's signer and stream signer) and
// encodes c. It returns the request, with its body set, and the body bytes.
func (c chunked) request(t testing.TB) (*http.Request, []byte) {
	t.Helper()
	if c.chunkSize == 0 {
		c.chunkSize = 64 << 10
	}
	secret := c.secret
	if secret == "" {
		secret = testSecret
	}
	r := newKeyRequest(t, http.MethodPut, "s3.example.com", "chunked key+1", "", nil)
	r.Header.Set("Content-Encoding", "aws-chunked")
	switch c.declaredLen {
	case "":
		r.Header.Set("X-Amz-Decoded-Content-Length", strconv.Itoa(len(c.data)))
	case "-":
	default:
		r.Header.Set("X-Amz-Decoded-Content-Length", c.declaredLen)
	}
	if c.trailerAlg != "" {
		r.Header.Set("X-Amz-Trailer", ChecksumHeaderPrefix+c.trailerAlg)
	}
	zero := make([]byte, 32)
	signed := c.mode != StreamingUnsignedTrailer
	var dummy sigFunc
	if signed {
		dummy = func([]byte) []byte { return zero }
	}
	// Signatures have a fixed length: encode once to learn the length,
	// which the SDK signs as content-length.
	r.ContentLength = int64(len(c.encode(dummy, func(string) []byte { return zero })))
	sdkSign(t, r, c.mode, secret, signTime())
	var body []byte
	if signed {
		ss := v4.NewStreamSigner(testCreds(secret), "s3", testRegion, seedSignature(t, r))
		var prev []byte
		sig := func(p []byte) []byte {
			s, err := ss.GetSignature(context.Background(), nil, p, signTime())
			if err != nil {
				t.Fatal(err)
			}
			prev = s
			return s
		}
		body = c.encode(sig, func(trailers string) []byte { return refTrailerSignature(secret, signTime(), prev, trailers) })
	} else {
		body = c.encode(nil, nil)
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return r, body
}

// readChunked verifies r and reads its whole body.
func readChunked(t testing.TB, r *http.Request) ([]byte, *Body, error) {
	t.Helper()
	v := newTestVerifier(t, signTime())
	res, err := v.Verify(r)
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	b, err := res.Body(r)
	if err != nil {
		return nil, nil, err
	}
	got, err := io.ReadAll(b)
	return got, b, err
}

func testData(n int) []byte {
	rng := rand.New(rand.NewPCG(uint64(n), 7))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// TestRefSigningKey checks the tests' own key derivation (used for trailer
// signatures, which the SDK cannot make) against the SDK's stream signer.
func TestRefSigningKey(t *testing.T) {
	seed := bytes.Repeat([]byte{0xab}, 32)
	ss := v4.NewStreamSigner(testCreds(testSecret), "s3", testRegion, seed)
	got, err := ss.GetSignature(context.Background(), nil, []byte("data"), signTime())
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.Sum256([]byte("data"))
	sts := "AWS4-HMAC-SHA256-PAYLOAD\n" + signTime().Format(amzDateFormat) + "\n" + refScope(signTime()) + "\n" +
		hex.EncodeToString(seed) + "\n" + EmptySHA256 + "\n" + hex.EncodeToString(h[:])
	if want := hmacSHA256(refSigningKey(testSecret, signTime()), sts); !bytes.Equal(got, want) {
		t.Fatalf("reference key derivation disagrees with the SDK")
	}
}

func TestBodyChunked(t *testing.T) {
	data := testData(200_000)
	for _, tc := range []struct {
		name string
		c    chunked
		want error
		msg  string
	}{
		{name: "signed", c: chunked{mode: StreamingPayload, data: data}},
		{name: "signed small chunks", c: chunked{mode: StreamingPayload, data: data, chunkSize: 8 << 10}},
		{name: "signed one chunk", c: chunked{mode: StreamingPayload, data: data, chunkSize: 1 << 20}},
		{name: "signed empty", c: chunked{mode: StreamingPayload, data: nil}},
		{name: "signed no final CRLF", c: chunked{mode: StreamingPayload, data: data, noFinalCRLF: true}},
		{name: "signed no decoded length", c: chunked{mode: StreamingPayload, data: data, declaredLen: "-"}},
		{name: "signed trailer crc32", c: chunked{mode: StreamingPayloadTrailer, data: data, trailerAlg: ChecksumCRC32}},
		{name: "signed trailer crc32c", c: chunked{mode: StreamingPayloadTrailer, data: data, trailerAlg: ChecksumCRC32C}},
		{name: "signed trailer crc64nvme", c: chunked{mode: StreamingPayloadTrailer, data: data, trailerAlg: ChecksumCRC64NVME}},
		{name: "signed trailer sha1", c: chunked{mode: StreamingPayloadTrailer, data: data, trailerAlg: ChecksumSHA1}},
		{name: "signed trailer sha256", c: chunked{mode: StreamingPayloadTrailer, data: data, trailerAlg: ChecksumSHA256}},
		{name: "signed trailer no final CRLF", c: chunked{mode: StreamingPayloadTrailer, data: data, trailerAlg: ChecksumCRC32C, noFinalCRLF: true}},
		{name: "signed trailer empty body", c: chunked{mode: StreamingPayloadTrailer, data: nil, trailerAlg: ChecksumCRC64NVME}},
		{name: "signed trailer none declared", c: chunked{mode: StreamingPayloadTrailer, data: data}},
		{name: "unsigned trailer crc32", c: chunked{mode: StreamingUnsignedTrailer, data: data, trailerAlg: ChecksumCRC32}},
		{name: "unsigned trailer crc32c", c: chunked{mode: StreamingUnsignedTrailer, data: data, trailerAlg: ChecksumCRC32C}},
		{name: "unsigned trailer crc64nvme", c: chunked{mode: StreamingUnsignedTrailer, data: data, trailerAlg: ChecksumCRC64NVME}},
		{name: "unsigned trailer sha1", c: chunked{mode: StreamingUnsignedTrailer, data: data, trailerAlg: ChecksumSHA1}},
		{name: "unsigned trailer sha256", c: chunked{mode: StreamingUnsignedTrailer, data: data, trailerAlg: ChecksumSHA256}},
		{name: "unsigned trailer no final CRLF", c: chunked{mode: StreamingUnsignedTrailer, data: data, trailerAlg: ChecksumCRC32, noFinalCRLF: true}},
		{name: "unsigned trailer 1-byte chunks", c: chunked{mode: StreamingUnsignedTrailer, data: data[:3000], chunkSize: 1, trailerAlg: ChecksumCRC32}},
		{name: "unsigned trailer empty", c: chunked{mode: StreamingUnsignedTrailer, data: nil, trailerAlg: ChecksumCRC32}},

		{name: "signed bad checksum", c: chunked{mode: StreamingPayloadTrailer, data: data, trailerAlg: ChecksumCRC32, trailerValue: "AAAAAA=="}, want: ErrBadDigest, msg: "AAAAAA=="},
		{name: "unsigned bad checksum", c: chunked{mode: StreamingUnsignedTrailer, data: data, trailerAlg: ChecksumSHA256, trailerValue: EncodeChecksum(sha256.New())}, want: ErrBadDigest},
		{name: "unsigned malformed checksum", c: chunked{mode: StreamingUnsignedTrailer, data: data, trailerAlg: ChecksumCRC32, trailerValue: "not base64!"}, want: ErrInvalidDigest},
		{name: "unsigned short checksum", c: chunked{mode: StreamingUnsignedTrailer, data: data, trailerAlg: ChecksumCRC64NVME, trailerValue: "AAAAAA=="}, want: ErrInvalidDigest},
		{name: "signed no trailer signature", c: chunked{mode: StreamingPayloadTrailer, data: data, trailerAlg: ChecksumCRC32, noTrailerSig: true}, want: ErrMalformedTrailer},
		{name: "undeclared trailer", c: chunked{mode: StreamingUnsignedTrailer, data: data, trailerAlg: ChecksumCRC32, extraTrailer: "x-amz-meta-x:1"}, want: ErrMalformedTrailer},
		{name: "trailer without colon", c: chunked{mode: StreamingUnsignedTrailer, data: data, extraTrailer: "garbage"}, want: ErrMalformedTrailer},
		{name: "declared length longer", c: chunked{mode: StreamingPayload, data: data, declaredLen: strconv.Itoa(len(data) + 1)}, want: ErrIncompleteBody},
		{name: "declared length shorter", c: chunked{mode: StreamingUnsignedTrailer, data: data, declaredLen: strconv.Itoa(len(data) - 1)}, want: ErrIncompleteBody},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, _ := tc.c.request(t)
			got, b, err := readChunked(t, r)
			wantErr(t, tc.name, err, tc.want)
			if tc.msg != "" && !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("message %q lacks %q", err, tc.msg)
			}
			if err != nil {
				return
			}
			if !bytes.Equal(got, tc.c.data) {
				t.Fatalf("decoded %d bytes, want %d (equal prefix: %v)", len(got), len(tc.c.data), bytes.HasPrefix(tc.c.data, got))
			}
			cs, ok := b.Checksum()
			if ok != (tc.c.trailerAlg != "") || cs.Algorithm != tc.c.trailerAlg {
				t.Fatalf("Checksum() = %+v, %v", cs, ok)
			}
			// A second read returns EOF again.
			if n, err := b.Read(make([]byte, 1)); n != 0 || err != io.EOF {
				t.Fatalf("read after EOF: %d, %v", n, err)
			}
		})
	}
}

// TestBodyChunkedSmallReads decodes with one-byte reads from a source that
// returns one byte at a time, and through iotest.TestReader.
func TestBodyChunkedSmallReads(t *testing.T) {
	data := testData(5000)
	for _, mode := range []string{StreamingPayload, StreamingPayloadTrailer, StreamingUnsignedTrailer} {
		c := chunked{mode: mode, data: data, chunkSize: 999, trailerAlg: ChecksumCRC32C}
		if mode == StreamingPayload {
			c.trailerAlg = ""
		}
		r, body := c.request(t)
		v := newTestVerifier(t, signTime())
		res, err := v.Verify(r)
		if err != nil {
			t.Fatal(err)
		}
		r.Body = io.NopCloser(iotest.OneByteReader(bytes.NewReader(body)))
		b, err := res.Body(r)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(iotest.OneByteReader(b))
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%s: %d bytes, %v", mode, len(got), err)
		}

		r.Body = io.NopCloser(bytes.NewReader(body))
		if b, err = res.Body(r); err != nil {
			t.Fatal(err)
		}
		if err := iotest.TestReader(b, data); err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
	}
}

// TestBodyChunkedCorrupt alters valid encoded bodies byte by byte.
func TestBodyChunkedCorrupt(t *testing.T) {
	data := testData(3000)
	type edit struct {
		name string
		f    func(body []byte) []byte
		want error
	}
	replace := func(old, new string) func([]byte) []byte {
		return func(b []byte) []byte {
			if !bytes.Contains(b, []byte(old)) {
				panic("no " + strconv.Quote(old) + " in body")
			}
			return bytes.Replace(b, []byte(old), []byte(new), 1)
		}
	}
	for _, tc := range []struct {
		c     chunked
		edits []edit
	}{
		{chunked{mode: StreamingPayload, data: data, chunkSize: 1000}, []edit{
			{"flip data byte", func(b []byte) []byte { b[bytes.Index(b, []byte("\r\n"))+2+500] ^= 1; return b }, ErrSignatureDoesNotMatch},
			{"flip last chunk byte", func(b []byte) []byte {
				i := bytes.LastIndex(b, []byte("0;chunk-signature="))
				b[i-3] ^= 1
				return b
			}, ErrSignatureDoesNotMatch},
			{"flip final signature", func(b []byte) []byte {
				i := bytes.LastIndex(b, []byte("0;chunk-signature=")) + len("0;chunk-signature=")
				b[i] ^= 1
				return b
			}, ErrSignatureDoesNotMatch},
			{"swap chunks", func(b []byte) []byte {
				// Three equal chunks: swap the first two.
				hdr := len("3e8;chunk-signature=") + 64 + 2
				n := hdr + 1000 + 2
				out := append([]byte{}, b[n:2*n]...)
				out = append(out, b[:n]...)
				return append(out, b[2*n:]...)
			}, ErrSignatureDoesNotMatch},
			{"drop a chunk", func(b []byte) []byte {
				n := len("3e8;chunk-signature=") + 64 + 2 + 1000 + 2
				return b[n:]
			}, ErrSignatureDoesNotMatch},
			{"truncated in data", func(b []byte) []byte { return b[:200] }, ErrIncompleteBody},
			{"truncated in header", func(b []byte) []byte { return b[:10] }, ErrIncompleteBody},
			{"truncated before CRLF", func(b []byte) []byte { return b[:len("3e8;chunk-signature=")+64+2+1000] }, ErrIncompleteBody},
			{"truncated before final chunk", func(b []byte) []byte { return b[:bytes.LastIndex(b, []byte("0;chunk-signature="))] }, ErrIncompleteBody},
			{"empty body", func(b []byte) []byte { return nil }, ErrIncompleteBody},
			{"size too small", replace("3e8;", "3e7;"), ErrMalformedChunk},
			{"size too big", replace("3e8;", "3e9;"), ErrMalformedChunk},
			{"size over 16 MiB", replace("3e8;", "1000001;"), ErrMalformedChunk},
			{"size huge", replace("3e8;", "ffffffffffffffff;"), ErrMalformedChunk},
			{"size 17 digits", replace("3e8;", "000000000000003e8;"), ErrMalformedChunk},
			{"size not hex", replace("3e8;", "3g8;"), ErrMalformedChunk},
			{"size empty", replace("3e8;", ";"), ErrMalformedChunk},
			{"no extension", replace("3e8;chunk-signature=", "3e8;"), ErrMalformedChunk},
			{"other extension", replace("3e8;chunk-signature=", "3e8;chunk-signatur="), ErrMalformedChunk},
			{"short signature", replace(";chunk-signature=", ";chunk-signature=0"), ErrMalformedChunk},
			{"LF only", func(b []byte) []byte {
				i := bytes.Index(b, []byte("\r\n"))
				return append(b[:i:i], b[i+1:]...)
			}, ErrMalformedChunk},
			{"data after end", func(b []byte) []byte { return append(b, 'x') }, ErrMalformedChunk},
			{"second CRLF after end", func(b []byte) []byte { return append(b, '\r', '\n') }, ErrMalformedChunk},
			{"trailer in non-trailer mode", func(b []byte) []byte {
				return append(b[:len(b)-2], []byte("x-amz-checksum-crc32:AAAAAA==\r\n\r\n")...)
			}, ErrMalformedChunk},
			{"long line", func(b []byte) []byte { return append([]byte(strings.Repeat("0", 5000)), b...) }, ErrMalformedChunk},
			{"very long line", func(b []byte) []byte { return bytes.Repeat([]byte("0"), 40000) }, ErrMalformedChunk},
		}},
		{chunked{mode: StreamingPayloadTrailer, data: data, chunkSize: 1000, trailerAlg: ChecksumCRC32C}, []edit{
			{"tampered trailer value", func(b []byte) []byte {
				h := crc32.New(crc32.MakeTable(crc32.Castagnoli))
				h.Write(data)
				return replace(EncodeChecksum(h), "AAAAAA==")(b)
			}, ErrSignatureDoesNotMatch},
			{"tampered trailer signature", func(b []byte) []byte {
				i := bytes.Index(b, []byte("x-amz-trailer-signature:")) + len("x-amz-trailer-signature:")
				b[i] ^= 1
				return b
			}, ErrSignatureDoesNotMatch},
			{"trailer after signature", func(b []byte) []byte {
				return append(b[:len(b)-2], []byte("x-amz-checksum-crc32c:AAAAAA==\r\n\r\n")...)
			}, ErrMalformedTrailer},
			{"duplicate trailer", func(b []byte) []byte {
				i := bytes.Index(b, []byte("x-amz-checksum-crc32c:"))
				j := bytes.Index(b, []byte("x-amz-trailer-signature:"))
				dup := append([]byte{}, b[i:j]...)
				return append(append(b[:j:j], dup...), b[j:]...)
			}, ErrMalformedTrailer},
			{"missing trailer", func(b []byte) []byte {
				i := bytes.Index(b, []byte("x-amz-checksum-crc32c:"))
				j := bytes.Index(b, []byte("x-amz-trailer-signature:"))
				return append(b[:i:i], b[j:]...)
			}, ErrSignatureDoesNotMatch},
			{"trailer LF only", replace("\r\nx-amz-trailer-signature", "\nx-amz-trailer-signature"), nil},
			{"data after trailers", func(b []byte) []byte { return append(b, "x"...) }, ErrMalformedChunk},
			{"truncated in trailers", func(b []byte) []byte { return b[:bytes.Index(b, []byte("x-amz-trailer-signature:"))+10] }, ErrMalformedTrailer},
		}},
		{chunked{mode: StreamingUnsignedTrailer, data: data, chunkSize: 1000, trailerAlg: ChecksumCRC32}, []edit{
			{"flip data byte", func(b []byte) []byte { b[100] ^= 1; return b }, ErrBadDigest},
			{"extension", replace("3e8\r\n", "3e8;chunk-signature=00\r\n"), ErrMalformedChunk},
			{"truncated in data", func(b []byte) []byte { return b[:500] }, ErrIncompleteBody},
			{"missing final chunk", func(b []byte) []byte { return b[:bytes.LastIndex(b, []byte("0\r\n"))] }, ErrIncompleteBody},
			{"missing trailer", func(b []byte) []byte { return b[:bytes.LastIndex(b, []byte("0\r\n"))+3] }, ErrMalformedTrailer},
			{"trailer name case", replace("x-amz-checksum-crc32:", "X-Amz-Checksum-CRC32:"), nil},
			{"too many trailers", func(b []byte) []byte {
				i := bytes.LastIndex(b, []byte("0\r\n")) + 3
				return append(b[:i:i], bytes.Repeat([]byte("x-amz-checksum-crc32:AAAAAA==\r\n"), 20)...)
			}, ErrMalformedTrailer},
		}},
	} {
		r0, body := tc.c.request(t)
		v := newTestVerifier(t, signTime())
		res, err := v.Verify(r0)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range tc.edits {
			t.Run(tc.c.mode+"/"+e.name, func(t *testing.T) {
				edited := e.f(append([]byte{}, body...))
				r0.Body = io.NopCloser(bytes.NewReader(edited))
				b, err := res.Body(r0)
				if err != nil {
					t.Fatal(err)
				}
				_, err = io.ReadAll(b)
				wantErr(t, e.name, err, e.want)
				if e.want == nil {
					return
				}
				// The error is sticky.
				if _, err2 := b.Read(make([]byte, 10)); err2 != err {
					t.Fatalf("second read: %v, first %v", err2, err)
				}
			})
		}
	}
}

// TestBodyPlain covers non-chunked payloads and checksum headers.
func TestBodyPlain(t *testing.T) {
	data := testData(100_000)
	crc := func(p []byte) string {
		h, _ := NewChecksum("CRC32C")
		h.Write(p)
		return EncodeChecksum(h)
	}
	for _, tc := range []struct {
		name    string
		hash    string
		body    []byte
		headers map[string]string
		want    error // from Read
		wantNew error // from Body
		sum     string
	}{
		{name: "hex", hash: payloadHashOf(data), body: data},
		{name: "hex mismatch", hash: payloadHashOf(data), body: data[1:], want: ErrContentSHA256Mismatch},
		{name: "hex uppercase", hash: strings.ToUpper(payloadHashOf(data)), body: data},
		{name: "unsigned", hash: UnsignedPayload, body: data},
		{name: "empty", hash: EmptySHA256, body: nil},
		{name: "checksum header", hash: UnsignedPayload, body: data,
			headers: map[string]string{"x-amz-checksum-crc32c": crc(data)}, sum: crc(data)},
		{name: "checksum header mismatch", hash: UnsignedPayload, body: data,
			headers: map[string]string{"x-amz-checksum-crc32c": crc(data[1:])}, want: ErrBadDigest},
		{name: "checksum header and hash", hash: payloadHashOf(data), body: data,
			headers: map[string]string{"x-amz-checksum-crc32c": crc(data), "x-amz-sdk-checksum-algorithm": "CRC32C", "x-amz-checksum-type": "FULL_OBJECT"}, sum: crc(data)},
		{name: "checksum header invalid", hash: UnsignedPayload, body: data,
			headers: map[string]string{"x-amz-checksum-sha1": crc(data)}, wantNew: ErrInvalidDigest},
		{name: "two checksum headers", hash: UnsignedPayload, body: data,
			headers: map[string]string{"x-amz-checksum-crc32c": crc(data), "x-amz-checksum-crc32": crc(data)}, wantNew: ErrInvalidRequest},
		{name: "trailer without streaming", hash: UnsignedPayload, body: data,
			headers: map[string]string{"x-amz-trailer": "x-amz-checksum-crc32"}, wantNew: ErrInvalidRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newKeyRequest(t, http.MethodPut, "h", "k", "", tc.body)
			for k, v := range tc.headers {
				r.Header.Set(k, v)
			}
			sdkSign(t, r, tc.hash, testSecret, signTime())
			v := newTestVerifier(t, signTime())
			res, err := v.Verify(r)
			if err != nil {
				t.Fatal(err)
			}
			b, err := res.Body(r)
			wantErr(t, "Body", err, tc.wantNew)
			if err != nil {
				return
			}
			got, err := io.ReadAll(b)
			wantErr(t, "Read", err, tc.want)
			if err != nil {
				return
			}
			if !bytes.Equal(got, tc.body) {
				t.Fatalf("body differs")
			}
			cs, ok := b.Checksum()
			if ok != (tc.sum != "") || cs.Value != tc.sum {
				t.Fatalf("Checksum() = %+v, %v", cs, ok)
			}
		})
	}
}

// TestTakePayloadHash: a hex payload hash handed to the caller is
// returned and no longer checked by Body (the caller's store hashes the
// bytes once and compares); other payload hashes are not handed over, nor
// a hash once reading started; a checksum header stays Body's to check.
func TestTakePayloadHash(t *testing.T) {
	data := testData(20_000)
	open := func(t *testing.T, hash string, body []byte, hdr map[string]string) *Body {
		t.Helper()
		r := newKeyRequest(t, http.MethodPut, "h", "k", "", body)
		for k, v := range hdr {
			r.Header.Set(k, v)
		}
		sdkSign(t, r, hash, testSecret, signTime())
		res, err := newTestVerifier(t, signTime()).Verify(r)
		if err != nil {
			t.Fatal(err)
		}
		b, err := res.Body(r)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	// Handed over: a body that is not the signed one reads to its end,
	// as the caller now checks it.
	b := open(t, payloadHashOf(data), data[1:], nil)
	want, ok := b.TakePayloadHash()
	if !ok || hex.EncodeToString(want) != payloadHashOf(data) {
		t.Fatalf("TakePayloadHash = %x, %v; want %s", want, ok, payloadHashOf(data))
	}
	if got, err := io.ReadAll(b); err != nil || !bytes.Equal(got, data[1:]) {
		t.Fatalf("after TakePayloadHash, Read: %d bytes, %v", len(got), err)
	}
	if _, ok := b.TakePayloadHash(); ok {
		t.Fatal("TakePayloadHash after Read handed the hash over")
	}
	for _, hash := range []string{UnsignedPayload, StreamingUnsignedTrailer} {
		b := open(t, hash, nil, nil)
		if _, ok := b.TakePayloadHash(); ok {
			t.Fatalf("%s: a hash was handed over", hash)
		}
	}
	// Once reading started, Body keeps the check.
	b = open(t, payloadHashOf(data), data[1:], nil)
	if _, err := b.Read(make([]byte, 10)); err != nil {
		t.Fatal(err)
	}
	if _, ok := b.TakePayloadHash(); ok {
		t.Fatal("TakePayloadHash after a Read handed the hash over")
	}
	if _, err := io.ReadAll(b); !errors.Is(err, ErrContentSHA256Mismatch) {
		t.Fatalf("Body that kept the check: %v", err)
	}
	// A checksum header is still Body's.
	h := sha256.Sum256(data)
	b = open(t, payloadHashOf(data[1:]), data[1:], map[string]string{"x-amz-checksum-sha256": base64.StdEncoding.EncodeToString(h[:])})
	if _, ok := b.TakePayloadHash(); !ok {
		t.Fatal("not handed over")
	}
	if _, err := io.ReadAll(b); !errors.Is(err, ErrBadDigest) {
		t.Fatalf("checksum header after TakePayloadHash: %v", err)
	}
}

// TestBodyHeaders covers the headers Body reads before decoding.
func TestBodyHeaders(t *testing.T) {
	for _, tc := range []struct {
		name    string
		mode    string
		headers map[string]string
		want    error
	}{
		{"bad decoded length", StreamingUnsignedTrailer, map[string]string{"x-amz-decoded-content-length": "-1"}, ErrInvalidArgument},
		{"unknown trailer", StreamingUnsignedTrailer, map[string]string{"x-amz-trailer": "x-amz-checksum-md5"}, ErrInvalidRequest},
		{"non-checksum trailer", StreamingUnsignedTrailer, map[string]string{"x-amz-trailer": "x-amz-meta-a"}, ErrInvalidRequest},
		{"two trailers", StreamingUnsignedTrailer, map[string]string{"x-amz-trailer": "x-amz-checksum-crc32, x-amz-checksum-sha1"}, ErrInvalidRequest},
		{"trailer and header", StreamingUnsignedTrailer, map[string]string{"x-amz-trailer": "x-amz-checksum-crc32", "x-amz-checksum-crc32": "AAAAAA=="}, ErrInvalidRequest},
		{"trailer case", StreamingUnsignedTrailer, map[string]string{"x-amz-trailer": " X-Amz-Checksum-CRC32 "}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newKeyRequest(t, http.MethodPut, "h", "k", "", nil)
			for k, v := range tc.headers {
				r.Header.Set(k, v)
			}
			sdkSign(t, r, tc.mode, testSecret, signTime())
			res, err := newTestVerifier(t, signTime()).Verify(r)
			if err != nil {
				t.Fatal(err)
			}
			_, err = res.Body(r)
			wantErr(t, tc.name, err, tc.want)
		})
	}
}

// failingReader returns data, then err.
type failingReader struct {
	data []byte
	err  error
}

func (f *failingReader) Read(p []byte) (int, error) {
	if len(f.data) == 0 {
		return 0, f.err
	}
	n := copy(p, f.data)
	f.data = f.data[n:]
	return n, nil
}

// TestBodySourceErrors checks that errors of the underlying body pass
// through, and that an unexpected EOF becomes ErrIncompleteBody.
func TestBodySourceErrors(t *testing.T) {
	netErr := errors.New("connection reset")
	for _, mode := range []string{UnsignedPayload, StreamingUnsignedTrailer} {
		for _, tc := range []struct {
			err, want error
		}{
			{netErr, netErr},
			{io.ErrUnexpectedEOF, ErrIncompleteBody},
		} {
			r := newKeyRequest(t, http.MethodPut, "h", "k", "", nil)
			sdkSign(t, r, mode, testSecret, signTime())
			res, err := newTestVerifier(t, signTime()).Verify(r)
			if err != nil {
				t.Fatal(err)
			}
			r.Body = io.NopCloser(&failingReader{data: []byte("10\r\n0123"), err: tc.err})
			b, err := res.Body(r)
			if err != nil {
				t.Fatal(err)
			}
			_, err = io.ReadAll(b)
			wantErr(t, mode, err, tc.want)
		}
	}
}

// TestAWSDocumentationExample verifies the chunked upload example of the
// S3 documentation ("Signature Calculations for the Authorization Header:
// Transferring Payload in Multiple Chunks"), with its published signatures.
func TestAWSDocumentationExample(t *testing.T) {
	const (
		seed   = "4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9"
		chunk1 = "ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648"
		chunk2 = "0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497"
		final  = "b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9"
	)
	body := "10000;chunk-signature=" + chunk1 + "\r\n" + strings.Repeat("a", 65536) + "\r\n" +
		"400;chunk-signature=" + chunk2 + "\r\n" + strings.Repeat("a", 1024) + "\r\n" +
		"0;chunk-signature=" + final + "\r\n\r\n"
	r, err := http.NewRequest(http.MethodPut, "http://s3.amazonaws.com/examplebucket/chunkObject.txt", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	r.Header.Set("X-Amz-Date", "20130524T000000Z")
	r.Header.Set("X-Amz-Storage-Class", "REDUCED_REDUNDANCY")
	r.Header.Set("X-Amz-Content-Sha256", StreamingPayload)
	r.Header.Set("Content-Encoding", "aws-chunked")
	r.Header.Set("X-Amz-Decoded-Content-Length", "66560")
	r.Header.Set("Content-Length", "66824")
	r.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,"+
		"SignedHeaders=content-encoding;content-length;host;x-amz-content-sha256;x-amz-date;x-amz-decoded-content-length;x-amz-storage-class,"+
		"Signature="+seed)
	if len(body) != 66824 {
		t.Fatalf("body is %d bytes", len(body))
	}
	v, err := New(Config{
		Lookup: func(id string) (string, bool) {
			return "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", id == "AKIAIOSFODNN7EXAMPLE"
		},
		Now: func() time.Time { return time.Date(2013, 5, 24, 0, 5, 0, 0, time.UTC) },
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err := v.Verify(r)
	if err != nil {
		t.Fatal(err)
	}
	if res.Signature != seed || res.Region != "us-east-1" {
		t.Fatalf("result %+v", res)
	}
	got := readAll(t, res, r)
	if string(got) != strings.Repeat("a", 66560) {
		t.Fatalf("decoded %d bytes", len(got))
	}
}
