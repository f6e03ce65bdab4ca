package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestAccessAcrossCluster: an access key and abuse rules created through
// node 1 work on node 3; a key revoked through node 2 stops working on
// node 3 within 1 s; a rule added through node 1 answers on node 3.
func TestAccessAcrossCluster(t *testing.T) {
	base := t.TempDir()
	n1 := startClusterNode(t, filepath.Join(base, "n1"), freeAddr(t), "")
	n2 := startClusterNode(t, filepath.Join(base, "n2"), freeAddr(t), n1.url)
	n3 := startClusterNode(t, filepath.Join(base, "n3"), freeAddr(t), n1.url)
	nodes := []*server{n1, n2, n3}
	waitFor(t, 30*time.Second, "bucket creation", func() bool {
		resp, _ := do(t, "POST", n1.url+"/_cairn/buckets", []byte(`{"name":"site","public":true}`), auth()...)
		return resp.StatusCode == 201 || resp.StatusCode == 409
	}, nodes...)

	// A key for uploads/ only.
	resp, body := do(t, "POST", n1.url+"/_cairn/keys", []byte(`{"name":"deploy","buckets":["site/uploads/"],"allow":"read,write"}`), auth()...)
	expect(t, resp, body, 201)
	var k struct{ ID, Secret string }
	if err := json.Unmarshal(body, &k); err != nil || k.ID == "" || k.Secret == "" {
		t.Fatalf("key: %s %v", body, err)
	}
	bearer := []string{"Authorization", "Bearer " + k.ID + ":" + k.Secret}
	waitFor(t, 5*time.Second, "the key works on node 3", func() bool {
		resp, _ := do(t, "PUT", n3.url+"/site/uploads/a.txt", []byte("a"), bearer...)
		return resp.StatusCode == 201 || resp.StatusCode == 200
	}, nodes...)
	resp, body = do(t, "PUT", n3.url+"/site/index.html", []byte("x"), bearer...)
	expect(t, resp, body, 403)
	if !strings.Contains(string(body), "may not write") {
		t.Fatalf("refusal does not say why: %s", body)
	}
	// Listing keys never shows a secret; the server log never holds one.
	resp, body = do(t, "GET", n2.url+"/_cairn/keys", nil, auth()...)
	expect(t, resp, body, 200)
	if strings.Contains(string(body), k.Secret) || !strings.Contains(string(body), k.ID) {
		t.Fatalf("key list: %s", body)
	}
	// Revoke through node 2; node 3 refuses within 1 s.
	resp, body = do(t, "DELETE", n2.url+"/_cairn/keys/"+k.ID, nil, auth()...)
	expect(t, resp, body, 204)
	t0 := time.Now()
	for {
		resp, _ := do(t, "GET", n3.url+"/site/uploads/a.txt", nil, bearer...)
		if resp.StatusCode == 403 {
			break
		}
		if time.Since(t0) > time.Second {
			t.Fatalf("a revoked key still works on node 3 after %v", time.Since(t0))
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("revocation took effect on node 3 after %v", time.Since(t0))
	for _, s := range nodes {
		if strings.Contains(s.logs.String(), k.Secret) {
			t.Fatalf("node %s logged a secret", s.addr)
		}
	}

	// A badbot rule added through node 1 answers on node 3; a browser
	// from the same address still gets the file.
	rule := `{"user_agent":"(?i)sitesucker","respond":{"status":403,"content_type":"text/html","body":"` +
		"PGgxPmJhZGJvdDwvaDE+" + `"}}` // base64 of <h1>badbot</h1>
	resp, body = do(t, "POST", n1.url+"/_cairn/rules", []byte(rule), auth()...)
	expect(t, resp, body, 201)
	waitFor(t, 2*time.Second, "the rule answers on node 3", func() bool {
		resp, body := do(t, "GET", n3.url+"/site/uploads/a.txt", nil, "User-Agent", "SiteSucker/2.0")
		return resp.StatusCode == 403 && string(body) == "<h1>badbot</h1>"
	}, nodes...)
	resp, body = do(t, "GET", n3.url+"/site/uploads/a.txt", nil, "User-Agent", "Mozilla/5.0 (X11; Linux x86_64) Firefox/140.0")
	expect(t, resp, body, 200)
	// Bad rules are refused with the reason.
	for _, bad := range []string{`{"user_agent":"(","deny":403}`, `{"ip":"10.0.0.0/33","deny":403}`, `{"ip":"10.0.0.1"}`} {
		resp, body := do(t, "POST", n1.url+"/_cairn/rules", []byte(bad), auth()...)
		if resp.StatusCode != 400 || !strings.Contains(string(body), "BadRule") {
			t.Fatalf("bad rule %s: %d %s", bad, resp.StatusCode, body)
		}
	}
	// The hit is counted per rule on node 3.
	resp, body = do(t, "GET", n3.url+"/_cairn/metrics", nil)
	if !strings.Contains(string(body), `cairn_rule_hits_total{rule="r1"}`) {
		t.Fatalf("no per-rule metric on node 3")
	}
}

// TestRulesByAddressAndRate: behind a trusted proxy, a CIDR deny refuses
// one client address and not another, and a throttle answers 429 with
// Retry-After at the configured rate, per client address.
func TestRulesByAddressAndRate(t *testing.T) {
	s := startServer(t, t.TempDir(), freeAddr(t), "--trusted-proxy", "127.0.0.1")
	resp, body := do(t, "POST", s.url+"/_cairn/buckets", []byte(`{"name":"www","public":true}`), auth()...)
	expect(t, resp, body, 201)
	resp, body = do(t, "PUT", s.url+"/www/index.html", []byte("hello"), auth()...)
	expect(t, resp, body, 201)
	for _, r := range []string{`{"ip":"203.0.113.0/24","deny":403}`, `{"bucket":"www","rate":10,"burst":10}`} {
		resp, body := do(t, "POST", s.url+"/_cairn/rules", []byte(r), auth()...)
		expect(t, resp, body, 201)
	}
	from := func(ip string) []string { return []string{"X-Forwarded-For", ip} }
	resp, body = do(t, "GET", s.url+"/www/index.html", nil, from("203.0.113.9")...)
	expect(t, resp, body, 403)
	// Spoofing the header from an untrusted peer does not work either way:
	// here the peer (127.0.0.1) is trusted, so the header decides.
	resp, body = do(t, "GET", s.url+"/www/index.html", nil, from("198.51.100.7")...)
	expect(t, resp, body, 200)

	// 10/s with a burst of 10: over 2 s at full speed one address gets
	// about 10 + 20 answers, the rest are 429 with Retry-After.
	ok, limited := 0, 0
	start := time.Now()
	for time.Since(start) < 2*time.Second {
		resp, _ := do(t, "GET", s.url+"/www/index.html", nil, from("192.0.2.1")...)
		switch resp.StatusCode {
		case 200:
			ok++
		case 429:
			limited++
			if resp.Header.Get("Retry-After") == "" {
				t.Fatal("429 without Retry-After")
			}
		default:
			t.Fatalf("status %d", resp.StatusCode)
		}
	}
	elapsed := time.Since(start).Seconds()
	want := 10 + 10*elapsed
	t.Logf("in %.2f s: %d allowed (expected about %.0f), %d throttled", elapsed, ok, want, limited)
	if float64(ok) < want-3 || float64(ok) > want+3 || limited == 0 {
		t.Fatalf("%d allowed in %.2f s, want %.0f±3 (and some 429s, got %d)", ok, elapsed, want, limited)
	}
	// Another address is not throttled.
	resp, body = do(t, "GET", s.url+"/www/index.html", nil, from("192.0.2.2")...)
	expect(t, resp, body, 200)
	// The access log names the rule that answered.
	waitFor(t, 5*time.Second, "rule in the access log", func() bool {
		b, _ := os.ReadFile(filepath.Join(s.dir, "access.log"))
		return strings.Contains(string(b), " 429 ") && strings.Contains(string(b), "rule=r2")
	}, s)
}
