package node

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/cairn-fs/cairn/internal/frontend/admin"
)

// TestUIEndpoints: the page is served without a key and with the CSP; the
// data endpoints need the admin key and are not cached; a warning logged
// through the node's logger shows in /_cairn/logs; the history and usage
// answer JSON.
func TestUIEndpoints(t *testing.T) {
	n := startTestNode(t, "")
	resp, err := http.Get(n.URL + "/_cairn/ui")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(resp.Header.Get("Content-Security-Policy"), "default-src 'none'") {
		t.Fatalf("page: %d, CSP %q", resp.StatusCode, resp.Header.Get("Content-Security-Policy"))
	}
	for _, p := range []string{admin.HistoryPath, admin.LogsPath, admin.UsagePath} {
		if code, _ := status(t, "GET", n.URL+p, ""); code != http.StatusUnauthorized {
			t.Errorf("%s without a key: %d", p, code)
		}
		if code, _ := status(t, "GET", n.URL+p, "wrong-key-0123456789abcdef"); code != http.StatusUnauthorized && code != http.StatusForbidden {
			t.Errorf("%s with a wrong key: %d", p, code)
		}
		if code, _ := status(t, "POST", n.URL+p, testKey); code != http.StatusMethodNotAllowed {
			t.Errorf("POST %s: %d", p, code)
		}
	}
	n.cfg.Logger.Warn("disk is slow", "volume", 3)
	code, body := status(t, "GET", n.URL+admin.LogsPath, testKey)
	var logs admin.Logs
	if err := json.Unmarshal([]byte(body), &logs); code != 200 || err != nil {
		t.Fatalf("logs: %d %v %s", code, err, body)
	}
	found := false
	for _, r := range logs.Records {
		found = found || r.Message == "disk is slow"
	}
	if !found {
		t.Errorf("the warning is not in /_cairn/logs: %s", body)
	}
	code, body = status(t, "GET", n.URL+admin.HistoryPath, testKey)
	if code != 200 || !strings.Contains(body, `"interval_seconds":5`) {
		t.Errorf("history: %d %s", code, body)
	}
	code, body = status(t, "GET", n.URL+admin.UsagePath, testKey)
	if code != 200 || !strings.Contains(body, `"buckets":[]`) {
		t.Errorf("usage: %d %s", code, body)
	}
	req, _ := http.NewRequest("GET", n.URL+admin.HistoryPath, nil)
	req.Header.Set("Authorization", "Bearer "+testKey)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Header.Get("Cache-Control") != "no-store" {
		t.Errorf("history Cache-Control %q", resp.Header.Get("Cache-Control"))
	}
}
