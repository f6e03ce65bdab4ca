package main

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestUnknownSubcommand: a mistyped command fails (main exits 1) with an
// error naming it, for root and for every command group; a bare group
// prints its help and succeeds.
func TestUnknownSubcommand(t *testing.T) {
	var groups [][]string
	var walk func(c *cobra.Command, path []string)
	walk = func(c *cobra.Command, path []string) {
		for _, sub := range c.Commands() {
			if sub.HasSubCommands() {
				p := append(append([]string(nil), path...), sub.Name())
				groups = append(groups, p)
				walk(sub, p)
			}
		}
	}
	walk(newRootCmd(), nil)
	if len(groups) < 2 {
		t.Fatalf("found only the groups %v; expected bucket and node at least", groups)
	}
	for _, g := range append(groups, nil) {
		args := append(append([]string(nil), g...), "frobnicate", "--json")
		out, errOut, err := cliRun(t, nil, "", args...)
		if err == nil || !strings.Contains(err.Error(), `unknown command "frobnicate"`) {
			t.Errorf("cairn %s: err %v (stdout %q, stderr %q), want an unknown command error", strings.Join(args, " "), err, out, errOut)
		}
		if g == nil {
			continue
		}
		out, _, err = cliRun(t, nil, "", g...)
		if err != nil || !strings.Contains(out, "Available Commands") {
			t.Errorf("cairn %s: err %v, output %q; want its help", strings.Join(g, " "), err, out)
		}
	}
	_, _, err := cliRun(t, nil, "", "node", "ls")
	if err == nil || !strings.Contains(err.Error(), `unknown command "ls" for "cairn node" (did you mean list?)`) {
		t.Errorf("cairn node ls: %v", err)
	}
}
