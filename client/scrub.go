package client

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

// ScrubStatus is the progress of one node's blob scrub, which re-reads and
// checks every blob copy the node holds (GET and POST /_cairn/scrub). It
// mirrors the server's JSON. The counts are those of the pass running, or
// of the last one when none runs.
type ScrubStatus struct {
	// Running reports that a pass is in progress.
	Running bool `json:"running"`
	// Started reports that this call (StartScrub) started the pass.
	Started bool `json:"started"`
	// PassStarted is when the pass running (or the last one) began; zero
	// if none has.
	PassStarted time.Time `json:"pass_started,omitzero"`
	// LastCompleted is when the last complete pass ended; zero if none has.
	LastCompleted time.Time `json:"last_completed,omitzero"`
	// NextPass is when the next background pass is due; zero while one
	// runs or when background passes are off.
	NextPass time.Time `json:"next_pass,omitzero"`
	// RateBytesPerSec is the pass's pace in bytes per second.
	RateBytesPerSec int64 `json:"rate_bytes_per_sec"`
	// BytesChecked of BytesTotal (the node's live bytes when the pass
	// began; a pass may check a little more) and NeedlesChecked (blob
	// copies) measure the progress.
	BytesChecked   int64 `json:"bytes_checked"`
	BytesTotal     int64 `json:"bytes_total"`
	NeedlesChecked int64 `json:"needles_checked"`
	// CorruptFound is the copies the pass found corrupt and quarantined.
	CorruptFound int64 `json:"corrupt_found"`
	// Passes is the passes completed since the node started.
	Passes int64 `json:"passes"`
	// CorruptCopies is every copy the node found corrupt and quarantined
	// since it started, by reads and by the scrub.
	CorruptCopies int64 `json:"corrupt_copies"`
}

// Fraction returns the share of BytesTotal checked, between 0 and 1 (1
// when there is nothing to check).
func (s ScrubStatus) Fraction() float64 {
	if s.BytesTotal <= 0 {
		return 1
	}
	return min(float64(s.BytesChecked)/float64(s.BytesTotal), 1)
}

// Scrub returns the scrub progress of the node the client talks to
// (admin).
func (c *Client) Scrub(ctx context.Context) (ScrubStatus, error) {
	var out ScrubStatus
	if err := c.doJSON(ctx, request{method: http.MethodGet, url: c.base + "/_cairn/scrub"}, &out); err != nil {
		return ScrubStatus{}, fmt.Errorf("scrub status: %w", err)
	}
	return out, nil
}

// StartScrub starts a scrub pass on the node the client talks to, unless
// one runs already (Started is false then), and returns its progress
// (admin). The pass runs in the background at the node's scrub rate
// (--scrub-rate); poll Scrub to follow it.
func (c *Client) StartScrub(ctx context.Context) (ScrubStatus, error) {
	var out ScrubStatus
	if err := c.doJSON(ctx, request{method: http.MethodPost, url: c.base + "/_cairn/scrub"}, &out); err != nil {
		return ScrubStatus{}, fmt.Errorf("start scrub: %w", err)
	}
	return out, nil
}
