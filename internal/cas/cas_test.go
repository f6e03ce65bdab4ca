package cas

import "testing"

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
