package s3

import (
	"context"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-fs/cairn/internal/access"
	"github.com/cairn-fs/cairn/internal/access/sigv4"
	"github.com/cairn-fs/cairn/internal/frontend/httpapi/fastpath"
	"github.com/cairn-fs/cairn/internal/store"
)

// PlanSigned implements httpapi.S3Handler: on the native listener's fast
// path, it plans the head of the answer to a GET or HEAD of an object
// signed with SigV4 in its Authorization header (what the SDKs'
// GetObject and HeadObject send), with the bytes ServeHTTP would write
// for it through net/http (the Date value and x-amz-request-id aside):
// the status line, the fields of getObject's 200 or 206 in net/http's
// order, Date and Connection. p.Path is the decoded path. It sets p.Buf
// (the head appended), p.Status, p.Off and p.N (the body's range of the
// object) and p.Source, and returns the open object, whose body the
// caller plans (none for a HEAD).
//
// It checks the signature with sigv4.Verifier.VerifyHeaderRequest (no
// allocation: the cached signing key, the canonical request on the
// stack), then does what ServeHTTP does for GetObject: the principal of
// the key, the bucket, the object, authorizeObject (grants, ACLs, the
// bucket's policy) and the Range. It answers false, having changed
// nothing, for every request it does not answer exactly so, which the
// caller hands to net/http and ServeHTTP: any error or refusal (a bad or
// expired signature, an unknown key, a denial, a missing object:
// ServeHTTP words them), a conditional or If-Range field, a query other
// than none or "x-id=GetObject", a virtual-hosted bucket, a versioned
// bucket (x-amz-version-id), a snapshot, internal or directory key, an
// object with stored S3 headers (x-amz-meta-*, Content-Disposition, ...),
// and whatever VerifyHeaderRequest leaves to Verify.
//
// It does not keep req's bytes. Safe for concurrent use.
func (h *Handler) PlanSigned(req *fastpath.Request, p *fastpath.Plan) (store.Object, bool) {
	hdr := &req.Hdr
	if hdr[fastpath.HdrIfMatch] != nil || hdr[fastpath.HdrIfNoneMatch] != nil || hdr[fastpath.HdrIfModifiedSince] != nil ||
		hdr[fastpath.HdrIfUnmodifiedSince] != nil || hdr[fastpath.HdrIfRange] != nil {
		return nil, false
	}
	query := fastpath.View(req.Query)
	if query != "" && query != "x-id=GetObject" {
		return nil, false
	}
	if h.cfg.Domain != "" && bucketFromHost(fastpath.View(hdr[fastpath.HdrHost]), h.cfg.Domain) != "" {
		return nil, false
	}
	bucket, key, _ := strings.Cut(strings.TrimPrefix(p.Path, "/"), "/")
	if bucket == "" || key == "" || strings.HasSuffix(key, "/") || hidden(key) {
		return nil, false
	}
	method, op, ok := http.MethodGet, "GetObject", h.metrics.getOK
	if req.Head {
		method, op, ok = http.MethodHead, "HeadObject", h.metrics.headOK
	}
	// Parse keeps one Host field at most (it hands off requests with more).
	host := hdr[fastpath.HdrHost]
	id, verified := h.sig.VerifyHeaderRequest(&sigv4.HeaderRequest{Method: method, Path: p.Path, RawQuery: query, Fields: req,
		Host: fastpath.View(host), OneHost: host != nil})
	if !verified {
		return nil, false
	}
	principal, err := h.auth.PrincipalFor(id)
	if err != nil {
		return nil, false
	}
	ctx := context.Background()
	b, err := h.st.Bucket(ctx, bucket)
	if err != nil || store.Versioned(b) {
		return nil, false
	}
	obj, err := h.st.Open(ctx, bucket, key)
	if err != nil {
		return nil, false
	}
	info := obj.Info()
	rq := request{principal: principal, op: op}
	if hasStoredHeaders(info.Xattrs) || h.authorizeObject(ctx, &rq, access.ActionRead, b, key, objectACL(info), "") != nil {
		obj.Close()
		return nil, false
	}
	off, n, status := int64(0), info.Size, http.StatusOK
	if spec := fastpath.View(hdr[fastpath.HdrRange]); spec != "" {
		start, length, ranged, err := parseRange(spec, info.Size)
		if err != nil {
			obj.Close()
			return nil, false // InvalidRange
		}
		if ranged {
			off, n, status = start, length, http.StatusPartialContent
		}
	}

	// getObject's fields, as net/http writes them: sorted by name.
	buf := fastpath.AppendStatusLine(p.Buf, req, status)
	buf = append(buf, "Accept-Ranges: bytes\r\nContent-Length: "...)
	buf = strconv.AppendInt(buf, n, 10)
	buf = append(buf, "\r\n"...)
	if status == http.StatusPartialContent {
		buf = append(buf, "Content-Range: bytes "...)
		buf = strconv.AppendInt(buf, off, 10)
		buf = append(buf, '-')
		buf = strconv.AppendInt(buf, off+n-1, 10)
		buf = append(buf, '/')
		buf = strconv.AppendInt(buf, info.Size, 10)
		buf = append(buf, "\r\n"...)
	}
	buf = fastpath.AppendField(buf, "Content-Type: ", contentType(info))
	buf = append(buf, "Etag: \""...)
	buf = append(buf, info.ETag...)
	buf = append(buf, "\"\r\nLast-Modified: "...)
	buf = appendHTTPDate(buf, info.ModTime)
	buf = append(buf, "\r\nServer: Cairn\r\nX-Amz-Request-Id: "...)
	buf = appendRequestID(buf)
	buf = append(buf, "\r\n"...)
	p.Buf = fastpath.AppendHeadEnd(buf, req)
	p.Status, p.Off, p.N, p.Source = status, off, n, obj
	ok.Inc()
	h.metrics.fast.Inc()
	return obj, true
}

