package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/cairn-fs/cairn/client"
	"github.com/spf13/cobra"
)

func newNodeCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "node",
		Short: "List, drain and remove cluster members (needs the admin key)",
		Long: `Manage the members of a cluster through any member (--server).

A NODE argument is a node ID as "cairn node list" prints it, or a member's
URL (http://HOST:PORT or HOST:PORT) or name.`,
	}
	cf := addClientFlags(cmd)
	cmd.AddCommand(newNodeListCmd(cf), newNodeDrainCmd(cf), newNodeActivateCmd(cf), newNodeRemoveCmd(cf))
	return cmd
}

func newNodeListCmd(cf *clientFlags) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list [--json]",
		Short: "List members: ID, URL, zone, state (active|draining), liveness (alive|suspect|dead), Raft role (voter|learner|none), leader (*)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ci, err := cf.client().Nodes(cmd.Context())
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return printJSON(out, ci)
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tURL\tZONE\tSTATE\tLIVENESS\tROLE\tLEADER")
			for _, n := range ci.Nodes {
				u, zone, lead := n.URL, n.Zone, ""
				if u == "" {
					u = "-"
				}
				if zone == "" {
					zone = "-"
				}
				if n.Leader {
					lead = "*"
				}
				role := n.Role
				if n.Witness {
					role += " (witness)"
				}
				live := n.Liveness
				if live == "" {
					live = "-"
				}
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", n.ID, u, zone, n.State, live, role, lead)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if ci.Leader == 0 {
				fmt.Fprintf(out, "no leader known to node %d: the cluster may have lost its quorum\n", ci.Self)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the server's JSON answer (with term, applied and commit index)")
	return cmd
}

func newNodeDrainCmd(cf *clientFlags) *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "drain NODE [--force]",
		Short: "Stop giving a member new copies; it keeps serving (state draining)",
		Args:  cobra.ExactArgs(1),
		RunE: nodeStateRunE(cf, func(ctx context.Context, c *client.Client, id uint64) (client.NodeInfo, error) {
			return c.DrainNode(ctx, id, force)
		}),
	}
	cmd.Flags().BoolVar(&force, "force", false, "drain even the last active data node (writes then have nowhere to go)")
	return cmd
}

func newNodeActivateCmd(cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "activate NODE",
		Short: "Undo drain: the member takes new copies again (state active)",
		Args:  cobra.ExactArgs(1),
		RunE: nodeStateRunE(cf, func(ctx context.Context, c *client.Client, id uint64) (client.NodeInfo, error) {
			return c.ActivateNode(ctx, id)
		}),
	}
}

func newNodeRemoveCmd(cf *clientFlags) *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "remove NODE [--force]",
		Short: "Remove a member from the Raft group and the cluster map (moves no data: drain first)",
		Long: `Remove a member from the Raft group, then from the cluster map. When it
was a voter, a caught-up learner is promoted to keep the voter count.

Refused (409) for the last voter, and for the node --server points at
unless --force (that node then asks another member to remove it). The
removed process keeps running until you stop it; stop it and do not
restart it on the same data directory.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c := cf.client()
			id, err := resolveNode(cmd.Context(), c, args[0])
			if err != nil {
				return err
			}
			res, err := c.RemoveNode(cmd.Context(), id, force)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "removed node %d\n", res.Removed)
			if res.Promoted != 0 {
				fmt.Fprintf(cmd.OutOrStdout(), "promoted node %d to voter\n", res.Promoted)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "allow removing the node --server points at")
	return cmd
}

// resolveNode turns a NODE argument into an ID: a decimal ID as is,
// otherwise the member whose URL, HOST:PORT or name matches.
func resolveNode(ctx context.Context, c *client.Client, arg string) (uint64, error) {
	if id, err := strconv.ParseUint(arg, 10, 64); err == nil && id != 0 {
		return id, nil
	}
	ci, err := c.Nodes(ctx)
	if err != nil {
		return 0, err
	}
	norm := func(u string) string {
		u = strings.TrimRight(u, "/")
		if i := strings.Index(u, "://"); i >= 0 {
			u = u[i+3:]
		}
		return u
	}
	var found []uint64
	for _, n := range ci.Nodes {
		if (n.Name != "" && n.Name == arg) || (n.URL != "" && norm(n.URL) == norm(arg)) {
			found = append(found, n.ID)
		}
	}
	switch len(found) {
	case 0:
		return 0, fmt.Errorf("no member with ID, URL or name %q (see cairn node list)", arg)
	case 1:
		return found[0], nil
	}
	return 0, fmt.Errorf("%q matches %d members; give the ID", arg, len(found))
}

// nodeStateRunE runs a state change (drain, activate) on the node named by
// the first argument and prints its new state.
func nodeStateRunE(cf *clientFlags, change func(ctx context.Context, c *client.Client, id uint64) (client.NodeInfo, error)) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		c := cf.client()
		id, err := resolveNode(cmd.Context(), c, args[0])
		if err != nil {
			return err
		}
		n, err := change(cmd.Context(), c, id)
		if err != nil {
			return err
		}
		fmt.Fprintf(cmd.OutOrStdout(), "node %d (%s): %s\n", n.ID, n.URL, n.State)
		return nil
	}
}
