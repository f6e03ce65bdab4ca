package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// strictGroups makes every command group below root (a command with
// subcommands and no action of its own: bucket, node, ...) fail on an
// unknown subcommand, as root does. Without this, cobra prints the
// group's help and exits 0 for `cairn node ls`, so a typo in a script
// passes silently. A group given no argument still prints its help and
// exits 0. Unknown flags after an unknown subcommand are ignored, so the
// error names the subcommand rather than the flag.
func strictGroups(root *cobra.Command) {
	for _, c := range root.Commands() {
		strictGroups(c)
		if !c.HasSubCommands() || c.Runnable() {
			continue
		}
		c.Args = cobra.ArbitraryArgs
		c.FParseErrWhitelist.UnknownFlags = true
		c.RunE = func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return cmd.Help()
			}
			return unknownCommand(cmd, args[0])
		}
	}
}

// unknownCommand is the error for an unknown subcommand name of group,
// worded as cobra words it for root, with the nearest names.
func unknownCommand(group *cobra.Command, name string) error {
	msg := fmt.Sprintf("unknown command %q for %q", name, group.CommandPath())
	if group.SuggestionsMinimumDistance <= 0 {
		group.SuggestionsMinimumDistance = 2 // cobra's default, set only for root
	}
	if s := group.SuggestionsFor(name); len(s) > 0 {
		msg += " (did you mean " + strings.Join(s, ", ") + "?)"
	}
	return fmt.Errorf("%s; see '%s --help'", msg, group.CommandPath())
}
