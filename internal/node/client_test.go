package node

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// checkClient refuses what cannot make a client node: a witness too, no
// secret, no join, and a data directory whose DATA/blobs holds a data
// node's volumes (restarted as a client, it would abandon them).
func TestCheckClient(t *testing.T) {
	dir := t.TempDir()
	ok := Config{Client: true, ClusterSecret: "s", Join: "http://127.0.0.1:1", DataDir: dir}
	if err := checkClient(ok); err != nil {
		t.Fatalf("a fresh client: %v", err)
	}
	for name, cfg := range map[string]Config{
		"witness":   {Client: true, Witness: true, ClusterSecret: "s", Join: "x", DataDir: dir},
		"no secret": {Client: true, Join: "x", DataDir: dir},
		"no join":   {Client: true, ClusterSecret: "s", DataDir: dir},
	} {
		if checkClient(cfg) == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "blobs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := checkClient(ok); err != nil {
		t.Fatalf("an empty DATA/blobs: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "blobs", "00000001.vol"), []byte("v"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := checkClient(ok); err == nil || !strings.Contains(err.Error(), "was a data node") {
		t.Fatalf("a data node's DATA/blobs: %v", err)
	}
	if err := checkClient(Config{DataDir: dir}); err != nil {
		t.Fatalf("a data node with its volumes: %v", err)
	}
}
