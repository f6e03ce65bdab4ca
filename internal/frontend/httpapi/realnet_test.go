package httpapi

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cairn-fs/cairn/internal/store"
)

// serveReal serves e's handler on a loopback listener through Serve.
func serveReal(t testing.TB, e *env) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	done := make(chan error, 1)
	go func() { done <- e.s.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = e.s.Shutdown(ctx)
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
	})
	return ln.Addr().String()
}

func dial(t testing.TB, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	must(t, err)
	t.Cleanup(func() { c.Close() })
	must(t, c.SetDeadline(time.Now().Add(20*time.Second)))
	return c
}

func TestRealStalledUploadIsCut(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.ReadTimeout = 200 * time.Millisecond })
	addr := serveReal(t, e)
	c := dial(t, addr)
	start := time.Now()
	fmt.Fprintf(c, "PUT /pub/stalled HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Length: 100\r\n\r\n0123456789", testKey)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	must(t, err)
	if resp.StatusCode != http.StatusRequestTimeout {
		t.Fatalf("status %d, want 408", resp.StatusCode)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("cut after %v", d)
	}
	if _, err := e.fs.Stat(context.Background(), "pub", "stalled"); !errors.Is(err, store.ErrNotFound) {
		t.Fatal("stalled upload stored a file")
	}
}

func TestRealDisconnectMidBodyStoresNothing(t *testing.T) {
	e := newEnv(t, nil)
	finished := make(chan struct{})
	e.fs.afterRead = func() { close(finished) } // must never run
	addr := serveReal(t, e)
	c := dial(t, addr)
	fmt.Fprintf(c, "PUT /pub/half HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Length: 100\r\n\r\n0123456789", testKey)
	c.(*net.TCPConn).CloseWrite()
	// The server answers (400) or closes; either way the read ends.
	_, _ = io.Copy(io.Discard, c)
	// Shut down to wait for the handler to finish before checking.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	must(t, e.s.Shutdown(ctx))
	select {
	case <-finished:
		t.Fatal("store accepted a truncated body")
	default:
	}
	if _, err := e.fs.Stat(context.Background(), "pub", "half"); !errors.Is(err, store.ErrNotFound) {
		t.Fatal("truncated upload stored a file")
	}
}

func TestRealSlowSteadyUploadSurvives(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.ReadTimeout = 500 * time.Millisecond })
	addr := serveReal(t, e)
	c := dial(t, addr)
	const pieces = 8
	fmt.Fprintf(c, "PUT /pub/slow HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n\r\n", testKey, pieces)
	tick := time.NewTicker(100 * time.Millisecond) // the client is slow on purpose
	defer tick.Stop()
	for range pieces {
		<-tick.C
		_, err := c.Write([]byte("x"))
		must(t, err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	must(t, err)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("status %d, want 201", resp.StatusCode)
	}
}

func TestRealSlowStoreAfterBodyKeepsContext(t *testing.T) {
	// net/http reads the connection in the background once the body is
	// consumed; a read deadline left behind would cancel the request.
	e := newEnv(t, func(c *Config) { c.ReadTimeout = 50 * time.Millisecond })
	e.fs.afterRead = func() { <-time.After(300 * time.Millisecond) } // a slow fsync
	addr := serveReal(t, e)
	resp, err := http.DefaultClient.Do(mustReq(t, "PUT", "http://"+addr+"/pub/fsync", "body"))
	must(t, err)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("status %d, want 201", resp.StatusCode)
	}
}

func mustReq(t *testing.T, method, url, body string) *http.Request {
	t.Helper()
	r, err := http.NewRequest(method, url, strings.NewReader(body))
	must(t, err)
	r.Header.Set("Authorization", "Bearer "+testKey)
	return r
}

func TestRealHeaderTooLarge(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.MaxHeaderBytes = 8 << 10 })
	addr := serveReal(t, e)
	c := dial(t, addr)
	fmt.Fprintf(c, "GET /pub/x HTTP/1.1\r\nHost: x\r\nX-Big: %s\r\n\r\n", strings.Repeat("a", 64<<10))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	must(t, err)
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("status %d, want 431", resp.StatusCode)
	}
}

func TestRealGetAndKeepAlive(t *testing.T) {
	e := newEnv(t, nil)
	body := strings.Repeat("0123456789", 100000)
	e.put("/pub/big", body)
	addr := serveReal(t, e)
	for i := range 3 {
		resp, err := http.Get("http://" + addr + "/pub/big")
		must(t, err)
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		must(t, err)
		if resp.StatusCode != 200 || string(got) != body {
			t.Fatalf("GET %d: %d, %d bytes", i, resp.StatusCode, len(got))
		}
	}
}

// doneHandler signals when each request's handler has returned.
func doneHandler(h http.Handler, done chan<- struct{}) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r)
		done <- struct{}{}
	})
}

func serveWrapped(t *testing.T, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	hs := &http.Server{Handler: h}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { hs.Close() })
	return ln.Addr().String()
}

func TestRealStalledDownloadIsCut(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.WriteTimeout = 300 * time.Millisecond })
	const size = 32 << 20
	e.put("/pub/huge", strings.Repeat("z", size))
	done := make(chan struct{}, 1)
	addr := serveWrapped(t, doneHandler(e.s.Handler(), done))
	c := dial(t, addr)
	must(t, c.(*net.TCPConn).SetReadBuffer(32<<10))
	fmt.Fprintf(c, "GET /pub/huge HTTP/1.1\r\nHost: x\r\n\r\n")
	buf := make([]byte, 1024)
	_, err := io.ReadFull(c, buf) // headers arrive; then the reader stalls
	must(t, err)
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		t.Fatal("handler still writing to a stalled reader")
	}
	n, _ := io.Copy(io.Discard, c)
	if n+1024 >= size {
		t.Fatalf("stalled reader got all %d bytes", n+1024)
	}
}

func TestRealSlowSteadyDownloadSurvives(t *testing.T) {
	// WriteTimeout leaves room for scheduling hiccups on a loaded CI
	// machine; the download still lasts about 2.6 times as long.
	e := newEnv(t, func(c *Config) { c.WriteTimeout = time.Second })
	const size = 16 << 20
	e.put("/pub/big", strings.Repeat("z", size))
	done := make(chan struct{}, 1)
	addr := serveWrapped(t, doneHandler(e.s.Handler(), done))
	c := dial(t, addr)
	must(t, c.(*net.TCPConn).SetReadBuffer(32<<10))
	fmt.Fprintf(c, "GET /pub/big HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	must(t, err)
	// Read at about 256 KiB per 40 ms: ~2.6 s in all, far longer than
	// WriteTimeout, but never stalled for long.
	tick := time.NewTicker(40 * time.Millisecond)
	defer tick.Stop()
	var got int64
	for {
		n, err := io.CopyN(io.Discard, resp.Body, 256<<10)
		got += n
		if err != nil {
			break
		}
		<-tick.C
	}
	if got != size {
		t.Fatalf("slow reader got %d of %d bytes", got, size)
	}
	<-done
}
