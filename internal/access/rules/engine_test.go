package rules

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairn-fs/cairn/internal/clock"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func newEngine(t testing.TB, cfg Config, rules ...Rule) *Engine {
	t.Helper()
	e, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Load(rules); err != nil {
		t.Fatal(err)
	}
	return e
}

func ip(s string) netip.Addr { return netip.MustParseAddr(s) }

// matchRules exercise every kind of match and the order of decisions.
var matchRules = []Rule{
	{ID: "r1", UserAgent: "BadBot", Deny: 403},
	{ID: "r2", IP: "198.51.100.0/24", Deny: 451},
	{ID: "r3", PathPrefix: "/secret/", Deny: 404},
	{ID: "r4", IP: "2001:db8:bad::/48", Deny: 403},
	// Order: r9 before r10 (numeric), though "r10" < "r9" as bytes.
	{ID: "r10", UserAgent: "curl", Deny: 418},
	{ID: "r9", IP: "203.0.113.0/24", Deny: 410},
	// Bucket rules come after every cluster rule, whatever their ID.
	{ID: "r0", Bucket: "photos", IP: "203.0.113.0/24", Deny: 499},
	{ID: "r20", Bucket: "photos", UserAgent: "(?i)scraper", Respond: &Response{Status: 200, ContentType: "text/plain", Body: []byte("no")}},
	{ID: "r21", Bucket: "photos", PathPrefix: "private/", Deny: 403},
	{ID: "r22", Bucket: "photos", IP: "192.0.2.7", Respond: &Response{Body: []byte("<p>bye</p>")}},
	{ID: "r23", Bucket: "photos", PathPrefix: "/slow/", Rate: 1, Burst: 1},
	{ID: "r24", PathPrefix: "photos/big/", Rate: 1, Burst: 1},
}

