package admin

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// The metrics a Sampler reads (internal/frontend/httpapi/metrics.go).
const (
	RequestsMetric = "cairn_http_requests_total"           // counter, label code
	DurationMetric = "cairn_http_request_duration_seconds" // histogram, summed over its labels
)

// Snapshot is the cumulative request counts at one instant: what a Sampler
// reads from the metrics each Interval.
type Snapshot struct {
	Requests     uint64    // every request
	ServerErrors uint64    // answered 5xx
	ClientErrors uint64    // answered 4xx
	Bounds       []float64 // latency histogram upper bounds in seconds, ascending, without +Inf
	Cumulative   []uint64  // requests at most Bounds[i] long; same length as Bounds
	Observed     uint64    // requests in the histogram (the +Inf bucket)
}

// Point is one interval of the history. Rates are per second over the
// interval; the percentiles are nil when no request finished in it.
type Point struct {
	Time            time.Time `json:"t"`                 // end of the interval
	Seconds         float64   `json:"seconds"`           // its length
	Rate            float64   `json:"rate"`              // requests/s
	ErrorRate       float64   `json:"error_rate"`        // 5xx answers/s
	ClientErrorRate float64   `json:"client_error_rate"` // 4xx answers/s (not counted as errors)
	ErrorRatio      float64   `json:"error_ratio"`       // 5xx / all requests in the interval, 0..1
	P50             *float64  `json:"p50_seconds"`
	P99             *float64  `json:"p99_seconds"`
}

// History is the answer of GET /_cairn/history.
type History struct {
	IntervalSeconds float64 `json:"interval_seconds"`
	WindowSeconds   float64 `json:"window_seconds"`
	Points          []Point `json:"points"`          // oldest first
	Error           string  `json:"error,omitempty"` // the last read failed: why
}

// Between computes the point of the interval from prev to cur, dt long.
// A counter that went backwards (a reset) counts as no requests.
func Between(prev, cur Snapshot, dt time.Duration, end time.Time) Point {
	p := Point{Time: end, Seconds: dt.Seconds()}
	if dt <= 0 {
		return p
	}
	s := dt.Seconds()
	req := sub(cur.Requests, prev.Requests)
	p.Rate = float64(req) / s
	p.ErrorRate = float64(sub(cur.ServerErrors, prev.ServerErrors)) / s
	p.ClientErrorRate = float64(sub(cur.ClientErrors, prev.ClientErrors)) / s
	if req > 0 {
		p.ErrorRatio = math.Min(1, float64(sub(cur.ServerErrors, prev.ServerErrors))/float64(req))
	}
	if len(prev.Bounds) != len(cur.Bounds) || len(cur.Cumulative) != len(cur.Bounds) || len(prev.Cumulative) != len(prev.Bounds) {
		return p // the buckets changed: no percentiles for this interval
	}
	delta := make([]uint64, len(cur.Bounds))
	for i := range delta {
		delta[i] = sub(cur.Cumulative[i], prev.Cumulative[i])
	}
	total := sub(cur.Observed, prev.Observed)
	p.P50 = Quantile(0.5, cur.Bounds, delta, total)
	p.P99 = Quantile(0.99, cur.Bounds, delta, total)
	return p
}

func sub(a, b uint64) uint64 {
	if a < b {
		return 0
	}
	return a - b
}

// Quantile estimates the q-quantile (0 < q < 1) of a histogram given its
// upper bounds, cumulative counts per bound and total count (including
// the +Inf bucket), as Prometheus's histogram_quantile does: it finds the
// bucket holding rank q·total and interpolates linearly inside it (from 0
// for the first bucket). A rank in the +Inf bucket answers the highest
// finite bound. It returns nil when total is 0.
func Quantile(q float64, bounds []float64, cumulative []uint64, total uint64) *float64 {
	if total == 0 || len(bounds) == 0 || len(cumulative) != len(bounds) {
		return nil
	}
	rank := q * float64(total)
	i := sort.Search(len(bounds), func(i int) bool { return float64(cumulative[i]) >= rank })
	if i == len(bounds) {
		v := bounds[len(bounds)-1]
		return &v
	}
	lower, below := 0.0, 0.0
	if i > 0 {
		lower, below = bounds[i-1], float64(cumulative[i-1])
	}
	in := float64(cumulative[i]) - below
	v := bounds[i]
	if in > 0 {
		v = lower + (bounds[i]-lower)*(rank-below)/in
	}
	return &v
}

// ReadSnapshot gathers RequestsMetric and DurationMetric from g and sums
// them over their labels. The histograms of every label set must share
// their bounds.
func ReadSnapshot(g prometheus.Gatherer) (Snapshot, error) {
	fams, err := g.Gather()
	if err != nil {
		return Snapshot{}, fmt.Errorf("gather request metrics: %w", err)
	}
	var s Snapshot
	for _, f := range fams {
		switch f.GetName() {
		case RequestsMetric:
			for _, m := range f.GetMetric() {
				n := uint64(m.GetCounter().GetValue())
				s.Requests += n
				switch code := codeOf(m); {
				case code >= 500 && code <= 599:
					s.ServerErrors += n
				case code >= 400 && code <= 499:
					s.ClientErrors += n
				}
			}
		case DurationMetric:
			for _, m := range f.GetMetric() {
				if err := s.addHistogram(m.GetHistogram()); err != nil {
					return Snapshot{}, err
				}
			}
		}
	}
	return s, nil
}

