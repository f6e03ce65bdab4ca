package blob

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/cairn-fs/cairn/internal/clock"
	"github.com/cairn-fs/cairn/internal/volume"
)

// scrubEnv is a corruptEnv whose scrub runs on a fake clock, reporting
// each wait on sleeps.
func scrubEnv(t *testing.T, rate int64, period time.Duration) (*corruptEnv, *clock.Fake, chan time.Duration) {
	fake := clock.NewFake(time.Unix(1e9, 0))
	sleeps := make(chan time.Duration, 1024)
	e := newCorruptEnv(t, false, func(c *Config) {
		c.Clock, c.ScrubRate, c.ScrubPeriod = fake, rate, period
		c.scrubSleeping = func(d time.Duration) { sleeps <- d }
	})
	return e, fake, sleeps
}

// TestScrubPacedByRate runs a pass over 40 blobs at 8000 bytes/s on a
// fake clock: it checks exactly the bytes the rate allows at each wait,
// takes total/rate, and quarantines the two copies flipped on disk — one
// that no read had checked, one that a read had already verified — when
// it reaches them, leaving the others readable.
func TestScrubPacedByRate(t *testing.T) {
	const rate, n, size = 8000, 40, 1000
	e, fake, sleeps := scrubEnv(t, rate, -1)
	s := e.open()
	defer s.Close()
	var hs []Hash
	for i := range n {
		d, h := blobN(i, size)
		if err := s.Put(h, d); err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h)
	}
	if _, err := s.ReadAt(hs[25], make([]byte, 10), 0); err != nil { // verified now
		t.Fatal(err)
	}
	flipData(t, s, hs[10], 500)
	flipData(t, s, hs[25], 500)
	needle := volume.NeedleSize(size)
	waitSleep(t, sleeps) // the start delay
	st, started := s.StartScrub()
	if !started || !st.Running || st.Rate != rate || st.BytesTotal != n*needle {
		t.Fatalf("StartScrub: %v %+v", started, st)
	}
	if _, again := s.StartScrub(); again {
		t.Fatal("a second pass started while one runs")
	}
	t0 := fake.Now()
	foundAt := map[int64]int64{} // corrupt count → bytes checked when first seen
	for {
		d := waitSleep(t, sleeps)
		st := s.ScrubStatus()
		if !st.Running {
			break
		}
		// The pass sleeps once it is scrubSlack or more ahead of its rate:
		// then it has checked exactly rate × (elapsed + d).
		elapsed := fake.Now().Sub(t0)
		if want := rate * (elapsed + d).Seconds(); math.Abs(float64(st.BytesChecked)-want) > 1 || d < scrubSlack {
			t.Fatalf("at %v, sleeping %v: %d bytes checked, want %.0f", elapsed, d, st.BytesChecked, want)
		}
		if _, ok := foundAt[st.CorruptFound]; !ok {
			foundAt[st.CorruptFound] = st.BytesChecked
		}
		fake.Advance(d)
	}
	st = s.ScrubStatus()
	took := fake.Now().Sub(t0)
	if want := time.Duration(float64(n*needle) / rate * float64(time.Second)); took < want-scrubSlack || took > want {
		t.Fatalf("pass took %v, want about %v", took, want)
	}
	if st.NeedlesChecked != n || st.BytesChecked != n*needle || st.CorruptFound != 2 || st.Passes != 1 || !st.LastCompleted.Equal(fake.Now()) {
		t.Fatalf("after the pass: %+v", st)
	}
	// Each was found once the pass had read past it, and not before.
	if b, ok := foundAt[1]; !ok || b < 11*needle || b > 26*needle {
		t.Fatalf("first corrupt copy seen at %d bytes (want %d..%d): %v", b, 11*needle, 26*needle, foundAt)
	}
	if got := e.corruptSeen(); !slices.Equal(got, []Hash{hs[10], hs[25]}) {
		t.Fatalf("OnCorrupt calls: %v", got)
	}
	for i, h := range hs {
		if got := s.Has(h); got != (i != 10 && i != 25) {
			t.Fatalf("blob %d: Has = %v", i, got)
		}
	}
	if st := s.ScrubStatus(); !st.NextPass.IsZero() {
		t.Fatalf("NextPass %v with no background passes", st.NextPass)
	}
}

