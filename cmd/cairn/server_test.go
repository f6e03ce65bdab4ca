package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cairn-fs/cairn/internal/node"
	"github.com/spf13/cobra"
)

// TestSettingsPrecedence checks flag > environment > config file > default.
func TestSettingsPrecedence(t *testing.T) {
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "cairn.toml")
	os.WriteFile(cfgPath, []byte(`
listen = "127.0.0.1:9001"
gc-grace = "7m"
compact-ratio = 0.25
access-log = "/from/file.log"
`), 0o644)
	t.Setenv("CAIRN_GC_GRACE", "3m")
	t.Setenv("CAIRN_ACCESS_LOG", "")

	var c serverOptions
	cmd := &cobra.Command{Use: "x", RunE: func(*cobra.Command, []string) error { return nil }}
	apply := bindSettings(cmd, &c)
	cmd.SetArgs([]string{"--config", cfgPath, "--data", "/flag/data"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if err := apply(); err != nil {
		t.Fatal(err)
	}
	if c.DataDir != "/flag/data" {
		t.Errorf("flag: DataDir = %q", c.DataDir)
	}
	if c.GCGrace != 3*time.Minute {
		t.Errorf("env over file: GCGrace = %v", c.GCGrace)
	}
	if c.Listen != "127.0.0.1:9001" || c.CompactRatio != 0.25 || c.AccessLog != "/from/file.log" {
		t.Errorf("file: %+v", c)
	}
	if c.MaxVolumeSize != node.DefaultConfig().MaxVolumeSize {
		t.Errorf("default: MaxVolumeSize = %d", c.MaxVolumeSize)
	}
}

func TestSettingsUnknownKey(t *testing.T) {
	cfgPath := filepath.Join(t.TempDir(), "bad.toml")
	os.WriteFile(cfgPath, []byte("lisen = \"x\"\n"), 0o644)
	var c serverOptions
	cmd := &cobra.Command{Use: "x", RunE: func(*cobra.Command, []string) error { return nil }}
	apply := bindSettings(cmd, &c)
	cmd.SetArgs([]string{"--config", cfgPath})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if err := apply(); err == nil {
		t.Fatal("unknown setting accepted")
	}
}

func TestServerHelpDocumentsEverySetting(t *testing.T) {
	cmd := newServerCmd()
	for _, st := range serverSettings() {
		f := cmd.Flags().Lookup(st.name)
		if f == nil || f.Usage == "" || st.env == "" {
			t.Errorf("setting %s is not documented", st.name)
		}
	}
}
