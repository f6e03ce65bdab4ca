package node

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/cairn-fs/cairn/internal/blob"
	"github.com/cairn-fs/cairn/internal/frontend/admin"
	"github.com/cairn-fs/cairn/internal/replica"
	"github.com/prometheus/client_golang/prometheus"
)

// nodeScrub connects the blob store's corruption findings to the rest of
// the node: a quarantined copy asks the repairer (cluster mode) for a pass,
// which pulls a good copy from a replica.
type nodeScrub struct {
	// repair is the cluster's repairer, set once it exists: the blob store
	// is opened (and may find corrupt copies) before the cluster is built.
	repair atomic.Pointer[replica.Repairer]
}

// corrupt is blob.Config.OnCorrupt: it asks for a repair pass. It never
// blocks.
func (s *nodeScrub) corrupt(blob.Hash) {
	if r := s.repair.Load(); r != nil {
		r.Trigger()
	}
}

// corruptHealth is the health verdict on corrupt copies: on a node
// without replicas, a quarantined copy is data this node can no longer
// serve, so health fails until the node restarts (the count is per
// process) and an operator has looked; in a cluster repair replaces it and
// the metrics tell.
func (n *Node) corruptHealth() error {
	if n.cl != nil {
		return nil
	}
	if c := n.blobs.Stats().CorruptCopies; c > 0 {
		return fmt.Errorf("%d corrupt blob copies found since start and quarantined; the files using them cannot be read (no replicas): see the error log and restore them", c)
	}
	return nil
}

// scrubView is the scrub's progress as the admin front end shows it.
func scrubView(st blob.ScrubStatus, corrupt int64) admin.Scrub {
	return admin.Scrub{Running: st.Running, PassStarted: st.PassStarted,
		LastCompleted: st.LastCompleted, NextPass: st.NextPass, RateBytes: st.Rate,
		BytesChecked: st.BytesChecked, BytesTotal: st.BytesTotal, NeedlesChecked: st.NeedlesChecked,
		CorruptFound: st.CorruptFound, Passes: st.Passes, CorruptCopies: corrupt}
}

// scrubCollector exports the scrub's progress and the corrupt copies
// found at scrape time.
type scrubCollector struct{ b *blob.Store }

var scrubDescs = struct {
	running, started, completed, rate, checked, total, needles, found, passes, corrupt, regions *prometheus.Desc
}{
	running:   prometheus.NewDesc("cairn_scrub_running", "1 while a scrub pass runs.", nil, nil),
	started:   prometheus.NewDesc("cairn_scrub_pass_start_timestamp_seconds", "Start of the scrub pass running or of the last one (Unix time; 0: none).", nil, nil),
	completed: prometheus.NewDesc("cairn_scrub_last_completed_timestamp_seconds", "End of the last complete scrub pass (Unix time; 0: none).", nil, nil),
	rate:      prometheus.NewDesc("cairn_scrub_rate_bytes_per_second", "Pace of the scrub pass running or of the last one.", nil, nil),
	checked:   prometheus.NewDesc("cairn_scrub_checked_bytes", "Bytes the scrub pass running (or the last one) has checked.", nil, nil),
	total:     prometheus.NewDesc("cairn_scrub_total_bytes", "Live bytes when the scrub pass running (or the last one) began.", nil, nil),
	needles:   prometheus.NewDesc("cairn_scrub_checked_needles", "Needles (blob copies) the scrub pass running (or the last one) has checked.", nil, nil),
	found:     prometheus.NewDesc("cairn_scrub_corrupt_found", "Corrupt copies the scrub pass running (or the last one) found.", nil, nil),
	passes:    prometheus.NewDesc("cairn_scrub_passes_total", "Scrub passes completed since the node started.", nil, nil),
	corrupt:   prometheus.NewDesc("cairn_blob_corrupt_copies_total", "Blob copies found corrupt (by reads or the scrub) and quarantined since the node started.", nil, nil),
	regions:   prometheus.NewDesc("cairn_blob_corrupt_regions", "Damaged regions inside volume files that the recovery scan at start skipped (their blobs are lost here).", nil, nil),
}

// Describe implements prometheus.Collector.
func (c scrubCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{scrubDescs.running, scrubDescs.started, scrubDescs.completed,
		scrubDescs.rate, scrubDescs.checked, scrubDescs.total, scrubDescs.needles, scrubDescs.found,
		scrubDescs.passes, scrubDescs.corrupt, scrubDescs.regions} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c scrubCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.b.ScrubStatus()
	g, ctr := prometheus.GaugeValue, prometheus.CounterValue
	unix := func(t time.Time) float64 {
		if t.IsZero() {
			return 0
		}
		return float64(t.UnixNano()) / 1e9
	}
	running := 0.0
	if st.Running {
		running = 1
	}
	ch <- prometheus.MustNewConstMetric(scrubDescs.running, g, running)
	ch <- prometheus.MustNewConstMetric(scrubDescs.started, g, unix(st.PassStarted))
	ch <- prometheus.MustNewConstMetric(scrubDescs.completed, g, unix(st.LastCompleted))
	ch <- prometheus.MustNewConstMetric(scrubDescs.rate, g, float64(st.Rate))
	ch <- prometheus.MustNewConstMetric(scrubDescs.checked, g, float64(st.BytesChecked))
	ch <- prometheus.MustNewConstMetric(scrubDescs.total, g, float64(st.BytesTotal))
	ch <- prometheus.MustNewConstMetric(scrubDescs.needles, g, float64(st.NeedlesChecked))
	ch <- prometheus.MustNewConstMetric(scrubDescs.found, g, float64(st.CorruptFound))
	ch <- prometheus.MustNewConstMetric(scrubDescs.passes, ctr, float64(st.Passes))
	bs := c.b.Stats()
	ch <- prometheus.MustNewConstMetric(scrubDescs.corrupt, ctr, float64(bs.CorruptCopies))
	ch <- prometheus.MustNewConstMetric(scrubDescs.regions, g, float64(bs.CorruptRegions))
}
