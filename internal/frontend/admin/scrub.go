package admin

// The blob scrub (docs/http-api.md, "Scrub"):
//
//	GET  /_cairn/scrub   the scrub's progress (this node)
//	POST /_cairn/scrub   start a pass now (202; 200 if one is running)

import (
	"net/http"
	"time"
)

// Scrub is the answer of GET and POST /_cairn/scrub, and the scrub in a
// node's status report. Times are RFC 3339, omitted when zero.
type Scrub struct {
	Running        bool      `json:"running"`
	Started        bool      `json:"started"` // POST: this call started the pass
	PassStarted    time.Time `json:"pass_started,omitzero"`
	LastCompleted  time.Time `json:"last_completed,omitzero"`
	NextPass       time.Time `json:"next_pass,omitzero"`
	RateBytes      int64     `json:"rate_bytes_per_sec"`
	BytesChecked   int64     `json:"bytes_checked"`
	BytesTotal     int64     `json:"bytes_total"`
	NeedlesChecked int64     `json:"needles_checked"`
	CorruptFound   int64     `json:"corrupt_found"`
	Passes         int64     `json:"passes"`
	CorruptCopies  int64     `json:"corrupt_copies"` // quarantined since the node started, by reads and the scrub
}

// serveScrub serves /_cairn/scrub (authorized by ServeHTTP).
func (h *Handler) serveScrub(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		h.writeJSON(w, r, http.StatusOK, h.local.Scrub())
	case http.MethodPost:
		st, started := h.local.StartScrub()
		st.Started = started
		status := http.StatusOK
		if started {
			status = http.StatusAccepted
			h.log.Info("scrub pass started on request", "remote", r.RemoteAddr)
		}
		h.writeJSON(w, r, status, st)
	default:
		h.notAllowed(w, r, "GET, HEAD, POST")
	}
}
