package sdnotify

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"

	"github.com/cairn-fs/cairn/internal/clock"
)

// Config configures a Notifier.
type Config struct {
	// Send delivers one message. Default: go-systemd's daemon.SdNotify
	// when NOTIFY_SOCKET is set; without it the Notifier is disabled:
	// it sends nothing and Ready returns at once.
	Send func(state string) error
	// Watchdog is the unit's WatchdogSec: the longest systemd waits for a
	// WATCHDOG=1 before it kills the service. 0: no watchdog. Default
	// (when Send is nil too): WatchdogFromEnv.
	Watchdog time.Duration
	// ReadyTimeout bounds how long Ready waits for the first successful
	// liveness check. Default 60 s.
	ReadyTimeout time.Duration
	// Clock schedules the pings and Ready's retries. Default clock.Real.
	Clock clock.Clock
	// Logger. Default slog.Default().
	Logger *slog.Logger
}

// DefaultReadyTimeout is Config.ReadyTimeout's default.
const DefaultReadyTimeout = 60 * time.Second

// readyRetry is the pause between Ready's liveness checks.
const readyRetry = 100 * time.Millisecond

// ErrNotAlive is returned by Ready when the liveness check never
// succeeded within Config.ReadyTimeout.
var ErrNotAlive = errors.New("sdnotify: the node did not answer its own liveness check")

// WatchdogFromEnv returns the watchdog interval systemd set for this
// process (WATCHDOG_USEC, when WATCHDOG_PID is unset or names this
// process), or 0 when there is none. A malformed value is an error.
func WatchdogFromEnv() (time.Duration, error) {
	d, err := daemon.SdWatchdogEnabled(false)
	if err != nil {
		return 0, fmt.Errorf("sdnotify: %w", err)
	}
	return d, nil
}

// Notifier sends a service's state to systemd. Its methods are safe for
// concurrent use and never block on the service manager for long (a
// datagram send on a local socket).
type Notifier struct {
	cfg      Config
	disabled bool // no service manager to tell

	mu      sync.Mutex
	alive   func(context.Context) error // nil until Ready: unconditional pings
	stopped bool
	stop    func() bool // cancels the next ping
}

// New returns a Notifier. With a watchdog, pings start at once
// (unconditional until Ready). Without Config.Send and NOTIFY_SOCKET, the
// Notifier is disabled (Enabled reports false) and every method does
// nothing.
func New(cfg Config) (*Notifier, error) {
	if cfg.Send == nil {
		if os.Getenv("NOTIFY_SOCKET") == "" {
			return &Notifier{cfg: cfg, disabled: true, stopped: true}, nil
		}
		cfg.Send = func(state string) error { _, err := daemon.SdNotify(false, state); return err }
		if cfg.Watchdog == 0 {
			d, err := WatchdogFromEnv()
			if err != nil {
				return nil, err
			}
			cfg.Watchdog = d
		}
	}
	if cfg.Watchdog < 0 {
		return nil, fmt.Errorf("sdnotify: negative watchdog interval %v", cfg.Watchdog)
	}
	if cfg.ReadyTimeout <= 0 {
		cfg.ReadyTimeout = DefaultReadyTimeout
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	n := &Notifier{cfg: cfg}
	if cfg.Watchdog > 0 {
		n.mu.Lock()
		n.stop = cfg.Clock.AfterFunc(0, n.tick)
		n.mu.Unlock()
	}
	return n, nil
}

// Enabled reports whether the Notifier talks to a service manager.
func (n *Notifier) Enabled() bool { return !n.disabled }

// pingEvery is the time between two pings: a quarter of the watchdog
// interval, so that a check taking its whole timeout (the same quarter)
// still leaves a ping every half interval, as sd_watchdog_enabled(3)
// recommends.
func (n *Notifier) pingEvery() time.Duration { return max(n.cfg.Watchdog/4, time.Millisecond) }

// tick sends one ping (after a successful check once Ready has been
// called) and schedules the next.
func (n *Notifier) tick() {
	n.mu.Lock()
	alive, stopped := n.alive, n.stopped
	n.mu.Unlock()
	if stopped {
		return
	}
	ping := true
	if alive != nil {
		ctx, cancel := context.WithTimeout(context.Background(), n.pingEvery())
		err := alive(ctx)
		cancel()
		if err != nil {
			ping = false
			n.cfg.Logger.Warn("watchdog: the node does not answer its liveness check; no ping to systemd, which restarts the node when none came for WatchdogSec",
				"err", err, "watchdog", n.cfg.Watchdog)
		}
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.stopped { // Stopping ran during the check: STOPPING=1 is the last message
		return
	}
	if ping {
		n.send("WATCHDOG=1")
	}
	n.stop = n.cfg.Clock.AfterFunc(n.pingEvery(), n.tick)
}

// send delivers state, logging a failure (there is nothing else to do
// with it: systemd then times the service out, which says why).
func (n *Notifier) send(state string) {
	if err := n.cfg.Send(state); err != nil {
		n.cfg.Logger.Warn("cannot notify systemd", "state", state, "err", err)
	}
}

// Ready waits until alive succeeds (checking every 100 ms, each check
// bounded by a quarter of the watchdog interval or 5 s, for at most
// Config.ReadyTimeout or until ctx ends), then sends READY=1 with status
// and makes the watchdog's pings conditional on alive. It returns
// ErrNotAlive (wrapping the last check's error) if alive never succeeded.
// A disabled Notifier (outside systemd) returns nil at once.
func (n *Notifier) Ready(ctx context.Context, alive func(context.Context) error, status string) error {
	if n.disabled {
		return nil
	}
	timeout := 5 * time.Second
	if n.cfg.Watchdog > 0 {
		timeout = n.pingEvery()
	}
	start := n.cfg.Clock.Now()
	var err error
	for {
		cctx, cancel := context.WithTimeout(ctx, timeout)
		err = alive(cctx)
		cancel()
		if err == nil {
			break
		}
		if ctx.Err() != nil || n.cfg.Clock.Now().Sub(start) >= n.cfg.ReadyTimeout {
			return fmt.Errorf("%w within %v: %w", ErrNotAlive, n.cfg.ReadyTimeout, err)
		}
		if err := n.wait(ctx, readyRetry); err != nil {
			return fmt.Errorf("%w: %w", ErrNotAlive, err)
		}
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.stopped {
		return nil
	}
	n.alive = alive
	n.send("READY=1\nSTATUS=" + status)
	return nil
}

// wait sleeps d on the Notifier's clock, or until ctx ends.
func (n *Notifier) wait(ctx context.Context, d time.Duration) error {
	done := make(chan struct{})
	stop := n.cfg.Clock.AfterFunc(d, func() { close(done) })
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		stop()
		return ctx.Err()
	}
}

// Status sends a STATUS= line (shown by systemctl status).
func (n *Notifier) Status(status string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.stopped {
		n.send("STATUS=" + status)
	}
}

// Stopping sends STOPPING=1 with status and stops the pings; later calls
// send nothing. Call it when the shutdown begins.
func (n *Notifier) Stopping(status string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.stopped {
		return
	}
	n.stopped = true
	if n.stop != nil {
		n.stop()
	}
	n.send("STOPPING=1\nSTATUS=" + status)
}
