package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cairn-fs/cairn/client"
	"github.com/spf13/cobra"
)

func newTrashCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "trash",
		Short: "List, restore and empty a bucket's trash: its deleted and overwritten files (needs the admin key)",
		Long: `A bucket with a trash (cairn bucket set B --trash 7d) keeps every file a
delete or an overwrite removes, through any front end, for that long.

TIME is as trash list prints it (local time: 2026-11-27 10:04:05), a date
and time without a zone (local), a date (local midnight), or RFC 3339
(2026-11-27T09:04:05.123456789Z, as --json prints it). For --at, a TIME
covers everything it names: 10:04:05 is up to the end of that second, so a
time copied from the list selects that entry; --before is strict.`,
	}
	cf := addClientFlags(cmd)
	cmd.AddCommand(newTrashListCmd(cf), newTrashRestoreCmd(cf), newTrashEmptyCmd(cf))
	return cmd
}

func newTrashListCmd(cf *clientFlags) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list BUCKET [PATH] [--json]",
		Short: "List the trash's entries whose path starts with PATH: PATH, DELETED, SIZE, KIND (deleted or overwritten), ORIGIN (node/front end/access key)",
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			prefix := ""
			if len(args) == 2 {
				prefix = strings.TrimLeft(args[1], "/")
			}
			c := cf.client()
			// Page by page (client.TrashEach): a trash of millions of
			// entries is printed in the memory of one page.
			each := func(fn func(client.TrashEntry) error) error {
				return c.TrashEach(cmd.Context(), args[0], prefix, fn)
			}
			if asJSON {
				return printJSONEach(cmd.OutOrStdout(), each)
			}
			n, err := printTrash(cmd.OutOrStdout(), args[0], prefix, each, time.Local)
			if err != nil {
				return err
			}
			if n == 0 {
				if b, err := c.Bucket(cmd.Context(), args[0]); err == nil && b.TrashSeconds == 0 {
					fmt.Fprintf(cmd.OutOrStdout(), "(bucket %s keeps no trash: cairn bucket set %s --trash 7d)\n", b.Name, b.Name)
				}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the server's JSON answer (times in RFC 3339, to the nanosecond)")
	return cmd
}

// trashTimeLayout is how trash list prints a deletion time, and one of
// the forms parseTrashTime reads.
const trashTimeLayout = time.DateTime

// trashAligned is how many rows of trash list are aligned together: the
// table is written in blocks of that many, so that its memory does not
// grow with the trash.
const trashAligned = 1000

