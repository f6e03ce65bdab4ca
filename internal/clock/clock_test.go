package clock

import (
	"context"
	"slices"
	"testing"
	"time"
)

func TestFakeOrderAndStop(t *testing.T) {
	t0 := time.Unix(0, 0)
	c := NewFake(t0)
	var got []string
	var at []time.Duration
	rec := func(s string) func() {
		return func() { got = append(got, s); at = append(at, c.Now().Sub(t0)) }
	}
	c.AfterFunc(30*time.Millisecond, rec("c"))
	c.AfterFunc(10*time.Millisecond, rec("a"))
	c.AfterFunc(10*time.Millisecond, func() {
		rec("b")()
		c.AfterFunc(5*time.Millisecond, rec("b2")) // scheduled from a timer, due within the advance
	})
	stop := c.AfterFunc(20*time.Millisecond, rec("stopped"))
	if !stop() || stop() {
		t.Fatal("stop: want true then false")
	}
	c.Advance(25 * time.Millisecond)
	if want := []string{"a", "b", "b2"}; !slices.Equal(got, want) {
		t.Fatalf("fired %v, want %v", got, want)
	}
	if want := []time.Duration{10 * time.Millisecond, 10 * time.Millisecond, 15 * time.Millisecond}; !slices.Equal(at, want) {
		t.Fatalf("fired at %v, want %v", at, want)
	}
	if c.Now().Sub(t0) != 25*time.Millisecond || c.Pending() != 1 {
		t.Fatalf("now %v pending %d", c.Now().Sub(t0), c.Pending())
	}
	c.AfterFunc(0, rec("now"))
	if n := c.RunDue(); n != 1 || got[len(got)-1] != "now" {
		t.Fatalf("RunDue ran %d, got %v", n, got)
	}
}

func TestFakeWithTimeout(t *testing.T) {
	c := NewFake(time.Unix(0, 0))
	ctx, cancel := c.WithTimeout(context.Background(), time.Second)
	defer cancel()
	c.Advance(999 * time.Millisecond)
	if ctx.Err() != nil {
		t.Fatal("cancelled early")
	}
	c.Advance(time.Millisecond)
	if ctx.Err() == nil {
		t.Fatal("not cancelled at the deadline")
	}
}

func TestTimerTickerOnFake(t *testing.T) {
	c := NewFake(time.Unix(0, 0))
	tm := NewTimer(c, time.Second)
	tk := NewTicker(c, 300*time.Millisecond)
	c.Advance(999 * time.Millisecond)
	select {
	case <-tm.C:
		t.Fatal("timer fired early")
	default:
	}
	if got := len(tk.C); got != 1 { // three ticks due, a slow receiver keeps one
		t.Fatalf("ticker holds %d ticks, want 1", got)
	}
	<-tk.C
	c.Advance(time.Millisecond)
	select {
	case at := <-tm.C:
		if !at.Equal(time.Unix(1, 0)) {
			t.Fatalf("timer fired at %v", at)
		}
	default:
		t.Fatal("timer did not fire at its due time")
	}
	tm.Reset(time.Second)
	if !tm.Stop() {
		t.Fatal("Stop of a pending timer reported false")
	}
	tk.Stop()
	c.Advance(5 * time.Second)
	if len(tm.C) != 0 || len(tk.C) != 0 {
		t.Fatal("stopped timer or ticker fired")
	}
	if c.Pending() != 0 {
		t.Fatalf("%d timers left pending after Stop", c.Pending())
	}
	if Since(c, time.Unix(0, 0)) != 6*time.Second {
		t.Fatalf("Since = %v", Since(c, time.Unix(0, 0)))
	}
}
