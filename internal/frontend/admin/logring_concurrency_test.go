package admin

import (
	"fmt"
	"log/slog"
	"sync"
	"testing"
)

// TestLogRingConcurrentDerived: handlers derived with WithAttrs and
// WithGroup log at once (run it with -race); every record is counted.
func TestLogRingConcurrentDerived(t *testing.T) {
	r := NewLogRing(slog.DiscardHandler, 50)
	base := slog.New(r).With("node", 1)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := base.WithGroup(fmt.Sprintf("g%d", i)).With("a", i)
			for j := range 200 {
				l.Warn(fmt.Sprintf("m%d", j%2), "j", j, slog.Group("", "inl", 1), slog.Group("grp", "x", 2), slog.Group("empty"))
				_ = r.Records()
			}
		}()
	}
	wg.Wait()
	recs := r.Records()
	total := 0
	for _, r := range recs {
		total += r.Count
	}
	if len(recs) == 0 || recs[len(recs)-1].Seq != 1600 || (len(recs) < 50 && total != 1600) {
		t.Fatalf("%d records, %d counted, last seq %d", len(recs), total, recs[len(recs)-1].Seq)
	}
}
