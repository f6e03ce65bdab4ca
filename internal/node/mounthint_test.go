package node

import (
	"errors"
	"strings"
	"testing"
)

func TestMountHint(t *testing.T) {
	for _, tc := range []struct {
		status string
		hint   bool
	}{
		{"Name:\tcairn\nCapEff:\t0000000000000400\n", true},  // CAP_NET_BIND_SERVICE only (cairn.service)
		{"Name:\tcairn\nCapEff:\t0000000000200400\n", false}, // with CAP_SYS_ADMIN (the mount drop-in)
		{"Name:\tcairn\nCapEff:\t000001ffffffffff\n", false}, // root
		{"Name:\tcairn\n", false},                            // cannot tell
		{"CapEff:\tzz\n", false},
	} {
		got := mountHintFrom(tc.status)
		if (got != "") != tc.hint || (tc.hint && !strings.Contains(got, "/usr/share/cairn/systemd/mount.conf")) {
			t.Errorf("%q: hint %q", tc.status, got)
		}
	}
	// Only a failure of the mount itself (the fallback to fusermount ran).
	if h := mountHint(errors.New("mount point /srv/www is not empty")); h != "" {
		t.Errorf("hint %q for an error that is not the mount's", h)
	}
}
