package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestShortKeysNamed: a too short admin key or cluster secret is refused
// before anything starts, by an error that names where it came from and
// the minimum (the README's CAIRN_ADMIN_KEY=secret used to fail with
// "admin key shorter than 16 bytes" after the stores were opened).
func TestShortKeysNamed(t *testing.T) {
	dir := t.TempDir()
	short := filepath.Join(dir, "short.secret")
	if err := os.WriteFile(short, []byte("tooshort\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty.secret")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		key, secret string
		args        []string
		want        string
	}{
		{"secret", "", nil, "CAIRN_ADMIN_KEY is 6 bytes long: the admin key must be at least 16 bytes (make one with: head -c 24 /dev/urandom | base64)"},
		{"0123456789abcdef", "short", nil, "CAIRN_CLUSTER_SECRET is 5 bytes long: the cluster secret must be at least 16 bytes"},
		{"0123456789abcdef", "", []string{"--secret-file", short}, "--secret-file " + short + " is 8 bytes long: the cluster secret must be at least 16 bytes"},
		{"0123456789abcdef", "", []string{"--secret-file", empty}, "--secret-file " + empty + " is empty"},
	} {
		t.Setenv("CAIRN_ADMIN_KEY", c.key)
		t.Setenv("CAIRN_CLUSTER_SECRET", c.secret)
		args := append([]string{"server", "--data", filepath.Join(dir, "data"), "--listen", "127.0.0.1:0"}, c.args...)
		_, _, err := cliRun(t, nil, "", args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("key %q secret %q %v: err %v, want %q", c.key, c.secret, c.args, err, c.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "data")); !os.IsNotExist(err) {
		t.Errorf("a refused start created the data dir: %v", err)
	}
	t.Setenv("CAIRN_ADMIN_KEY", "secret")
	if _, _, err := cliRun(t, nil, "", "dev", "--data", filepath.Join(dir, "dev")); err == nil || !strings.Contains(err.Error(), "CAIRN_ADMIN_KEY is 6 bytes long") {
		t.Errorf("dev with a short key: %v", err)
	}
}
