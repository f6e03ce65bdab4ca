package rules

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"mime"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
)

// Errors of this package, tested with errors.Is.
var (
	// ErrBadRule is wrapped by every error of Rule.Validate, ParseRate and
	// Engine.Load: the rule (or the rate text) is refused and nothing changed.
	ErrBadRule = errors.New("rules: bad rule")
	// ErrBadAddress is wrapped by ParsePrefixes for an entry that is neither
	// an IP address nor a CIDR prefix.
	ErrBadAddress = errors.New("rules: bad ip or cidr")
	// ErrBadConfig is wrapped by Config.Validate and New.
	ErrBadConfig = errors.New("rules: bad config")
)

// Limits on rule values, checked by Rule.Validate.
const (
	// MaxBodySize is the largest Response.Body, in bytes (64 KiB): rules live
	// in the replicated log and in every node's memory.
	MaxBodySize = 64 << 10
	// MaxRate is the highest throttle rate, in requests per second. Higher
	// rates are not throttles; the bound also keeps the default burst an int.
	MaxRate = 1e9
	// MaxBurst is the largest explicit Burst.
	MaxBurst = 1 << 30
)

// Defaults of a Response.
const (
	DefaultRespondStatus      = 403
	DefaultRespondContentType = "text/html; charset=utf-8"
)

// Rule is one abuse rule: at most one match (User-Agent regexp, client IP or
// CIDR, or path prefix) and exactly one action (deny, respond or throttle).
// It is the value stored in the cluster's replicated log, so its JSON field
// names are part of the on-disk format and must not change. A Rule is a plain
// value; its methods are safe for concurrent use and do not block.
type Rule struct {
	// ID is assigned by the cluster ("r7") and unique among loaded rules.
	// Rules are ordered by ID with digit runs compared as numbers, so "r2"
	// comes before "r10" (see doc.go). Validate accepts an empty ID (a rule
	// not yet submitted); Load does not.
	ID string `json:"id"`
	// Bucket scopes the rule to one bucket; "" makes it a cluster rule that
	// applies to requests for every bucket.
	Bucket string `json:"bucket,omitempty"`

	// UserAgent is an RE2 regexp matched, unanchored, against the
	// User-Agent header ("" when absent). Case-sensitive unless it starts
	// with (?i).
	UserAgent string `json:"user_agent,omitempty"`
	// IP is an address ("192.0.2.7", "2001:db8::1") or a CIDR prefix
	// ("10.0.0.0/8", "2001:db8::/32") matched against the client IP.
	// IPv4-mapped IPv6 forms are treated as IPv4.
	IP string `json:"ip,omitempty"`
	// PathPrefix matches requests whose path starts with it. For a bucket
	// rule it is a prefix of the path inside the bucket ("private/", a
	// leading "/" is ignored); for a cluster rule a prefix of
	// "/bucket/path" (a leading "/" is implied).
	PathPrefix string `json:"path_prefix,omitempty"`

	// Deny refuses matching requests with this HTTP status (400-599) and no
	// configured body.
	Deny int `json:"deny,omitempty"`
	// Respond answers matching requests with a configured status and body.
	Respond *Response `json:"respond,omitempty"`
	// Rate throttles matching requests to this many requests per second
	// per client IP (a token bucket per rule and client IP).
	Rate float64 `json:"rate,omitempty"`
	// Burst is the token bucket's size; 0 means max(1, ceil(Rate)).
	Burst int `json:"burst,omitempty"`
}

// Response is the answer of a respond rule.
type Response struct {
	// Status is the HTTP status, 200-599; 0 means DefaultRespondStatus (403).
	Status int `json:"status"`
	// ContentType is the Content-Type of Body; "" means
	// DefaultRespondContentType.
	ContentType string `json:"content_type"`
	// Body is sent as is; at most MaxBodySize bytes.
	Body []byte `json:"body"`
}

// badRule builds an error wrapping ErrBadRule (and cause, if not nil) whose
// text is "rules: " + msg [+ ": " + cause].
func badRule(cause error, format string, args ...any) error {
	return &kindError{kind: ErrBadRule, msg: fmt.Sprintf(format, args...), cause: cause}
}

// kindError is an error of one of the package's kinds that reads as
// "rules: what went wrong: cause" rather than repeating the sentinel's text.
type kindError struct {
	kind  error
	msg   string
	cause error
}

func (e *kindError) Error() string {
	if e.cause != nil {
		return "rules: " + e.msg + ": " + e.cause.Error()
	}
	return "rules: " + e.msg
}

