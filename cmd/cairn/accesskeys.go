package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cairn-fs/cairn/client"
	"github.com/spf13/cobra"
)

func newKeyCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "key",
		Short: "Create, list, show and revoke access keys (needs the admin key)",
	}
	cf := addClientFlags(cmd)
	cmd.AddCommand(newKeyCreateCmd(cf), newKeyListCmd(cf), newKeyShowCmd(cf), newKeyRevokeCmd(cf))
	return cmd
}

func newKeyCreateCmd(cf *clientFlags) *cobra.Command {
	var req client.KeyRequest
	var asJSON, asEnv bool
	cmd := &cobra.Command{
		Use:   "create NAME [--bucket B[/PREFIX]]... [--allow read,list,write,delete,admin] [--expires DURATION] [--json|--env]",
		Short: "Create an access key and print its id and secret (shown only once)",
		Long: `Create an access key. It works for the native HTTP API
(Authorization: Bearer ID:SECRET), S3 (SigV4) and signed URLs.

Without --bucket the grant covers every bucket, and admin then covers
creating and deleting buckets. --allow defaults to read,list,write,delete.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req.Name = args[0]
			k, err := cf.client().CreateKey(cmd.Context(), req)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asEnv {
				// For eval: the CLI's and the AWS tools' variables.
				fmt.Fprintf(out, "export CAIRN_ACCESS_KEY_ID=%s CAIRN_SECRET_ACCESS_KEY=%s\n", k.ID, k.Secret)
				fmt.Fprintf(out, "export AWS_ACCESS_KEY_ID=%s AWS_SECRET_ACCESS_KEY=%s\n", k.ID, k.Secret)
				return nil
			}
			if asJSON {
				return printJSON(out, struct {
					ID     string `json:"id"`
					Secret string `json:"secret"`
				}{k.ID, k.Secret})
			}
			fmt.Fprintf(out, "created access key %s (%s)\n", k.ID, k.Name)
			fmt.Fprintf(out, "id:     %s\nsecret: %s\n", k.ID, k.Secret)
			fmt.Fprintf(out, "grants: %s\n", grantsSummary(k.Grants))
			if !k.Expires.IsZero() {
				fmt.Fprintf(out, "expires: %s\n", k.Expires.Format(time.RFC3339))
			}
			fmt.Fprintln(out, "The secret is not shown again: keep it now.")
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&req.Buckets, "bucket", nil, "grant on BUCKET or BUCKET/PREFIX (repeatable; default: every bucket)")
	cmd.Flags().StringVar(&req.Allow, "allow", "", "actions: read,list,write,delete,admin (default read,list,write,delete)")
	cmd.Flags().DurationVar(&req.Expires, "expires", 0, "the key stops working after this duration (e.g. 720h; default never)")
	cmd.Flags().BoolVar(&asJSON, "json", false, `print {"id": ..., "secret": ...}`)
	cmd.Flags().BoolVar(&asEnv, "env", false, "print export lines for eval: CAIRN_ACCESS_KEY_ID, CAIRN_SECRET_ACCESS_KEY, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY")
	return cmd
}

func newKeyListCmd(cf *clientFlags) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list [--json]",
		Short: "List the access keys (never their secrets)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			keys, err := cf.client().Keys(cmd.Context())
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), keys)
			}
			return printKeys(cmd.OutOrStdout(), keys)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newKeyShowCmd(cf *clientFlags) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show ID [--json]",
		Short: "Show one access key (never its secret)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			k, err := cf.client().Key(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), k)
			}
			return printKeys(cmd.OutOrStdout(), []client.KeyInfo{k})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newKeyRevokeCmd(cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "revoke ID",
		Short: "Revoke an access key: it stops working on every node within a second",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := cf.client().RevokeKey(cmd.Context(), args[0]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "revoked access key %s\n", args[0])
			return nil
		},
	}
}

func printKeys(w io.Writer, keys []client.KeyInfo) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tGRANTS\tCREATED\tEXPIRES")
	for _, k := range keys {
		exp := "never"
		if !k.Expires.IsZero() {
			exp = k.Expires.Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", k.ID, k.Name, grantsSummary(k.Grants), k.Created.Format(time.RFC3339), exp)
	}
	return tw.Flush()
}

func grantsSummary(gs []client.Grant) string {
	var parts []string
	for _, g := range gs {
		target := g.Bucket
		if target == "" {
			target = "*"
		}
		if g.Prefix != "" {
			target += "/" + g.Prefix
		}
		parts = append(parts, target+":"+strings.Join(g.Allow, ","))
	}
	return strings.Join(parts, " ")
}
