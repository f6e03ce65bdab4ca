// Command presign writes a presigned S3 GET (SigV4, query) of every path
// of a bench corpus, for wrk (bench/read.sh S3=1):
//
//	go run ./bench/presign -base http://127.0.0.1:PORT -bucket small \
//	    -id ID -secret SECRET -expires 2h < paths.txt > presigned.txt
//
// Each output line is "BUCKET/PATH?X-Amz-..." (no leading slash), so
// random.lua's PREFIX "/" makes it a request target.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/cairn-fs/cairn/internal/access/sigv4"
)

func main() {
	base := flag.String("base", "", "node URL, http://HOST:PORT (the signature covers the host)")
	bucket := flag.String("bucket", "", "bucket holding the corpus")
	id := flag.String("id", "", "access key id")
	secret := flag.String("secret", "", "its secret")
	expires := flag.Duration("expires", 2*time.Hour, "validity")
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
