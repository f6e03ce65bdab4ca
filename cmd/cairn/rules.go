package main

import (
	"fmt"
	"os"
	"text/tabwriter"

	"github.com/cairn-fs/cairn/client"
	"github.com/cairn-fs/cairn/internal/access/rules"
	"github.com/spf13/cobra"
)

func newRuleCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "rule",
		Short: "Add, list and remove abuse rules: deny, answer or throttle by User-Agent, IP or path (needs the admin key)",
	}
	cf := addClientFlags(cmd)
	cmd.AddCommand(newRuleAddCmd(cf), newRuleListCmd(cf), newRuleRmCmd(cf))
	return cmd
}

func newRuleAddCmd(cf *clientFlags) *cobra.Command {
	var (
		r                 client.Rule
		respondFile, rate string
		status            int
		contentType       string
		burst             int
		asJSON            bool
	)
	cmd := &cobra.Command{
		Use:   "add [--bucket B] (--user-agent REGEX | --ip CIDR | --path PREFIX) (--deny STATUS | --respond FILE [--status N] [--content-type T] | --rate N/s [--burst N])",
		Short: "Add an abuse rule; it takes effect on every node within a second",
		Long: `Add an abuse rule. A rule applies to one bucket (--bucket) or to the whole
cluster, matches one thing (a User-Agent regular expression, an IP or CIDR,
or a path prefix) and does one thing:

  --deny STATUS                refuse with that status
  --respond FILE               answer with FILE's bytes (the "badbot page"),
     [--status N] [--content-type T]   status 403 and text/html by default
  --rate N/s [--burst N]       a token bucket per client IP; beyond it, 429
                               with Retry-After

A --rate rule without a match is the default per-client-IP limit of its
bucket or of the cluster. Rules are checked in order: cluster rules first,
then the bucket's, each by ID; the first deny or respond that matches
decides, then every matching throttle takes a token.

Examples:
  cairn rule add --user-agent '(?i)sitesucker|httrack' --respond badbot.html
  cairn rule add --ip 203.0.113.0/24 --deny 403
  cairn rule add --bucket www --rate 20/s --burst 40`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if respondFile != "" {
				body, err := os.ReadFile(respondFile)
				if err != nil {
					return fmt.Errorf("--respond: %w", err)
				}
				r.Respond = &client.RuleResponse{Status: status, ContentType: contentType, Body: body}
			} else if cmd.Flags().Changed("status") || cmd.Flags().Changed("content-type") {
				return fmt.Errorf("--status and --content-type go with --respond")
			}
			if rate != "" {
				v, err := rules.ParseRate(rate)
				if err != nil {
					return fmt.Errorf("--rate: %w", err)
				}
				r.Rate, r.Burst = v, burst
			} else if cmd.Flags().Changed("burst") {
				return fmt.Errorf("--burst goes with --rate")
			}
			// Check here for a clear message before anything is sent;
			// the cluster checks again.
			local := rules.Rule{Bucket: r.Bucket, UserAgent: r.UserAgent, IP: r.IP, PathPrefix: r.PathPrefix, Deny: r.Deny, Rate: r.Rate, Burst: r.Burst}
			if r.Respond != nil {
				local.Respond = &rules.Response{Status: r.Respond.Status, ContentType: r.Respond.ContentType, Body: r.Respond.Body}
			}
			if err := local.Validate(); err != nil {
				return err
			}
			got, err := cf.client().AddRule(cmd.Context(), r)
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), got)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "added rule %s\n", describeRule(got))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&r.Bucket, "bucket", "", "the bucket the rule applies to (default: the whole cluster)")
	f.StringVar(&r.UserAgent, "user-agent", "", "match: a regular expression (RE2) on the User-Agent; (?i) for case-insensitive")
	f.StringVar(&r.IP, "ip", "", "match: a client IP or CIDR, v4 or v6")
	f.StringVar(&r.PathPrefix, "path", "", "match: a path prefix (inside the bucket for a bucket rule, /BUCKET/... for a cluster rule)")
	f.IntVar(&r.Deny, "deny", 0, "action: refuse with this HTTP status (400-599)")
	f.StringVar(&respondFile, "respond", "", "action: answer with the contents of this file (at most 64 KiB)")
	f.IntVar(&status, "status", 0, "status of a --respond answer (default 403)")
	f.StringVar(&contentType, "content-type", "", "content type of a --respond answer (default text/html; charset=utf-8)")
	f.StringVar(&rate, "rate", "", "action: throttle each client IP to N requests per second (N/s, N/m, N/h)")
	f.IntVar(&burst, "burst", 0, "token bucket size of --rate (default: the rate per second, at least 1)")
	f.BoolVar(&asJSON, "json", false, "print the rule as JSON")
	return cmd
}

func newRuleListCmd(cf *clientFlags) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list [--json]",
		Short: "List the abuse rules in the order they are checked",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			list, err := cf.client().Rules(cmd.Context())
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), list)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tRULE")
			for _, r := range list {
				fmt.Fprintf(tw, "%s\t%s\n", r.ID, describeRule(r))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newRuleRmCmd(cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "rm ID",
		Short: "Remove an abuse rule",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := cf.client().RemoveRule(cmd.Context(), args[0]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "removed rule %s\n", args[0])
			return nil
		},
	}
}

// describeRule is the one-line summary of a rule (rules.Rule.String).
func describeRule(r client.Rule) string {
	local := rules.Rule{ID: r.ID, Bucket: r.Bucket, UserAgent: r.UserAgent, IP: r.IP, PathPrefix: r.PathPrefix, Deny: r.Deny, Rate: r.Rate, Burst: r.Burst}
	if r.Respond != nil {
		local.Respond = &rules.Response{Status: r.Respond.Status, ContentType: r.Respond.ContentType, Body: r.Respond.Body}
	}
	return local.String()
}
