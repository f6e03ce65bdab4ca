package node

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

func call(t *testing.T, method, url, key, body string) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, url, rd)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestUILoneNodeActions: every call app.js makes, with its exact
// bodies, on a node that is not in cluster mode.
func TestUILoneNodeActions(t *testing.T) {
	n := startTestNode(t, "")
	for _, p := range []string{"/_cairn/status", "/_cairn/history", "/_cairn/logs", "/_cairn/buckets", "/_cairn/usage", "/_cairn/keys", "/_cairn/rules"} {
		code, body := call(t, "GET", n.URL+p, testKey, "")
		if code != 200 {
			t.Errorf("GET %s: %d %s", p, code, body)
		}
		if p == "/_cairn/status" {
			t.Logf("lone status: %s", body)
		}
	}
	code, body := call(t, "POST", n.URL+"/_cairn/scrub", testKey, "")
	t.Logf("scrub: %d %s", code, body)
	// createKey: {name, buckets, allow, expires}
	code, body = call(t, "POST", n.URL+"/_cairn/keys", testKey, `{"name":"k1","buckets":[],"allow":"","expires":""}`)
	if code != 201 {
		t.Errorf("create key: %d %s", code, body)
	}
	var k struct{ ID, Secret string }
	_ = json.Unmarshal([]byte(body), &k)
	code, body = call(t, "POST", n.URL+"/_cairn/keys", testKey, `{"name":"k2","buckets":["web","logs/2024"],"allow":"read,list","expires":"720h"}`)
	if code != 201 {
		t.Errorf("create key 2: %d %s", code, body)
	}
	// addRule: deny / rate bodies
	for _, r := range []string{`{"user_agent":"(?i)badbot","deny":403}`, `{"rate":5}`, `{"bucket":"web","path_prefix":"private/","deny":451}`, `{"ip":"203.0.113.0/24","rate":0.5}`} {
		code, body = call(t, "POST", n.URL+"/_cairn/rules", testKey, r)
		if code != 201 {
			t.Errorf("rule %s: %d %s", r, code, body)
		}
	}
	code, body = call(t, "GET", n.URL+"/_cairn/rules", testKey, "")
	t.Logf("rules: %s", body)
	code, body = call(t, "GET", n.URL+"/_cairn/keys", testKey, "")
	t.Logf("keys: %s", body)
	// nodes: 501 on a lone node (the page does not call it)
	code, body = call(t, "GET", n.URL+"/_cairn/nodes", testKey, "")
	t.Logf("nodes: %d %s", code, body)
	// secrets never reach the log ring
	code, body = call(t, "GET", n.URL+"/_cairn/logs", testKey, "")
	if strings.Contains(body, k.Secret) || strings.Contains(body, testKey) {
		t.Errorf("a secret in /_cairn/logs: %s", body)
	}
	// the page's own polling is what the history shows
	n.admin.Sampler().Sample()
	for range 50 {
		call(t, "GET", n.URL+"/_cairn/status", testKey, "")
	}
	n.admin.Sampler().Sample()
	h := n.admin.Sampler().History()
	b, _ := json.Marshal(h.Points[len(h.Points)-1])
	t.Logf("history point after 50 admin GETs and no data traffic: %s", b)
}
