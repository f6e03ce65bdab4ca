package httpapi

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// A connection that has sent part of a request head has no answer in
// progress: Shutdown closes it at once, as net/http closes a connection
// that has not finished sending its request, instead of waiting for
// ReadHeaderTimeout (or failing with its context's error).
func TestFastShutdownClosesPartialHead(t *testing.T) {
	for _, name := range []string{"first request", "after an answer"} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, func(c *Config) { c.ReadHeaderTimeout = time.Minute })
			e.put("/pub/f.txt", "hello world")
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			must(t, err)
			served := make(chan error, 1)
			go func() { served <- e.s.Serve(ln) }()
			c := dial(t, ln.Addr().String())
			raw := "GET /pub/f.txt HTTP/1.1\r\nHost: x\r\n"
			if name == "after an answer" {
				raw = "GET /pub/f.txt HTTP/1.1\r\nHost: x\r\n\r\n" + raw
			}
			_, err = io.WriteString(c, raw)
			must(t, err)
			time.Sleep(100 * time.Millisecond) // the server has read it
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			start := time.Now()
			if err := e.s.Shutdown(ctx); err != nil {
				t.Fatalf("Shutdown: %v after %v", err, time.Since(start))
			}
			if d := time.Since(start); d > time.Second {
				t.Fatalf("Shutdown took %v", d)
			}
			if err := <-served; !errors.Is(err, http.ErrServerClosed) {
				t.Fatalf("Serve: %v", err)
			}
			if !closedWithin(t, c, 2*time.Second) {
				t.Fatal("connection with a partial head left open")
			}
		})
	}
}

// A bucket's Cache-Control is written verbatim into every answer of both
// paths: a control byte other than HTAB (which net/http refuses in any
// field value it reads) would make those answers malformed, so it is
// refused when the bucket is created or changed.
func TestCacheControlControlBytesRefused(t *testing.T) {
	e := newEnv(t, nil)
	for _, v := range []string{`a\r\nb`, `a\u0000b`, `a\u0001b`, `no-cache\u007f`, `x\u001b[31m`} {
		body := `{"cache_control":"` + v + `"}`
		expect(t, e.do("PATCH", "/_cairn/buckets/pub", strings.NewReader(body), "key: admin"), 400, "BadRequest")
		expect(t, e.do("POST", "/_cairn/buckets", strings.NewReader(`{"name":"cc-b",`+body[1:]), "key: admin"), 400, "BadRequest")
	}
	expect(t, e.do("PATCH", "/_cairn/buckets/pub", strings.NewReader(`{"cache_control":"public,\tmax-age=60"}`), "key: admin"), 200, "")
}
