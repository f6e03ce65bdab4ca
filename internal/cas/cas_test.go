package cas

import (
	"hash/crc32"
	"testing"
)

func TestHashRoundTrip(t *testing.T) {
	h := Sum([]byte("hello"))
	if h.String() != "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824" {
		t.Fatalf("Sum: %s", h)
	}
	back, err := ParseHash(h.String())
	if err != nil || back != h {
		t.Fatalf("ParseHash: %v %v", back, err)
	}
	for _, bad := range []string{"", "zz", h.String()[:63] + "g"} {
		if _, err := ParseHash(bad); err == nil {
			t.Errorf("ParseHash(%q) accepted", bad)
		}
	}
}

// TestSums: one pass gives Sum's Hash and the CRC32C of the same bytes,
// for sizes around the chunk size, and a changed byte changes the CRC.
func TestSums(t *testing.T) {
	for _, n := range []int{0, 1, sumsChunk - 1, sumsChunk, sumsChunk + 1, 3*sumsChunk + 17, MaxSize} {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(i*7 + i>>9)
		}
		h, c := Sums(b)
		if h != Sum(b) {
			t.Errorf("%d bytes: Sums hash %s, Sum %s", n, h, Sum(b))
		}
		v, ok := c.Value()
		if !ok || v != crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)) || v != CRC32C(b) {
			t.Errorf("%d bytes: Sums CRC %08x (set %v), want %08x", n, v, ok, CRC32C(b))
		}
		if n > 0 {
			b[n/2] ^= 1
			if CRC32C(b) == v {
				t.Errorf("%d bytes: a flipped bit keeps the CRC", n)
			}
		}
	}
	if _, ok := (CRC{}).Value(); ok {
		t.Error("the zero CRC is set")
	}
}
