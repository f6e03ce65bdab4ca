package node

// The admin page and its data endpoints (docs/admin-ui.md):
//
//	GET /_cairn/ui        the embedded page (no key: it holds no data)
//	GET /_cairn/history   this node's request rate, error rate and latency
//	                      percentiles over the last 15 minutes (admin key)
//	GET /_cairn/logs      this node's last warnings and errors (admin key)
//	GET /_cairn/usage     files and bytes per bucket (admin key; usage.go)

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/cairn-fs/cairn/internal/access"
	"github.com/cairn-fs/cairn/internal/frontend/admin"
	"github.com/cairn-fs/cairn/internal/frontend/httpapi"
	"github.com/prometheus/client_golang/prometheus"
)

const (
	historyPath = "/_cairn/history"
	logsPath    = "/_cairn/logs"
)

// nodeUI is the node's part of the admin page: the log ring its logger
// writes through and the sampler of its request metrics.
type nodeUI struct {
	logs    *admin.LogRing
	sampler *admin.Sampler
}

// captureLogs wraps l so that its warnings and errors, from every package
// the node passes it to, are kept for GET /_cairn/logs.
func (u *nodeUI) captureLogs(l *slog.Logger) *slog.Logger {
	u.logs = admin.NewLogRing(l.Handler(), admin.DefaultLogRecords)
	return slog.New(u.logs)
}

// logsJSON is the answer of GET /_cairn/logs.
type logsJSON struct {
	Records []admin.LogRecord `json:"records"` // oldest first
	Time    time.Time         `json:"time"`
}

// uiHandlers adds the page and its data endpoints to the extra handlers,
// and starts the sampler of the request metrics m (stopped by stopUI).
func (n *Node) uiHandlers(hs map[string]http.Handler, auth *access.Authorizer, m *httpapi.Metrics) (map[string]http.Handler, error) {
	reg := prometheus.NewRegistry()
	for _, c := range m.RequestCollectors() {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	s, err := admin.NewSampler(admin.SamplerConfig{Read: func() (admin.Snapshot, error) { return admin.ReadSnapshot(reg) }})
	if err != nil {
		return nil, err
	}
	n.ui.sampler = s
	s.Start()
	h := &adminHandler{n: n, auth: auth, log: n.cfg.Logger}
	page := admin.UIHandler()
	hs[admin.UIPath] = page
	hs[admin.UIPath+"/"] = page
	hs[historyPath] = h.adminOnly(func(w http.ResponseWriter, r *http.Request) {
		h.writeJSON(w, r, http.StatusOK, s.History())
	})
	hs[logsPath] = h.adminOnly(func(w http.ResponseWriter, r *http.Request) {
		recs := []admin.LogRecord{}
		if n.ui.logs != nil {
			recs = n.ui.logs.Records()
		}
		h.writeJSON(w, r, http.StatusOK, logsJSON{Records: recs, Time: time.Now().UTC()})
	})
	hs[usagePath] = h.adminOnly(n.serveUsage(h)) // usage.go
	return hs, nil
}

// adminOnly serves GET and HEAD with f for callers holding the admin key.
func (h *adminHandler) adminOnly(f http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := h.auth.Authenticate(r.Header.Get("Authorization"))
		if err == nil {
			err = h.auth.Authorize(p, access.ActionAdmin, access.Resource{})
		}
		if err != nil {
			h.fail(w, r, err)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			h.notAllowed(w, r, "GET, HEAD")
			return
		}
		f(w, r)
	})
}

// stopUI stops the sampler. Safe when uiHandlers never ran.
func (n *Node) stopUI() {
	if n.ui.sampler != nil {
		n.ui.sampler.Stop()
	}
}
