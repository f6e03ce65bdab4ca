package backup

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

func hexSum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func TestVerifier(t *testing.T) {
	good := []byte(strings.Repeat("cairn backup ", 1000))
	bad := bytes.Clone(good)
	bad[len(bad)-1] ^= 1
	cases := []struct {
		name    string
		src     []byte
		want    string
		size    int64
		wantErr error
	}{
		{"match", good, hexSum(good), int64(len(good)), nil},
		{"empty", nil, hexSum(nil), 0, nil},
		{"any content", good, "", int64(len(good)), nil},
		{"one byte", []byte("x"), hexSum([]byte("x")), 1, nil},
		{"last byte differs", bad, hexSum(good), int64(len(good)), ErrDigest},
		{"first byte differs", append([]byte{'X'}, good[1:]...), hexSum(good), int64(len(good)), ErrDigest},
		{"empty but wrong digest", nil, hexSum(good), 0, ErrDigest},
		{"short", good[:100], hexSum(good), int64(len(good)), io.ErrUnexpectedEOF},
		{"long", append(bytes.Clone(good), 'z'), hexSum(good), int64(len(good)), ErrDigest},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// One byte at a time too: the check must not depend on how
			// the source splits its reads.
			for _, r := range []io.Reader{bytes.NewReader(tc.src), iotest.OneByteReader(bytes.NewReader(tc.src))} {
				v := newVerifier(r, tc.want, tc.size)
				var out bytes.Buffer
				_, err := io.Copy(&out, v)
				if tc.wantErr == nil {
					if err != nil || !bytes.Equal(out.Bytes(), tc.src) || !v.done {
						t.Fatalf("err %v, %d bytes out of %d, done %v", err, out.Len(), len(tc.src), v.done)
					}
					if v.Sum() != hexSum(tc.src) {
						t.Fatalf("Sum %s", v.Sum())
					}
					continue
				}
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err %v, want %v", err, tc.wantErr)
				}
				// The consumer never got the whole of a wrong content.
				if int64(out.Len()) >= tc.size && tc.size > 0 {
					t.Fatalf("%d bytes handed over of a wrong content of %d", out.Len(), tc.size)
				}
				if v.done {
					t.Fatal("done after a failure")
				}
				if _, err2 := v.Read(make([]byte, 10)); err2 == nil || err2 == io.EOF {
					t.Fatalf("read after a failure: %v", err2)
				}
			}
		})
	}
}

func TestReadVerified(t *testing.T) {
	data := []byte("hello, snapshot")
	var n int
	got, sum, err := readVerified(bytes.NewReader(data), hexSum(data), int64(len(data)), func(k int) { n += k })
	if err != nil || !bytes.Equal(got, data) || sum != hexSum(data) || n != len(data) {
		t.Fatalf("%q %s %v progress %d", got, sum, err, n)
	}
	if _, _, err := readVerified(bytes.NewReader(data), hexSum([]byte("other")), int64(len(data)), nil); !errors.Is(err, ErrDigest) {
		t.Fatalf("wrong content: %v", err)
	}
	got, sum, err = readVerified(bytes.NewReader(nil), "", 0, nil)
	if err != nil || len(got) != 0 || sum != hexSum(nil) {
		t.Fatalf("empty: %q %s %v", got, sum, err)
	}
}