func codeOf(m *dto.Metric) int {
	for _, l := range m.GetLabel() {
		if l.GetName() == "code" {
			c, _ := strconv.Atoi(l.GetValue())
			return c
		}
	}
	return 0
}

func (s *Snapshot) addHistogram(h *dto.Histogram) error {
	if h == nil {
		return nil
	}
	bs := h.GetBucket()
	var bounds []float64
	var cum []uint64
	for _, b := range bs {
		if math.IsInf(b.GetUpperBound(), 1) {
			continue
		}
		bounds = append(bounds, b.GetUpperBound())
		cum = append(cum, b.GetCumulativeCount())
	}
	if s.Bounds == nil {
		s.Bounds, s.Cumulative = bounds, cum
	} else {
		if len(bounds) != len(s.Bounds) {
			return errors.New("admin: request histograms have different buckets")
		}
		for i := range bounds {
			if bounds[i] != s.Bounds[i] {
				return errors.New("admin: request histograms have different buckets")
			}
			s.Cumulative[i] += cum[i]
		}
	}
	s.Observed += h.GetSampleCount()
	return nil
}

// SamplerConfig configures a Sampler.
type SamplerConfig struct {
	// Read returns the current cumulative counts; required. ReadSnapshot
	// over the node's request metrics, or a fake in tests.
	Read func() (Snapshot, error)
	// Interval between samples; default 5s.
	Interval time.Duration
	// Window of history kept; default 15m (180 points at 5 s).
	Window time.Duration
	// Clock; default the real one (time.Now, time.AfterFunc).
	Clock Clock
}

// Clock is the time seam of the Sampler: internal/clock's Real and Fake
// satisfy it (a front end does not import internal/clock, test/deps).
type Clock interface {
	Now() time.Time
	// AfterFunc runs f once after d; stop cancels it.
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

// realClock is the wall clock.
type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) AfterFunc(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop }

// DefaultSamplerConfig returns the defaults (Read still to set).
func DefaultSamplerConfig() SamplerConfig {
	return SamplerConfig{Interval: 5 * time.Second, Window: 15 * time.Minute, Clock: realClock{}}
}

// Validate reports a config NewSampler refuses.
func (c SamplerConfig) Validate() error {
	if c.Read == nil {
		return errors.New("admin: SamplerConfig.Read is required")
	}
	if c.Interval < 0 || c.Window < 0 || (c.Interval > 0 && c.Window > 0 && c.Window < c.Interval) {
		return errors.New("admin: the sampler's window must be at least one interval")
	}
	return nil
}

// Sampler keeps the request history of the last Window: every Interval it
// reads a Snapshot and stores the Point since the previous one in a ring.
// Its methods are safe for concurrent use.
type Sampler struct {
	cfg    SamplerConfig
	mu     sync.Mutex
	prev   Snapshot
	prevAt time.Time
	have   bool
	points []Point // circular, len ≤ cap
	next   int
	stop   func() bool
	closed bool
	err    error // of the last read: shown in History, not logged every 5 s
}

// NewSampler makes a sampler; Start begins sampling.
func NewSampler(cfg SamplerConfig) (*Sampler, error) {
	d := DefaultSamplerConfig()
	if cfg.Interval == 0 {
		cfg.Interval = d.Interval
	}
	if cfg.Window == 0 {
		cfg.Window = d.Window
	}
	if cfg.Clock == nil {
		cfg.Clock = d.Clock
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	n := int(cfg.Window / cfg.Interval)
	return &Sampler{cfg: cfg, points: make([]Point, 0, n)}, nil
}

// Start takes the first snapshot now and schedules the next each
// Interval on the clock, until Stop. It does not block.
func (s *Sampler) Start() { s.tick() }

// tick takes a snapshot and schedules the next one, unless stopped.
func (s *Sampler) tick() {
	s.Sample()
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.stop = s.cfg.Clock.AfterFunc(s.cfg.Interval, s.tick)
	}
}

// Stop ends sampling; the history stays readable.
func (s *Sampler) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.stop != nil {
		s.stop()
	}
}

// Sample reads a snapshot now and adds the point since the previous one
// (the first call only records the baseline). A failed read is kept for
// Err and skipped: the next point then covers the longer interval.
func (s *Sampler) Sample() {
	snap, err := s.cfg.Read()
	now := s.cfg.Clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.err = err
	if err != nil {
		return
	}
	if s.have {
		s.add(Between(s.prev, snap, now.Sub(s.prevAt), now))
	}
	s.prev, s.prevAt, s.have = snap, now, true
}

func (s *Sampler) add(p Point) {
	if len(s.points) < cap(s.points) {
		s.points = append(s.points, p)
		return
	}
	s.points[s.next] = p
	s.next = (s.next + 1) % len(s.points)
}

// History returns the points kept, oldest first (a copy).
func (s *Sampler) History() History {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := History{IntervalSeconds: s.cfg.Interval.Seconds(), WindowSeconds: s.cfg.Window.Seconds(),
		Points: make([]Point, 0, len(s.points))}
	h.Points = append(h.Points, s.points[s.next:]...)
	h.Points = append(h.Points, s.points[:s.next]...)
	if s.err != nil {
		h.Error = s.err.Error()
	}
	return h
}

// Err returns the error of the last read, or nil.
func (s *Sampler) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}
