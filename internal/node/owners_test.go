package node

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"strings"
	"testing"

	"github.com/cairn-fs/cairn/internal/store"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// series gathers c's metrics: "NAME TYPE" (counter or gauge) to value.
func series(t *testing.T, c prometheus.Collector) map[string]float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			v := m.GetCounter().GetValue()
			if mf.GetType() == dto.MetricType_GAUGE {
				v = m.GetGauge().GetValue()
			}
			got[mf.GetName()+" "+strings.ToLower(mf.GetType().String())] = v
		}
	}
	return got
}

// fixedOwners is a store whose ownership counters are given.
type fixedOwners store.OwnerStats

func (f fixedOwners) OwnerStats() store.OwnerStats { return store.OwnerStats(f) }

// TestOwnerCollector: each counter of the store's ownership table is
// exported under its own name.
func TestOwnerCollector(t *testing.T) {
	got := series(t, ownerCollector{fixedOwners{Owned: 1, Claims: 2, Recalls: 3, HandedOver: 4, Fenced: 5, Lost: 6}})
	want := map[string]float64{
		"cairn_owner_dirs gauge": 1, "cairn_owner_claims_total counter": 2, "cairn_owner_recalls_total counter": 3,
		"cairn_owner_handovers_total counter": 4, "cairn_owner_fenced_total counter": 5, "cairn_owner_lost_dirs_total counter": 6,
	}
	if !maps.Equal(got, want) {
		t.Errorf("series %v, want %v", got, want)
	}
}

// fixedLocks is a store whose lock counters are given.
type fixedLocks store.LockStats

func (f fixedLocks) LockStats() store.LockStats { return store.LockStats(f) }

// TestLockCollector: each of the store's lock counters is exported under
// its own name.
func TestLockCollector(t *testing.T) {
	got := series(t, lockCollector{fixedLocks{Commits: 1, Grants: 2, Waits: 3, Refused: 4, Lost: 5, Held: 6,
		LocalGrants: 7, Recalled: 8, Returned: 9, Rights: 10}})
	want := map[string]float64{
		"cairn_locks_commits_total counter": 1, "cairn_locks_grants_total counter": 2, "cairn_locks_waits_total counter": 3,
		"cairn_locks_refused_total counter": 4, "cairn_locks_sessions_lost_total counter": 5, "cairn_locks_inodes gauge": 6,
		"cairn_locks_local_grants_total counter": 7, "cairn_locks_recalls_total counter": 8, "cairn_locks_returns_total counter": 9,
		"cairn_locks_rights gauge": 10,
	}
	if !maps.Equal(got, want) {
		t.Errorf("series %v, want %v", got, want)
	}
}

// TestOwnersWiring: a directory the node's store owns shows in its
// metrics and in the owners section of GET /_cairn/status (through
// admin.Local and the store's count from the log).
func TestOwnersWiring(t *testing.T) {
	n := startTestNode(t, "")
	ctx := context.Background()
	if err := n.store.CreateBucket(ctx, store.BucketInfo{Name: "web"}); err != nil {
		t.Fatal(err)
	}
	if err := n.store.Mkdir(ctx, "web", "uploads", store.Attrs{}); err != nil {
		t.Fatal(err)
	}
	info, err := n.store.Stat(ctx, "web", "uploads")
	if err != nil {
		t.Fatal(err)
	}
	c, done, err := n.store.Own(ctx, info.Ino, "web/uploads")
	if err != nil {
		t.Fatal(err)
	}
	done()

	_, body := status(t, http.MethodGet, n.URL+"/_cairn/metrics", "")
	for _, line := range []string{"\ncairn_owner_dirs 1\n", "\ncairn_owner_claims_total 1\n", "\ncairn_owner_recalls_total 0\n",
		"\ncairn_owner_handovers_total 0\n", "\ncairn_owner_fenced_total 0\n", "\ncairn_owner_lost_dirs_total 0\n"} {
		if !strings.Contains(body, line) {
			t.Errorf("metrics lack %q", strings.TrimSpace(line))
		}
	}

	code, body := status(t, http.MethodGet, n.URL+"/_cairn/status", testKey)
	var v struct {
		Owners struct {
			Owned  int              `json:"owned"`
			Claims uint64           `json:"claims"`
			Dirs   []store.OwnedDir `json:"dirs"`
			ByNode []store.NodeDirs `json:"by_node"`
		} `json:"owners"`
	}
	if err := json.Unmarshal([]byte(body), &v); code != 200 || err != nil {
		t.Fatalf("status: %d %v %s", code, err, body)
	}
	o := v.Owners
	if o.Owned != 1 || o.Claims != 1 || len(o.Dirs) != 1 || o.Dirs[0].Path != "web/uploads" || o.Dirs[0].Dir != info.Ino ||
		o.Dirs[0].Epoch != c.Epoch || o.Dirs[0].Since.IsZero() {
		t.Errorf("this node's owners: %+v", o)
	}
	if len(o.ByNode) != 1 || o.ByNode[0] != (store.NodeDirs{Node: 1, Dirs: 1}) {
		t.Errorf("counts from the log: %+v", o.ByNode)
	}
}
