package s3

import (
	"testing"
	"time"

	"github.com/cairn-fs/cairn/internal/access/sigv4"
)

// BenchmarkPresigned is the fast path's check of a presigned GET.
func BenchmarkPresigned(b *testing.B) {
	e := newEnv(&testing.T{})
	u, err := sigv4.Presign("GET", "http://127.0.0.1:8080/bench/d19/s2/f000000.json", e.key.ID, e.key.Secret, "us-east-1", time.Now(), time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	q := u[len("http://127.0.0.1:8080/bench/d19/s2/f000000.json?"):]
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := e.h.Presigned("GET", "127.0.0.1:8080", "/bench/d19/s2/f000000.json", q); !ok {
			b.Fatal("not verified")
		}
	}
}