func TestCheckMatching(t *testing.T) {
	const ff = "Mozilla/5.0 Firefox/140.0"
	v4 := ip("203.0.113.77")
	other := ip("192.0.2.99")
	tests := []struct {
		name   string
		req    Request
		action Action
		rule   string
		status int
		thr    string // the throttle rule that refuses the same request again
	}{
		{"nothing matches", Request{Bucket: "photos", Path: "a.jpg", UserAgent: ff, IP: other}, Allow, "", 0, ""},
		{"no bucket", Request{UserAgent: ff, IP: other}, Allow, "", 0, ""},
		{"ua", Request{Bucket: "photos", UserAgent: "Mozilla/5.0 (compatible; BadBot/2.1)", IP: other}, Deny, "r1", 403, ""},
		{"ua is case-sensitive", Request{Bucket: "photos", UserAgent: "badbot", IP: other}, Allow, "", 0, ""},
		{"ua (?i)", Request{Bucket: "photos", UserAgent: "My SCRAPER 1.0", IP: other}, Respond, "r20", 200, ""},
		{"ua bucket rule in another bucket", Request{Bucket: "docs", UserAgent: "scraper", IP: other}, Allow, "", 0, ""},
		{"ua cluster rule in any bucket", Request{Bucket: "docs", UserAgent: "BadBot", IP: other}, Deny, "r1", 403, ""},
		{"empty ua", Request{Bucket: "photos", IP: other}, Allow, "", 0, ""},
		{"cidr v4", Request{Bucket: "docs", UserAgent: ff, IP: ip("198.51.100.200")}, Deny, "r2", 451, ""},
		{"cidr v4 outside", Request{Bucket: "docs", UserAgent: ff, IP: ip("198.51.101.1")}, Allow, "", 0, ""},
		{"cidr v4 mapped", Request{Bucket: "docs", UserAgent: ff, IP: ip("::ffff:198.51.100.3")}, Deny, "r2", 451, ""},
		{"cidr v6", Request{Bucket: "docs", UserAgent: ff, IP: ip("2001:db8:bad:1::9")}, Deny, "r4", 403, ""},
		{"cidr v6 outside", Request{Bucket: "docs", UserAgent: ff, IP: ip("2001:db8:bae::9")}, Allow, "", 0, ""},
		{"cidr v6 zone", Request{Bucket: "docs", UserAgent: ff, IP: ip("2001:db8:bad::9%eth0")}, Deny, "r4", 403, ""},
		{"invalid ip", Request{Bucket: "docs", UserAgent: ff}, Allow, "", 0, ""},
		{"single ip bucket rule", Request{Bucket: "photos", UserAgent: ff, IP: ip("192.0.2.7")}, Respond, "r22", 403, ""},
		{"single ip neighbour", Request{Bucket: "photos", UserAgent: ff, IP: ip("192.0.2.8")}, Allow, "", 0, ""},
		{"bucket path", Request{Bucket: "photos", Path: "private/a.jpg", UserAgent: ff, IP: other}, Deny, "r21", 403, ""},
		{"bucket path leading slash", Request{Bucket: "photos", Path: "/private/a.jpg", UserAgent: ff, IP: other}, Deny, "r21", 403, ""},
		{"bucket path not prefix", Request{Bucket: "photos", Path: "public/private/a.jpg", UserAgent: ff, IP: other}, Allow, "", 0, ""},
		{"bucket path other bucket", Request{Bucket: "docs", Path: "private/a.jpg", UserAgent: ff, IP: other}, Allow, "", 0, ""},
		{"cluster path", Request{Bucket: "secret", Path: "x", UserAgent: ff, IP: other}, Deny, "r3", 404, ""},
		{"cluster path whole bucket", Request{Bucket: "secret", Path: "", UserAgent: ff, IP: other}, Deny, "r3", 404, ""},
		{"cluster path longer bucket", Request{Bucket: "secretive", Path: "x", UserAgent: ff, IP: other}, Allow, "", 0, ""},
		{"cluster path is not bucket path", Request{Bucket: "photos", Path: "secret/x", UserAgent: ff, IP: other}, Allow, "", 0, ""},
		{"cluster path into bucket", Request{Bucket: "photos", Path: "big/x.iso", UserAgent: ff, IP: other}, Allow, "", 0, "r24"},
		{"numeric id order", Request{Bucket: "docs", UserAgent: "curl/8.0", IP: v4}, Deny, "r9", 410, ""},
		{"cluster before bucket", Request{Bucket: "photos", UserAgent: ff, IP: v4}, Deny, "r9", 410, ""},
		{"deny before throttle", Request{Bucket: "photos", Path: "slow/x", UserAgent: "BadBot", IP: other}, Deny, "r1", 403, ""},
		{"bucket path throttle", Request{Bucket: "photos", Path: "slow/x", UserAgent: ff, IP: other}, Allow, "", 0, "r23"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fc := clock.NewFake(t0)
			e := newEngine(t, Config{Now: fc.Now}, matchRules...)
			d := e.Check(tt.req)
			if d.Action != tt.action || d.RuleID != tt.rule || d.Status != tt.status {
				t.Fatalf("Check = %v %s %d, want %v %s %d", d.Action, d.RuleID, d.Status, tt.action, tt.rule, tt.status)
			}
			// Decisions are stable: the UA cache does not change them. The
			// throttles have a burst of 1, so the same request again is
			// throttled if one matched.
			d2 := e.Check(tt.req)
			if tt.thr != "" {
				if d2.Action != Throttle || d2.RuleID != tt.thr {
					t.Fatalf("second Check = %+v, want Throttle by %s", d2, tt.thr)
				}
			} else if d2.Action != d.Action || d2.RuleID != d.RuleID {
				t.Fatalf("second Check = %+v, first %+v", d2, d)
			}
		})
	}
}

func TestCheckRespondBody(t *testing.T) {
	body := []byte("<p>bye</p>")
	e := newEngine(t, Config{}, Rule{ID: "r1", UserAgent: "x", Respond: &Response{Body: body}})
	body[0] = '!' // Load keeps its own copy
	d := e.Check(Request{UserAgent: "x"})
	if d.Action != Respond || d.Status != 403 || d.ContentType != "text/html; charset=utf-8" || string(d.Body) != "<p>bye</p>" {
		t.Fatalf("Check = %+v", d)
	}
}

