package main

import (
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/cairn-fs/cairn/internal/access"
	"github.com/cairn-fs/cairn/internal/access/sigv4"
	"github.com/spf13/cobra"
)

func newURLCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "url",
		Short: "Make signed, expiring URLs",
	}
	cmd.AddCommand(newURLSignCmd())
	return cmd
}

func newURLSignCmd() *cobra.Command {
	var (
		server, adminKey, keyID, secret, method, region string
		expires                                         time.Duration
	)
	cmd := &cobra.Command{
		Use:   "sign BUCKET/PATH [--expires 1h] [--method GET|PUT] [--key-id ID --secret SECRET]",
		Short: "Print a signed URL that gives time-limited access to one file (an S3 presigned URL)",
		Long: `Print a signed, expiring URL for one file: anyone holding it may GET (or
PUT, with --method PUT) that file until it expires, even in a private
bucket. It is an S3 presigned URL (SigV4 in the query) on the node's own
path, so it works with curl, browsers and S3 clients alike.

It is signed offline with an access key (--key-id/--secret, or
CAIRN_ACCESS_KEY_ID/CAIRN_SECRET_ACCESS_KEY), which must be allowed to do
the operation; without one, with the admin key (--key or CAIRN_ADMIN_KEY).
Revoking the key revokes its URLs.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			bucket, p, err := parseRemote(args[0])
			if err != nil {
				return err
			}
			if p == "" || strings.HasSuffix(p, "/") {
				return fmt.Errorf("%q: expected BUCKET/PATH of a file", args[0])
			}
			cf := clientFlags{server: server, key: adminKey}
			base := cf.client().BaseURL()
			if keyID == "" {
				keyID, secret = os.Getenv("CAIRN_ACCESS_KEY_ID"), os.Getenv("CAIRN_SECRET_ACCESS_KEY")
			}
			if keyID == "" {
				keyID, secret = access.AdminKeyID, adminKey
				if secret == "" {
					secret = os.Getenv("CAIRN_ADMIN_KEY")
				}
			}
			if secret == "" {
				return fmt.Errorf("no key to sign with: give --key-id and --secret, or the admin key (--key or CAIRN_ADMIN_KEY)")
			}
			u := strings.TrimSuffix(base, "/") + "/" + bucket + "/" + (&url.URL{Path: p}).EscapedPath()
			signed, err := sigv4.Presign(strings.ToUpper(method), u, keyID, secret, region, time.Now(), expires)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), signed)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&server, "server", "", "server URL the link points at (default $CAIRN_SERVER, else "+defaultServerURL+")")
	f.StringVar(&adminKey, "key", "", "admin key to sign with when no access key is given (default $CAIRN_ADMIN_KEY)")
	f.StringVar(&keyID, "key-id", "", "access key id to sign with (default $CAIRN_ACCESS_KEY_ID)")
	f.StringVar(&secret, "secret", "", "its secret (default $CAIRN_SECRET_ACCESS_KEY)")
	f.StringVar(&method, "method", "GET", "the method the URL allows: GET (or HEAD) or PUT")
	f.StringVar(&region, "region", "us-east-1", "region in the signature's scope (any is accepted by Cairn)")
	f.DurationVar(&expires, "expires", time.Hour, "how long the URL works (1s to 168h)")
	return cmd
}
