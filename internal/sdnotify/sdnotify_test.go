package sdnotify

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cairn-fs/cairn/internal/clock"
)

// listen makes a fake service manager: a unixgram socket named addr
// ("@..." for an abstract one) that NOTIFY_SOCKET points at.
func listen(t *testing.T, addr string) *net.UnixConn {
	t.Helper()
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: addr, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	t.Setenv("NOTIFY_SOCKET", addr)
	return c
}

// next reads the next message other than WATCHDOG=1 (counting those),
// failing the test after 10 s.
func next(t *testing.T, c *net.UnixConn, pings *int) string {
	t.Helper()
	buf := make([]byte, 4096)
	for {
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		n, err := c.Read(buf)
		if err != nil {
			t.Fatalf("no message from the notifier: %v", err)
		}
		if m := string(buf[:n]); m != "WATCHDOG=1" {
			return m
		} else if pings != nil {
			*pings++
		}
	}
}

// TestProtocol runs the real protocol against a fake manager on a socket
// file and on an abstract socket: pings before READY=1, READY=1 with the
// status after a successful check, pings after it, STOPPING=1 last.
func TestProtocol(t *testing.T) {
	dir, err := os.MkdirTemp("", "sdn") // short: a socket path has at most 107 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	for _, addr := range []string{dir + "/notify", fmt.Sprintf("@cairn-sdnotify-test-%d", os.Getpid())} {
		t.Run(addr[:1], func(t *testing.T) {
			c := listen(t, addr)
			t.Setenv("WATCHDOG_USEC", "40000") // 40 ms: a ping every 10 ms
			t.Setenv("WATCHDOG_PID", strconv.Itoa(os.Getpid()))
			n, err := New(Config{})
			if err != nil {
				t.Fatal(err)
			}
			if !n.Enabled() || n.cfg.Watchdog != 40*time.Millisecond {
				t.Fatalf("enabled %v, watchdog %v: want true, 40ms", n.Enabled(), n.cfg.Watchdog)
			}
			buf := make([]byte, 64)
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			if k, err := c.Read(buf); err != nil || string(buf[:k]) != "WATCHDOG=1" {
				t.Fatalf("before Ready: %q, %v; want an unconditional WATCHDOG=1", buf[:k], err)
			}
			var checks atomic.Int32
			alive := func(context.Context) error { checks.Add(1); return nil }
			if err := n.Ready(context.Background(), alive, "serving http://127.0.0.1:8080"); err != nil {
				t.Fatal(err)
			}
			if m := next(t, c, nil); m != "READY=1\nSTATUS=serving http://127.0.0.1:8080" {
				t.Fatalf("got %q, want READY=1 with the status", m)
			}
			// Pings go on after READY=1, each after a check.
			pings := 0
			for pings < 3 {
				c.SetReadDeadline(time.Now().Add(10 * time.Second))
				k, err := c.Read(buf)
				if err != nil || string(buf[:k]) != "WATCHDOG=1" {
					t.Fatalf("after Ready: %q, %v; want WATCHDOG=1", buf[:k], err)
				}
				pings++
			}
			if got := checks.Load(); got < 4 { // Ready's, then one per ping
				t.Fatalf("%d liveness checks for 3 pings after Ready", got)
			}
			n.Stopping("stopping")
			if m := next(t, c, nil); m != "STOPPING=1\nSTATUS=stopping" {
				t.Fatalf("got %q, want STOPPING=1", m)
			}
			// Nothing after STOPPING=1 (the pings stopped): wait ten ping
			// intervals.
			c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
			if k, err := c.Read(buf); err == nil {
				t.Fatalf("after Stopping: %q", buf[:k])
			}
		})
	}
}

func TestDisabledWithoutSocket(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "")
	n, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	if n.Enabled() {
		t.Fatal("enabled without NOTIFY_SOCKET")
	}
	called := false
	if err := n.Ready(context.Background(), func(context.Context) error { called = true; return errors.New("down") }, "x"); err != nil || called {
		t.Fatalf("disabled Ready: err %v, check called %v; want nil, false", err, called)
	}
	n.Status("x")
	n.Stopping("x")
}

