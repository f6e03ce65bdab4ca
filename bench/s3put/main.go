// Command s3put PUTs new small files into a Cairn node for a while, with
// the native API or S3, from CONC keep-alive connections, so that
// bench/put.sh can compare the node's CPU per PUT of each API with the
// same client:
//
//	go run ./bench/s3put -url http://127.0.0.1:PORT -bucket B -prefix p/ \
//	    -mode s3 -id ID -secret SECRET -conc 20 -duration 8s -size 15000
//
// Modes: native (Authorization: Bearer -key), s3 (SigV4 in the header with
// the body's SHA-256 as x-amz-content-sha256, as the aws CLI and the SDKs
// send a PutObject over HTTP), s3unsigned (SigV4 with UNSIGNED-PAYLOAD).
// Every request writes a new name, and a different body (its first bytes
// are a counter), so every PUT writes a new blob. It prints one line:
// "puts=N errors=E seconds=S".
package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

func main() {
	base := flag.String("url", "", "node URL, http://HOST:PORT")
	bucket := flag.String("bucket", "", "bucket")
	prefix := flag.String("prefix", "", "name prefix of the new files")
	mode := flag.String("mode", "native", "native, s3 or s3unsigned")
	key := flag.String("key", "", "native: the admin key (Bearer)")
	id := flag.String("id", "", "s3: access key id")
	secret := flag.String("secret", "", "s3: its secret")
	conc := flag.Int("conc", 20, "concurrent connections")
	dur := flag.Duration("duration", 8*time.Second, "how long to PUT")
	size := flag.Int("size", 15000, "body bytes")
	flag.Parse()
	if *base == "" || *bucket == "" || (*mode == "native" && *key == "") || (*mode != "native" && (*id == "" || *secret == "")) {
		fmt.Fprintln(os.Stderr, "s3put: -url, -bucket and -key (native) or -id and -secret (s3) are required")
		os.Exit(2)
	}
	if *mode != "native" && *mode != "s3" && *mode != "s3unsigned" {
		fmt.Fprintln(os.Stderr, "s3put: -mode is native, s3 or s3unsigned")
		os.Exit(2)
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: *conc, MaxConnsPerHost: *conc}}
	signer := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
	creds := aws.Credentials{AccessKeyID: *id, SecretAccessKey: *secret}
	var puts, errs atomic.Int64
	var firstErr sync.Once
	deadline := time.Now().Add(*dur)
	start := time.Now()
	var wg sync.WaitGroup
	for w := range *conc {
		wg.Go(func() {
			body := bytes.Repeat([]byte("x"), *size)
			for n := 0; time.Now().Before(deadline); n++ {
				binary.BigEndian.PutUint64(body, uint64(w)<<40|uint64(n))
				u := fmt.Sprintf("%s/%s/%sw%d-%d", strings.TrimSuffix(*base, "/"), *bucket, *prefix, w, n)
				req, err := http.NewRequest(http.MethodPut, u, bytes.NewReader(body))
				if err != nil {
					fmt.Fprintln(os.Stderr, "s3put:", err)
					os.Exit(1)
				}
				if *mode == "native" {
					req.Header.Set("Authorization", "Bearer "+*key)
				} else {
					ph := "UNSIGNED-PAYLOAD"
					if *mode == "s3" {
						s := sha256.Sum256(body)
						ph = hex.EncodeToString(s[:])
					}
					req.Header.Set("X-Amz-Content-Sha256", ph)
					if err := signer.SignHTTP(context.Background(), creds, req, ph, "s3", "us-east-1", time.Now()); err != nil {
						fmt.Fprintln(os.Stderr, "s3put:", err)
						os.Exit(1)
					}
				}
				resp, err := client.Do(req)
				if err != nil {
					errs.Add(1)
					firstErr.Do(func() { fmt.Fprintln(os.Stderr, "s3put:", err) })
					continue
				}
				msg, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode/100 != 2 {
					errs.Add(1)
					firstErr.Do(func() { fmt.Fprintf(os.Stderr, "s3put: %s: %d %s\n", u, resp.StatusCode, msg) })
					continue
				}
				puts.Add(1)
			}
		})
	}
	wg.Wait()
	fmt.Printf("puts=%d errors=%d seconds=%.3f\n", puts.Load(), errs.Load(), time.Since(start).Seconds())
}
