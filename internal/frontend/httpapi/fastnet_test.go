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
)

// fastEnv is an env served through Serve (fast path and hand-off).
func fastEnv(t *testing.T, mut func(*Config)) (*env, string) {
	t.Helper()
	e := newEnv(t, mut)
	e.put("/pub/f.txt", "hello world")
	e.put("/pub/mid.css", strings.Repeat("body{margin:0}\n", 1000))
	return e, serveReal(t, e)
}

func TestFastPipelining(t *testing.T) {
	e, addr := fastEnv(t, nil)
	big := strings.Repeat("z", 200<<10)
	e.put("/pub/big", big)
	c := dial(t, addr)
	reqs := []struct{ method, target, extra, status, body string }{
		{"GET", "/pub/f.txt", "", "200", "hello world"},
		{"HEAD", "/pub/mid.css", "", "200", ""},
		{"GET", "/pub/missing", "", "404", `{"error":"store: not found","code":"NoSuchKey"}` + "\n"},
		{"GET", "/pub/big", "", "200", big},
		{"GET", "/pub/f.txt", "If-None-Match: *\r\n", "304", ""},
		{"GET", "/pub/f.txt", "Range: bytes=6-\r\n", "206", "world"},
		{"GET", "/pub/mid.css", "", "200", strings.Repeat("body{margin:0}\n", 1000)},
	}
	var all strings.Builder
	for range 3 {
		for _, r := range reqs {
			fmt.Fprintf(&all, "%s %s HTTP/1.1\r\nHost: x\r\n%s\r\n", r.method, r.target, r.extra)
		}
	}
	before := e.s.fast.Counts().Served
	_, err := io.WriteString(c, all.String()) // one write: every request is in the first reads
	must(t, err)
	br := bufio.NewReader(c)
	for i := range 3 * len(reqs) {
		r := reqs[i%len(reqs)]
		resp, body := readResp(t, br, r.method)
		if fmt.Sprint(resp.StatusCode) != r.status || body != r.body {
			t.Fatalf("answer %d (%s %s): %d, %d bytes; want %s, %d bytes", i, r.method, r.target, resp.StatusCode, len(body), r.status, len(r.body))
		}
	}
	if got := e.s.fast.Counts().Served - before; got != int64(3*len(reqs)) {
		t.Fatalf("fast path answered %d of %d pipelined requests", got, 3*len(reqs))
	}
}

func TestFastHandoffMidConnection(t *testing.T) {
	for _, pipelined := range []bool{false, true} {
		t.Run(fmt.Sprint("pipelined=", pipelined), func(t *testing.T) {
			e, addr := fastEnv(t, nil)
			c := dial(t, addr)
			br := bufio.NewReader(c)
			get := "GET /pub/f.txt HTTP/1.1\r\nHost: x\r\n\r\n"
			put := fmt.Sprintf("PUT /pub/f.txt HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Length: 7\r\n\r\nchanged", testKey)
			steps := []struct{ raw, method, status, body string }{
				{get, "GET", "200", "hello world"},
				{put, "PUT", "200", ""},
				{get, "GET", "200", "changed"},
				{"GET /pub/ HTTP/1.1\r\nHost: x\r\nAccept: application/json\r\n\r\n", "GET", "200", ""},
			}
			if pipelined {
				var all string
				for _, s := range steps {
					all += s.raw
				}
				_, err := io.WriteString(c, all)
				must(t, err)
			}
			for i, s := range steps {
				if !pipelined {
					_, err := io.WriteString(c, s.raw)
					must(t, err)
				}
				resp, body := readResp(t, br, s.method)
				if fmt.Sprint(resp.StatusCode) != s.status || (s.body != "" && body != s.body) {
					t.Fatalf("step %d: %d %q", i, resp.StatusCode, body)
				}
				if resp.Close {
					t.Fatalf("step %d: connection closing", i)
				}
			}
			if e.s.fast.Counts().Served != 1 || e.s.fast.Counts().HandedOff != 1 {
				t.Fatalf("fast path answered %d, handed off %d; want 1 and 1", e.s.fast.Counts().Served, e.s.fast.Counts().HandedOff)
			}
		})
	}
}

func TestFastRequestInTinyPieces(t *testing.T) {
	e, addr := fastEnv(t, nil)
	c := dial(t, addr)
	br := bufio.NewReader(c)
	raw := "GET /pub/mid.css HTTP/1.1\r\nHost: x\r\nUser-Agent: trickle\r\nRange: bytes=0-3\r\n\r\n"
	tick := time.NewTicker(time.Millisecond) // pace the client so that the server sees many reads
	defer tick.Stop()
	for round := range 2 {
		for i := 0; i < len(raw); i += 3 {
			<-tick.C
			_, err := io.WriteString(c, raw[i:min(i+3, len(raw))])
			must(t, err)
		}
		resp, body := readResp(t, br, "GET")
		if resp.StatusCode != 206 || body != "body" {
			t.Fatalf("round %d: %d %q", round, resp.StatusCode, body)
		}
	}
	if e.s.fast.Counts().Served != 2 || e.s.fast.Counts().HandedOff != 0 {
		t.Fatalf("fast path answered %d, handed off %d", e.s.fast.Counts().Served, e.s.fast.Counts().HandedOff)
	}
}