// printTrash writes the table of trash list, times in loc, of the
// entries each gives, and returns how many.
func printTrash(out io.Writer, bucket, prefix string, each func(func(client.TrashEntry) error) error, loc *time.Location) (int, error) {
	where := "the trash of " + bucket
	if prefix != "" {
		where += " under " + prefix
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	n := 0
	var total int64
	err := each(func(e client.TrashEntry) error {
		if n == 0 {
			fmt.Fprintln(tw, "PATH\tDELETED\tSIZE\tKIND\tORIGIN")
		}
		kind := "deleted"
		if e.Replaced {
			kind = "overwritten"
		}
		n++
		total += e.Size
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", e.Path, e.Deleted.In(loc).Format(trashTimeLayout), humanBytes(e.Size), kind, trashOrigin(e))
		if n%trashAligned == 0 {
			return tw.Flush()
		}
		return nil
	})
	if ferr := tw.Flush(); err == nil {
		err = ferr
	}
	if err != nil {
		return n, err
	}
	if n == 0 {
		fmt.Fprintf(out, "%s holds nothing\n", where)
		return 0, nil
	}
	fmt.Fprintf(out, "%s: %s, %s\n", where, count(n, "entry", "entries"), humanBytes(total))
	return n, nil
}

// printJSONEach writes the entries each gives as one JSON array, entry by
// entry (printJSON's layout).
func printJSONEach[T any](out io.Writer, each func(func(T) error) error) error {
	first := true
	err := each(func(v T) error {
		b, err := json.MarshalIndent(v, "  ", "  ")
		if err != nil {
			return err
		}
		sep := ",\n  "
		if first {
			sep, first = "[\n  ", false
		}
		_, err = fmt.Fprintf(out, "%s%s", sep, b)
		return err
	})
	if err != nil {
		return err
	}
	if first {
		_, err = fmt.Fprintln(out, "[]")
		return err
	}
	_, err = fmt.Fprintln(out, "\n]")
	return err
}

// trashOrigin is an entry's node/front end/access key, "-" for what is
// unknown.
func trashOrigin(e client.TrashEntry) string {
	node := "-"
	if e.Node != 0 {
		node = strconv.FormatUint(e.Node, 10)
	}
	return node + "/" + orDash(e.Frontend) + "/" + orDash(e.Key)
}

// count is "1 entry" or "N entries".
func count(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func newTrashRestoreCmd(cf *clientFlags) *cobra.Command {
	var at, to string
	var asJSON, verbose bool
	cmd := &cobra.Command{
		Use:   "restore BUCKET PATH [--at TIME] [--to PATH] [--json] [-v]",
		Short: "Put files back from the trash: PATH's newest entry (at or before --at); a PATH ending in / restores a tree, / the whole bucket. Never overwrites",
		Long: `Restore puts PATH back from the trash: its newest entry, or with --at the
newest deleted at or before TIME, as a new file (parent directories made
as needed); the entry leaves the trash, older ones stay. A PATH ending in
"/" restores every path under it that way ("/" or "" the whole bucket);
so does a PATH without the "/" that the trash has no entry for but
entries under (a directory removed with rm -rf). --to restores
elsewhere: a path for a file, a prefix for a tree.

A restore never overwrites: a file or directory at a target is refused
(the other paths of a tree are restored) and the error names it. Move or
delete it first (in a bucket with a trash that keeps it too), or restore
--to another path. See cairn trash --help for TIME.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			bucket, path := args[0], strings.TrimLeft(args[1], "/")
			var atT time.Time
			if at != "" {
				var err error
				if atT, err = parseTrashTime(at, true, time.Local); err != nil {
					return fmt.Errorf("--at %w", err)
				}
			}
			c := cf.client()
			restored, err := c.TrashRestore(cmd.Context(), bucket, path, atT, strings.TrimLeft(to, "/"))
			if (errors.Is(err, client.ErrNotFound) || (errors.Is(err, client.ErrBadRequest) && strings.HasSuffix(to, "/"))) &&
				path != "" && !strings.HasSuffix(path, "/") {
				// A directory named without its slash (what a user types
				// after rm -rf DIR): no entry for PATH itself (or a --to
				// that can only be a tree's prefix), entries under it: the
				// tree.
				if under, _, lerr := c.TrashPage(cmd.Context(), bucket, path+"/", "", 1); lerr == nil && len(under) > 0 {
					path += "/"
					if to != "" && !strings.HasSuffix(to, "/") {
						to += "/"
					}
					restored, err = c.TrashRestore(cmd.Context(), bucket, path, atT, strings.TrimLeft(to, "/"))
				}
			}
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return printJSON(out, struct {
					Restored []string `json:"restored"`
				}{restored})
			}
			tree := path == "" || strings.HasSuffix(path, "/")
			if verbose || !tree {
				for _, p := range restored {
					fmt.Fprintf(out, "restored %s/%s\n", bucket, p)
				}
			}
			if tree {
				where := ""
				if to = strings.Trim(to, "/"); to != "" {
					where = " to " + bucket + "/" + to + "/"
				}
				fmt.Fprintf(out, "restored %s under %s/%s%s\n", count(len(restored), "file", "files"), bucket, path, where)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&at, "at", "", "restore the newest entry deleted at or before TIME (default: the newest)")
	cmd.Flags().StringVar(&to, "to", "", "restore to this path (a prefix for a tree) instead of PATH")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the server's JSON answer")
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "print every file of a tree restored")
	return cmd
}

func newTrashEmptyCmd(cf *clientFlags) *cobra.Command {
	var before string
	cmd := &cobra.Command{
		Use:   "empty BUCKET [--before TIME]",
		Short: "Drop the trash's entries (deleted before TIME) for good: their space is freed by the next garbage collection",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var b time.Time
			if before != "" {
				var err error
				if b, err = parseTrashTime(before, false, time.Local); err != nil {
					return fmt.Errorf("--before %w", err)
				}
			}
			n, err := cf.client().TrashEmpty(cmd.Context(), args[0], b)
			if err != nil {
				return err
			}
			msg := fmt.Sprintf("emptied %s from the trash of %s", count(n, "entry", "entries"), args[0])
			if !b.IsZero() {
				msg += " deleted before " + b.Local().Format(time.RFC3339)
			}
			fmt.Fprintln(cmd.OutOrStdout(), msg)
			return nil
		},
	}
	cmd.Flags().StringVar(&before, "before", "", "drop only the entries deleted before TIME (default: every entry)")
	return cmd
}

// trashTimeForms are the forms parseTrashTime reads: the layout, whether
// it names its zone, and how long a time without a fraction of a second
// lasts.
var trashTimeForms = []struct {
	layout string
	zoned  bool
	span   time.Duration
}{
	{time.RFC3339Nano, true, time.Second},
	{"2006-01-02T15:04:05", false, time.Second},
	{trashTimeLayout, false, time.Second},
	{"2006-01-02T15:04", false, time.Minute},
	{"2006-01-02 15:04", false, time.Minute},
	{time.DateOnly, false, 24 * time.Hour},
}

// parseTrashTime parses TIME (cairn trash --help): RFC 3339, or a date
// and time without a zone, in loc. With through, the time is the last
// instant of what v names: a time to the second covers that second (a
// time trash list printed selects its entry), to the minute that minute,
// a date that day; a fraction of a second is exact. Its error starts with
// v quoted.
func parseTrashTime(v string, through bool, loc *time.Location) (time.Time, error) {
	s := strings.TrimSpace(v)
	for _, f := range trashTimeForms {
		var t time.Time
		var err error
		if f.zoned {
			t, err = time.Parse(f.layout, s)
		} else {
			t, err = time.ParseInLocation(f.layout, s, loc)
		}
		if err != nil {
			continue
		}
		if through && !strings.Contains(s, ".") {
			if f.span == 24*time.Hour {
				t = t.AddDate(0, 0, 1).Add(-time.Nanosecond) // a day of 23 or 25 hours too
			} else {
				t = t.Add(f.span - time.Nanosecond)
			}
		}
		return t, nil
	}
	return time.Time{}, fmt.Errorf("%q: not a time: want one as trash list prints it (2026-11-27 10:04:05, local), a date (2026-11-27) or RFC 3339 (2026-11-27T09:04:05Z)", v)
}
