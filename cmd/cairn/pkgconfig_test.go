package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// packagedConfig is the default /etc/cairn/cairn.toml of the packages.
const packagedConfig = "../../packaging/files/cairn.toml"

// applyConfig loads a TOML file as `cairn server --config FILE` does, with
// no CAIRN_* variable in the way.
func applyConfig(t *testing.T, path string) (serverOptions, error) {
	t.Helper()
	for _, st := range serverSettings() {
		t.Setenv(st.env, "")
	}
	var c serverOptions
	cmd := &cobra.Command{Use: "x", RunE: func(*cobra.Command, []string) error { return nil }}
	apply := bindSettings(cmd, &c)
	cmd.SetArgs([]string{"--config", path})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	return c, apply()
}

// TestPackagedConfig: the packages' cairn.toml is read by `cairn server`
// (an unknown key would stop the service), sets what the unit expects
// (the data and log directories its ReadWritePaths= opens), and every
// setting it shows, set or commented out, is a real one with a valid
// value and a comment of its own above it.
func TestPackagedConfig(t *testing.T) {
	c, err := applyConfig(t, packagedConfig)
	if err != nil {
		t.Fatalf("%s: %v", packagedConfig, err)
	}
	if c.DataDir != "/var/lib/cairn" || !strings.HasPrefix(c.AccessLog, "/var/log/cairn/") || c.Listen != "127.0.0.1:8080" {
		t.Fatalf("%s: data %q, access-log %q, listen %q", packagedConfig, c.DataDir, c.AccessLog, c.Listen)
	}
	b, err := os.ReadFile(packagedConfig)
	if err != nil {
		t.Fatal(err)
	}
	setting := regexp.MustCompile(`^(?:# )?([a-z0-9-]+) = (.+)$`)
	lines := strings.Split(string(b), "\n")
	var commented []string
	shown := 0
	for i, line := range lines {
		m := setting.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		shown++
		if i == 0 || !strings.HasPrefix(lines[i-1], "# ") || setting.MatchString(lines[i-1]) {
			t.Errorf("%s:%d: %s has no comment of its own above it", packagedConfig, i+1, m[1])
		}
		if strings.HasPrefix(line, "# ") {
			commented = append(commented, strings.TrimPrefix(line, "# "))
		}
	}
	if shown < 10 || len(commented) < 5 {
		t.Fatalf("%s: found %d settings, %d commented out: the pattern no longer matches the file", packagedConfig, shown, len(commented))
	}
	// The commented-out ones, all set at once.
	all := filepath.Join(t.TempDir(), "all.toml")
	if err := os.WriteFile(all, []byte(strings.Join(commented, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := applyConfig(t, all); err != nil {
		t.Fatalf("%s, its commented-out settings: %v", packagedConfig, err)
	}
}
