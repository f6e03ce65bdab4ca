package admin

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

func TestLogRingLevelsBoundOrder(t *testing.T) {
	var out bytes.Buffer
	inner := slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelError})
	ring := NewLogRing(inner, 3)
	log := slog.New(ring)

	log.Info("lifecycle")
	log.Debug("per request")
	log.Warn("w1", "node", 7)
	if got := ring.Records(); len(got) != 1 || got[0].Message != "w1" || got[0].Level != "WARN" ||
		len(got[0].Attrs) != 1 || got[0].Attrs[0] != (LogAttr{"node", "7"}) {
		t.Fatalf("records: %+v", got)
	}
	// The inner handler's level still applies to what it writes: a warning
	// is kept but not written at --log-level error.
	if out.Len() != 0 {
		t.Errorf("inner handler wrote %q", out.String())
	}
	log.With("peer", "n2").WithGroup("req").Error("e1", "status", 503)
	if !strings.Contains(out.String(), "e1") {
		t.Errorf("the error did not reach the inner handler: %q", out.String())
	}
	for i := range 3 {
		log.Warn(fmt.Sprintf("w%d", i+2))
	}
	got := ring.Records()
	var msgs []string
	for _, r := range got {
		msgs = append(msgs, r.Message)
	}
	if strings.Join(msgs, ",") != "w2,w3,w4" {
		t.Errorf("bound or order: %v", msgs)
	}
	if got[0].Seq != 3 || got[2].Seq != 5 {
		t.Errorf("sequence numbers: %d, %d", got[0].Seq, got[2].Seq)
	}
}

func TestLogRingAttrsAndGroups(t *testing.T) {
	ring := NewLogRing(slog.DiscardHandler, 0)
	slog.New(ring).With("peer", "n2").WithGroup("req").Error("e1", "status", 503, slog.Group("g", "k", "v"))
	got := ring.Records()
	if len(got) != 1 || got[0].Level != "ERROR" {
		t.Fatalf("records: %+v", got)
	}
	want := []LogAttr{{"peer", "n2"}, {"req.status", "503"}, {"req.g.k", "v"}}
	if fmt.Sprint(got[0].Attrs) != fmt.Sprint(want) {
		t.Errorf("attrs %v, want %v", got[0].Attrs, want)
	}
	if !ring.Enabled(t.Context(), slog.LevelWarn) || ring.Enabled(t.Context(), slog.LevelInfo) {
		t.Error("Enabled: warn must be, info must not be with a discarding inner handler")
	}
}

// TestLogRingBursts: the same warning many times in a row takes one place
// (with a count), so it cannot push out the record that caused it.
func TestLogRingBursts(t *testing.T) {
	ring := NewLogRing(slog.DiscardHandler, 3)
	log := slog.New(ring)
	log.Error("disk failed", "dev", "sda")
	for i := range 500 {
		log.Warn("request failed", "n", i)
	}
	got := ring.Records()
	if len(got) != 2 || got[0].Message != "disk failed" || got[0].Count != 1 {
		t.Fatalf("records: %+v", got)
	}
	if got[1].Count != 500 || got[1].Attrs[0].Value != "499" || got[1].First.After(got[1].Time) || got[1].Seq != 501 {
		t.Errorf("burst: %+v", got[1])
	}
}
