package admin

import (
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/cairn-fs/cairn/internal/access"
	"github.com/prometheus/client_golang/prometheus"
)

// The admin API's paths (docs/http-api.md) and the page's data endpoints
// (docs/admin-ui.md); the page itself is at UIPath.
const (
	NodesPath   = "/_cairn/nodes"   // cluster members (nodes.go)
	StatusPath  = "/_cairn/status"  // the status view (status.go)
	ScrubPath   = "/_cairn/scrub"   // the blob scrub (scrub.go)
	MountsPath  = "/_cairn/mounts"  // the mounts' counters (mounts.go)
	KeysPath    = "/_cairn/keys"    // access keys (keys.go)
	RulesPath   = "/_cairn/rules"   // abuse rules (keys.go)
	HistoryPath = "/_cairn/history" // request rate, errors and latency of the last 15 minutes
	LogsPath    = "/_cairn/logs"    // the last warnings and errors
	UsagePath   = "/_cairn/usage"   // files and bytes per bucket (usage.go)
	// TrashPath (trash.go) is the buckets' trash: list, restore, empty.
)

// adminTimeout bounds one membership change (Raft configuration change plus
// the cluster-map command). The work is not tied to the request: a client
// that hangs up does not leave a half-done removal behind.
const adminTimeout = 30 * time.Second

// Config configures the admin front end.
type Config struct {
	// Auth checks the admin key of every call but the page's; required.
	Auth *access.Authorizer
	// Store is the namespace (usage, keys, rules, locks, the trash);
	// required.
	Store Store
	// Local is this node's own state (status report, scrub, mounts);
	// required.
	Local Local
	// Cluster is the cluster this node is a member of; nil for a node
	// that runs alone (/_cairn/nodes answers 501 NotACluster).
	Cluster Cluster
	// URL is this node's public URL: a lone node's row in the status view.
	URL string
	// Logs is the ring the node's logger writes through, shown by GET
	// /_cairn/logs; nil shows no record.
	Logs *LogRing
	// Requests gathers the request metrics the history is computed from
	// (RequestsMetric, DurationMetric); nil: an empty registry.
	Requests prometheus.Gatherer
	// Sampler configures the history; its Read is set from Requests, its
	// other zero fields take DefaultSamplerConfig's.
	Sampler SamplerConfig
	// Logger; default slog.Default().
	Logger *slog.Logger
}

// DefaultConfig returns the defaults (Auth, Store and Local still to set).
func DefaultConfig() Config {
	return Config{Sampler: DefaultSamplerConfig()}
}

// Validate reports a config New refuses.
func (c Config) Validate() error {
	if c.Auth == nil || c.Store == nil || c.Local == nil {
		return errors.New("admin: Config.Auth, Store and Local are required")
	}
	return nil
}

// Handler serves the admin API and page. Make it with New, mount Routes on
// the node's listener, and Close it when the node stops. Its handlers are
// safe for concurrent use.
type Handler struct {
	auth    *access.Authorizer
	store   Store
	local   Local
	cluster Cluster // nil: a lone node
	url     string
	logs    *LogRing
	log     *slog.Logger
	sampler *Sampler
	usage   usageCache
}

// New makes the admin front end and starts sampling the request metrics
// for the history (Close stops it).
func New(cfg Config) (*Handler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	g := cfg.Requests
	if g == nil {
		g = prometheus.NewRegistry()
	}
	sc := cfg.Sampler
	sc.Read = func() (Snapshot, error) { return ReadSnapshot(g) }
	s, err := NewSampler(sc)
	if err != nil {
		return nil, err
	}
	h := &Handler{auth: cfg.Auth, store: cfg.Store, local: cfg.Local, cluster: cfg.Cluster, url: cfg.URL,
		logs: cfg.Logs, log: cfg.Logger, sampler: s}
	s.Start()
	return h, nil
}

// Routes returns the handlers to serve, by path (httpapi's ExtraHandlers:
// a path ending in "/" serves every path below it). Every one needs the
// admin key, but the page (UIPath), which holds no data.
func (h *Handler) Routes() map[string]http.Handler {
	page := UIHandler()
	return map[string]http.Handler{
		NodesPath: h, NodesPath + "/": h,
		StatusPath: h,
		ScrubPath:  h,
		MountsPath: h,
		KeysPath:   h, KeysPath + "/": h,
		RulesPath: h, RulesPath + "/": h,
		TrashPath: h, TrashPath + "/": h,
		UIPath: page, UIPath + "/": page,
		HistoryPath: h.adminOnly(func(w http.ResponseWriter, r *http.Request) {
			h.writeJSON(w, r, http.StatusOK, h.sampler.History())
		}),
		LogsPath:            h.adminOnly(h.serveLogs),
		UsagePath:           h.adminOnly(h.serveUsage),          // usage.go
		SnapshotsPath + "/": http.HandlerFunc(h.serveSnapshots), // snapshots.go
		SchedulesPath + "/": http.HandlerFunc(h.serveSchedules),
	}
}

// Sampler returns the sampler of the history (tests drive it).
func (h *Handler) Sampler() *Sampler { return h.sampler }

// Close stops the sampler. The handlers keep answering.
func (h *Handler) Close() {
	if h != nil {
		h.sampler.Stop()
	}
}

// ServeHTTP serves the API's endpoints (all but the page's data ones, see
// Routes) for callers holding the admin key.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := h.authorize(r); err != nil {
		h.fail(w, r, err)
		return
	}
	switch p := r.URL.Path; {
	case p == StatusPath:
		h.serveStatus(w, r)
	case p == ScrubPath:
		h.serveScrub(w, r)
	case p == MountsPath:
		h.serveMounts(w, r)
	case p == KeysPath || strings.HasPrefix(p, KeysPath+"/"):
		h.serveKeys(w, r)
	case p == RulesPath || strings.HasPrefix(p, RulesPath+"/"):
		h.serveRules(w, r)
	case p == TrashPath || strings.HasPrefix(p, TrashPath+"/"):
		h.serveTrash(w, r)
	default:
		h.serveNodes(w, r)
	}
}

// authorize checks that r carries the admin key.
func (h *Handler) authorize(r *http.Request) error {
	p, err := h.auth.Authenticate(r.Header.Get("Authorization"))
	if err == nil {
		err = h.auth.Authorize(p, access.ActionAdmin, access.Resource{})
	}
	return err
}

// adminOnly serves GET and HEAD with f for callers holding the admin key.
func (h *Handler) adminOnly(f http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := h.authorize(r); err != nil {
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

// Logs is the answer of GET /_cairn/logs.
type Logs struct {
	Records []LogRecord `json:"records"` // oldest first
	Time    time.Time   `json:"time"`
}

func (h *Handler) serveLogs(w http.ResponseWriter, r *http.Request) {
	recs := []LogRecord{}
	if h.logs != nil {
		recs = h.logs.Records()
	}
	h.writeJSON(w, r, http.StatusOK, Logs{Records: recs, Time: time.Now().UTC()})
}
