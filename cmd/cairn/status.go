package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/cairn-fs/cairn/client"
	"github.com/spf13/cobra"
)

func newStatusCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status [--json]",
		Short: "Show the cluster: nodes (liveness, Raft role, lag, disk), under-replicated blobs, repair and scrub progress (needs the admin key)",
		Args:  cobra.NoArgs,
	}
	cf := addClientFlags(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the server's JSON answer")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		st, err := cf.client().Status(cmd.Context())
		if err != nil {
			return err
		}
		out := cmd.OutOrStdout()
		if asJSON {
			return printJSON(out, st)
		}
		return printStatus(out, st)
	}
	return cmd
}

// printJSON writes v as indented JSON (the --json output of the commands).
func printJSON(out io.Writer, v any) error {
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// printStatus writes the human form of a status view.
func printStatus(out io.Writer, st client.Status) error {
	if st.Cluster {
		leader := "none known (the cluster may have lost its quorum)"
		if st.Leader != 0 {
			leader = strconv.FormatUint(st.Leader, 10)
		}
		fmt.Fprintf(out, "cluster: %d nodes, leader %s, term %d, commit index %d\n", len(st.Nodes), leader, st.Term, st.CommitIndex)
	} else {
		fmt.Fprintln(out, "single node (not a cluster)")
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tURL\tSTATE\tLIVENESS\tROLE\tLAG\tDISK USED\tFREE\tBLOBS\tREPAIR\tSCRUB\tVERSION")
	for _, n := range st.Nodes {
		role := n.Role
		if n.Leader {
			role += "*"
		}
		if n.Witness {
			role += " (witness)"
		}
		used, free, blobs, repair, scrub, ver := "-", "-", "-", "-", "-", "-"
		if r := n.Report; r != nil {
			ver = versionSummary(r.Version)
			used, free, blobs = humanBytes(r.Disk.UsedBytes), humanBytes(r.Disk.FreeBytes), strconv.FormatInt(r.Disk.Blobs, 10)
			if r.Disk.ReadOnly {
				used += " (read-only)"
			}
			if p := r.Repair; p != nil {
				repair = repairSummary(p)
			}
			scrub = scrubSummary(r.Scrub)
		} else if n.Error != "" {
			repair = "no report" // the reason is in --json
			if strings.HasPrefix(n.Error, "unreachable") {
				repair = "unreachable"
			}
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", n.ID, n.URL, n.State, n.Liveness, role, n.Lag,
			used, free, blobs, repair, scrub, ver)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if st.Cluster {
		fmt.Fprintf(out, "under-replicated blobs: %d\n", st.UnderReplicated)
		printLogVersion(out, st)
	}
	for _, n := range st.Nodes {
		if c := n.Report; c != nil && c.Cache != nil && c.Cache.OnDisk {
			fmt.Fprintf(out, "node %d's blob cache (%s): %s of %s, %s; %d hits, %d misses, %d evictions, %d not kept (full), %d refused as corrupt\n",
				n.ID, n.State, humanBytes(c.Cache.Bytes), humanBytes(c.Cache.MaxBytes), count(c.Cache.Entries, "blob", "blobs"),
				c.Cache.Hits, c.Cache.Misses, c.Cache.Evictions, c.Cache.NotKept, c.Cache.Corrupt)
		}
	}
	printTrashUsage(out, st.Trash)
	if err := printLocks(out, st.Locks); err != nil {
		return err
	}
	return printOwners(out, st.Cluster, st.Owners)
}

// printOwners prints the answering node's directory ownership (its
// counters and directories) and, in a cluster, each node's count from the
// log.
func printOwners(out io.Writer, cluster bool, o client.DirOwners) error {
	who := "this node"
	if o.Node != 0 {
		who = "node " + strconv.FormatUint(o.Node, 10)
	}
	fmt.Fprintf(out, "directory owners: %s owns %s; since start: %s, %s sent, %d handed over, %d fenced, %d lost\n",
		who, count(o.Owned, "directory", "directories"), count(int(o.Claims), "claim", "claims"),
		count(int(o.Recalls), "recall", "recalls"), o.HandedOver, o.Fenced, o.Lost)
	if len(o.Dirs) > 0 {
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "PATH\tINODE\tEPOCH\tSINCE")
		for _, d := range o.Dirs {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%s\n", orDash(d.Path), d.Ino, d.Epoch, d.Since.Local().Format("15:04:05"))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if more := o.Owned - len(o.Dirs); more > 0 {
			fmt.Fprintf(out, "(and %d more)\n", more)
		}
	}
	switch {
	case o.Error != "":
		fmt.Fprintf(out, "directories owned per node: unknown (%s)\n", o.Error)
	case cluster && len(o.ByNode) > 0:
		parts := make([]string, len(o.ByNode))
		for i, c := range o.ByNode {
			parts[i] = fmt.Sprintf("%d: %d", c.Node, c.Dirs)
			if c.More {
				parts[i] += "+"
			}
		}
		fmt.Fprintf(out, "directories owned per node (from the log): %s\n", strings.Join(parts, ", "))
	}
	return nil
}

// printTrashUsage prints a line per bucket with a trash: its retention,
// entries and bytes.
func printTrashUsage(out io.Writer, tu []client.TrashUsage) {
	for _, u := range tu {
		keeps := "keeps " + formatRetention(u.RetentionSeconds)
		if u.RetentionSeconds <= 0 {
			keeps = "off, still holds"
		}
		fmt.Fprintf(out, "trash of %s: %s: %s, %s\n", u.Bucket, keeps, count(int(u.Entries), "file", "files"), humanBytes(u.Bytes))
	}
}

// versionSummary is a node's release, commit and log version reads.
func versionSummary(v client.VersionStatus) string {
	if v.Release == "" {
		return "-"
	}
	s := v.Release
	if v.Commit != "" && v.Commit != "unknown" {
		s += " " + v.Commit
	}
	s += " (log " + strconv.Itoa(v.LogMax) + ")"
	if v.LogStopped != "" {
		s += " LOG STOPPED"
	}
	return s
}

// printLogVersion prints the cluster's log version as the answering node
// applied it, and what an unfinished upgrade waits for.
func printLogVersion(out io.Writer, st client.Status) {
	for _, n := range st.Nodes {
		if !n.Self || n.Report == nil {
			continue
		}
		v := n.Report.Version
		fmt.Fprintf(out, "log version: %d", v.LogVersion)
		if len(v.Waiting) > 0 {
			fmt.Fprintf(out, " (this binary reads %d; rises when every node does; waiting for: %s)", v.LogMax, strings.Join(v.Waiting, "; "))
		}
		fmt.Fprintln(out)
		for _, m := range st.Nodes {
			if m.Report != nil && m.Report.Version.LogStopped != "" {
				fmt.Fprintf(out, "node %d: log stopped: %s\n", m.ID, m.Report.Version.LogStopped)
			}
		}
	}
}

// printLocks lists the file locks held and waited for through the mounts.
func printLocks(out io.Writer, locks []client.FileLock) error {
	if len(locks) == 0 {
		fmt.Fprintln(out, "file locks: none")
		return nil
	}
	fmt.Fprintf(out, "file locks: %d\n", len(locks))
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PATH\tNODE\tPID\tKIND\tTYPE\tRANGE\tSINCE\tSTATE")
	for _, l := range locks {
		typ, state, rng := "read", "held", "whole file"
		if l.Write {
			typ = "write"
		}
		if l.Waiting {
			state = "waiting"
		}
		if l.Kind != "flock" && (l.Start != 0 || l.End != math.MaxUint64) {
			rng = fmt.Sprintf("%d-", l.Start)
			if l.End != math.MaxUint64 {
				rng += strconv.FormatUint(l.End, 10)
			}
		}
		p := l.Path
		if p == "" {
			p = fmt.Sprintf("inode %d", l.Ino)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\n", p, l.Node, l.Pid, l.Kind, typ, rng,
			l.Since.Local().Format("15:04:05"), state)
	}
	return tw.Flush()
}

// repairSummary is one node's repair and rebalance progress in a few words.
func repairSummary(p *client.RepairStatus) string {
	state := "idle"
	if p.Active {
		state = "running"
	}
	return fmt.Sprintf("%s, %d passes, pulled %d (%s), handed off %d (%s), pending %d",
		state, p.Passes, p.Pulled, humanBytes(p.PulledBytes), p.Pushed, humanBytes(p.PushedBytes), p.Pending)
}

// scrubSummary is a node's scrub progress and findings in a few words.
func scrubSummary(s client.ScrubStatus) string {
	var state string
	switch {
	case s.Running:
		state = fmt.Sprintf("running %.0f%%", 100*s.Fraction())
	case s.LastCompleted.IsZero():
		state = "no pass yet"
	default:
		state = "last pass " + s.LastCompleted.Local().Format("2006-01-02 15:04")
	}
	return fmt.Sprintf("%s, %d corrupt found", state, s.CorruptCopies)
}

// humanBytes formats n bytes with a binary unit.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
