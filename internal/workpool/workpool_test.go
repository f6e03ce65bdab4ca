package workpool

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
)

// Every function sent runs, never more than jobs at once; a feed's error
// comes back, and none once ctx ended.
func TestRun(t *testing.T) {
	var ran, running, most atomic.Int64
	err := Run(context.Background(), 3, func(work chan<- func()) error {
		for range 100 {
			if err := Send(context.Background(), work, func() {
				n := running.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				ran.Add(1)
				running.Add(-1)
			}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil || ran.Load() != 100 || most.Load() > 3 {
		t.Fatalf("err %v, ran %d, at most %d at once", err, ran.Load(), most.Load())
	}
	boom := errors.New("boom")
	if err := Run(context.Background(), 2, func(chan<- func()) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("feed's error: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Run(ctx, 2, func(work chan<- func()) error { return Send(ctx, work, func() {}) }); err != nil {
		t.Fatalf("after ctx ended: %v", err)
	}
}
