package admin

// The mounts' counters for the admin page's Mounts section
// (docs/http-api.md, "Mounts"): GET /_cairn/mounts.

import (
	"net/http"
	"sort"

	"github.com/cairn-fs/cairn/internal/frontend/fuse"
)

// mountOpJSON is one opcode's counts in GET /_cairn/mounts.
type mountOpJSON struct {
	Op           string  `json:"op"`
	Calls        uint64  `json:"calls"`
	Errors       uint64  `json:"errors"`
	MeanMicros   float64 `json:"mean_us"`
	Seconds      float64 `json:"seconds"`       // total time in the node
	P99UpToMicro float64 `json:"p99_le_us"`     // the latency bucket holding the 99th percentile (upper bound; -1: above the last)
	ShareOfTime  float64 `json:"share_of_time"` // of the mount's total time in calls
}

// mountJSON is one mount in GET /_cairn/mounts.
type mountJSON struct {
	Bucket        string        `json:"bucket"`
	Prefix        string        `json:"prefix"`
	Dir           string        `json:"dir"`
	Calls         uint64        `json:"calls"`
	Ops           []mountOpJSON `json:"ops"` // most time first
	QueueItems    int           `json:"queue_items"`
	QueueBytes    int64         `json:"queue_bytes"`
	QueueOldestMs float64       `json:"queue_oldest_ms"`
	Published     uint64        `json:"published"`
	PublishErrors uint64        `json:"publish_errors"`
	ZeroCopyBytes uint64        `json:"zero_copy_bytes"`
}

// mountsView is GET /_cairn/mounts: every mount of this node.
func mountsView(stats []fuse.Stats) []mountJSON {
	out := make([]mountJSON, 0, len(stats))
	for _, st := range stats {
		m := mountJSON{Bucket: st.Bucket, Prefix: st.Prefix, Dir: st.Dir, Ops: []mountOpJSON{},
			QueueItems: st.QueueItems, QueueBytes: st.QueueBytes, QueueOldestMs: float64(st.QueueOldest.Microseconds()) / 1e3,
			Published: st.Published, PublishErrors: st.PublishErrors, ZeroCopyBytes: st.ZeroCopyBytes}
		var total float64
		for _, o := range st.Ops {
			total += o.Seconds
			m.Calls += o.Calls
		}
		for _, o := range st.Ops {
			j := mountOpJSON{Op: o.Op.String(), Calls: o.Calls, Errors: o.Errors, Seconds: o.Seconds,
				MeanMicros: o.Seconds / float64(o.Calls) * 1e6, P99UpToMicro: -1}
			if total > 0 {
				j.ShareOfTime = o.Seconds / total
			}
			for i, b := range fuse.LatencyBounds {
				if float64(o.Buckets[i]) >= 0.99*float64(o.Calls) {
					j.P99UpToMicro = b * 1e6
					break
				}
			}
			m.Ops = append(m.Ops, j)
		}
		sort.SliceStable(m.Ops, func(a, b int) bool { return m.Ops[a].Seconds > m.Ops[b].Seconds })
		out = append(out, m)
	}
	return out
}

// serveMounts answers GET /_cairn/mounts (authorized by ServeHTTP).
func (h *Handler) serveMounts(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		h.writeJSON(w, r, http.StatusOK, map[string]any{"mounts": mountsView(h.local.Mounts())})
	default:
		h.notAllowed(w, r, "GET, HEAD")
	}
}
