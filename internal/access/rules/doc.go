// Package rules is the abuse filter at the edge of every Cairn node: deny,
// answer or throttle requests by User-Agent, client IP or path before they
// reach storage. Every front end (the native HTTP GET fast path, S3, WebDAV)
// calls Engine.Check once per request, after working out the client address
// with ClientIP.
//
// The rules themselves live in the cluster's replicated log; this package
// defines the stored value (Rule, JSON-encoded; its field names are a stored
// format and must not change), validates and compiles rules (Engine.Load),
// and decides requests (Engine.Check). It does no I/O and holds no
// package-level mutable state; time comes from Config.Now.
//
// # Rules
//
// A rule has a scope, at most one match and exactly one action:
//
//   - scope: a bucket, or the whole cluster (Bucket == "");
//   - match: a User-Agent RE2 regexp (unanchored, case-sensitive unless
//     written with (?i)), an IP or CIDR (v4 or v6; IPv4-mapped IPv6
//     addresses count as IPv4 on both sides), or a path prefix; a throttle
//     may have no match, making it the default per-client-IP limit of its
//     bucket or of the cluster;
//   - action: deny with a status (400-599), respond with a configured status
//     (default 403), content type and body (at most 64 KiB), or throttle to a
//     rate per client IP with a token bucket (burst default max(1, ceil(rate))).
//
// Path prefixes: a bucket rule's prefix is compared with the path inside the
// bucket, both without a leading "/" ("private/" matches "private/a.jpg" in
// that bucket). A cluster rule's prefix is compared with "/bucket/path"
// ("/photos/private/"); a missing leading "/" is implied. Comparison is
// plain byte prefix: "/photos" also matches bucket "photos2", so end a
// prefix with "/" to mean one bucket or folder.
//
// # Order and semantics of Check
//
// The rules that apply to a request are the cluster rules and the rules of
// the request's bucket. They are ordered cluster rules first, then bucket
// rules, each by ID in natural order: runs of digits compare as numbers, so
// "r2" < "r10" < "r11" (IDs that tie that way, "r01" and "r1", fall back to
// byte order).
//
//  1. Deny and respond rules are tried in that order; the first that matches
//     decides (Deny or Respond), and no token is taken.
//  2. Otherwise every matching throttle rule is consulted with the client
//     IP's bucket for that rule. If every such bucket holds a token, one
//     token is taken from each and the request is allowed. If any bucket is
//     empty, the decision is Throttle (429), no token is taken from any
//     bucket, RetryAfter is the longest wait until the empty buckets hold a
//     token again, and RuleID is the rule with that wait. (Two passes: a
//     concurrent request of the same client can empty a bucket between them;
//     that request is then throttled and keeps the tokens it already took.)
//  3. Otherwise the request is allowed.
//
// Each rule counts the decisions it made (Engine.Hits): deny/respond
// decisions, and Throttle decisions attributed to a throttle rule.
//
// # Cost and memory
//
// Load publishes an immutable compiled set through an atomic pointer, so
// Check takes no lock for the rule set and never sees half a reload. Check
// does not allocate when nothing matches or the User-Agent was seen before,
// and costs well under a microsecond with 20 rules (BenchmarkCheck20Rules).
// Regexps are the expensive part, so the set keeps a bounded cache
// (Config.UACacheEntries, default 4096) from User-Agent string to the bit
// set of the distinct User-Agent regexps that match it; a miss evaluates
// every distinct User-Agent regexp of the set once. User-Agents longer than
// 1 KiB are not cached. The cache starts empty after each Load.
//
// Token buckets (golang.org/x/time/rate Limiters) are kept per throttle rule
// and client IP in a sharded map of at most Config.MaxClientsPerRule
// entries (default 100000). When a shard is full, buckets that have refilled
// (idle clients, indistinguishable from a new bucket) are evicted first,
// then arbitrary ones; an attacker spreading over more addresses than that
// bound gets fresh buckets for evicted addresses, so set per-prefix rules
// (an IP rule with a CIDR) for such floods. Buckets carry over a Load for a
// rule whose ID, rate and burst are unchanged; hit counters for every
// unchanged ID.
//
// # Client address
//
// ClientIP takes the peer address unless the peer is a trusted proxy
// (--trusted-proxy, parsed by ParsePrefixes); then X-Forwarded-For is read
// from the right, skipping trusted proxies, and the first untrusted address
// is the client. X-Forwarded-For from an untrusted peer is ignored, so it
// cannot be used to dodge or frame a rule.
package rules
