package fuse

import (
	"bytes"
	"io"
	"testing"
)

// A buffer reads back what was written at any offset (a gap reads as
// zeros), truncates both ways, and moves to a file past memMax without
// losing a byte.
func TestBuffer(t *testing.T) {
	b := newBuffer(t.TempDir())
	defer b.Close()
	want := []byte{}
	write := func(p []byte, off int64) {
		t.Helper()
		if n, err := b.WriteAt(p, off); err != nil || n != len(p) {
			t.Fatalf("WriteAt(%d bytes, %d): %d, %v", len(p), off, n, err)
		}
		if end := off + int64(len(p)); end > int64(len(want)) {
			want = append(want, make([]byte, end-int64(len(want)))...)
		}
		copy(want[off:], p)
	}
	check := func(what string) {
		t.Helper()
		if b.Size() != int64(len(want)) {
			t.Fatalf("%s: size %d, want %d", what, b.Size(), len(want))
		}
		got, err := io.ReadAll(io.NewSectionReader(b, 0, b.Size()))
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s: content differs (%v)", what, err)
		}
	}
	write([]byte("hello"), 0)
	write([]byte("sparse"), 100)
	check("in memory")
	if _, ok := b.Bytes(); !ok {
		t.Fatal("a small buffer is not in memory")
	}
	if err := b.Truncate(3); err != nil {
		t.Fatal(err)
	}
	want = want[:3]
	if err := b.Truncate(50); err != nil {
		t.Fatal(err)
	}
	want = append(want, make([]byte, 47)...)
	check("truncated down then up (zeros)")
	write(bytes.Repeat([]byte("x"), 4096), memMax-100)
	if _, ok := b.Bytes(); ok {
		t.Fatal("a buffer past memMax is still in memory")
	}
	check("spilled to a file")
	if err := b.Truncate(10); err != nil {
		t.Fatal(err)
	}
	want = want[:10]
	check("spilled and truncated")
}
