package main

import (
	"testing"
	"time"
)

func TestPackageVersion(t *testing.T) {
	at := time.Date(2026, 11, 27, 8, 30, 0, 0, time.UTC)
	for _, tc := range []struct {
		v    versionInfo
		t    time.Time
		want string
		err  bool
	}{
		{versionInfo{Release: "0.22.0", Commit: "0123456789abcdef"}, at, "0.22.0", false},
		{versionInfo{Release: "v1.2.3"}, at, "1.2.3", false},
		{versionInfo{Release: "0.22.0-dev", Commit: "0123456789abcdef"}, at, "0.22.0-dev.20261127083000+g0123456789ab", false},
		{versionInfo{Release: "0.22.0-dev", Commit: "0123456789abcdef", Modified: true}, at, "0.22.0-dev.20261127083000+g0123456789ab.dirty", false},
		{versionInfo{Release: "0.22.0-rc.1", Commit: "unknown"}, time.Time{}, "0.22.0-rc.1", false},
		{versionInfo{Release: "0.22"}, at, "", true},
		{versionInfo{Release: "0.22.0+x"}, at, "", true},
	} {
		got, err := packageVersion(tc.v, tc.t)
		if got != tc.want || (err != nil) != tc.err {
			t.Errorf("packageVersion(%+v) = %q, %v; want %q, error %v", tc.v, got, err, tc.want, tc.err)
		}
	}
}