func TestFastLargeHeaderHandedOff(t *testing.T) {
	for _, tc := range []struct {
		name     string
		maxHdr   int
		fill     int
		status   int
		handoffs int64
	}{
		{"fits the buffer", 64 << 10, 6 << 10, 200, 0},
		{"over the buffer, under MaxHeaderBytes", 64 << 10, 20 << 10, 200, 1},
		{"over MaxHeaderBytes", 16 << 10, 40 << 10, 431, 1},
		{"over a small MaxHeaderBytes", 1 << 10, 6 << 10, 431, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, addr := fastEnv(t, func(c *Config) { c.MaxHeaderBytes = tc.maxHdr })
			c := dial(t, addr)
			fmt.Fprintf(c, "GET /pub/f.txt HTTP/1.1\r\nHost: x\r\nX-Big: %s\r\n\r\n", strings.Repeat("a", tc.fill))
			resp, _ := readResp(t, bufio.NewReader(c), "GET")
			if resp.StatusCode != tc.status || e.s.fast.Counts().HandedOff != tc.handoffs {
				t.Fatalf("status %d, %d hand-offs; want %d, %d", resp.StatusCode, e.s.fast.Counts().HandedOff, tc.status, tc.handoffs)
			}
		})
	}
}

// closedWithin reports whether the server closes c (a read returns an
// error other than a timeout) within d.
func closedWithin(t *testing.T, c net.Conn, d time.Duration) bool {
	t.Helper()
	must(t, c.SetReadDeadline(time.Now().Add(d)))
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	return !(errors.As(err, &ne) && ne.Timeout())
}

func TestFastSlowlorisIsCut(t *testing.T) {
	_, addr := fastEnv(t, func(c *Config) { c.ReadHeaderTimeout = 300 * time.Millisecond })
	c := dial(t, addr)
	start := time.Now()
	closed := make(chan time.Duration, 1)
	go func() {
		buf := make([]byte, 1)
		_, _ = c.Read(buf) // returns when the server closes (no answer comes)
		closed <- time.Since(start)
	}()
	_, err := io.WriteString(c, "GET /pub/f.txt HTTP/1.1\r\n")
	must(t, err)
	tick := time.NewTicker(50 * time.Millisecond) // the attacker's pace
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case d := <-closed:
			if d < 250*time.Millisecond {
				t.Fatalf("closed after %v, before ReadHeaderTimeout", d)
			}
			return
		case <-tick.C:
			if i > 100 {
				t.Fatal("header trickled for 5 s without the connection being closed")
			}
			_, _ = fmt.Fprintf(c, "X-%d: y\r\n", i)
		}
	}
}

func TestFastIdleTimeout(t *testing.T) {
	_, addr := fastEnv(t, func(c *Config) { c.IdleTimeout = 300 * time.Millisecond })
	c := dial(t, addr)
	br := bufio.NewReader(c)
	for range 2 {
		_, err := io.WriteString(c, "GET /pub/f.txt HTTP/1.1\r\nHost: x\r\n\r\n")
		must(t, err)
		if resp, _ := readResp(t, br, "GET"); resp.StatusCode != 200 {
			t.Fatal(resp.Status)
		}
	}
	start := time.Now()
	if !closedWithin(t, c, 5*time.Second) {
		t.Fatal("idle connection still open after 5 s")
	}
	if d := time.Since(start); d < 250*time.Millisecond {
		t.Fatalf("idle connection closed after %v, before IdleTimeout", d)
	}
}

func TestFastClientGoneMidResponse(t *testing.T) {
	e, addr := fastEnv(t, nil)
	e.put("/pub/huge", strings.Repeat("h", 32<<20))
	for range 3 {
		c, err := net.Dial("tcp", addr)
		must(t, err)
		must(t, c.(*net.TCPConn).SetReadBuffer(16<<10))
		_, err = io.WriteString(c, "GET /pub/huge HTTP/1.1\r\nHost: x\r\n\r\n")
		must(t, err)
		buf := make([]byte, 4096)
		_, err = io.ReadFull(c, buf)
		must(t, err)
		c.Close()
	}
	// The server goes on serving...
	resp, err := http.Get("http://" + addr + "/pub/f.txt")
	must(t, err)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatal(resp.Status)
	}
	// ...and the three abandoned answers ended: Shutdown finds no busy
	// connection left (WriteTimeout is 30 s, so only the write errors can
	// have ended them).
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	must(t, e.s.Shutdown(ctx))
}

