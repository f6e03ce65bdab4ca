package node

import (
	"context"
	"time"

	"github.com/cairn-fs/cairn/internal/store"
	"github.com/prometheus/client_golang/prometheus"
)

// trashCollector exports each bucket's trash (docs/design/0007-undo.md)
// at scrape time: one series per bucket that has a trash (a retention, or
// entries left after it was turned off). It reads the per-bucket counts
// the namespace keeps, one key per bucket, so a scrape costs a listing of
// the buckets and no walk of the trash. The values come from the
// namespace: every node exports the same.
type trashCollector struct{ st trashCounts }

// trashCounts is what trashCollector reads of the store.
type trashCounts interface {
	Buckets(ctx context.Context) ([]store.BucketInfo, error)
	TrashUsage(ctx context.Context, bucket string) (entries, bytes int64, err error)
}

// trashScrapeTimeout bounds the reads of one scrape.
const trashScrapeTimeout = 2 * time.Second

var trashDescs = struct{ entries, bytes *prometheus.Desc }{
	entries: prometheus.NewDesc("cairn_trash_entries",
		"Files a bucket's trash holds (deleted or overwritten, kept for its retention); the same on every node.", []string{"bucket"}, nil),
	bytes: prometheus.NewDesc("cairn_trash_bytes",
		"Bytes of the files a bucket's trash holds (each once, not its copies): freed only when they expire or the trash is emptied.", []string{"bucket"}, nil),
}

// Describe implements prometheus.Collector.
func (c trashCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- trashDescs.entries
	ch <- trashDescs.bytes
}

// Collect implements prometheus.Collector. A read that fails leaves its
// bucket (or every bucket) out of the scrape.
func (c trashCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), trashScrapeTimeout)
	defer cancel()
	bs, err := c.st.Buckets(ctx)
	if err != nil {
		return
	}
	for _, b := range bs {
		n, by, err := c.st.TrashUsage(ctx, b.Name)
		if err != nil || (b.TrashSeconds <= 0 && n == 0) {
			continue
		}
		ch <- prometheus.MustNewConstMetric(trashDescs.entries, prometheus.GaugeValue, float64(n), b.Name)
		ch <- prometheus.MustNewConstMetric(trashDescs.bytes, prometheus.GaugeValue, float64(by), b.Name)
	}
}
