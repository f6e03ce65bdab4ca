package rules

import (
	"bytes"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// Action is what a Decision tells the front end to do.
type Action uint8

// The actions. The zero value is Allow.
const (
	// Allow lets the request through to storage.
	Allow Action = iota
	// Deny refuses the request with Decision.Status and the front end's
	// usual error body.
	Deny
	// Respond answers with Decision.Status, ContentType and Body.
	Respond
	// Throttle refuses the request with 429 Too Many Requests and a
	// Retry-After of Decision.RetryAfter.
	Throttle
)

// String returns the lowercase name of a, or "action(N)" for an unknown value.
func (a Action) String() string {
	switch a {
	case Allow:
		return "allow"
	case Deny:
		return "deny"
	case Respond:
		return "respond"
	case Throttle:
		return "throttle"
	}
	return fmt.Sprintf("action(%d)", uint8(a))
}

// Request is what Check needs to know about a request.
type Request struct {
	// Bucket is the bucket the request addresses; "" for requests outside
	// any bucket (only cluster rules apply).
	Bucket string
	// Path is the path inside the bucket; a leading "/" is ignored.
	Path string
	// UserAgent is the User-Agent header, "" if absent.
	UserAgent string
	// IP is the client address (see ClientIP). IPv4-mapped IPv6 addresses
	// match IPv4 rules. An invalid IP matches no IP rule, and all requests
	// with an invalid IP share one token bucket per throttle rule.
	IP netip.Addr
}

// Decision is the outcome of Check.
type Decision struct {
	// Action is what to do; Allow (the zero Decision) lets the request in.
	Action Action
	// Status is the HTTP status for Deny, Respond and Throttle (429).
	Status int
	// ContentType and Body are the answer of a Respond decision. Body is
	// shared by every decision of the rule: callers must not modify it.
	ContentType string
	Body        []byte
	// RetryAfter is, for Throttle, how long until the client's bucket holds
	// a token again (always > 0). See RetryAfterSeconds.
	RetryAfter time.Duration
	// RuleID is the ID of the rule that decided; "" for Allow.
	RuleID string
}

// RetryAfterSeconds returns RetryAfter rounded up to whole seconds, at least
// 1, for a Retry-After header.
func (d Decision) RetryAfterSeconds() int {
	s := int((d.RetryAfter + time.Second - 1) / time.Second)
	return max(1, s)
}

// RuleHits is the number of decisions one rule made.
type RuleHits struct {
	ID   string
	Hits uint64
}

// Config configures an Engine. The zero value is usable: zero fields take
// their defaults.
type Config struct {
	// Now reads the clock for the token buckets. Default time.Now.
	Now func() time.Time
	// MaxClientsPerRule bounds the token buckets (one per client IP) kept
	// for each throttle rule. Default 100000 (up to about 20 MB per rule:
	// ~180 bytes a client, measured). When full, buckets that are full
	// again (idle clients) are evicted first, then arbitrary ones.
	MaxClientsPerRule int
	// UACacheEntries bounds the cache of which User-Agent rules match a
	// User-Agent string. Default 4096 entries; an arbitrary entry is
	// evicted when full.
	UACacheEntries int
}

// Defaults of Config.
const (
	DefaultMaxClientsPerRule = 100000
	DefaultUACacheEntries    = 4096
)

// maxCachedUA is the longest User-Agent kept in the cache, in bytes: longer
// ones are matched against the regexps on every request, so a client cannot
// pin megabytes of cache with huge headers.
const maxCachedUA = 1024

// DefaultConfig returns a Config with every field at its default.
func DefaultConfig() Config {
	return Config{Now: time.Now, MaxClientsPerRule: DefaultMaxClientsPerRule, UACacheEntries: DefaultUACacheEntries}
}

// Validate reports a Config that New would refuse, wrapping ErrBadConfig.
func (c Config) Validate() error {
	if c.MaxClientsPerRule < 0 {
		return &kindError{kind: ErrBadConfig, msg: fmt.Sprintf("MaxClientsPerRule %d is negative", c.MaxClientsPerRule)}
	}
	if c.UACacheEntries < 0 {
		return &kindError{kind: ErrBadConfig, msg: fmt.Sprintf("UACacheEntries %d is negative", c.UACacheEntries)}
	}
	return nil
}

// Engine holds the loaded rule set and decides requests. Check and Hits are
// safe for concurrent use with each other and with Load; Load calls are
// serialized. No method does I/O or blocks beyond short internal locks.
type Engine struct {
	now        func() time.Time
	maxClients int
	uaEntries  int

	loadMu sync.Mutex // serializes Load
	set    atomic.Pointer[ruleSet]
}

// New returns an Engine with no rules (every request is allowed), or an
// error wrapping ErrBadConfig.
func New(cfg Config) (*Engine, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	d := DefaultConfig()
	if cfg.Now == nil {
		cfg.Now = d.Now
	}
	if cfg.MaxClientsPerRule == 0 {
		cfg.MaxClientsPerRule = d.MaxClientsPerRule
	}
	if cfg.UACacheEntries == 0 {
		cfg.UACacheEntries = d.UACacheEntries
	}
	e := &Engine{now: cfg.Now, maxClients: cfg.MaxClientsPerRule, uaEntries: cfg.UACacheEntries}
	e.set.Store(&ruleSet{byID: map[string]*compiled{}})
	return e, nil
}

// matchKind says what a compiled rule matches on.
type matchKind uint8

const (
	matchAll      matchKind = iota // default throttle: every request
	matchUA                        // UserAgent regexp, via the UA cache
	matchIP                        // client IP in prefix
	matchPath                      // bucket rule: path inside the bucket
	matchFullPath                  // cluster rule: "/bucket/path"
)

// compiled is a validated rule ready for Check. It is immutable once
// published, except for the counters behind its pointers.
type compiled struct {
	rule   Rule
	id     string
	kind   matchKind
	uaIdx  int          // matchUA: index into ruleSet.ua's regexps
	prefix netip.Prefix // matchIP
	path   string       // matchPath, matchFullPath: normalized prefix

	action      Action
	status      int
	contentType string
	body        []byte

	limit   rate.Limit
	burst   int
	clients *clientSet // Throttle: carried over by Load when id, limit and burst are unchanged

	hits *atomic.Uint64 // carried over by Load for an unchanged id
}

// group is the rules of one scope (the cluster, or one bucket) in ID order,
// split by kind of action.
type group struct {
	blocks    []*compiled // Deny and Respond
	throttles []*compiled
}

// ruleSet is one immutable loaded set of rules.
type ruleSet struct {
	cluster group
	buckets map[string]*group
	all     []*compiled // cluster rules then bucket rules by bucket name, each in ID order
	byID    map[string]*compiled
	ua      *uaCache // nil when no rule matches on User-Agent
	empty   bool
}

// Load validates rules and, if all are valid, replaces the loaded set with
// them atomically: a concurrent Check sees either the old set or the new
// one. Every rule needs a non-empty ID, unique in rules. Token buckets of a
// throttle rule whose ID, rate and burst are unchanged carry over, so a
// reload does not reset throttles; hit counters carry over for every
// unchanged ID. The User-Agent cache starts empty. On error (wrapping
// ErrBadRule, naming the rule) the old set stays. Load compiles every
// regexp: it is meant for rule changes, not per request.
func (e *Engine) Load(rules []Rule) error {
	e.loadMu.Lock()
	defer e.loadMu.Unlock()
	old := e.set.Load()

	rs := &ruleSet{buckets: map[string]*group{}, byID: make(map[string]*compiled, len(rules))}
	var uaRegexps []*regexp.Regexp
	uaIndex := map[string]int{}
	for i := range rules {
		r := rules[i]
		if r.ID == "" {
			return badRule(nil, "rule %d (%s) has no id", i, r)
		}
		if _, dup := rs.byID[r.ID]; dup {
			return badRule(nil, "duplicate rule id %q", r.ID)
		}
		ch, err := r.check()
		if err != nil {
			return fmt.Errorf("rule %s: %w", r.ID, err)
		}
		c := &compiled{id: r.ID, action: ch.action}
		switch {
		case r.UserAgent != "":
			c.kind = matchUA
			idx, ok := uaIndex[r.UserAgent]
			if !ok {
				// Rules sharing a pattern share its evaluation.
				idx = len(uaRegexps)
				uaIndex[r.UserAgent] = idx
				uaRegexps = append(uaRegexps, ch.ua)
			}
			c.uaIdx = idx
		case r.IP != "":
			c.kind = matchIP
			c.prefix = ch.prefix
		case r.PathPrefix != "" && r.Bucket != "":
			c.kind = matchPath
			c.path = strings.TrimPrefix(r.PathPrefix, "/")
		case r.PathPrefix != "":
			c.kind = matchFullPath
			c.path = "/" + strings.TrimPrefix(r.PathPrefix, "/")
		default:
			c.kind = matchAll
		}
		switch ch.action {
		case Deny:
			c.status = r.Deny
		case Respond:
			resp := *r.Respond
			// Own copy: the caller may reuse its slice.
			resp.Body = bytes.Clone(resp.Body)
			r.Respond = &resp
			c.status, c.contentType, c.body = resp.Status, resp.ContentType, resp.Body
			if c.status == 0 {
				c.status = DefaultRespondStatus
			}
			if c.contentType == "" {
				c.contentType = DefaultRespondContentType
			}
		case Throttle:
			c.status = 429
			c.limit = rate.Limit(r.Rate)
			c.burst = r.EffectiveBurst()
		}
		c.rule = r
		if o := old.byID[r.ID]; o != nil {
			c.hits = o.hits
			if c.action == Throttle && o.action == Throttle && o.limit == c.limit && o.burst == c.burst {
				c.clients = o.clients
			}
		}
		if c.hits == nil {
			c.hits = new(atomic.Uint64)
		}
		if c.action == Throttle && c.clients == nil {
			c.clients = newClientSet(c.limit, c.burst, e.maxClients)
		}
		rs.byID[r.ID] = c
	}

	ordered := make([]*compiled, 0, len(rs.byID))
	for _, c := range rs.byID {
		ordered = append(ordered, c)
	}
	slices.SortFunc(ordered, func(a, b *compiled) int {
		// Cluster rules ("" bucket) first, then by bucket, then by ID.
		if c := strings.Compare(a.rule.Bucket, b.rule.Bucket); c != 0 {
			return c
		}
		return compareIDs(a.id, b.id)
	})
	for _, c := range ordered {
		g := &rs.cluster
		if c.rule.Bucket != "" {
			g = rs.buckets[c.rule.Bucket]
			if g == nil {
				g = &group{}
				rs.buckets[c.rule.Bucket] = g
			}
		}
		if c.action == Throttle {
			g.throttles = append(g.throttles, c)
		} else {
			g.blocks = append(g.blocks, c)
		}
	}
	rs.all = ordered
	rs.empty = len(ordered) == 0
	if len(uaRegexps) > 0 {
		rs.ua = newUACache(uaRegexps, e.uaEntries)
	}
	e.set.Store(rs)
	return nil
}

// Rules returns the loaded rules in decision order: cluster rules, then each
// bucket's rules by bucket name, each in ID order. Safe for concurrent use;
// the Respond bodies are shared and must not be modified.
func (e *Engine) Rules() []Rule {
	rs := e.set.Load()
	out := make([]Rule, len(rs.all))
	for i, c := range rs.all {
		out[i] = c.rule
	}
	return out
}

// Hits returns, for every loaded rule in the order of Rules, the number of
// decisions it made: the Deny or Respond decisions of a deny or respond rule,
// the Throttle decisions attributed to a throttle rule (requests it let
// through are not counted). Counters survive Load for unchanged IDs. Safe
// for concurrent use; the counts are read atomically one by one, not as a
// snapshot of all.
func (e *Engine) Hits() []RuleHits {
	rs := e.set.Load()
	out := make([]RuleHits, len(rs.all))
	for i, c := range rs.all {
		out[i] = RuleHits{ID: c.id, Hits: c.hits.Load()}
	}
	return out
}

// maxPending is how many matching throttle rules Check remembers between
// its two passes without looking their buckets up again.
const maxPending = 8

// Check decides one request against the loaded rules (see the package
// documentation for the order and semantics). It is safe for concurrent use,
// does no I/O, and takes only short internal locks. It does not allocate
// when no rule matches, when the User-Agent was seen before (or no rule
// matches on User-Agent), and when a throttled client IP was seen before; a
// new User-Agent costs one evaluation of each distinct User-Agent regexp.
func (e *Engine) Check(req Request) Decision {
	rs := e.set.Load()
	if rs.empty {
		return Decision{}
	}
	bg := rs.buckets[req.Bucket]
	m := matcher{
		ua:     rs.ua,
		agent:  req.UserAgent,
		ip:     req.IP.Unmap().WithZone(""),
		path:   strings.TrimPrefix(req.Path, "/"),
		bucket: req.Bucket,
	}
	for _, c := range rs.cluster.blocks {
		if m.match(c) {
			return c.block()
		}
	}
	if bg != nil {
		for _, c := range bg.blocks {
			if m.match(c) {
				return c.block()
			}
		}
	}
	if len(rs.cluster.throttles) == 0 && (bg == nil || len(bg.throttles) == 0) {
		return Decision{}
	}

	// Throttles: first see whether every matching rule's bucket holds a
	// token, and take tokens only if all do, so that a request refused by one
	// rule does not spend tokens of another.
	var (
		pending [maxPending]struct {
			c   *compiled
			lim *rate.Limiter
		}
		n      int
		now    time.Time
		wait   time.Duration
		waiter *compiled
	)
	groups := [2]*group{&rs.cluster, bg}
	for _, g := range groups {
		if g == nil {
			continue
		}
		for _, c := range g.throttles {
			if !m.match(c) {
				continue
			}
			if n == 0 {
				now = e.now()
			}
			lim := c.clients.get(m.ip, now)
			if n < maxPending {
				pending[n].c, pending[n].lim = c, lim
			}
			n++
			if w := waitFor(lim, c.limit, now); w > wait {
				wait, waiter = w, c
			}
		}
	}
	if n > 0 && waiter == nil {
		// Second pass: take the tokens. A concurrent request of the same
		// client may have taken the last one since the first pass; then this
		// one is throttled after all (tokens already taken stay taken).
		take := func(c *compiled, lim *rate.Limiter) {
			if !lim.AllowN(now, 1) {
				if w := waitFor(lim, c.limit, now); w > wait || waiter == nil {
					wait, waiter = w, c
				}
			}
		}
		for _, p := range pending[:min(n, maxPending)] {
			take(p.c, p.lim)
		}
		if n > maxPending {
			// Rare: more matching throttles than remembered; find the rest again.
			i := 0
			for _, g := range groups {
				if g == nil {
					continue
				}
				for _, c := range g.throttles {
					if m.match(c) {
						if i >= maxPending {
							take(c, c.clients.get(m.ip, now))
						}
						i++
					}
				}
			}
		}
	}
	if waiter == nil {
		return Decision{}
	}
	waiter.hits.Add(1)
	return Decision{Action: Throttle, Status: 429, RetryAfter: max(wait, time.Nanosecond), RuleID: waiter.id}
}

// block returns the decision of a matching deny or respond rule.
func (c *compiled) block() Decision {
	c.hits.Add(1)
	return Decision{Action: c.action, Status: c.status, ContentType: c.contentType, Body: c.body, RuleID: c.id}
}

// matcher evaluates the match of compiled rules against one request,
// looking the User-Agent up at most once.
type matcher struct {
	ua     *uaCache
	agent  string
	ip     netip.Addr
	path   string // inside the bucket, without a leading "/"
	bucket string
	uaBits []uint64
	uaDone bool
}

func (m *matcher) match(c *compiled) bool {
	switch c.kind {
	case matchAll:
		return true
	case matchIP:
		return c.prefix.Contains(m.ip)
	case matchPath:
		return strings.HasPrefix(m.path, c.path)
	case matchFullPath:
		return fullPathHasPrefix(m.bucket, m.path, c.path)
	case matchUA:
		if !m.uaDone {
			m.uaBits = m.ua.lookup(m.agent)
			m.uaDone = true
		}
		return m.uaBits[c.uaIdx>>6]&(1<<(c.uaIdx&63)) != 0
	}
	return false
}

// fullPathHasPrefix reports whether "/"+bucket+"/"+path (or "/"+path when
// bucket is "") starts with prefix, which starts with "/", without building
// the string.
func fullPathHasPrefix(bucket, path, prefix string) bool {
	p := prefix[1:]
	if bucket != "" {
		if len(p) <= len(bucket) {
			return bucket[:len(p)] == p
		}
		if p[:len(bucket)] != bucket || p[len(bucket)] != '/' {
			return false
		}
		p = p[len(bucket)+1:]
	}
	return strings.HasPrefix(path, p)
}
