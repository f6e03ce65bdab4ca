package httpapi

import (
	"encoding/json"
	"net/http"
	"net/netip"
	"strconv"
	"strings"

	"github.com/cairn-fs/cairn/internal/access/rules"
	"github.com/cairn-fs/cairn/internal/frontend/httpapi/fastpath"
)

// The front door: the one decision, made for every request by both paths
// (route for net/http, the planner for the fast path), of the abuse rules
// and of the API that serves it. Abuse rules (internal/access/rules) are
// checked for every request to a bucket, native, WebDAV or S3, before it
// is authenticated or reaches the store. Node endpoints (/_cairn/...) are
// exempt, so that no rule can cut the cluster's own traffic or lock the
// operator out.

// door is where the front door sends a request.
type door uint8

const (
	doorNative door = iota // the native API: parseTarget, then openRead
	doorRule               // an abuse rule answers it
	doorDAV                // WebDAV (Config.DAV), under DAVPrefix
	doorS3                 // the S3 API (Config.S3)
	// doorPresigned is the S3 API too, for a presigned URL (a query with
	// X-Amz-Signature, no Authorization field): net/http gives it to S3,
	// the fast path may serve it as the native GET (openPresigned).
	doorPresigned
	doorNode     // a node endpoint: NodePrefix, "/_cairn"
	doorSnapshot // a snapshot's file or directory: SnapshotPrefix (snapshot.go)
)

// entrance is what the front door reads of a request. Its strings may be
// views of the fast path's read buffer: the door keeps none.
type entrance struct {
	host             string
	path             string // percent-decoded
	rawQuery         string
	authorization    string
	hasAuthorization bool
	userAgent        string
	ip               netip.Addr // the client IP; read only with Config.Rules
}

// frontDoor decides where the request e goes, and for doorRule the
// decision that answers it, in this order: abuse rules, WebDAV, S3
// (presigned or not), node endpoints, the native API.
func (s *Server) frontDoor(e *entrance) (door, rules.Decision) {
	if s.cfg.Rules != nil {
		if d := s.checkRules(e.host, e.path, e.userAgent, e.ip); d.Action != rules.Allow {
			return doorRule, d
		}
	}
	if s.cfg.DAV != nil && isDAV(e.path) {
		return doorDAV, rules.Decision{}
	}
	node := strings.HasPrefix(e.path, NodePrefix) || e.path == "/_cairn"
	if s3 := s.cfg.S3; s3 != nil {
		q := e.rawQuery
		if node {
			// No path-style bucket is named _cairn: a node endpoint's
			// query (GET /_cairn/trash/B?prefix=P) does not make it S3,
			// only a signature, a virtual host or an S3 tool does.
			q = ""
		}
		if s3.Match(e.host, e.authorization, q, e.userAgent) {
			if !e.hasAuthorization && strings.Contains(q, "X-Amz-Signature=") {
				return doorPresigned, rules.Decision{}
			}
			return doorS3, rules.Decision{}
		}
	}
	if node {
		return doorNode, rules.Decision{}
	}
	if strings.HasPrefix(e.path, SnapshotPrefix) {
		return doorSnapshot, rules.Decision{}
	}
	return doorNative, rules.Decision{}
}

// ruleTarget splits a decoded request path into bucket and path for the
// rules; ok is false for node endpoints.
func ruleTarget(p string) (bucket, path string, ok bool) {
	if strings.HasPrefix(p, NodePrefix) || p == "/_cairn" {
		return "", "", false
	}
	if rest, ok := strings.CutPrefix(p, SnapshotPrefix); ok { // BUCKET/NAME/PATH: the rules see BUCKET/PATH
		bucket, rest, _ = strings.Cut(rest, "/")
		_, path, _ = strings.Cut(rest, "/")
		return bucket, path, true
	}
	p = strings.TrimPrefix(p, "/_dav") // WebDAV's /_dav/BUCKET/PATH
	bucket, path, _ = strings.Cut(strings.TrimPrefix(p, "/"), "/")
	return bucket, path, true
}

