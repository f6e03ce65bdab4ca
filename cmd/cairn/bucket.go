package main

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cairn-fs/cairn/client"
	"github.com/cairn-fs/cairn/internal/store"
	"github.com/spf13/cobra"
)

func newBucketCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bucket",
		Short: "Create, change, list and delete buckets (needs the admin key)",
	}
	cf := addClientFlags(cmd)
	cmd.AddCommand(newBucketCreateCmd(cf), newBucketSetCmd(cf), newBucketListCmd(cf), newBucketShowCmd(cf), newBucketDeleteCmd(cf))
	return cmd
}

func newBucketCreateCmd(cf *clientFlags) *cobra.Command {
	var b client.BucketInfo
	var replicas, trash string
	var owner ownerFlags
	cmd := &cobra.Command{
		Use:   "create NAME [--public] [--checksum-sidecars] [--cache-control V] [--replicas N|mirror] [--write-quorum W] [--strict] [--trash 7d]",
		Short: "Create a bucket",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			b.Name = args[0]
			r, err := parseReplicas(replicas)
			if err != nil {
				return err
			}
			b.Replicas = r
			if cmd.Flags().Changed("trash") {
				if b.TrashSeconds, err = parseRetention(trash); err != nil {
					return fmt.Errorf("--trash %w", err)
				}
			}
			var u client.BucketUpdate
			if err := owner.apply(cmd, &u); err != nil {
				return err
			}
			for _, f := range []struct{ src, dst *uint32 }{{u.UID, &b.UID}, {u.GID, &b.GID}, {u.FileMode, &b.FileMode}, {u.DirMode, &b.DirMode}} {
				if f.src != nil {
					*f.dst = *f.src
				}
			}
			got, err := cf.client().CreateBucket(cmd.Context(), b)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "created bucket %s (%s)\n", got.Name, bucketOptions(got))
			return nil
		},
	}
	cmd.Flags().BoolVar(&b.Public, "public", false, "anyone may read (GET/HEAD) without a key")
	cmd.Flags().BoolVar(&b.ChecksumSidecars, "checksum-sidecars", false, "answer PATH.md5 and PATH.sha256 with checksums")
	cmd.Flags().StringVar(&b.CacheControl, "cache-control", "", "Cache-Control header for every file")
	cmd.Flags().StringVar(&replicas, "replicas", "", "copies of each file: a count, or mirror for every node (default: the cluster's, 3)")
	cmd.Flags().IntVar(&b.WriteQuorum, "write-quorum", 0, "copies a write waits for (default: a majority of the replicas)")
	cmd.Flags().BoolVar(&b.Strict, "strict", false, "refuse writes (503) that cannot make --write-quorum copies; by default a write with nodes down goes on with the copies it can make and is repaired later")
	cmd.Flags().StringVar(&trash, "trash", "", trashFlagHelp)
	owner.bind(cmd)
	return cmd
}

// trashFlagHelp is the help of --trash.
const trashFlagHelp = "keep deleted and overwritten files in the bucket's trash this long (7d, 36h, 90m; 0 or off: no trash, the default; at most 3650d); see cairn trash"

// maxTrashDays bounds a trash retention (client.MaxTrashSeconds).
const maxTrashDays = client.MaxTrashSeconds / 86400

// parseRetention parses a trash retention into whole seconds: 0 or off
// (no trash), days ("7d"), a Go duration ("36h", "90m", "1h30m") or
// both ("1d12h"), from 1s to 3650 days. Its error starts with v quoted.
func parseRetention(v string) (int64, error) {
	s := strings.ToLower(strings.TrimSpace(v))
	switch s {
	case "0", "off", "none", "false":
		return 0, nil
	}
	bad := func(why string) error {
		return fmt.Errorf("%q: %s (a duration such as 7d, 36h or 90m; 0 or off for no trash)", v, why)
	}
	if s == "" {
		return 0, bad("empty")
	}
	var d time.Duration
	rest := s
	if days, after, ok := strings.Cut(s, "d"); ok {
		n, err := strconv.ParseUint(days, 10, 32)
		if err != nil {
			return 0, bad("days must be a whole number")
		}
		if n > maxTrashDays {
			return 0, bad(fmt.Sprintf("at most %dd (10 years)", maxTrashDays))
		}
		d, rest = time.Duration(n)*24*time.Hour, after
	}
	if rest != "" {
		x, err := time.ParseDuration(rest)
		if err != nil {
			return 0, bad("not a duration")
		}
		if x < 0 {
			return 0, bad("negative")
		}
		d += x
	}
	switch {
	case d > client.MaxTrashSeconds*time.Second:
		return 0, bad(fmt.Sprintf("at most %dd (10 years)", maxTrashDays))
	case d == 0:
		return 0, nil
	case d < time.Second:
		return 0, bad("at least 1s")
	case d%time.Second != 0:
		return 0, bad("whole seconds only")
	}
	return int64(d / time.Second), nil
}