func (e *kindError) Unwrap() []error {
	if e.cause != nil {
		return []error{e.kind, e.cause}
	}
	return []error{e.kind}
}

// DecodeRecord parses a rule's stored form: the JSON of a Rule, kept in
// the log as a record named N (internal/store's RecordRule). Its ID is
// "r" + N; the rule is validated (an error wraps ErrBadRule, or is the
// JSON's).
func DecodeRecord(name string, value []byte) (Rule, error) {
	var rule Rule
	if err := json.Unmarshal(value, &rule); err != nil {
		return rule, err
	}
	rule.ID = "r" + name
	return rule, rule.Validate()
}

// Validate reports whether r is a well-formed rule, with an error wrapping
// ErrBadRule that names the offending field. It does not check ID (see
// Engine.Load). It compiles the UserAgent regexp, so it costs microseconds.
func (r Rule) Validate() error {
	_, err := r.check()
	return err
}

// checked is what check learns about a valid rule.
type checked struct {
	ua     *regexp.Regexp
	prefix netip.Prefix
	action Action
}

func (r Rule) check() (checked, error) {
	var c checked
	if strings.Contains(r.Bucket, "/") {
		return c, badRule(nil, "bad bucket %q: contains '/'", r.Bucket)
	}
	matches := 0
	if r.UserAgent != "" {
		matches++
	}
	if r.IP != "" {
		matches++
	}
	if r.PathPrefix != "" {
		matches++
	}
	if matches > 1 {
		return c, badRule(nil, "a rule has at most one match: --user-agent, --ip or --path-prefix")
	}
	if r.UserAgent != "" {
		re, err := regexp.Compile(r.UserAgent)
		if err != nil {
			return c, badRule(err, "bad user-agent regexp %q", r.UserAgent)
		}
		c.ua = re
	}
	if r.IP != "" {
		p, err := parsePrefix(r.IP)
		if err != nil {
			return c, badRule(err, "bad ip %q", r.IP)
		}
		c.prefix = p
	}

	actions := 0
	if r.Deny != 0 {
		actions++
		c.action = Deny
	}
	if r.Respond != nil {
		actions++
		c.action = Respond
	}
	if r.Rate != 0 {
		actions++
		c.action = Throttle
	}
	if actions != 1 {
		return c, badRule(nil, "a rule needs exactly one action: --deny, --respond or --rate")
	}
	if r.Burst != 0 && c.action != Throttle {
		return c, badRule(nil, "burst %d given without --rate", r.Burst)
	}
	switch c.action {
	case Deny:
		if r.Deny < 400 || r.Deny > 599 {
			return c, badRule(nil, "deny status %d out of range 400-599", r.Deny)
		}
	case Respond:
		if s := r.Respond.Status; s != 0 && (s < 200 || s > 599) {
			return c, badRule(nil, "respond status %d out of range 200-599", s)
		}
		if n := len(r.Respond.Body); n > MaxBodySize {
			return c, badRule(nil, "respond body of %d bytes is larger than %d", n, MaxBodySize)
		}
		if ct := r.Respond.ContentType; ct != "" {
			if _, _, err := mime.ParseMediaType(ct); err != nil {
				return c, badRule(err, "bad respond content type %q", ct)
			}
		}
	case Throttle:
		if math.IsNaN(r.Rate) || r.Rate <= 0 || r.Rate > MaxRate {
			return c, badRule(nil, "rate %v out of range: want more than 0 and at most %g requests per second", r.Rate, float64(MaxRate))
		}
		if r.Burst < 0 || r.Burst > MaxBurst {
			return c, badRule(nil, "burst %d out of range 0-%d", r.Burst, MaxBurst)
		}
	}
	if matches == 0 && c.action != Throttle {
		return c, badRule(nil, "a deny or respond rule needs a match: --user-agent, --ip or --path-prefix")
	}
	return c, nil
}

// EffectiveBurst returns the token bucket size of a throttle rule: Burst, or
// max(1, ceil(Rate)) when Burst is 0. It is meaningless for other rules.
func (r Rule) EffectiveBurst() int {
	if r.Burst > 0 {
		return r.Burst
	}
	return max(1, int(math.Ceil(r.Rate)))
}

