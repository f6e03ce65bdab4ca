package vfs

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestWriteVAt: pwritev of several buffers (one empty) lands them in
// order at the offset, as one WriteAt of their concatenation would.
func TestWriteVAt(t *testing.T) {
	f, err := OS().OpenFile(filepath.Join(t.TempDir(), "v"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt([]byte("0123456789"), 0); err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte("b"), 1<<20)
	n, err := f.(VectorWriter).WriteVAt([][]byte{[]byte("head"), nil, big, []byte("tail"), {}}, 4)
	if err != nil || n != 4+len(big)+4 {
		t.Fatalf("WriteVAt: %d, %v", n, err)
	}
	got := make([]byte, 4+4+len(big)+4)
	if _, err := f.ReadAt(got, 0); err != nil {
		t.Fatal(err)
	}
	want := append(append([]byte("0123head"), big...), "tail"...)
	if !bytes.Equal(got, want) {
		t.Fatalf("read back %q... (%d bytes), want %q...", got[:12], len(got), want[:12])
	}
}