// hasStoredHeaders reports whether an object has attributes that
// setStoredHeaders turns into answer fields.
func hasStoredHeaders(x map[string][]byte) bool {
	for k := range x {
		if name, ok := strings.CutPrefix(k, xattrPrefix); ok && (strings.HasPrefix(name, "x-amz-meta-") || isStoredHeader(name)) {
			return true
		}
	}
	return false
}

// appendRequestID appends a request id as newRequestID makes them (16
// uppercase hex digits), without allocating: it names a request in logs
// and support, and needs to be unique, not secret.
func appendRequestID(b []byte) []byte {
	const digits = "0123456789ABCDEF"
	v := rand.Uint64()
	for i := 60; i >= 0; i -= 4 {
		b = append(b, digits[v>>uint(i)&15])
	}
	return b
}

// appendHTTPDate appends t as net/http's TimeFormat writes it in UTC
// ("Mon, 02 Jan 2006 15:04:05 GMT"), without AppendFormat's layout
// parsing, for a year of four digits (else AppendFormat).
func appendHTTPDate(b []byte, t time.Time) []byte {
	t = t.UTC()
	y, mo, d := t.Date()
	if y < 1000 || y > 9999 {
		return t.AppendFormat(b, http.TimeFormat)
	}
	h, mi, sec := t.Clock()
	two := func(b []byte, v int) []byte { return append(b, byte('0'+v/10), byte('0'+v%10)) }
	b = append(b, t.Weekday().String()[:3]...)
	b = append(b, ", "...)
	b = two(b, d)
	b = append(b, ' ')
	b = append(b, mo.String()[:3]...)
	b = append(b, ' ')
	b = two(b, y/100)
	b = two(b, y%100)
	b = append(b, ' ')
	b = two(b, h)
	b = append(b, ':')
	b = two(b, mi)
	b = append(b, ':')
	b = two(b, sec)
	return append(b, " GMT"...)
}