// TestThrottleRate drives 100 requests/s for 10 simulated seconds from one IP
// against a 5/s burst 5 limit and counts what gets through.
func TestThrottleRate(t *testing.T) {
	fc := clock.NewFake(t0)
	e := newEngine(t, Config{Now: fc.Now}, Rule{ID: "r1", Rate: 5, Burst: 5})
	a, b := ip("203.0.113.1"), ip("2001:db8::1")
	allowed, throttled := 0, 0
	for i := 0; i < 1000; i++ {
		d := e.Check(Request{Bucket: "x", IP: a})
		switch d.Action {
		case Allow:
			allowed++
		case Throttle:
			throttled++
			if d.Status != 429 || d.RuleID != "r1" {
				t.Fatalf("request %d: %+v", i, d)
			}
			if d.RetryAfter <= 0 || d.RetryAfter > 200*time.Millisecond {
				t.Fatalf("request %d: RetryAfter %v, want in (0, 200ms]", i, d.RetryAfter)
			}
			if d.RetryAfterSeconds() != 1 {
				t.Fatalf("RetryAfterSeconds = %d", d.RetryAfterSeconds())
			}
		default:
			t.Fatalf("request %d: %+v", i, d)
		}
		if i%100 == 0 {
			// Another client, once a second, is never throttled.
			if d := e.Check(Request{Bucket: "x", IP: b}); d.Action != Allow {
				t.Fatalf("other IP at request %d: %+v", i, d)
			}
		}
		fc.Advance(10 * time.Millisecond)
	}
	if want := 5 + 50; allowed < want-1 || allowed > want+1 {
		t.Fatalf("allowed %d of 1000, want %d±1", allowed, want)
	}
	if h := e.Hits(); len(h) != 1 || h[0] != (RuleHits{"r1", uint64(throttled)}) {
		t.Fatalf("Hits = %v, want r1 %d", h, throttled)
	}
}

func TestRetryAfterExact(t *testing.T) {
	fc := clock.NewFake(t0)
	e := newEngine(t, Config{Now: fc.Now}, Rule{ID: "r1", Rate: 0.5})
	if d := e.Check(Request{IP: ip("192.0.2.1")}); d.Action != Allow {
		t.Fatal(d)
	}
	fc.Advance(500 * time.Millisecond)
	d := e.Check(Request{IP: ip("192.0.2.1")})
	if d.Action != Throttle || d.RetryAfter != 1500*time.Millisecond || d.RetryAfterSeconds() != 2 {
		t.Fatalf("Check = %+v, want Throttle after 1.5s", d)
	}
}

// TestThrottleTakesNoTokenWhenRefused checks that a request refused by one
// throttle, or by a deny rule, does not spend tokens of another throttle.
func TestThrottleTakesNoTokenWhenRefused(t *testing.T) {
	fc := clock.NewFake(t0)
	e := newEngine(t, Config{Now: fc.Now},
		Rule{ID: "r1", Rate: 1, Burst: 10},               // cluster default
		Rule{ID: "r2", Bucket: "b", Rate: 0.1, Burst: 1}, // bucket default, slower
		Rule{ID: "r3", Bucket: "b", UserAgent: "bad", Deny: 403},
	)
	c := ip("192.0.2.1")
	if d := e.Check(Request{Bucket: "b", IP: c}); d.Action != Allow {
		t.Fatal(d)
	}
	for range 5 {
		if d := e.Check(Request{Bucket: "b", IP: c}); d.Action != Throttle || d.RuleID != "r2" || d.RetryAfter != 10*time.Second {
			t.Fatalf("Check = %+v, want Throttle by r2 in 10s", d)
		}
		if d := e.Check(Request{Bucket: "b", IP: c, UserAgent: "bad"}); d.Action != Deny {
			t.Fatal(d)
		}
	}
	r1 := e.set.Load().byID["r1"]
	if tok := r1.clients.get(c, fc.Now()).TokensAt(fc.Now()); tok != 9 {
		t.Fatalf("r1 holds %v tokens, want 9 (only the allowed request took one)", tok)
	}
	// In another bucket only r1 applies: 9 more requests pass.
	for i := range 9 {
		if d := e.Check(Request{Bucket: "other", IP: c}); d.Action != Allow {
			t.Fatalf("request %d: %+v", i, d)
		}
	}
	if d := e.Check(Request{Bucket: "other", IP: c}); d.Action != Throttle || d.RuleID != "r1" {
		t.Fatal(d)
	}
	// Both empty: the longest wait and its rule.
	if d := e.Check(Request{Bucket: "b", IP: c}); d.RuleID != "r2" || d.RetryAfter != 10*time.Second {
		t.Fatalf("Check = %+v, want r2's 10s", d)
	}
}

