package httpapi

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestAppendCombined(t *testing.T) {
	tm := time.Date(2000, 10, 10, 13, 55, 36, 0, time.FixedZone("", -7*3600))
	for _, tc := range []struct {
		name string
		ln   logLine
		want string
	}{
		{"apache example", logLine{
			remoteAddr: "127.0.0.1:5555", user: "frank", t: tm, method: "GET", uri: "/apache_pb.gif",
			proto: "HTTP/1.0", status: 200, bytes: 2326, referer: "http://www.example.com/start.html",
			userAgent: "Mozilla/4.08 [en] (Win98; I ;Nav)",
		}, `127.0.0.1 - frank [10/Oct/2000:13:55:36 -0700] "GET /apache_pb.gif HTTP/1.0" 200 2326 "http://www.example.com/start.html" "Mozilla/4.08 [en] (Win98; I ;Nav)"` + "\n"},
		{"anonymous, no body, no headers, ipv6", logLine{
			remoteAddr: "[2001:db8::1]:443", t: tm, method: "HEAD", uri: "/b/x", proto: "HTTP/1.1", status: 304,
		}, `2001:db8::1 - - [10/Oct/2000:13:55:36 -0700] "HEAD /b/x HTTP/1.1" 304 - "-" "-"` + "\n"},
		{"escaping", logLine{
			remoteAddr: "10.0.0.1:1", t: tm, method: "GET", uri: "/a\"b", proto: "HTTP/1.1", status: 404, bytes: 5,
			referer: "x\\y", userAgent: "evil\" agent\n\x01é",
		}, `10.0.0.1 - - [10/Oct/2000:13:55:36 -0700] "GET /a\"b HTTP/1.1" 404 5 "x\\y" "evil\" agent\n\x01\xc3\xa9"` + "\n"},
		{"no port", logLine{remoteAddr: "pipe", t: tm.UTC(), method: "GET", uri: "/", proto: "HTTP/2.0", status: 200, bytes: 1},
			`pipe - - [10/Oct/2000:20:55:36 +0000] "GET / HTTP/2.0" 200 1 "-" "-"` + "\n"},
	} {
		if got := string(appendCombined(nil, &tc.ln)); got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, got, tc.want)
		}
	}
}

// syncBuffer is a bytes.Buffer safe for the flusher goroutine and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func testLine(i int) *logLine {
	return &logLine{remoteAddr: "1.2.3.4:5", t: time.Unix(int64(i), 0).UTC(), method: "GET", uri: "/x", proto: "HTTP/1.1", status: 200}
}

func TestAccessLogFlushOnClose(t *testing.T) {
	var out syncBuffer
	var dropped atomic.Int64
	l := newAccessLog(&out, 1<<20, time.Hour, func(n int) { dropped.Add(int64(n)) }, slog.New(slog.DiscardHandler))
	for i := range 100 {
		l.add(testLine(i))
	}
	l.Close()
	if n := strings.Count(out.String(), "\n"); n != 100 || dropped.Load() != 0 {
		t.Fatalf("after Close: %d lines written, %d dropped; want 100, 0", n, dropped.Load())
	}
	l.add(testLine(0))
	l.Close() // idempotent
	if dropped.Load() != 1 {
		t.Fatalf("line after Close: dropped %d, want 1", dropped.Load())
	}
}

// stuckWriter blocks every Write until released.
type stuckWriter struct {
	entered chan struct{}
	release chan struct{}
	out     syncBuffer
}

func (w *stuckWriter) Write(p []byte) (int, error) {
	select {
	case w.entered <- struct{}{}:
	default:
	}
	<-w.release
	return w.out.Write(p)
}

func TestAccessLogDropsWhenWriterStuck(t *testing.T) {
	w := &stuckWriter{entered: make(chan struct{}, 1), release: make(chan struct{})}
	var dropped atomic.Int64
	lineLen := len(appendCombined(nil, testLine(0)))
	l := newAccessLog(w, 10*lineLen, time.Hour, func(n int) { dropped.Add(int64(n)) }, slog.New(slog.DiscardHandler))
	// Fill half the buffer: that kicks the flusher, which gets stuck in Write.
	for i := range 5 {
		l.add(testLine(i))
	}
	<-w.entered
	// The flusher holds the first 5 lines; 10 fit in the buffer, the rest drop.
	done := make(chan struct{})
	go func() {
		for i := range 30 {
			l.add(testLine(i))
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("add blocked on a stuck writer")
	}
	if got := dropped.Load(); got != 20 {
		t.Fatalf("dropped %d lines, want 20", got)
	}
	close(w.release)
	l.Close()
	if n := strings.Count(w.out.String(), "\n"); n != 15 {
		t.Fatalf("wrote %d lines, want 15", n)
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk gone") }

func TestAccessLogWriteErrorCountsDrops(t *testing.T) {
	var dropped atomic.Int64
	l := newAccessLog(failWriter{}, 1<<20, time.Hour, func(n int) { dropped.Add(int64(n)) }, slog.New(slog.DiscardHandler))
	for i := range 3 {
		l.add(testLine(i))
	}
	l.Close()
	if dropped.Load() != 3 {
		t.Fatalf("dropped %d, want 3", dropped.Load())
	}
}
