package replica

import (
	"context"
	"sync"
	"time"

	"github.com/cairn-fs/cairn/internal/clock"
)

// pacer spreads a pass's moves to at most blobs/s and bytes/s (0: no
// limit) since the pass began.
type pacer struct {
	clk                      clock.Clock
	blobsPerSec, bytesPerSec float64
	start                    time.Time
	mu                       sync.Mutex // guards blobs and bytes: parallel pulls share the pacer
	blobs, bytes             float64
}

func newPacer(clk clock.Clock, blobsPerSec, bytesPerSec float64) *pacer {
	return &pacer{clk: clk, blobsPerSec: blobsPerSec, bytesPerSec: bytesPerSec, start: clk.Now()}
}

// wait accounts for one blob of n bytes and sleeps until the rates allow it.
func (p *pacer) wait(ctx context.Context, n int) error {
	p.mu.Lock()
	p.blobs++
	p.bytes += float64(n)
	var due float64 // seconds since start
	if p.blobsPerSec > 0 {
		due = max(due, (p.blobs-1)/p.blobsPerSec)
	}
	if p.bytesPerSec > 0 {
		due = max(due, (p.bytes-float64(n))/p.bytesPerSec)
	}
	p.mu.Unlock()
	d := time.Duration(due*float64(time.Second)) - clock.Since(p.clk, p.start)
	if d <= 0 {
		return ctx.Err()
	}
	t := clock.NewTimer(p.clk, d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
