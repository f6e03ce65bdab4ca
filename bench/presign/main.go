// Command presign writes a presigned S3 GET (SigV4, query) of every path
// of a bench corpus, for wrk (bench/read.sh S3=1):
//
//	go run ./bench/presign -base http://127.0.0.1:PORT -bucket small \
//	    -id ID -secret SECRET -expires 2h < paths.txt > presigned.txt
//
// Each output line is "BUCKET/PATH?X-Amz-..." (no leading slash), so
// random.lua's PREFIX "/" makes it a request target.
//
// With -header, it signs each GET in its Authorization header instead, as
// the AWS SDKs' GetObject does (aws-sdk-go-v2's signer: host,
// x-amz-content-sha256 of the empty body and x-amz-date signed, now):
// each line is "BUCKET/PATH" and the request's signed fields, separated
// by tabs ("Authorization: ...", "X-Amz-Content-Sha256: ...",
// "X-Amz-Date: ..."), which random.lua sends. Such a signature is good for
// 15 minutes either way of its time (the server's clock-skew limit), so
// bench/read.sh signs again before each run.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/cairn-fs/cairn/internal/access/sigv4"
)

func main() {
	base := flag.String("base", "", "node URL, http://HOST:PORT (the signature covers the host)")
	bucket := flag.String("bucket", "", "bucket holding the corpus")
	id := flag.String("id", "", "access key id")
	secret := flag.String("secret", "", "its secret")
	expires := flag.Duration("expires", 2*time.Hour, "validity")
	header := flag.Bool("header", false, "sign in the Authorization header (an SDK's GetObject), not the query")
	flag.Parse()
	if *base == "" || *bucket == "" || *id == "" || *secret == "" {
		fmt.Fprintln(os.Stderr, "presign: -base, -bucket, -id and -secret are required")
		os.Exit(2)
	}
	in := bufio.NewScanner(os.Stdin)
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	now := time.Now()
	for in.Scan() {
		p := in.Text()
		if p == "" {
			continue
		}
		u := strings.TrimSuffix(*base, "/") + "/" + *bucket + "/" + (&url.URL{Path: p}).EscapedPath()
		if *header {
			line, err := signHeader(u, *id, *secret, now)
			if err != nil {
				fmt.Fprintln(os.Stderr, "presign:", err)
				os.Exit(1)
			}
			fmt.Fprintln(out, line)
			continue
		}
		s, err := sigv4.Presign("GET", u, *id, *secret, "us-east-1", now, *expires)
		if err != nil {
			fmt.Fprintln(os.Stderr, "presign:", err)
			os.Exit(1)
		}
		pu, err := url.Parse(s)
		if err != nil {
			fmt.Fprintln(os.Stderr, "presign:", err)
			os.Exit(1)
		}
		fmt.Fprintln(out, strings.TrimPrefix(pu.RequestURI(), "/"))
	}
	if err := in.Err(); err != nil {
		fmt.Fprintln(os.Stderr, "presign:", err)
		os.Exit(1)
	}
}

// signHeader signs a GET of u in its header as aws-sdk-go-v2's S3 client
// does, and returns the line for random.lua: the target without its
// leading slash, then the signed fields, tab-separated.
func signHeader(u, id, secret string, now time.Time) (string, error) {
	r, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		return "", err
	}
	r.Header.Set("X-Amz-Content-Sha256", sigv4.EmptySHA256)
	signer := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
	creds := aws.Credentials{AccessKeyID: id, SecretAccessKey: secret}
	if err := signer.SignHTTP(context.Background(), creds, r, sigv4.EmptySHA256, "s3", "us-east-1", now); err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString(strings.TrimPrefix(r.URL.RequestURI(), "/"))
	for _, k := range []string{"Authorization", "X-Amz-Content-Sha256", "X-Amz-Date"} {
		b.WriteString("\t" + k + ": " + r.Header.Get(k))
	}
	return b.String(), nil
}
