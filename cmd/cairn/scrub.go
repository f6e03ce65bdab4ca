package main

import (
	"fmt"
	"io"
	"time"

	"github.com/cairn-fs/cairn/client"
	"github.com/spf13/cobra"
)

func newScrubCmd() *cobra.Command {
	var wait, statusOnly, asJSON bool
	var every time.Duration
	cmd := &cobra.Command{
		Use:   "scrub [--wait] [--status] [--json]",
		Short: "Start a scrub pass on a node now: it re-reads and checks every blob copy the node holds (needs the admin key)",
		Long: `Start a scrub pass on the node --server names: it re-reads every blob copy
the node holds at the node's scrub rate (--scrub-rate of cairn server) and
checks it against its checksums. A copy that fails is quarantined (never
served again); in a cluster, repair replaces it from a replica. If a pass is
already running, it reports that pass. --status only shows the progress;
--wait follows the pass to its end and exits with status 1 if it found
corrupt copies.`,
		Args: cobra.NoArgs,
	}
	cf := addClientFlags(cmd)
	cmd.Flags().BoolVar(&wait, "wait", false, "wait for the pass to finish (progress every --interval)")
	cmd.Flags().BoolVar(&statusOnly, "status", false, "show the progress of the running or last pass; start nothing")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the server's JSON answer (the last one with --wait)")
	cmd.Flags().DurationVar(&every, "interval", time.Second, "with --wait: how often to ask for the progress")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		ctx, c, out := cmd.Context(), cf.client(), cmd.OutOrStdout()
		var st client.ScrubStatus
		var err error
		if statusOnly {
			st, err = c.Scrub(ctx)
		} else {
			st, err = c.StartScrub(ctx)
		}
		if err != nil {
			return err
		}
		if !asJSON {
			switch {
			case statusOnly:
			case st.Started:
				fmt.Fprintf(out, "scrub pass started on %s: %s to check at %s/s\n", c.BaseURL(), humanBytes(st.BytesTotal), humanBytes(st.RateBytesPerSec))
			default:
				fmt.Fprintf(out, "a scrub pass is already running on %s\n", c.BaseURL())
			}
		}
		if wait && !statusOnly {
			started := st.PassStarted
			t := time.NewTicker(max(every, 10*time.Millisecond))
			defer t.Stop()
			for st.Running && st.PassStarted.Equal(started) {
				if !asJSON {
					fmt.Fprintf(out, "  %s of %s (%.0f%%), %d copies checked, %d corrupt\n",
						humanBytes(st.BytesChecked), humanBytes(st.BytesTotal), 100*st.Fraction(), st.NeedlesChecked, st.CorruptFound)
				}
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-t.C:
				}
				if st, err = c.Scrub(ctx); err != nil {
					return err
				}
			}
		}
		if asJSON {
			if err := printJSON(out, st); err != nil {
				return err
			}
		} else if !wait || statusOnly || !st.Running {
			printScrub(out, st)
		}
		if wait && !statusOnly && !st.Running && st.CorruptFound > 0 {
			return fmt.Errorf("the pass found %d corrupt blob copies: they are quarantined (see the node's error log); in a cluster repair copies them back from replicas", st.CorruptFound)
		}
		return nil
	}
	return cmd
}

// printScrub writes the human form of a scrub status.
func printScrub(out io.Writer, st client.ScrubStatus) {
	when := func(t time.Time) string {
		if t.IsZero() {
			return "never"
		}
		return t.Local().Format(time.RFC3339)
	}
	switch {
	case st.Running:
		fmt.Fprintf(out, "scrub: running since %s: %s of %s (%.0f%%) at %s/s, %d copies checked, %d corrupt\n",
			when(st.PassStarted), humanBytes(st.BytesChecked), humanBytes(st.BytesTotal), 100*st.Fraction(),
			humanBytes(st.RateBytesPerSec), st.NeedlesChecked, st.CorruptFound)
	case !st.LastCompleted.IsZero():
		fmt.Fprintf(out, "scrub: last pass %s to %s: %d copies (%s) checked, %d corrupt\n",
			when(st.PassStarted), when(st.LastCompleted), st.NeedlesChecked, humanBytes(st.BytesChecked), st.CorruptFound)
	default:
		fmt.Fprintln(out, "scrub: no pass completed yet")
	}
	if !st.NextPass.IsZero() {
		fmt.Fprintf(out, "next pass: %s\n", when(st.NextPass))
	}
	fmt.Fprintf(out, "corrupt copies found since the node started (reads and scrub): %d\n", st.CorruptCopies)
}