// TestScrubResumesAfterRestart closes the store halfway through a
// background pass: the reopened store goes on from the saved cursor after
// the start delay, so the pass checks every needle once, and the next
// pass is due a period after this one began.
func TestScrubResumesAfterRestart(t *testing.T) {
	const rate, n, size, period = 8000, 40, 1000, time.Hour
	e, fake, sleeps := scrubEnv(t, rate, period)
	s := e.open()
	for i := range n {
		d, h := blobN(i, size)
		if err := s.Put(h, d); err != nil {
			t.Fatal(err)
		}
	}
	needle := volume.NeedleSize(size)
	if st := s.ScrubStatus(); !st.NextPass.Equal(fake.Now().Add(scrubStartDelay)) {
		t.Fatalf("NextPass %v before any pass, want the start delay after Open", st.NextPass)
	}
	if d := waitSleep(t, sleeps); d != scrubStartDelay {
		t.Fatalf("first wait %v, want the start delay", d)
	}
	fake.Advance(scrubStartDelay) // the first pass begins by itself
	start := fake.Now()
	for s.ScrubStatus().BytesChecked < n*needle/2 {
		fake.Advance(waitSleep(t, sleeps))
	}
	waitSleep(t, sleeps)
	half := s.ScrubStatus()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = e.open()
	defer s.Close()
	st := s.ScrubStatus()
	if !st.Running || !st.PassStarted.Equal(start) || st.BytesChecked != half.BytesChecked || st.NeedlesChecked != half.NeedlesChecked {
		t.Fatalf("reopened: %+v, saved at close: %+v", st, half)
	}
	fake.Advance(waitSleep(t, sleeps)) // the start delay
	for {
		d := waitSleep(t, sleeps)
		if !s.ScrubStatus().Running { // waiting for the next pass
			if d <= 0 {
				t.Fatalf("after the pass: waiting %v", d)
			}
			break
		}
		fake.Advance(d)
	}
	st = s.ScrubStatus()
	if st.NeedlesChecked != n || st.BytesChecked != n*needle || st.CorruptFound != 0 || st.Passes != 1 {
		t.Fatalf("resumed pass: %+v", st)
	}
	if !st.NextPass.Equal(start.Add(period)) {
		t.Fatalf("NextPass %v, want %v", st.NextPass, start.Add(period))
	}
}

// TestScrubDerivedRate: without ScrubRate, a pass runs at the live bytes
// over the period, but no slower than MinScrubRate.
func TestScrubDerivedRate(t *testing.T) {
	for _, tc := range []struct {
		rate   int64
		period time.Duration
		want   func(live int64) int64
	}{
		{0, DefaultScrubPeriod, func(int64) int64 { return MinScrubRate }},
		{0, time.Millisecond, func(live int64) int64 { return live * 1000 }},
		{0, -1, func(int64) int64 { return MinScrubRate }}, // no background passes: the default period
		{12345, time.Millisecond, func(int64) int64 { return 12345 }},
	} {
		e, _, _ := scrubEnv(t, tc.rate, tc.period)
		s := e.open()
		for i := range 40 {
			d, h := blobN(i, 1000)
			if err := s.Put(h, d); err != nil {
				t.Fatal(err)
			}
		}
		live := s.Stats().LiveBytes
		st, _ := s.StartScrub()
		if st.Rate != tc.want(live) {
			t.Errorf("rate %d, period %v: pass at %d bytes/s, want %d", tc.rate, tc.period, st.Rate, tc.want(live))
		}
		s.Close()
	}
}
