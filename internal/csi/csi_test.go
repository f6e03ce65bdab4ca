package csi

import (
	"testing"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// A volume ID names a bucket and a directory in it; nothing that is a
// path out of the bucket's mount parses.
func TestParseVolumeID(t *testing.T) {
	for _, c := range []struct{ id, bucket, dir string }{
		{"web/k8s/pvc-1", "web", "k8s/pvc-1"},
		{"web/", "web", ""},
		{"web", "web", ""},
		{"web/k8s/pvc-1/", "web", "k8s/pvc-1"},
	} {
		b, d, err := parseVolumeID(c.id)
		if err != nil || b != c.bucket || d != c.dir {
			t.Errorf("%q: %q %q %v", c.id, b, d, err)
		}
	}
	for _, id := range []string{"", "../x", "./", "../../etc/", "web/../x", "web/k8s/../../x", "web/./x", "web//etc",
		"Web/x", "a/x", "web/..", "/web/x"} {
		if _, _, err := parseVolumeID(id); status.Code(err) != codes.NotFound {
			t.Errorf("%q parsed: %v", id, err)
		}
	}
}

// Mount flags a bind mount honours map to its flags; any other is
// refused, not ignored.
func TestBindFlags(t *testing.T) {
	f, err := bindFlags([]string{"ro,nosuid", "nodev", "noexec", "noatime", "rw", ""})
	if err != nil || f != unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC|unix.MS_NOATIME {
		t.Fatalf("flags %#x, %v", f, err)
	}
	for _, bad := range []string{"uid=33", "vers=4", "sync"} {
		if _, err := bindFlags([]string{bad}); status.Code(err) != codes.InvalidArgument {
			t.Errorf("%q: %v", bad, err)
		}
	}
}
