package version

import (
	"strings"
	"testing"
)

func TestGet(t *testing.T) {
	in := Get()
	if in.Release == "" || !strings.HasPrefix(in.Go, "go") || in.Commit == "" {
		t.Fatalf("Get() = %+v", in)
	}
	commit, dirty = "0123456789abcdef0123", "true"
	defer func() { commit, dirty = "", "" }()
	in = Get()
	if in.Commit != "0123456789abcdef0123" || !in.Modified || in.Short() != "0123456789ab+dirty" {
		t.Fatalf("with a stamped commit: %+v, short %q", in, in.Short())
	}
}