// TestManyThrottles matches more throttle rules than Check remembers
// between its passes.
func TestManyThrottles(t *testing.T) {
	fc := clock.NewFake(t0)
	var rs []Rule
	for i := 1; i <= maxPending+2; i++ {
		rs = append(rs, Rule{ID: fmt.Sprintf("r%d", i), Rate: 1, Burst: 100})
	}
	rs[len(rs)-1].Burst = 2
	e := newEngine(t, Config{Now: fc.Now}, rs...)
	c := ip("192.0.2.1")
	for range 2 {
		if d := e.Check(Request{IP: c}); d.Action != Allow {
			t.Fatal(d)
		}
	}
	last := fmt.Sprintf("r%d", maxPending+2)
	if d := e.Check(Request{IP: c}); d.Action != Throttle || d.RuleID != last {
		t.Fatalf("Check = %+v, want Throttle by %s", d, last)
	}
	for _, id := range []string{"r1", fmt.Sprintf("r%d", maxPending+1)} {
		if tok := e.set.Load().byID[id].clients.get(c, fc.Now()).TokensAt(fc.Now()); tok != 98 {
			t.Errorf("%s holds %v tokens, want 98", id, tok)
		}
	}
}

func TestLoadCarriesBucketsOver(t *testing.T) {
	fc := clock.NewFake(t0)
	rule := Rule{ID: "r5", UserAgent: "bot", Rate: 1, Burst: 2}
	e := newEngine(t, Config{Now: fc.Now}, rule)
	req := Request{UserAgent: "a bot", IP: ip("192.0.2.1")}
	for range 2 {
		if d := e.Check(req); d.Action != Allow {
			t.Fatal(d)
		}
	}
	if d := e.Check(req); d.Action != Throttle {
		t.Fatal(d)
	}
	// Reload with an unrelated change: the bucket and counter carry over.
	if err := e.Load([]Rule{{ID: "r6", IP: "10.0.0.0/8", Deny: 403}, rule}); err != nil {
		t.Fatal(err)
	}
	if d := e.Check(req); d.Action != Throttle {
		t.Fatalf("after reload: %+v, want still throttled", d)
	}
	if h := e.Hits(); fmt.Sprint(h) != "[{r5 2} {r6 0}]" {
		t.Fatalf("Hits = %v", h)
	}
	// A changed rate is a new limit: fresh buckets. Hit counters stay with the ID.
	rule.Rate = 2
	if err := e.Load([]Rule{rule}); err != nil {
		t.Fatal(err)
	}
	if d := e.Check(req); d.Action != Allow {
		t.Fatalf("after rate change: %+v, want a fresh bucket", d)
	}
	if h := e.Hits(); fmt.Sprint(h) != "[{r5 2}]" {
		t.Fatalf("Hits = %v", h)
	}
	// A removed and re-added ID starts from zero.
	if err := e.Load(nil); err != nil {
		t.Fatal(err)
	}
	if d := e.Check(req); d.Action != Allow {
		t.Fatal(d)
	}
	if err := e.Load([]Rule{rule}); err != nil {
		t.Fatal(err)
	}
	if h := e.Hits(); fmt.Sprint(h) != "[{r5 0}]" {
		t.Fatalf("Hits = %v", h)
	}
}

func TestLoadRefusesBadSets(t *testing.T) {
	good := Rule{ID: "r1", UserAgent: "bot", Deny: 403}
	tests := []struct {
		name  string
		rules []Rule
		want  string
	}{
		{"invalid rule", []Rule{good, {ID: "r2", UserAgent: "(", Deny: 403}}, `rule r2: rules: bad user-agent regexp "("`},
		{"duplicate id", []Rule{good, {ID: "r1", Rate: 1}}, `rules: duplicate rule id "r1"`},
		{"no id", []Rule{{Rate: 1}}, "rules: rule 0 (- cluster all-clients rate 1/s burst 1) has no id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEngine(t, Config{}, good)
			err := e.Load(tt.rules)
			if err == nil || !errors.Is(err, ErrBadRule) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Load = %v, want ErrBadRule with %q", err, tt.want)
			}
			if d := e.Check(Request{UserAgent: "bot"}); d.Action != Deny || d.RuleID != "r1" {
				t.Fatalf("after failed Load: %+v, want the old set", d)
			}
			if len(e.Rules()) != 1 {
				t.Fatalf("Rules = %v", e.Rules())
			}
		})
	}
}

