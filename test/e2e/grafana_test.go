package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"
)

// TestGrafanaDashboardMetrics: every metric docs/grafana/cairn-dashboard.json
// names is one a node exports (a cluster node after a little traffic:
// requests, an S3 call, an abuse rule's answer).
func TestGrafanaDashboardMetrics(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(repoRoot(t), "docs", "grafana", "cairn-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("the dashboard is not JSON: %v", err)
	}
	names := map[string]string{} // metric → panel
	metric := regexp.MustCompile(`cairn_[a-z0-9_]+`)
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			for _, m := range metric.FindAllString(tg.Expr, -1) {
				names[m] = p.Title
			}
		}
	}
	if len(names) < 15 {
		t.Fatalf("the dashboard names only %d metrics", len(names))
	}

	n := startClusterNode(t, filepath.Join(t.TempDir(), "n1"), freeAddr(t), "")
	waitFor(t, 30*time.Second, "bucket creation", func() bool {
		resp, _ := do(t, "POST", n.url+"/_cairn/buckets", []byte(`{"name":"graf","public":true}`), auth()...)
		return resp.StatusCode == 201 || resp.StatusCode == 409
	}, n)
	do(t, "PUT", n.url+"/graf/a.txt", []byte("a"), auth()...)
	do(t, "GET", n.url+"/graf/a.txt", nil, "Authorization", "Bearer wrong-key")
	do(t, "GET", n.url+"/graf?list-type=2", nil, auth()...)
	resp, body := do(t, "POST", n.url+"/_cairn/rules", []byte(`{"user_agent":"grafbot","deny":403}`), auth()...)
	expect(t, resp, body, 201)
	waitFor(t, 5*time.Second, "the rule", func() bool {
		resp, _ := do(t, "GET", n.url+"/graf/a.txt", nil, "User-Agent", "grafbot")
		return resp.StatusCode == 403
	}, n)
	_, scrape := do(t, "GET", n.url+"/_cairn/metrics", nil)
	have := map[string]bool{}
	for _, line := range strings.Split(string(scrape), "\n") {
		if m := metric.FindString(line); m != "" && !strings.HasPrefix(line, "#") {
			have[m] = true
		}
	}
	var missing []string
	for m, panel := range names {
		if !have[m] {
			missing = append(missing, m+" (panel "+panel+")")
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Fatalf("the dashboard names metrics no node exports: %v", missing)
	}
}