// checkRules decides the request for path p on host by the abuse rules.
// ip is its client IP. A virtual-hosted S3 request's bucket is in its
// host.
func (s *Server) checkRules(host, p, userAgent string, ip netip.Addr) rules.Decision {
	if s.cfg.Rules == nil {
		return rules.Decision{}
	}
	bucket, path, ok := ruleTarget(p)
	if !ok {
		return rules.Decision{}
	}
	if s.cfg.S3 != nil {
		if hb := s.cfg.S3.HostBucket(host); hb != "" {
			bucket, path = hb, strings.TrimPrefix(p, "/")
		}
	}
	return s.cfg.Rules.Check(rules.Request{Bucket: bucket, Path: path, UserAgent: userAgent, IP: ip})
}

// clientIP returns the client address of a net/http request.
func (s *Server) clientIP(r *http.Request) netip.Addr {
	return rules.ClientIP(r.RemoteAddr, r.Header.Values("X-Forwarded-For"), s.cfg.TrustedProxies)
}

// fastClientIP returns the client address of a fast-path request: the
// peer (parsed once per connection), or from X-Forwarded-For when the
// peer is a trusted proxy.
func (s *Server) fastClientIP(req *fastpath.Request) netip.Addr {
	peer := req.Peer
	if !peer.IP.IsValid() {
		peer.IP = rules.ClientIP(peer.RemoteAddr(), nil, nil)
	}
	trusted := s.cfg.TrustedProxies
	if len(trusted) == 0 || req.Hdr[fastpath.HdrXForwardedFor] == nil {
		return peer.IP
	}
	var xff [1]string
	xff[0] = fastpath.View(req.Hdr[fastpath.HdrXForwardedFor])
	return rules.ClientIP(peer.RemoteAddr(), xff[:], trusted)
}

// ruleAnswer is the status, headers and body of a non-Allow decision.
func ruleAnswer(d rules.Decision) (status int, contentType string, body []byte, retryAfter string) {
	switch d.Action {
	case rules.Respond:
		return d.Status, d.ContentType, d.Body, ""
	case rules.Throttle:
		ra := strconv.Itoa(d.RetryAfterSeconds())
		b, _ := json.Marshal(errorBody{Error: "too many requests from your address (rule " + d.RuleID + "); retry after " + ra + " s", Code: "TooManyRequests"})
		return http.StatusTooManyRequests, "application/json", append(b, '\n'), ra
	}
	b, _ := json.Marshal(errorBody{Error: "request refused by rule " + d.RuleID, Code: "Denied"})
	return d.Status, "application/json", append(b, '\n'), ""
}

// serveRule answers a non-Allow decision through net/http.
func (s *Server) serveRule(rs *reqState, d rules.Decision) {
	status, ct, body, ra := ruleAnswer(d)
	h := rs.w.Header()
	h[hdrContentType] = []string{ct}
	h[hdrContentLength] = []string{strconv.Itoa(len(body))}
	h[hdrCacheControl] = []string{"no-store"}
	if ra != "" {
		h["Retry-After"] = []string{ra}
	}
	rs.rule = d.RuleID
	rs.w.WriteHeader(status)
	if rs.req.Method != http.MethodHead {
		_, _ = rs.w.Write(body)
	}
}

// planRule answers a non-Allow decision on the fast path, with the bytes
// net/http writes for serveRule: its Content-Length is the handler's,
// so net/http sorts it among the handler's fields, before Date.
func planRule(req *fastpath.Request, p *fastpath.Plan, d rules.Decision) {
	status, ct, body, ra := ruleAnswer(d)
	p.Status, p.Rule = status, d.RuleID
	b := fastpath.AppendStatusLine(p.Buf, req, status)
	b = append(b, "Cache-Control: no-store\r\nContent-Length: "...)
	b = strconv.AppendInt(b, int64(len(body)), 10)
	b = append(b, "\r\n"...)
	b = fastpath.AppendField(b, "Content-Type: ", ct)
	if ra != "" {
		b = append(b, "Retry-After: "...)
		b = append(b, ra...)
		b = append(b, "\r\n"...)
	}
	b = fastpath.AppendHeadEnd(b, req)
	if !req.Head {
		b = append(b, body...)
		p.Bytes = int64(len(body))
	}
	p.Buf = b
}