// formatRetention formats a trash retention as parseRetention reads it:
// "7d", "1d12h", "90m" → "1h30m"; "off" for 0; "forever" for a bucket
// that S3 versioning keeps every version of (store.VersioningSeconds).
func formatRetention(secs int64) string {
	if secs <= 0 {
		return "off"
	}
	if secs == store.VersioningSeconds {
		return "forever"
	}
	var b strings.Builder
	for _, u := range []struct {
		n    int64
		unit string
	}{{86400, "d"}, {3600, "h"}, {60, "m"}, {1, "s"}} {
		if q := secs / u.n; q > 0 {
			fmt.Fprintf(&b, "%d%s", q, u.unit)
			secs -= q * u.n
		}
	}
	return b.String()
}

// parseReplicas parses a replication factor: "" (default), a count, or mirror.
func parseReplicas(v string) (int, error) {
	switch strings.ToLower(v) {
	case "", "default":
		return 0, nil
	case "mirror":
		return client.Mirror, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("replicas=%q: expected a count of at least 1, or mirror", v)
	}
	return n, nil
}

// bucketSettingNames lists the OPTION names `bucket set` accepts.
const bucketSettingNames = "public, checksum-sidecars, cache-control, replicas, write-quorum, strict, uid, gid, file-mode, dir-mode, trash"

// parseBucketSettings turns OPTION=VALUE arguments into a partial update.
func parseBucketSettings(args []string) (client.BucketUpdate, error) {
	var u client.BucketUpdate
	for _, a := range args {
		k, v, ok := strings.Cut(a, "=")
		if !ok {
			return u, fmt.Errorf("%q: expected OPTION=VALUE (options: %s)", a, bucketSettingNames)
		}
		key := strings.ReplaceAll(strings.ToLower(k), "_", "-")
		switch key {
		case "public":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return u, fmt.Errorf("public=%q: expected true or false", v)
			}
			u.Public = &b
		case "checksum-sidecars":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return u, fmt.Errorf("checksum-sidecars=%q: expected true or false", v)
			}
			u.ChecksumSidecars = &b
		case "cache-control":
			s := v
			u.CacheControl = &s
		case "replicas":
			n, err := parseReplicas(v)
			if err != nil {
				return u, err
			}
			u.Replicas = &n
		case "write-quorum":
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return u, fmt.Errorf("write-quorum=%q: expected a count (0 = majority)", v)
			}
			u.WriteQuorum = &n
		case "uid", "gid":
			n, err := strconv.ParseUint(v, 10, 32)
			if err != nil {
				return u, fmt.Errorf("%s=%q: expected a numeric ID", key, v)
			}
			id := uint32(n)
			if key == "uid" {
				u.UID = &id
			} else {
				u.GID = &id
			}
		case "file-mode", "dir-mode":
			n, err := parseMode(v)
			if err != nil {
				return u, fmt.Errorf("%s=%w", key, err)
			}
			if key == "file-mode" {
				u.FileMode = &n
			} else {
				u.DirMode = &n
			}
		case "strict":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return u, fmt.Errorf("strict=%q: expected true or false", v)
			}
			u.Strict = &b
		case "trash":
			n, err := parseRetention(v)
			if err != nil {
				return u, fmt.Errorf("trash=%w", err)
			}
			u.TrashSeconds = &n
		default:
			return u, fmt.Errorf("unknown bucket option %q (options: %s)", k, bucketSettingNames)
		}
	}
	return u, nil
}

func newBucketSetCmd(cf *clientFlags) *cobra.Command {
	var owner ownerFlags
	var trash string
	cmd := &cobra.Command{
		Use:   "set NAME [OPTION=VALUE...] [--uid N] [--gid N] [--file-mode 0644] [--dir-mode 0755] [--trash 7d|off]",
		Short: "Change bucket options: public=true|false, checksum-sidecars=true|false, cache-control=V, replicas=N|mirror, write-quorum=W, strict=true|false, uid=N, gid=N, file-mode=0644, dir-mode=0755, trash=7d|off",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			u, err := parseBucketSettings(args[1:])
			if err != nil {
				return err
			}
			if err := owner.apply(cmd, &u); err != nil {
				return err
			}
			if cmd.Flags().Changed("trash") {
				n, err := parseRetention(trash)
				if err != nil {
					return fmt.Errorf("--trash %w", err)
				}
				u.TrashSeconds = &n
			}
			if u == (client.BucketUpdate{}) {
				return fmt.Errorf("nothing to change: give OPTION=VALUE arguments or flags (options: %s)", bucketSettingNames)
			}
			got, err := cf.client().UpdateBucket(cmd.Context(), args[0], u)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "bucket %s: %s\n", got.Name, bucketOptions(got))
			return nil
		},
	}
	owner.bind(cmd)
	cmd.Flags().StringVar(&trash, "trash", "", trashFlagHelp)
	return cmd
}

