package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-fs/cairn/client"
	"github.com/cairn-fs/cairn/internal/node"
	"github.com/spf13/cobra"
)

// TestScrubCommand runs cairn scrub against a real node: a pass starts,
// --wait follows it to the end, --status and --json report it.
func TestScrubCommand(t *testing.T) {
	const key = "scrub-cli-test-admin-key-0123"
	cfg := node.DefaultConfig()
	cfg.DataDir, cfg.Listen, cfg.AdminKey = t.TempDir(), "127.0.0.1:0", key
	cfg.GCInterval, cfg.Logger = time.Hour, slog.New(slog.DiscardHandler)
	n, err := node.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	c := client.New(n.URL, key)
	ctx := context.Background()
	if _, err := c.CreateBucket(ctx, client.BucketInfo{Name: "web"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Put(ctx, "web", "a.txt", strings.NewReader("hello"), 5, client.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) string {
		t.Helper()
		root := newRootCmd()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetArgs(append(args, "--server", n.URL, "--key", key))
		if err := root.ExecuteContext(ctx); err != nil {
			t.Fatalf("cairn %s: %v\n%s", strings.Join(args, " "), err, out.String())
		}
		return out.String()
	}
	out := run("scrub", "--wait", "--interval", "10ms")
	if !strings.Contains(out, "scrub pass started on "+n.URL) || !strings.Contains(out, "1 copies (") || !strings.Contains(out, "checked, 0 corrupt") {
		t.Fatalf("scrub --wait:\n%s", out)
	}
	out = run("scrub", "--status", "--json")
	var st client.ScrubStatus
	if err := json.Unmarshal([]byte(out), &st); err != nil || st.Running || st.Passes != 1 || st.NeedlesChecked != 1 || st.LastCompleted.IsZero() {
		t.Fatalf("scrub --status --json: %v\n%s", err, out)
	}
	if out := run("scrub", "--status"); !strings.Contains(out, "corrupt copies found since the node started (reads and scrub): 0") {
		t.Fatalf("scrub --status:\n%s", out)
	}
}

// TestScrubSettings: --scrub-rate and --scrub-period come from the
// environment and the config file like every setting.
func TestScrubSettings(t *testing.T) {
	cfgPath := filepath.Join(t.TempDir(), "cairn.toml")
	os.WriteFile(cfgPath, []byte("scrub-period = \"48h\"\n"), 0o644)
	t.Setenv("CAIRN_SCRUB_RATE", "12345")
	var c serverOptions
	cmd := &cobra.Command{Use: "x", RunE: func(*cobra.Command, []string) error { return nil }}
	apply := bindSettings(cmd, &c)
	cmd.SetArgs([]string{"--config", cfgPath})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if err := apply(); err != nil {
		t.Fatal(err)
	}
	if c.ScrubRate != 12345 || c.ScrubPeriod != 48*time.Hour {
		t.Fatalf("ScrubRate %d, ScrubPeriod %v", c.ScrubRate, c.ScrubPeriod)
	}
	var d serverOptions
	cmd = &cobra.Command{Use: "x", RunE: func(*cobra.Command, []string) error { return nil }}
	bindSettings(cmd, &d)
	cmd.SetArgs([]string{})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if d.ScrubPeriod != 14*24*time.Hour || d.ScrubRate != 0 {
		t.Fatalf("defaults: ScrubRate %d, ScrubPeriod %v", d.ScrubRate, d.ScrubPeriod)
	}
}
