package clock

import (
	"container/heap"
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Clock tells the time and runs functions later.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// AfterFunc runs f once, on its own goroutine (Real) or on the
	// goroutine that advances the clock (Fake), after d. The returned stop
	// function prevents the call if it has not started and reports whether
	// it did so.
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

// Real is the wall clock.
type Real struct{}

// Now returns time.Now().
func (Real) Now() time.Time { return time.Now() }

// AfterFunc is time.AfterFunc.
func (Real) AfterFunc(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop }

// Fake is a manually advanced clock. Time moves only in Advance; the
// timers that come due fire in order of due time, then of creation, on the
// goroutine calling Advance (or RunDue), one at a time, with no lock held,
// so a timer's function may schedule more timers or read the clock. A
// function that blocks holds up the clock. Safe for concurrent use.
type Fake struct {
	mu     sync.Mutex
	now    time.Time
	seq    uint64
	timers timerHeap

	created, fired atomic.Int64
}

// NewFake returns a Fake showing start.
func NewFake(start time.Time) *Fake { return &Fake{now: start} }

// Now returns the fake time.
func (c *Fake) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// AfterFunc schedules f at Now()+d (d <= 0: due now, run by the next
// Advance or RunDue).
func (c *Fake) AfterFunc(d time.Duration, f func()) func() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	t := &timer{due: c.now.Add(max(d, 0)), seq: c.seq, f: f}
	heap.Push(&c.timers, t)
	c.created.Add(1)
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		if t.idx < 0 {
			return false
		}
		heap.Remove(&c.timers, t.idx)
		return true
	}
}

// WithTimeout is context.WithTimeout in fake time: the context is cancelled
// when the clock passes Now()+d (or by cancel).
func (c *Fake) WithTimeout(parent context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(parent)
	stop := c.AfterFunc(d, cancel)
	return ctx, func() { stop(); cancel() }
}

// Advance moves the clock forward by d, firing every timer that comes due
// (including ones scheduled by the functions it runs) at its due time.
func (c *Fake) Advance(d time.Duration) {
	c.mu.Lock()
	end := c.now.Add(d)
	c.mu.Unlock()
	for c.fireNext(end) {
	}
	c.mu.Lock()
	if end.After(c.now) {
		c.now = end
	}
	c.mu.Unlock()
}

// RunDue fires the timers due at the current time and returns how many.
func (c *Fake) RunDue() int {
	n := 0
	for c.fireNext(c.Now()) {
		n++
	}
	return n
}

// fireNext fires the earliest timer due at or before limit, moving the
// clock to its due time; false if there is none.
func (c *Fake) fireNext(limit time.Time) bool {
	c.mu.Lock()
	if len(c.timers) == 0 || c.timers[0].due.After(limit) {
		c.mu.Unlock()
		return false
	}
	t := heap.Pop(&c.timers).(*timer)
	if t.due.After(c.now) {
		c.now = t.due
	}
	c.mu.Unlock()
	c.fired.Add(1)
	t.f()
	return true
}

// Pending returns the number of timers not yet fired or stopped.
func (c *Fake) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// Activity returns the number of timers ever created plus the number
// fired: a value that changes whenever anything uses the clock, for
// harnesses that wait until the system is quiet.
func (c *Fake) Activity() int64 { return c.created.Load() + c.fired.Load() }

type timer struct {
	due time.Time
	seq uint64
	f   func()
	idx int // in the heap; -1 once popped or removed
}

type timerHeap []*timer

func (h timerHeap) Len() int { return len(h) }
func (h timerHeap) Less(i, j int) bool {
	if !h[i].due.Equal(h[j].due) {
		return h[i].due.Before(h[j].due)
	}
	return h[i].seq < h[j].seq
}
func (h timerHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx, h[j].idx = i, j
}
func (h *timerHeap) Push(x any) {
	t := x.(*timer)
	t.idx = len(*h)
	*h = append(*h, t)
}
func (h *timerHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	t.idx = -1
	return t
}