func TestFastStalledDownloadIsCut(t *testing.T) {
	e, addr := fastEnv(t, func(c *Config) { c.WriteTimeout = 300 * time.Millisecond })
	const size = 32 << 20
	e.put("/pub/huge", strings.Repeat("z", size))
	c := dial(t, addr)
	must(t, c.(*net.TCPConn).SetReadBuffer(32<<10))
	fmt.Fprintf(c, "GET /pub/huge HTTP/1.1\r\nHost: x\r\n\r\n")
	buf := make([]byte, 1024)
	_, err := io.ReadFull(c, buf) // headers arrive; then the reader stalls
	must(t, err)
	// The write deadline cuts the answer: Shutdown, which leaves busy
	// connections alone until its context ends, sees the connection go.
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	must(t, e.s.Shutdown(ctx))
	n, _ := io.Copy(io.Discard, c)
	if n+1024 >= size {
		t.Fatalf("stalled reader got all %d bytes", n+1024)
	}
}

func TestFastSlowSteadyDownloadSurvives(t *testing.T) {
	e, addr := fastEnv(t, func(c *Config) { c.WriteTimeout = time.Second })
	const size = 16 << 20
	e.put("/pub/big", strings.Repeat("z", size))
	c := dial(t, addr)
	must(t, c.(*net.TCPConn).SetReadBuffer(32<<10))
	fmt.Fprintf(c, "GET /pub/big HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	must(t, err)
	tick := time.NewTicker(40 * time.Millisecond) // a slow but steady reader
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
	if e.s.fast.Counts().Served != 1 {
		t.Fatal("not served by the fast path")
	}
}

func TestFastShutdown(t *testing.T) {
	e := newEnv(t, nil)
	e.put("/pub/f.txt", "hello world")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	served := make(chan error, 1)
	go func() { served <- e.s.Serve(ln) }()
	addr := ln.Addr().String()
	idle := dial(t, addr)
	_, err = io.WriteString(idle, "GET /pub/f.txt HTTP/1.1\r\nHost: x\r\n\r\n")
	must(t, err)
	if resp, _ := readResp(t, bufio.NewReader(idle), "GET"); resp.StatusCode != 200 {
		t.Fatal(resp.Status)
	}
	handed := dial(t, addr) // a connection living in net/http
	_, err = io.WriteString(handed, "GET /_cairn/health HTTP/1.1\r\nHost: x\r\n\r\n")
	must(t, err)
	if resp, _ := readResp(t, bufio.NewReader(handed), "GET"); resp.StatusCode != 200 {
		t.Fatal(resp.Status)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	must(t, e.s.Shutdown(ctx))
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		t.Fatalf("Serve returned %v", err)
	}
	for name, c := range map[string]net.Conn{"fast": idle, "handed off": handed} {
		if !closedWithin(t, c, 5*time.Second) {
			t.Errorf("%s idle connection not closed by Shutdown", name)
		}
	}
	if _, err := net.Dial("tcp", addr); err == nil {
		t.Error("still accepting after Shutdown")
	}
	must(t, e.s.Shutdown(ctx)) // twice is fine
}

func TestFastShutdownLetsAnswerFinish(t *testing.T) {
	e := newEnv(t, nil)
	const size = 8 << 20
	e.put("/pub/big", strings.Repeat("b", size))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	go func() { _ = e.s.Serve(ln) }()
	c := dial(t, ln.Addr().String())
	must(t, c.(*net.TCPConn).SetReadBuffer(32<<10))
	fmt.Fprintf(c, "GET /pub/big HTTP/1.1\r\nHost: x\r\n\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	must(t, err)
	shut := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		shut <- e.s.Shutdown(ctx)
	}()
	tick := time.NewTicker(10 * time.Millisecond) // a slowish reader: ~0.3 s in all
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
		t.Fatalf("got %d of %d bytes across Shutdown", got, size)
	}
	must(t, <-shut)
	if !closedWithin(t, c, 5*time.Second) {
		t.Fatal("connection left open after Shutdown")
	}
}

// TestFastSlowSendfileSurvives: a body sent with sendfile in one loop (not
// in deadline-sized chunks) to a slow but steady reader, for much longer
// than WriteTimeout, arrives whole: the deadline is extended at each wait
// that follows progress. (A stall is cut by the deadline as before:
// TestFastStalledDownloadIsCut.)
func TestFastSlowSendfileSurvives(t *testing.T) {
	e, addr := fastEnv(t, func(c *Config) { c.WriteTimeout = time.Second })
	const size = 24 << 20 // beyond the kernel's loopback buffers
	e.put("/pub/one-blob", strings.Repeat("s", size))
	c := dial(t, addr)
	must(t, c.(*net.TCPConn).SetReadBuffer(16<<10))
	fmt.Fprintf(c, "GET /pub/one-blob HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	must(t, err)
	var got int64
	start := time.Now()
	var rerr error
	for {
		n, err := io.CopyN(io.Discard, resp.Body, 1<<20)
		got += n
		if err != nil {
			rerr = err
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.Close()
	if got != size || time.Since(start) < 2*time.Second {
		t.Fatalf("steady reader: %d of %d bytes in %v (want all, over more than 2 write timeouts): %v", got, size, time.Since(start), rerr)
	}
	if e.s.fast.Counts().SentFile == 0 {
		t.Fatal("the body did not leave with sendfile")
	}
}
