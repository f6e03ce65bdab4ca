package clock

import (
	"context"
	"sync"
	"time"
)

// Or returns c, or Real when c is nil: a Config's zero value means the
// wall clock.
func Or(c Clock) Clock {
	if c == nil {
		return Real{}
	}
	return c
}

// Since is c.Now().Sub(t).
func Since(c Clock, t time.Time) time.Duration { return c.Now().Sub(t) }

// Timer is a one-shot channel timer on a Clock, like time.Timer: C
// receives the time once, d after NewTimer or Reset.
type Timer struct {
	C    <-chan time.Time
	c    chan time.Time
	clk  Clock
	mu   sync.Mutex
	stop func() bool
	real *time.Timer // Real clocks use the runtime's timer
}

// NewTimer returns a timer on c that fires after d.
func NewTimer(c Clock, d time.Duration) *Timer {
	if _, ok := c.(Real); ok || c == nil {
		rt := time.NewTimer(d)
		return &Timer{C: rt.C, real: rt}
	}
	ch := make(chan time.Time, 1)
	t := &Timer{C: ch, c: ch, clk: c}
	t.arm(d)
	return t
}

func (t *Timer) arm(d time.Duration) {
	t.stop = t.clk.AfterFunc(d, func() {
		select {
		case t.c <- t.clk.Now():
		default:
		}
	})
}

// Stop prevents the timer from firing; it reports whether it did so.
func (t *Timer) Stop() bool {
	if t.real != nil {
		return t.real.Stop()
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.stop()
}

// Reset makes the timer fire d from now (stopping it first), and drains a
// value not yet received, as time.Timer.Reset does since Go 1.23.
func (t *Timer) Reset(d time.Duration) {
	if t.real != nil {
		t.real.Reset(d)
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.stop()
	select {
	case <-t.c:
	default:
	}
	t.arm(d)
}

// After is NewTimer(c, d).C.
func After(c Clock, d time.Duration) <-chan time.Time { return NewTimer(c, d).C }

// Ticker delivers the time on C every period, dropping ticks a slow
// receiver misses, like time.Ticker.
type Ticker struct {
	C    <-chan time.Time
	c    chan time.Time
	clk  Clock
	d    time.Duration
	mu   sync.Mutex
	stop func() bool
	done bool
	real *time.Ticker
}

// NewTicker returns a ticker on c with period d (> 0).
func NewTicker(c Clock, d time.Duration) *Ticker {
	if _, ok := c.(Real); ok || c == nil {
		rt := time.NewTicker(d)
		return &Ticker{C: rt.C, real: rt}
	}
	ch := make(chan time.Time, 1)
	t := &Ticker{C: ch, c: ch, clk: c, d: d}
	t.mu.Lock()
	t.arm()
	t.mu.Unlock()
	return t
}

func (t *Ticker) arm() {
	t.stop = t.clk.AfterFunc(t.d, func() {
		select {
		case t.c <- t.clk.Now():
		default:
		}
		t.mu.Lock()
		defer t.mu.Unlock()
		if !t.done {
			t.arm()
		}
	})
}

// Stop turns the ticker off.
func (t *Ticker) Stop() {
	if t.real != nil {
		t.real.Stop()
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.done = true
	t.stop()
}

// WithTimeout is context.WithTimeout on c: the context ends d from c's
// now (Real: the runtime's deadline).
func WithTimeout(parent context.Context, c Clock, d time.Duration) (context.Context, context.CancelFunc) {
	if f, ok := c.(*Fake); ok {
		return f.WithTimeout(parent, d)
	}
	return context.WithTimeout(parent, d)
}

// FuncTimer runs a function after a delay on a Clock, like the
// *time.Timer of time.AfterFunc: Reset re-arms it, Stop cancels it.
type FuncTimer struct {
	clk  Clock
	f    func()
	mu   sync.Mutex
	stop func() bool
	real *time.Timer
}

// AfterFunc returns a FuncTimer on c that runs f (on its own goroutine,
// or the Fake's advancing one) after d.
func AfterFunc(c Clock, d time.Duration, f func()) *FuncTimer {
	if _, ok := c.(Real); ok || c == nil {
		return &FuncTimer{real: time.AfterFunc(d, f)}
	}
	t := &FuncTimer{clk: c, f: f}
	t.stop = c.AfterFunc(d, f)
	return t
}

// Stop prevents f from running if it has not started; it reports whether
// it did so.
func (t *FuncTimer) Stop() bool {
	if t.real != nil {
		return t.real.Stop()
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.stop()
}

// Reset makes f run d from now instead.
func (t *FuncTimer) Reset(d time.Duration) {
	if t.real != nil {
		t.real.Reset(d)
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.stop()
	t.stop = t.clk.AfterFunc(d, t.f)
}