// ownerFlags are --uid, --gid, --file-mode and --dir-mode: the owner and
// modes of what is written over HTTP or the CLI.
type ownerFlags struct {
	uid, gid          uint32
	fileMode, dirMode string
}

func (o *ownerFlags) bind(cmd *cobra.Command) {
	cmd.Flags().Uint32Var(&o.uid, "uid", 0, "owner (user ID) of files and directories written over HTTP or the CLI, e.g. 33 for www-data")
	cmd.Flags().Uint32Var(&o.gid, "gid", 0, "group ID of files and directories written over HTTP or the CLI")
	cmd.Flags().StringVar(&o.fileMode, "file-mode", "", "mode (octal) of files written over HTTP or the CLI (default 0644)")
	cmd.Flags().StringVar(&o.dirMode, "dir-mode", "", "mode (octal) of directories made over HTTP or the CLI (default 0755)")
}

// apply puts the flags given into u.
func (o *ownerFlags) apply(cmd *cobra.Command, u *client.BucketUpdate) error {
	if cmd.Flags().Changed("uid") {
		u.UID = &o.uid
	}
	if cmd.Flags().Changed("gid") {
		u.GID = &o.gid
	}
	for _, m := range []struct {
		flag string
		v    string
		dst  **uint32
	}{{"file-mode", o.fileMode, &u.FileMode}, {"dir-mode", o.dirMode, &u.DirMode}} {
		if !cmd.Flags().Changed(m.flag) {
			continue
		}
		n, err := parseMode(m.v)
		if err != nil {
			return fmt.Errorf("--%s: %w", m.flag, err)
		}
		*m.dst = &n
	}
	return nil
}

// parseMode parses an octal permission mode such as 0644.
func parseMode(v string) (uint32, error) {
	n, err := strconv.ParseUint(v, 8, 32)
	if err != nil || n > 0o7777 {
		return 0, fmt.Errorf("%q: expected an octal mode such as 0644", v)
	}
	return uint32(n), nil
}

func newBucketListCmd(cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List buckets and their options",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			buckets, err := cf.client().ListBuckets(cmd.Context())
			if err != nil {
				return err
			}
			sort.Slice(buckets, func(i, j int) bool { return buckets[i].Name < buckets[j].Name })
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tPUBLIC\tCHECKSUM-SIDECARS\tCACHE-CONTROL\tTRASH\tCREATED")
			for _, b := range buckets {
				cc, created := b.CacheControl, "-"
				if cc == "" {
					cc = "-"
				}
				if !b.Created.IsZero() {
					created = b.Created.Local().Format(time.DateTime)
				}
				fmt.Fprintf(tw, "%s\t%t\t%t\t%s\t%s\t%s\n", b.Name, b.Public, b.ChecksumSidecars, cc, formatRetention(b.TrashSeconds), created)
			}
			return tw.Flush()
		},
	}
}

func newBucketShowCmd(cf *clientFlags) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show NAME [--json]",
		Short: "Show a bucket's options",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			b, err := cf.client().Bucket(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), b)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "bucket %s: %s\n", b.Name, bucketOptions(b))
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the server's JSON answer")
	return cmd
}

func newBucketDeleteCmd(cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete an empty bucket (with an empty trash)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := cf.client().DeleteBucket(cmd.Context(), args[0]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "deleted bucket %s\n", args[0])
			return nil
		},
	}
}

// bucketOptions formats a bucket's options on one line.
func bucketOptions(b client.BucketInfo) string {
	cc := b.CacheControl
	if cc == "" {
		cc = "none"
	}
	r := "default"
	switch {
	case b.Replicas == client.Mirror:
		r = "mirror"
	case b.Replicas > 0:
		r = strconv.Itoa(b.Replicas)
	}
	w := "majority"
	if b.WriteQuorum > 0 {
		w = strconv.Itoa(b.WriteQuorum)
	}
	fm, dm := b.FileMode, b.DirMode
	if fm == 0 {
		fm = 0o644
	}
	if dm == 0 {
		dm = 0o755
	}
	return fmt.Sprintf("public=%t checksum-sidecars=%t cache-control=%s replicas=%s write-quorum=%s strict=%t uid=%d gid=%d file-mode=%04o dir-mode=%04o trash=%s",
		b.Public, b.ChecksumSidecars, cc, r, w, b.Strict, b.UID, b.GID, fm, dm, formatRetention(b.TrashSeconds))
}
