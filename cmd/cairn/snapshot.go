package main

import (
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/cairn-fs/cairn/client"
)

func newSnapshotCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "snapshot",
		Short: "Take, list and delete a bucket's read-only snapshots (needs the admin key)",
		Long: `A snapshot is a read-only copy of a bucket at one point of the log. Taking
one costs one log entry, whatever the bucket's size; its files are read at
/_snapshots/BUCKET/NAME/PATH over HTTP and under .snapshots/NAME/ at a
mount's root. A blob a snapshot holds is reclaimed only once no live file,
trash entry or snapshot names it. docs/operations.md, "Snapshots".`,
	}
	cf := addClientFlags(cmd)
	create := &cobra.Command{
		Use:   "create BUCKET [NAME]",
		Short: "Take a snapshot (NAME defaults to the time, UTC)",
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := ""
			if len(args) == 2 {
				name = args[1]
			}
			start := time.Now()
			s, err := cf.client().CreateSnapshot(cmd.Context(), args[0], name)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "snapshot %s of %s taken (log index %d, %v)\n", s.Name, s.Bucket, s.Index,
				time.Since(start).Round(time.Millisecond))
			return nil
		},
	}
	var asJSON bool
	list := &cobra.Command{
		Use:   "list BUCKET [--json]",
		Short: "List a bucket's snapshots, oldest first",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			l, err := cf.client().Snapshots(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return printJSON(out, l)
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tCREATED\tLOG INDEX")
			for _, s := range l {
				fmt.Fprintf(tw, "%s\t%s\t%d\n", s.Name, s.Created.Local().Format(time.DateTime), s.Index)
			}
			return tw.Flush()
		},
	}
	list.Flags().BoolVar(&asJSON, "json", false, "print the server's JSON answer")
	del := &cobra.Command{
		Use:   "delete BUCKET NAME",
		Short: "Delete a snapshot (what only it held is reclaimed by the next GC passes)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := cf.client().DeleteSnapshot(cmd.Context(), args[0], args[1]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "snapshot %s of %s deleted\n", args[1], args[0])
			return nil
		},
	}
	var to string
	var delExtra bool
	restore := &cobra.Command{
		Use:   "restore BUCKET NAME [PATH] [--to PATH] [--delete]",
		Short: "Put a snapshot's file or tree back (no byte is copied; live versions replaced go to the trash if the bucket keeps one)",
		Long: `Put PATH of snapshot NAME (the whole bucket without PATH) back into the live
bucket, at PATH or at --to. Files that differ from the snapshot are replaced
(their live versions go to the bucket's trash when it keeps one); files that
are the same are left alone. --delete also removes the live files under the
target that the snapshot does not hold (for example a backdoor a hacked
plugin dropped). Each file is a namespace change naming the snapshot's
blobs: no byte is copied.`,
		Args: cobra.RangeArgs(2, 3),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := ""
			if len(args) == 3 {
				path = args[2]
			}
			st, err := cf.client().RestoreSnapshot(cmd.Context(), args[0], args[1], path, to, delExtra)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "restored %d files from snapshot %s (%d unchanged, %d directories made, %d deleted)\n",
				st.Restored, args[1], st.Unchanged, st.Dirs, st.Deleted)
			return nil
		},
	}
	restore.Flags().StringVar(&to, "to", "", "where to put it in the live bucket (default: the same path)")
	restore.Flags().BoolVar(&delExtra, "delete", false, "also delete the live files under the target that the snapshot does not hold")
	schedule := &cobra.Command{
		Use:   "schedule BUCKET [hourly=N] [daily=N] [weekly=N] | off",
		Short: "Show or set a bucket's automatic snapshots: the leader takes one each hour, day and week and keeps the newest N",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, out := cf.client(), cmd.OutOrStdout()
			if len(args) == 1 {
				sc, err := c.Schedule(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				fmt.Fprintf(out, "%s: %s\n", args[0], scheduleString(sc))
				return nil
			}
			sc, err := parseSchedule(args[1:])
			if err != nil {
				return err
			}
			if sc, err = c.SetSchedule(cmd.Context(), args[0], sc); err != nil {
				return err
			}
			fmt.Fprintf(out, "%s: %s\n", args[0], scheduleString(sc))
			return nil
		},
	}
	cmd.AddCommand(create, list, del, restore, schedule)
	return cmd
}

// parseSchedule reads hourly=N daily=N weekly=N, or "off".
func parseSchedule(args []string) (client.SnapshotSchedule, error) {
	var sc client.SnapshotSchedule
	if len(args) == 1 && args[0] == "off" {
		return sc, nil
	}
	for _, a := range args {
		k, v, ok := strings.Cut(a, "=")
		n, err := strconv.Atoi(v)
		if !ok || err != nil || n < 0 {
			return sc, fmt.Errorf("%q: want hourly=N, daily=N, weekly=N (N ≥ 0) or off", a)
		}
		switch k {
		case "hourly":
			sc.Hourly = n
		case "daily":
			sc.Daily = n
		case "weekly":
			sc.Weekly = n
		default:
			return sc, fmt.Errorf("%q: want hourly=N, daily=N, weekly=N (N ≥ 0) or off", a)
		}
	}
	return sc, nil
}

func scheduleString(sc client.SnapshotSchedule) string {
	if sc == (client.SnapshotSchedule{}) {
		return "no automatic snapshots"
	}
	return fmt.Sprintf("keeps %d hourly, %d daily, %d weekly snapshots", sc.Hourly, sc.Daily, sc.Weekly)
}
