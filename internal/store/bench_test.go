package store

import (
	"context"
	"testing"
)

// BenchmarkOpenCached measures Open of a hot file: the GET path's store
// cost before the body is read.
func BenchmarkOpenCached(b *testing.B) {
	e := newEnv(&testing.T{})
	ctx := context.Background()
	const p = "d19/s2/f000000.json"
	if _, _, err := e.s.Put(ctx, "bkt", p, bytesReader(make([]byte, 15000)), PutOptions{Size: 15000}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		o, err := e.s.Open(ctx, "bkt", p)
		if err != nil {
			b.Fatal(err)
		}
		o.Close()
	}
}
