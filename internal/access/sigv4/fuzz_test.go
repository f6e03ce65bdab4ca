package sigv4

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"testing"
)

// FuzzChunkedBody feeds arbitrary bytes to the aws-chunked decoder in each
// streaming mode. It must never panic or loop, every failure must be an
// *Error, the error must be sticky, and a body it accepts cannot decode to
// more bytes than it holds. Normal test runs use only the seed corpus: valid
// SDK-signed bodies and some corruptions of them.
func FuzzChunkedBody(f *testing.F) {
	modes := []string{StreamingPayload, StreamingPayloadTrailer, StreamingUnsignedTrailer}
	type setup struct {
		res    *Result
		header http.Header
	}
	setups := make([]setup, len(modes))
	for i, mode := range modes {
		c := chunked{mode: mode, data: testData(300), chunkSize: 100, declaredLen: "-"}
		if mode != StreamingPayload {
			c.trailerAlg = ChecksumCRC32C
		}
		r, body := c.request(f)
		res, err := newTestVerifier(f, signTime()).Verify(r)
		if err != nil {
			f.Fatal(err)
		}
		setups[i] = setup{res, r.Header.Clone()}
		f.Add(uint8(i), uint8(0), body)
		f.Add(uint8(i), uint8(7), body)
		f.Add(uint8(i), uint8(1), body[:len(body)/2])
		f.Add(uint8(i), uint8(3), append(bytes.Clone(body), body...))
		edited := bytes.Clone(body)
		edited[len(edited)/3] ^= 0x20
		f.Add(uint8(i), uint8(100), edited)
	}
	f.Add(uint8(2), uint8(0), []byte("0\r\n\r\n"))
	f.Add(uint8(2), uint8(0), []byte("5\r\nhello\r\n0\r\nx-amz-checksum-crc32c:AAAAAA==\r\n\r\n"))
	f.Add(uint8(0), uint8(0), []byte("fffffffffffffffff;chunk-signature=\r\n"))

	f.Fuzz(func(t *testing.T, mode, readSize uint8, data []byte) {
		s := setups[int(mode)%len(setups)]
		r := &http.Request{Header: s.header, Body: io.NopCloser(bytes.NewReader(data))}
		b, err := s.res.Body(r)
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, int(readSize)+1)
		var n int64
		for i := 0; ; i++ {
			if i > len(data)+10 {
				t.Fatalf("no end after %d reads of %d bytes", i, len(data))
			}
			m, err := b.Read(buf)
			n += int64(m)
			if err == io.EOF {
				if n > int64(len(data)) {
					t.Fatalf("decoded %d bytes from %d", n, len(data))
				}
				break
			}
			if err != nil {
				var e *Error
				if !errors.As(err, &e) {
					t.Fatalf("error %v is not an *Error", err)
				}
				if _, err2 := b.Read(buf); err2 != err {
					t.Fatalf("error not sticky: %v then %v", err, err2)
				}
				break
			}
			if m == 0 {
				// A Read of a non-empty buffer that returns nothing must at
				// least make progress through the framing.
				continue
			}
		}
	})
}