func TestRulesOrder(t *testing.T) {
	e := newEngine(t, Config{}, matchRules...)
	var ids []string
	for _, r := range e.Rules() {
		ids = append(ids, r.ID)
	}
	if got := strings.Join(ids, " "); got != "r1 r2 r3 r4 r9 r10 r24 r0 r20 r21 r22 r23" {
		t.Fatalf("Rules order = %s", got)
	}
}

func TestConfig(t *testing.T) {
	for _, c := range []Config{{MaxClientsPerRule: -1}, {UACacheEntries: -1}} {
		if _, err := New(c); !errors.Is(err, ErrBadConfig) {
			t.Errorf("New(%+v) = %v, want ErrBadConfig", c, err)
		}
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
}

// TestBoundedClients sends requests from a million distinct IPs, plus one
// heavy client, and checks that the buckets of the rule stay within
// MaxClientsPerRule and that evictions prefer idle clients, so the heavy
// client stays throttled.
func TestBoundedClients(t *testing.T) {
	n := 1_000_000
	if testing.Short() {
		n = 100_000
	}
	const maxClients = 1000
	fc := clock.NewFake(t0)
	e := newEngine(t, Config{Now: fc.Now, MaxClientsPerRule: maxClients}, Rule{ID: "r1", Rate: 5, Burst: 5})
	heavy := ip("2001:db8::1")
	heavyAllowed, heavyReqs := 0, 0
	for i := range n {
		a := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
		if d := e.Check(Request{IP: a}); d.Action != Allow {
			t.Fatalf("new client %v: %+v", a, d)
		}
		if i%10 == 0 {
			heavyReqs++
			if e.Check(Request{IP: heavy}).Action == Allow {
				heavyAllowed++
			}
		}
		fc.Advance(time.Millisecond)
	}
	// With the clock stopped no bucket refills, so the shards fill up to
	// their bound and evict arbitrary buckets.
	for i := range 10 * maxClients {
		e.Check(Request{IP: netip.AddrFrom4([4]byte{172, 16, byte(i >> 8), byte(i)})})
	}
	if got := e.set.Load().byID["r1"].clients.len(); got > maxClients || got < maxClients*9/10 {
		t.Fatalf("%d buckets held, want at most %d (and not far below)", got, maxClients)
	}
	// 100 requests/s against 5/s: the heavy client gets ~5 per simulated
	// second. Each time its bucket were evicted it would get 5 more.
	secs := float64(n) / 1000
	t.Logf("heavy client allowed %d of %d in %.0f simulated seconds", heavyAllowed, heavyReqs, secs)
	if limit := int(5*secs) + 5 + int(secs/100); heavyAllowed > limit {
		t.Fatalf("heavy client allowed %d of %d, want at most %d", heavyAllowed, heavyReqs, limit)
	}
}

func TestUACacheBounded(t *testing.T) {
	e := newEngine(t, Config{UACacheEntries: 64}, Rule{ID: "r1", UserAgent: "bot[0-9]+$", Deny: 403})
	for i := range 10000 {
		ua := fmt.Sprintf("client-%d", i)
		want := Allow
		if i%7 == 0 {
			ua = fmt.Sprintf("bot%d", i)
			want = Deny
		}
		if d := e.Check(Request{UserAgent: ua}); d.Action != want {
			t.Fatalf("%q: %+v", ua, d)
		}
	}
	if got := e.set.Load().ua.len(); got > 64 {
		t.Fatalf("UA cache holds %d entries, want at most 64", got)
	}
	long := strings.Repeat("x", maxCachedUA+1) + "bot1"
	if d := e.Check(Request{UserAgent: long}); d.Action != Deny {
		t.Fatalf("long UA: %+v", d)
	}
}

// TestManyUARegexps crosses the 64-bit word boundary of the cache's bit sets.
func TestManyUARegexps(t *testing.T) {
	var rs []Rule
	for i := range 130 {
		rs = append(rs, Rule{ID: fmt.Sprintf("r%d", i), UserAgent: fmt.Sprintf("^agent-%d$", i), Deny: 400 + i})
	}
	e := newEngine(t, Config{}, rs...)
	for _, i := range []int{0, 63, 64, 65, 127, 128, 129} {
		for range 2 { // miss, then hit
			d := e.Check(Request{UserAgent: fmt.Sprintf("agent-%d", i)})
			if d.Action != Deny || d.Status != 400+i {
				t.Fatalf("agent-%d: %+v", i, d)
			}
		}
	}
	if d := e.Check(Request{UserAgent: "agent-130"}); d.Action != Allow {
		t.Fatal(d)
	}
}

func TestFullPathHasPrefix(t *testing.T) {
	tests := []struct {
		bucket, path, prefix string
		want                 bool
	}{
		{"photos", "a/b", "/", true},
		{"photos", "a/b", "/pho", true},
		{"photos", "a/b", "/photos", true},
		{"photos", "a/b", "/photos/", true},
		{"photos", "a/b", "/photos/a/", true},
		{"photos", "a/b", "/photos/a/b", true},
		{"photos", "a/b", "/photos/a/bc", false},
		{"photos", "a/b", "/photosX", false},
		{"photos", "a/b", "/photos2/", false},
		{"photos2", "a/b", "/photos/", false},
		{"", "a/b", "/a/", true},
		{"", "a/b", "/b", false},
	}
	for _, tt := range tests {
		if got := fullPathHasPrefix(tt.bucket, tt.path, tt.prefix); got != tt.want {
			t.Errorf("fullPathHasPrefix(%q, %q, %q) = %v, want %v", tt.bucket, tt.path, tt.prefix, got, tt.want)
		}
	}
}

// TestConcurrentCheckAndLoad runs Checks while rule sets are swapped; run it
// with -race. Every decision must come from one of the two sets.
func TestConcurrentCheckAndLoad(t *testing.T) {
	setA := []Rule{{ID: "r1", UserAgent: "x", Deny: 403}, {ID: "r2", Rate: 1000}}
	setB := []Rule{{ID: "r1", UserAgent: "x", Deny: 410}, {ID: "r3", IP: "10.0.0.0/8", Deny: 403}}
	e := newEngine(t, Config{}, setA...)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for g := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				d := e.Check(Request{UserAgent: fmt.Sprintf("x%d", i%50), IP: netip.AddrFrom4([4]byte{192, 0, 2, byte(g)})})
				if d.Action != Deny || (d.Status != 403 && d.Status != 410) {
					t.Errorf("Check = %+v", d)
					return
				}
			}
		})
	}
	for i := range 200 {
		set := setA
		if i%2 == 1 {
			set = setB
		}
		if err := e.Load(set); err != nil {
			t.Fatal(err)
		}
		_ = e.Hits()
	}
	close(stop)
	wg.Wait()
}