func TestWatchdogFromEnv(t *testing.T) {
	me := strconv.Itoa(os.Getpid())
	for _, tc := range []struct {
		usec, pid string
		want      time.Duration
		err       bool
	}{
		{"", "", 0, false},
		{"30000000", "", 30 * time.Second, false},
		{"30000000", me, 30 * time.Second, false},
		{"30000000", "1", 0, false}, // another process's watchdog
		{"abc", "", 0, true},
		{"0", "", 0, true},
		{"30000000", "x", 0, true},
	} {
		t.Setenv("WATCHDOG_USEC", tc.usec)
		t.Setenv("WATCHDOG_PID", tc.pid)
		got, err := WatchdogFromEnv()
		if got != tc.want || (err != nil) != tc.err {
			t.Errorf("WATCHDOG_USEC=%q WATCHDOG_PID=%q: %v, %v; want %v, error %v", tc.usec, tc.pid, got, err, tc.want, tc.err)
		}
	}
	t.Setenv("NOTIFY_SOCKET", "@cairn-sdnotify-unused")
	t.Setenv("WATCHDOG_USEC", "abc")
	t.Setenv("WATCHDOG_PID", "")
	if _, err := New(Config{}); err == nil {
		t.Error("New with a malformed WATCHDOG_USEC: no error")
	}
}

// recorder is a Config.Send that keeps the messages.
type recorder struct {
	mu   sync.Mutex
	msgs []string
}

func (r *recorder) send(s string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, s)
	return nil
}

func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.msgs
	r.msgs = nil
	return m
}

// TestPingsOnlyWhenAlive drives the watchdog on a fake clock: once Ready,
// a tick whose check fails sends no ping, so systemd restarts a hung node.
func TestPingsOnlyWhenAlive(t *testing.T) {
	fake := clock.NewFake(time.Unix(1e9, 0))
	rec := &recorder{}
	n, err := New(Config{Send: rec.send, Watchdog: 4 * time.Second, Clock: fake})
	if err != nil {
		t.Fatal(err)
	}
	fake.RunDue()
	fake.Advance(time.Second)
	if got := rec.take(); !slices.Equal(got, []string{"WATCHDOG=1", "WATCHDOG=1"}) {
		t.Fatalf("before Ready: %q; want two unconditional pings", got)
	}
	var down atomic.Bool
	var checks atomic.Int32
	alive := func(ctx context.Context) error {
		checks.Add(1)
		if _, ok := ctx.Deadline(); !ok {
			return errors.New("a check without a deadline")
		}
		if down.Load() {
			return errors.New("hung")
		}
		return nil
	}
	if err := n.Ready(context.Background(), alive, "serving"); err != nil {
		t.Fatal(err)
	}
	fake.Advance(time.Second)
	if got := rec.take(); !slices.Equal(got, []string{"READY=1\nSTATUS=serving", "WATCHDOG=1"}) {
		t.Fatalf("after Ready: %q", got)
	}
	down.Store(true)
	before := checks.Load()
	fake.Advance(3 * time.Second)
	if got, c := rec.take(), checks.Load()-before; len(got) != 0 || c != 3 {
		t.Fatalf("node down for 3 ticks: sent %q after %d checks; want nothing after 3", got, c)
	}
	down.Store(false)
	fake.Advance(time.Second)
	if got := rec.take(); !slices.Equal(got, []string{"WATCHDOG=1"}) {
		t.Fatalf("node back: %q; want a ping", got)
	}
	n.Stopping("bye")
	n.Status("late")
	fake.Advance(10 * time.Second)
	if got := rec.take(); !slices.Equal(got, []string{"STOPPING=1\nSTATUS=bye"}) {
		t.Fatalf("after Stopping: %q; want STOPPING=1 alone", got)
	}
	if p := fake.Pending(); p != 0 {
		t.Fatalf("%d timers pending after Stopping", p)
	}
}

// TestReadyWaitsForAlive: READY=1 comes only after a check succeeds, and
// Ready gives up after ReadyTimeout (in a synctest bubble: fake time).
func TestReadyWaitsForAlive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		n, err := New(Config{Send: rec.send})
		if err != nil {
			t.Fatal(err)
		}
		fails := 3
		start := time.Now()
		err = n.Ready(context.Background(), func(context.Context) error {
			if fails > 0 {
				fails--
				return errors.New("connection refused")
			}
			return nil
		}, "up")
		if err != nil || time.Since(start) != 3*readyRetry {
			t.Fatalf("Ready: %v after %v; want nil after %v", err, time.Since(start), 3*readyRetry)
		}
		if got := rec.take(); !slices.Equal(got, []string{"READY=1\nSTATUS=up"}) {
			t.Fatalf("sent %q", got)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		n, err := New(Config{Send: rec.send, ReadyTimeout: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		err = n.Ready(context.Background(), func(context.Context) error { return errors.New("connection refused") }, "up")
		if !errors.Is(err, ErrNotAlive) || time.Since(start) < 2*time.Second || time.Since(start) > 3*time.Second {
			t.Fatalf("Ready with a node that never answers: %v after %v; want ErrNotAlive after 2 s", err, time.Since(start))
		}
		if got := rec.take(); len(got) != 0 {
			t.Fatalf("sent %q without a successful check", got)
		}
	})
}
