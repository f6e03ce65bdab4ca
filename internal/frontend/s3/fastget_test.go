package s3

import (
	"math/rand/v2"
	"net/http"
	"testing"
	"time"
)

// TestAppendHTTPDate: the same bytes as AppendFormat(http.TimeFormat) in
// UTC, for times across years, zones and the edges of the format.
func TestAppendHTTPDate(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	zone := time.FixedZone("X", -5*3600-30*60)
	times := []time.Time{time.Unix(0, 0), time.Date(9999, 12, 31, 23, 59, 59, 999, time.UTC),
		time.Date(999, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 11, 27, 0, 0, 0, 0, zone)}
	for range 100000 {
		times = append(times, time.Unix(rng.Int64N(400<<30)-(100<<30), rng.Int64N(1e9)).In(zone))
	}
	for _, tm := range times {
		if got, want := string(appendHTTPDate(nil, tm)), tm.UTC().Format(http.TimeFormat); got != want {
			t.Fatalf("%v: %q, want %q", tm, got, want)
		}
	}
}