// twentyRules is a realistic mix of cluster and bucket rules of every kind.
var twentyRules = []Rule{
	{ID: "r1", UserAgent: `(?i)\b(ahrefs|semrush|mj12)bot\b`, Deny: 403},
	{ID: "r2", UserAgent: `^python-requests/`, Deny: 403},
	{ID: "r3", UserAgent: `curl/7\.`, Respond: &Response{Body: []byte("use the API")}},
	{ID: "r4", UserAgent: `^Go-http-client/1\.1$`, Rate: 2},
	{ID: "r5", IP: "198.51.100.0/24", Deny: 403},
	{ID: "r6", IP: "2001:db8:bad::/48", Deny: 403},
	{ID: "r7", IP: "192.0.2.7", Deny: 451},
	{ID: "r8", PathPrefix: "/secret/", Deny: 404},
	{ID: "r9", PathPrefix: "/photos/.trash/", Deny: 404},
	{ID: "r10", PathPrefix: "/backups/", Deny: 403},
	{ID: "r11", Bucket: "photos", UserAgent: `(?i)scrap(er|y)`, Deny: 403},
	{ID: "r12", Bucket: "photos", UserAgent: `^Wget/`, Rate: 1},
	{ID: "r13", Bucket: "photos", UserAgent: `HeadlessChrome`, Respond: &Response{Status: 429, Body: []byte("slow down")}},
	{ID: "r14", Bucket: "photos", IP: "10.0.0.0/8", Deny: 403},
	{ID: "r15", Bucket: "photos", IP: "172.16.0.0/12", Rate: 5},
	{ID: "r16", Bucket: "photos", IP: "2001:db8:1::/48", Deny: 403},
	{ID: "r17", Bucket: "photos", PathPrefix: "private/", Deny: 403},
	{ID: "r18", Bucket: "photos", PathPrefix: "raw/", Rate: 10},
	{ID: "r19", Bucket: "photos", PathPrefix: "tmp/", Deny: 410},
	{ID: "r20", Bucket: "photos", PathPrefix: "drafts/", Deny: 403},
}

