package main

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cairn-fs/cairn/client"
	"github.com/spf13/cobra"
)

func newBucketCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bucket",
		Short: "Create, change, list and delete buckets (needs the admin key)",
	}
	cf := addClientFlags(cmd)
	cmd.AddCommand(newBucketCreateCmd(cf), newBucketSetCmd(cf), newBucketListCmd(cf), newBucketDeleteCmd(cf))
	return cmd
}

func newBucketCreateCmd(cf *clientFlags) *cobra.Command {
	var b client.BucketInfo
	var replicas string
	var owner ownerFlags
	cmd := &cobra.Command{
		Use:   "create NAME [--public] [--checksum-sidecars] [--cache-control V] [--replicas N|mirror] [--write-quorum W] [--strict]",
		Short: "Create a bucket",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			b.Name = args[0]
			r, err := parseReplicas(replicas)
			if err != nil {
				return err
			}
			b.Replicas = r
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
	owner.bind(cmd)
	return cmd
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
const bucketSettingNames = "public, checksum-sidecars, cache-control, replicas, write-quorum, strict, uid, gid, file-mode, dir-mode"

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
		default:
			return u, fmt.Errorf("unknown bucket option %q (options: %s)", k, bucketSettingNames)
		}
	}
	return u, nil
}

func newBucketSetCmd(cf *clientFlags) *cobra.Command {
	var owner ownerFlags
	cmd := &cobra.Command{
		Use:   "set NAME [OPTION=VALUE...] [--uid N] [--gid N] [--file-mode 0644] [--dir-mode 0755]",
		Short: "Change bucket options: public=true|false, checksum-sidecars=true|false, cache-control=V, replicas=N|mirror, write-quorum=W, strict=true|false, uid=N, gid=N, file-mode=0644, dir-mode=0755",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			u, err := parseBucketSettings(args[1:])
			if err != nil {
				return err
			}
			if err := owner.apply(cmd, &u); err != nil {
				return err
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
			fmt.Fprintln(tw, "NAME\tPUBLIC\tCHECKSUM-SIDECARS\tCACHE-CONTROL\tCREATED")
			for _, b := range buckets {
				cc, created := b.CacheControl, "-"
				if cc == "" {
					cc = "-"
				}
				if !b.Created.IsZero() {
					created = b.Created.Local().Format(time.DateTime)
				}
				fmt.Fprintf(tw, "%s\t%t\t%t\t%s\t%s\n", b.Name, b.Public, b.ChecksumSidecars, cc, created)
			}
			return tw.Flush()
		},
	}
}

func newBucketDeleteCmd(cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete an empty bucket",
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
	return fmt.Sprintf("public=%t checksum-sidecars=%t cache-control=%s replicas=%s write-quorum=%s strict=%t uid=%d gid=%d file-mode=%04o dir-mode=%04o",
		b.Public, b.ChecksumSidecars, cc, r, w, b.Strict, b.UID, b.GID, fm, dm)
}
