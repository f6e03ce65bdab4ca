package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand"
	"testing"

	"github.com/cairn-fs/cairn/internal/blob"
)

// TestPutContentSHA256: an expected SHA-256 handed to Put is checked, never
// trusted: a body that hashes otherwise is ErrSHA256Mismatch and stores
// nothing (for a single-blob body, not even its blob); a matching one is
// stored with that SHA-256 as its content hash. A body of the wrong length
// is still ErrShortBody / ErrTooLarge.
func TestPutContentSHA256(t *testing.T) {
	e := newEnv(t)
	s := e.s
	ctx := context.Background()
	rng := rand.New(rand.NewSource(1))
	small := randBytes(rng, 15000)
	big := randBytes(rng, blob.MaxSize+1000) // two blobs
	sum := func(b []byte) []byte { h := sha256.Sum256(b); return h[:] }
	flip := func(b []byte) []byte { c := append([]byte(nil), b...); c[len(c)/2] ^= 1; return c }
	for i, tc := range []struct {
		name string
		body []byte
		size int64 // declared
		want []byte
		err  error
	}{
		{"small right", small, int64(len(small)), sum(small), nil},
		{"small wrong", small, int64(len(small)), sum(flip(small)), ErrSHA256Mismatch},
		{"small unknown size right", small, -1, sum(small), nil},
		{"small unknown size wrong", small, -1, sum(flip(small)), ErrSHA256Mismatch},
		{"big right", big, int64(len(big)), sum(big), nil},
		{"big wrong", big, int64(len(big)), sum(flip(big)), ErrSHA256Mismatch},
		{"empty right", nil, 0, sum(nil), nil},
		{"empty wrong", nil, 0, sum(small), ErrSHA256Mismatch},
		{"short and wrong", small[:100], 200, sum(small), ErrShortBody},
		{"long and wrong", small, 100, sum(small[:100]), ErrTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := tc.body
			if tc.err == ErrSHA256Mismatch || tc.err == nil {
				// A body never stored before, so that its blob's absence
				// after a refusal means something.
				body = append(append([]byte(nil), body...), []byte(fmt.Sprint(i))...)
				want := sum(body)
				if tc.err != nil {
					want = sum(flip(body))
				}
				tc.want = want
				if tc.size >= 0 {
					tc.size = int64(len(body))
				}
			}
			path := fmt.Sprintf("f%d", i)
			info, _, err := s.Put(ctx, "bkt", path, bytes.NewReader(body), PutOptions{Size: tc.size, ContentSHA256: tc.want})
			if !errors.Is(err, tc.err) {
				t.Fatalf("Put: %v, want %v", err, tc.err)
			}
			if err != nil {
				if _, serr := s.Stat(ctx, "bkt", path); !errors.Is(serr, ErrNotFound) {
					t.Fatalf("a refused body was stored: %v", serr)
				}
				if len(body) <= blob.MaxSize && len(body) > 0 && tc.size >= 0 && e.blobs.Has(blob.Sum(body)) {
					t.Fatalf("the blob of a refused single-blob body was written")
				}
				return
			}
			if info.SHA256 != hex.EncodeToString(tc.want) {
				t.Fatalf("stored SHA-256 %s, want %x", info.SHA256, tc.want)
			}
			st, err := s.Stat(ctx, "bkt", path)
			if err != nil || st.SHA256 != info.SHA256 || st.Size != int64(len(body)) {
				t.Fatalf("Stat: %+v %v", st, err)
			}
		})
	}
}

// TestConcatRefusesDigests: Concat reads no body, so it refuses an
// expected digest rather than pass over it unchecked.
func TestConcatRefusesDigests(t *testing.T) {
	s := newEnv(t).s
	ctx := context.Background()
	if _, _, err := s.Put(ctx, "bkt", "a", bytes.NewReader([]byte("part")), PutOptions{Size: 4}); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte("part"))
	for _, opts := range []PutOptions{{ContentSHA256: sum[:]}, {ContentMD5: sum[:16]}} {
		if _, _, err := s.Concat(ctx, "bkt", "c", []ObjectRef{{Bucket: "bkt", Path: "a"}}, "x", opts); err == nil {
			t.Fatalf("Concat with %+v: no error", opts)
		}
	}
	if _, _, err := s.Concat(ctx, "bkt", "c", []ObjectRef{{Bucket: "bkt", Path: "a"}}, "x", PutOptions{}); err != nil {
		t.Fatal(err)
	}
}