var benchReq = Request{
	Bucket:    "photos",
	Path:      "2026/01/holiday/IMG_0042.jpg",
	UserAgent: "Mozilla/5.0 (X11; Linux x86_64; rv:140.0) Gecko/20100101 Firefox/140.0",
	IP:        netip.MustParseAddr("203.0.113.7"),
}

func TestCheckAllocs(t *testing.T) {
	fc := clock.NewFake(t0)
	e := newEngine(t, Config{Now: fc.Now}, twentyRules...)
	if d := e.Check(benchReq); d.Action != Allow { // fills the UA cache
		t.Fatal(d)
	}
	if n := testing.AllocsPerRun(1000, func() { e.Check(benchReq) }); n != 0 {
		t.Errorf("20 rules, none matching: %v allocs per Check, want 0", n)
	}
	denied := benchReq
	denied.IP = ip("198.51.100.9")
	if n := testing.AllocsPerRun(1000, func() { e.Check(denied) }); n != 0 {
		t.Errorf("20 rules, deny: %v allocs per Check, want 0", n)
	}
	throttled := benchReq
	throttled.Path = "raw/x.cr2"
	e.Check(throttled) // creates the client's bucket
	if n := testing.AllocsPerRun(1000, func() { e.Check(throttled) }); n != 0 {
		t.Errorf("20 rules, throttle of a known client: %v allocs per Check, want 0", n)
	}
	empty := newEngine(t, Config{})
	if n := testing.AllocsPerRun(1000, func() { empty.Check(benchReq) }); n != 0 {
		t.Errorf("no rules: %v allocs per Check, want 0", n)
	}
}

func BenchmarkCheck20Rules(b *testing.B) {
	e := newEngine(b, Config{}, twentyRules...)
	e.Check(benchReq)
	b.ReportAllocs()
	for b.Loop() {
		if e.Check(benchReq).Action != Allow {
			b.Fatal("not allowed")
		}
	}
}

func BenchmarkCheck20RulesParallel(b *testing.B) {
	e := newEngine(b, Config{}, twentyRules...)
	e.Check(benchReq)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			e.Check(benchReq)
		}
	})
}

// BenchmarkCheckThrottle measures a request that passes a throttle rule
// (a known client): the clock read and the token bucket.
func BenchmarkCheckThrottle(b *testing.B) {
	e := newEngine(b, Config{}, twentyRules...)
	req := benchReq
	req.Path = "raw/x.cr2"
	e.Load(append(twentyRules[:17:17], Rule{ID: "r18", Bucket: "photos", PathPrefix: "raw/", Rate: 1e9}))
	e.Check(req)
	b.ReportAllocs()
	for b.Loop() {
		e.Check(req)
	}
}

// BenchmarkCheckNewUA measures User-Agent cache misses (10000 agents
// cycling through a 16-entry cache): every distinct User-Agent regexp of
// the set runs once per request.
func BenchmarkCheckNewUA(b *testing.B) {
	e := newEngine(b, Config{UACacheEntries: 16}, twentyRules...)
	uas := make([]Request, 10000)
	for i := range uas {
		uas[i] = benchReq
		uas[i].UserAgent = fmt.Sprintf("%s/%d", benchReq.UserAgent, i)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		e.Check(uas[i%len(uas)])
		i++
	}
}

func BenchmarkCheckNoRules(b *testing.B) {
	e := newEngine(b, Config{})
	b.ReportAllocs()
	for b.Loop() {
		e.Check(benchReq)
	}
}
