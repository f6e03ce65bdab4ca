package workpool

import (
	"context"
	"sync"
)

// Run runs the functions feed sends on work, at most jobs (at least one)
// at a time, and returns feed's error once all have returned: none when
// ctx ended (the caller reports that).
func Run(ctx context.Context, jobs int, feed func(work chan<- func()) error) error {
	work := make(chan func())
	var wg sync.WaitGroup
	for range max(jobs, 1) {
		wg.Go(func() {
			for f := range work {
				f()
			}
		})
	}
	err := feed(work)
	close(work)
	wg.Wait()
	if err != nil && ctx.Err() != nil {
		return nil
	}
	return err
}

// Send hands f to the workers, unless ctx ends first.
func Send(ctx context.Context, work chan<- func(), f func()) error {
	select {
	case work <- f:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