// String returns a one-line human summary of r for listings, e.g.
//
//	r7 bucket=photos user-agent~"(?i)curl" deny 403
//	r9 cluster all-clients rate 10/s burst 10
//
// It does not validate r.
func (r Rule) String() string {
	var b strings.Builder
	id := r.ID
	if id == "" {
		id = "-"
	}
	b.WriteString(id)
	if r.Bucket == "" {
		b.WriteString(" cluster")
	} else {
		b.WriteString(" bucket=")
		b.WriteString(r.Bucket)
	}
	switch {
	case r.UserAgent != "":
		fmt.Fprintf(&b, " user-agent~%q", r.UserAgent)
	case r.IP != "":
		b.WriteString(" ip=")
		b.WriteString(r.IP)
	case r.PathPrefix != "":
		fmt.Fprintf(&b, " path^=%q", r.PathPrefix)
	default:
		b.WriteString(" all-clients")
	}
	switch {
	case r.Deny != 0:
		fmt.Fprintf(&b, " deny %d", r.Deny)
	case r.Respond != nil:
		st, ct := r.Respond.Status, r.Respond.ContentType
		if st == 0 {
			st = DefaultRespondStatus
		}
		if ct == "" {
			ct = DefaultRespondContentType
		}
		fmt.Fprintf(&b, " respond %d %q %dB", st, ct, len(r.Respond.Body))
	case r.Rate != 0:
		fmt.Fprintf(&b, " rate %s burst %d", FormatRate(r.Rate), r.EffectiveBurst())
	default:
		b.WriteString(" no-action")
	}
	return b.String()
}

// ParseRate parses a throttle rate for the CLI: "N/s", "N/m", "N/h" or a bare
// "N" (per second), N a positive decimal number ("0.5/s", "600/m"). It
// returns requests per second, or an error wrapping ErrBadRule.
func ParseRate(s string) (float64, error) {
	num, unit, found := strings.Cut(strings.TrimSpace(s), "/")
	per := 1.0
	switch unit = strings.TrimSpace(unit); {
	case !found, unit == "s":
	case unit == "m":
		per = 60
	case unit == "h":
		per = 3600
	default:
		return 0, badRule(nil, "bad rate %q: want N, N/s, N/m or N/h", s)
	}
	n, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
	if err != nil || math.IsNaN(n) || math.IsInf(n, 0) || n <= 0 {
		return 0, badRule(nil, "bad rate %q: want a positive number, then /s, /m or /h", s)
	}
	r := n / per
	if r > MaxRate {
		return 0, badRule(nil, "bad rate %q: more than %g requests per second", s, float64(MaxRate))
	}
	return r, nil
}

// FormatRate formats requests per second the way ParseRate reads them,
// choosing the unit (/s, /m, /h) that gives a whole number if one does.
func FormatRate(perSecond float64) string {
	for _, u := range [...]struct {
		n    float64
		unit string
	}{{1, "/s"}, {60, "/m"}, {3600, "/h"}} {
		v := perSecond * u.n
		if r := math.Round(v); r >= 1 && math.Abs(v-r) < 1e-9*max(1, r) {
			return strconv.FormatFloat(r, 'f', -1, 64) + u.unit
		}
	}
	return strconv.FormatFloat(perSecond, 'g', -1, 64) + "/s"
}

// parsePrefix parses an IP address (as a single-address prefix) or a CIDR
// prefix. IPv4-mapped IPv6 forms become IPv4, host bits are cleared, and
// zones are refused.
func parsePrefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, err
		}
		if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
			p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	if a.Zone() != "" {
		return netip.Prefix{}, errors.New("an IPv6 zone is not allowed")
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// compareIDs orders rule IDs "naturally": runs of digits compare by numeric
// value (so "r2" < "r10"), other bytes by value; IDs that compare equal that
// way ("r01", "r1") fall back to plain byte order. It is a total order.
func compareIDs(a, b string) int {
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		ca, cb := a[i], b[j]
		if isDigit(ca) && isDigit(cb) {
			si, sj := i, j
			for i < len(a) && isDigit(a[i]) {
				i++
			}
			for j < len(b) && isDigit(b[j]) {
				j++
			}
			na := strings.TrimLeft(a[si:i], "0")
			nb := strings.TrimLeft(b[sj:j], "0")
			if len(na) != len(nb) {
				return cmpInt(len(na), len(nb))
			}
			if c := strings.Compare(na, nb); c != 0 {
				return c
			}
			continue
		}
		// A digit run sorts like a single byte between '/' and ':'.
		if isDigit(ca) {
			ca = '0'
		}
		if isDigit(cb) {
			cb = '0'
		}
		if ca != cb {
			return cmpInt(int(ca), int(cb))
		}
		i++
		j++
	}
	if c := cmpInt(len(a)-i, len(b)-j); c != 0 {
		return c
	}
	return strings.Compare(a, b)
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func cmpInt(a, b int) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
