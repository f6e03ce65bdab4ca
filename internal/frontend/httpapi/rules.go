package httpapi

import (
	"encoding/json"
	"net/http"
	"net/netip"
	"strconv"
	"strings"

	"github.com/cairn-fs/cairn/internal/access/rules"
)

// Abuse rules (internal/access/rules) are checked for every request to a
// bucket, native or S3, before it is authenticated or reaches the store:
// on the fast path (fastresp.go) and in route. Node endpoints (/_cairn/...)
// are exempt, so that no rule can cut the cluster's own traffic or lock
// the operator out.

// ruleTarget splits a decoded request path into bucket and path for the
// rules; ok is false for node endpoints.
func ruleTarget(p string) (bucket, path string, ok bool) {
	if strings.HasPrefix(p, NodePrefix) || p == "/_cairn" {
		return "", "", false
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

// fastRule answers a non-Allow decision on the fast path.
func (s *Server) fastRule(fc *fastConn, req *fastReq, a *fastAnswer, d rules.Decision) {
	status, ct, body, ra := ruleAnswer(d)
	a.status, a.rule = status, d.RuleID
	b := fc.writeBuf()
	b = appendStatusLine(b, req.http10, status)
	b = append(b, "Cache-Control: no-store\r\nContent-Type: "...)
	b = append(b, ct...)
	b = append(b, "\r\n"...)
	if ra != "" {
		b = append(b, "Retry-After: "...)
		b = append(b, ra...)
		b = append(b, "\r\n"...)
	}
	b = append(b, "Date: "...)
	b = append(b, s.fast.date.get(a.start)...)
	b = append(b, "\r\nContent-Length: "...)
	b = strconv.AppendInt(b, int64(len(body)), 10)
	b = append(b, "\r\n"...)
	b = appendConnection(b, req)
	b = append(b, "\r\n"...)
	if !req.head {
		b = append(b, body...)
		a.bytes = int64(len(body))
	}
	*fc.wbuf = b
}
