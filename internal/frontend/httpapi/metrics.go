package httpapi

import (
	"fmt"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// NodeStats is a snapshot of the node's storage, exported as gauges at every
// scrape of /_cairn/metrics through Config.StatsFunc.
type NodeStats struct {
	Blobs         int64  // blobs held on this node
	Volumes       int64  // volume files on this node
	DiskUsedBytes uint64 // bytes used on the data file system
	DiskFreeBytes uint64 // bytes free on the data file system
	Fsyncs        uint64 // fsync calls since start (a counter)
	LiveBytes     int64  // bytes of live (referenced) blob data on this node
	IndexBytes    int64  // bytes of RAM the blob store's index takes
}

// Methods tracked with their own label value; others count as "OTHER".
var methodNames = [...]string{"GET", "HEAD", "PUT", "POST", "DELETE", "PATCH", "OPTIONS", "OTHER"}

func methodIndex(m string) int {
	switch m {
	case http.MethodGet:
		return 0
	case http.MethodHead:
		return 1
	case http.MethodPut:
		return 2
	case http.MethodPost:
		return 3
	case http.MethodDelete:
		return 4
	case http.MethodPatch:
		return 5
	case http.MethodOptions:
		return 6
	}
	return 7
}

// Metrics holds the HTTP front end's Prometheus metrics, and the fsync
// latency histogram the store observes. Create it with NewMetrics before the
// store when the store needs ObserveFsync, and pass it in Config.Metrics;
// otherwise New creates one on Config.Registry. All methods are safe for
// concurrent use and never block.
//
// Exported series (all prefixed cairn_):
//
//	http_requests_total{method,code}        counter
//	http_request_duration_seconds{method}   histogram, until the handler returns
//	http_request_bytes_total                counter, request body bytes read
//	http_response_bytes_total               counter, response body bytes written
//	http_access_log_dropped_total           counter, access log lines dropped
//	fsync_duration_seconds                  histogram, fed by ObserveFsync
//	node_* gauges                           from Config.StatsFunc, at scrape time
type Metrics struct {
	all        requestSet // registered: every request
	data       requestSet // not registered: requests outside NodePrefix, for RequestCollectors
	bytesIn    prometheus.Counter
	bytesOut   prometheus.Counter
	logDropped prometheus.Counter
	fsync      prometheus.Histogram
}

// requestSet is cairn_http_requests_total and
// cairn_http_request_duration_seconds of one set of requests.
type requestSet struct {
	requests  *prometheus.CounterVec
	duration  *prometheus.HistogramVec
	durations [len(methodNames)]prometheus.Observer

	// counters caches requests' children by method and status-100, so that
	// the request path does not hash label values.
	counters [len(methodNames)][500]atomic.Pointer[counterRef]
}

type counterRef struct{ c prometheus.Counter }

func (r *requestSet) init() {
	r.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "cairn_http_requests_total",
		Help: "HTTP requests served, by method and status code.",
	}, []string{"method", "code"})
	r.duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "cairn_http_request_duration_seconds",
		Help:    "Time from request start until the handler returned, by method.",
		Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
	}, []string{"method"})
	for i, name := range methodNames {
		r.durations[i] = r.duration.WithLabelValues(name)
	}
}

func (r *requestSet) observe(mi, status int, d time.Duration) {
	r.counter(mi, status).Inc()
	r.durations[mi].Observe(d.Seconds())
}

func (r *requestSet) counter(mi, status int) prometheus.Counter {
	if status < 100 || status > 599 {
		return r.requests.WithLabelValues(methodNames[mi], strconv.Itoa(status))
	}
	slot := &r.counters[mi][status-100]
	if ref := slot.Load(); ref != nil {
		return ref.c
	}
	// Racing creators get the same child from the vec; either store is fine.
	ref := &counterRef{c: r.requests.WithLabelValues(methodNames[mi], strconv.Itoa(status))}
	slot.Store(ref)
	return ref.c
}

