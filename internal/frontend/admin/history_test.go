package admin

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/cairn-fs/cairn/internal/clock"
	"github.com/prometheus/client_golang/prometheus"
)

func f(v float64) *float64 { return &v }

func TestQuantile(t *testing.T) {
	bounds := []float64{0.001, 0.01, 0.1, 1}
	for _, tc := range []struct {
		name  string
		q     float64
		cum   []uint64
		total uint64
		want  *float64
	}{
		{"empty", 0.5, []uint64{0, 0, 0, 0}, 0, nil},
		// 100 requests all in (0.001, 0.01]: p50 halfway through that bucket.
		{"one bucket", 0.5, []uint64{0, 100, 100, 100}, 100, f(0.001 + 0.009*0.5)},
		// first bucket interpolates from 0
		{"first bucket", 0.5, []uint64{10, 10, 10, 10}, 10, f(0.0005)},
		// 90 fast, 10 in (0.1, 1]: p99 is 90% into the last bucket
		{"p99 tail", 0.99, []uint64{90, 90, 90, 100}, 100, f(0.1 + 0.9*0.9)},
		// rank in +Inf: the highest finite bound
		{"overflow", 0.99, []uint64{0, 0, 0, 50}, 100, f(1)},
	} {
		got := Quantile(tc.q, bounds, tc.cum, tc.total)
		switch {
		case tc.want == nil && got != nil:
			t.Errorf("%s: got %v, want nil", tc.name, *got)
		case tc.want != nil && (got == nil || math.Abs(*got-*tc.want) > 1e-12):
			t.Errorf("%s: got %v, want %v", tc.name, got, *tc.want)
		}
	}
}

func TestBetween(t *testing.T) {
	bounds := []float64{0.01, 0.1, 1}
	prev := Snapshot{Requests: 1000, ServerErrors: 10, ClientErrors: 50, Bounds: bounds, Cumulative: []uint64{900, 990, 1000}, Observed: 1000}
	// 50 new requests in 5 s: 5 answered 5xx, 10 answered 4xx; 40 in
	// (0, 0.01], 10 in (0.1, 1].
	cur := Snapshot{Requests: 1050, ServerErrors: 15, ClientErrors: 60, Bounds: bounds, Cumulative: []uint64{940, 1030, 1050}, Observed: 1050}
	end := time.Unix(1000, 0)
	p := Between(prev, cur, 5*time.Second, end)
	if p.Rate != 10 || p.ErrorRate != 1 || p.ClientErrorRate != 2 || p.ErrorRatio != 0.1 || p.Seconds != 5 || !p.Time.Equal(end) {
		t.Fatalf("rates: %+v", p)
	}
	// p50: rank 25 of 50, in the first bucket (40): 0.01*25/40.
	if p.P50 == nil || math.Abs(*p.P50-0.01*25/40) > 1e-12 {
		t.Errorf("p50 = %v", p.P50)
	}
	// p99: rank 49.5, in (0.1, 1] holding 40..50: 0.1 + 0.9*(9.5/10).
	if p.P99 == nil || math.Abs(*p.P99-(0.1+0.9*0.95)) > 1e-12 {
		t.Errorf("p99 = %v", p.P99)
	}
	// No requests: zero rates, no percentiles.
	q := Between(cur, cur, 5*time.Second, end)
	if q.Rate != 0 || q.P50 != nil || q.P99 != nil || q.ErrorRatio != 0 {
		t.Errorf("idle interval: %+v", q)
	}
	// A counter that went backwards counts as nothing, not as a huge number.
	r := Between(cur, prev, 5*time.Second, end)
	if r.Rate != 0 || r.ErrorRate != 0 || r.P50 != nil {
		t.Errorf("reset: %+v", r)
	}
}

func TestReadSnapshot(t *testing.T) {
	reg := prometheus.NewRegistry()
	reqs := prometheus.NewCounterVec(prometheus.CounterOpts{Name: RequestsMetric, Help: "h"}, []string{"method", "code"})
	dur := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: DurationMetric, Help: "h", Buckets: []float64{0.01, 0.1}}, []string{"method"})
	reg.MustRegister(reqs, dur)
	reqs.WithLabelValues("GET", "200").Add(7)
	reqs.WithLabelValues("PUT", "503").Add(2)
	reqs.WithLabelValues("GET", "404").Add(3)
	dur.WithLabelValues("GET").Observe(0.005)
	dur.WithLabelValues("PUT").Observe(0.05)
	dur.WithLabelValues("PUT").Observe(5)
	s, err := ReadSnapshot(reg)
	if err != nil {
		t.Fatal(err)
	}
	if s.Requests != 12 || s.ServerErrors != 2 || s.ClientErrors != 3 {
		t.Errorf("counts: %+v", s)
	}
	if len(s.Bounds) != 2 || s.Cumulative[0] != 1 || s.Cumulative[1] != 2 || s.Observed != 3 {
		t.Errorf("histogram summed over methods: %+v", s)
	}
}

func TestSamplerRing(t *testing.T) {
	clk := clock.NewFake(time.Unix(0, 0))
	var n uint64
	fail := false
	s, err := NewSampler(SamplerConfig{Clock: clk, Interval: 5 * time.Second, Window: 20 * time.Second,
		Read: func() (Snapshot, error) {
			if fail {
				return Snapshot{}, errors.New("boom")
			}
			n += 10
			return Snapshot{Requests: n}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	if h := s.History(); len(h.Points) != 0 || h.IntervalSeconds != 5 || h.WindowSeconds != 20 {
		t.Fatalf("after the baseline: %+v", h)
	}
	for range 6 {
		clk.Advance(5 * time.Second)
	}
	h := s.History()
	if len(h.Points) != 4 { // the window holds 4 intervals
		t.Fatalf("kept %d points, want 4", len(h.Points))
	}
	for i, p := range h.Points {
		if p.Rate != 2 {
			t.Errorf("point %d: rate %v, want 2", i, p.Rate)
		}
		if want := time.Unix(int64(15+5*i), 0); !p.Time.Equal(want) {
			t.Errorf("point %d at %v, want %v (oldest first)", i, p.Time, want)
		}
	}
	// A failed read is reported and skipped; the next point spans both intervals.
	fail = true
	clk.Advance(5 * time.Second)
	if h := s.History(); h.Error == "" {
		t.Error("a failed read is not reported")
	}
	fail = false
	clk.Advance(5 * time.Second)
	h = s.History()
	last := h.Points[len(h.Points)-1]
	if h.Error != "" || last.Seconds != 10 || last.Rate != 1 {
		t.Errorf("after a failed read: %+v, last %+v", h.Error, last)
	}
	s.Stop()
	if clk.Pending() != 0 {
		t.Errorf("Stop left %d timers", clk.Pending())
	}
}
