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
const bucketSettingNames = "public, checksum-sidecars, cache-control, replicas, write-quorum, strict"

// parseBucketSettings turns OPTION=VALUE arguments into a partial update.
func parseBucketSettings(args []string) (client.BucketUpdate, error) {
	var u client.BucketUpdate
	for _, a := range args {
		k, v, ok := strings.Cut(a, "=")
		if !ok {
			return u, fmt.Errorf("%q: expected OPTION=VALUE (options: %s)", a, bucketSettingNames)
		}
		switch strings.ReplaceAll(strings.ToLower(k), "_", "-") {
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
	return &cobra.Command{
		Use:   "set NAME OPTION=VALUE...",
		Short: "Change bucket options: public=true|false, checksum-sidecars=true|false, cache-control=V, replicas=N|mirror, write-quorum=W, strict=true|false",
		Args:  cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			u, err := parseBucketSettings(args[1:])
			if err != nil {
				return err
			}
			got, err := cf.client().UpdateBucket(cmd.Context(), args[0], u)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "bucket %s: %s\n", got.Name, bucketOptions(got))
			return nil
		},
	}
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
	return fmt.Sprintf("public=%t checksum-sidecars=%t cache-control=%s replicas=%s write-quorum=%s strict=%t", b.Public, b.ChecksumSidecars, cc, r, w, b.Strict)
}