// NewMetrics creates the metrics and registers them on reg. It fails if
// any is already registered there.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		bytesIn: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cairn_http_request_bytes_total",
			Help: "Request body bytes read.",
		}),
		bytesOut: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cairn_http_response_bytes_total",
			Help: "Response body bytes written.",
		}),
		logDropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cairn_http_access_log_dropped_total",
			Help: "Access log lines dropped because the log writer fell behind or failed.",
		}),
		fsync: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "cairn_fsync_duration_seconds",
			Help:    "Latency of fsync calls on the data disk.",
			Buckets: []float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}),
	}
	m.all.init()
	m.data.init()
	for _, c := range []prometheus.Collector{m.all.requests, m.bytesIn, m.bytesOut, m.logDropped, m.fsync, m.all.duration} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("httpapi: register metrics: %w", err)
		}
	}
	return m, nil
}

// RequestCollectors returns collectors named and labelled as
// cairn_http_requests_total and cairn_http_request_duration_seconds but
// counting only the requests outside NodePrefix (no admin calls, health
// checks, metric scrapes or node-to-node RPC), for the node's in-process
// history (internal/admin) to gather on a registry of its own: the
// traffic an operator wants to see on the admin page, not the page's own.
func (m *Metrics) RequestCollectors() []prometheus.Collector {
	return []prometheus.Collector{m.data.requests, m.data.duration}
}

// ObserveFsync records the latency of one fsync. For the store to call.
func (m *Metrics) ObserveFsync(d time.Duration) { m.fsync.Observe(d.Seconds()) }

// observeRequest records one finished request; node marks a request for
// a path under NodePrefix.
func (m *Metrics) observeRequest(method string, status int, in, out int64, d time.Duration, node bool) {
	mi := methodIndex(method)
	m.all.observe(mi, status, d)
	if !node {
		m.data.observe(mi, status, d)
	}
	if in > 0 {
		m.bytesIn.Add(float64(in))
	}
	if out > 0 {
		m.bytesOut.Add(float64(out))
	}
}

// statsCollector exports NodeStats at scrape time.
type statsCollector struct {
	fn    func() NodeStats
	descs [7]*prometheus.Desc
}

func newStatsCollector(fn func() NodeStats) *statsCollector {
	d := func(name, help string) *prometheus.Desc { return prometheus.NewDesc(name, help, nil, nil) }
	return &statsCollector{fn: fn, descs: [7]*prometheus.Desc{
		d("cairn_node_blobs", "Blobs held on this node."),
		d("cairn_node_volumes", "Volume files on this node."),
		d("cairn_node_disk_used_bytes", "Bytes used on the data file system."),
		d("cairn_node_disk_free_bytes", "Bytes free on the data file system."),
		d("cairn_node_fsyncs_total", "fsync calls since the node started."),
		d("cairn_node_live_bytes", "Bytes of live blob data on this node."),
		d("cairn_node_blob_index_bytes", "Bytes of RAM the blob store's in-memory index takes (it grows with the blobs held)."),
	}}
}

// Describe implements prometheus.Collector.
func (c *statsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

// Collect implements prometheus.Collector; it calls the stats function once.
func (c *statsCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.fn()
	g := prometheus.GaugeValue
	ch <- prometheus.MustNewConstMetric(c.descs[0], g, float64(st.Blobs))
	ch <- prometheus.MustNewConstMetric(c.descs[1], g, float64(st.Volumes))
	ch <- prometheus.MustNewConstMetric(c.descs[2], g, float64(st.DiskUsedBytes))
	ch <- prometheus.MustNewConstMetric(c.descs[3], g, float64(st.DiskFreeBytes))
	ch <- prometheus.MustNewConstMetric(c.descs[4], prometheus.CounterValue, float64(st.Fsyncs))
	ch <- prometheus.MustNewConstMetric(c.descs[5], g, float64(st.LiveBytes))
	ch <- prometheus.MustNewConstMetric(c.descs[6], g, float64(st.IndexBytes))
}
