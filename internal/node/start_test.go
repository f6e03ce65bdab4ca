package node

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// loneConfig is the config of a test node without a cluster, on a free
// loopback port with its own data dir.
func loneConfig(t *testing.T) Config {
	cfg := DefaultConfig()
	cfg.DataDir = filepath.Join(t.TempDir(), "data")
	cfg.Listen = "127.0.0.1:0"
	cfg.AdminKey = testKey
	cfg.GCInterval = time.Hour
	cfg.Logger = slog.New(slog.DiscardHandler)
	return cfg
}

// TestAccessLogDirCreated: --access-log in a directory that does not exist
// yet (/var/log/cairn on a fresh machine) creates it, mode 0755; an access
// log that still cannot be opened is an error naming the flag and path.
func TestAccessLogDirCreated(t *testing.T) {
	cfg := loneConfig(t)
	logDir := filepath.Join(t.TempDir(), "log", "cairn")
	cfg.AccessLog = filepath.Join(logDir, "access.log")
	n, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	st, err := os.Stat(logDir)
	if err != nil || !st.IsDir() || st.Mode().Perm()&^0o755 != 0 { // 0755 less the umask
		t.Fatalf("log dir: %v, %v", st, err)
	}
	if _, err := os.Stat(cfg.AccessLog); err != nil {
		t.Fatal(err)
	}

	cfg = loneConfig(t)
	file := filepath.Join(t.TempDir(), "a-file")
	must(t, os.WriteFile(file, nil, 0o644))
	cfg.AccessLog = filepath.Join(file, "access.log") // its "directory" is a file
	if n, err := Start(cfg); err == nil {
		n.Close()
		t.Fatal("an access log under a file was accepted")
	} else if !strings.Contains(err.Error(), "--access-log "+cfg.AccessLog) {
		t.Fatalf("error %q does not name the flag and path", err)
	}
}

// TestShortAdminKeyFile: a hand-written DATA/admin.key that is too short
// is refused with the file's name.
func TestShortAdminKeyFile(t *testing.T) {
	cfg := loneConfig(t)
	cfg.AdminKey = ""
	must(t, os.MkdirAll(cfg.DataDir, 0o755))
	must(t, os.WriteFile(filepath.Join(cfg.DataDir, "admin.key"), []byte("secret\n"), 0o600))
	n, err := Start(cfg)
	if err == nil {
		n.Close()
		t.Fatal("a 6-byte admin key was accepted")
	}
	if want := "admin key in " + filepath.Join(cfg.DataDir, "admin.key") + " is 6 bytes long: it must be at least 16"; !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q, want %q", err, want)
	}
}
