package httpapi

import (
	"bytes"
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/cairn-fs/cairn/internal/frontend/httpapi/fastpath"
	"github.com/cairn-fs/cairn/internal/store"
)

// The fast path's heads, byte for byte as net/http writes what the
// handler sets (checked by TestFastPathDifferential): the handler's fields
// sorted by name, then Date, then the Content-Length net/http computes
// for a body it buffered whole, then Connection (fastpath's encoders).

// planError plans the answer to err, with its status from the status
// table.
func (pl *planner) planError(req *fastpath.Request, p *fastpath.Plan, err error) {
	status, code := classify(err)
	pl.planErrorStatus(req, p, status, code, err, 0)
}

// planErrorStatus plans an error answer as writeErrorStatus and net/http
// write it: the handler's headers in sorted order, then Date, then the
// Content-Length net/http computes for a body it buffered whole (not for
// HEAD, which has no body). rangeSize is the file's size for a 416.
func (pl *planner) planErrorStatus(req *fastpath.Request, p *fastpath.Plan, status int, code string, err error, rangeSize int64) {
	method := http.MethodGet
	if req.Head {
		method = http.MethodHead
	}
	body := pl.s.errorBody(context.Background(), method, p.Path, status, code, err)
	p.Status = status
	b := fastpath.AppendStatusLine(p.Buf, req, status)
	if status == http.StatusRequestedRangeNotSatisfiable {
		b = append(b, "Content-Range: bytes */"...)
		b = strconv.AppendInt(b, rangeSize, 10)
		b = append(b, "\r\n"...)
	}
	b = append(b, "Content-Type: application/json\r\n"...)
	if status == http.StatusUnauthorized {
		b = append(b, "Www-Authenticate: "+wwwAuthenticate+"\r\n"...)
	}
	b = append(b, "X-Content-Type-Options: nosniff\r\n"...)
	b = fastpath.AppendDate(b, req)
	if !req.Head {
		b = append(b, "Content-Length: "...)
		b = strconv.AppendInt(b, int64(len(body)), 10)
		b = append(b, "\r\n"...)
	}
	b = fastpath.AppendConnection(b, req)
	b = append(b, "\r\n"...)
	if !req.Head {
		b = append(b, body...)
		p.Bytes = int64(len(body))
	}
	p.Buf = b
}

// appendObjectFields encodes the handler's fields of a 200, 206 or 304
// planned by planObject, as net/http writes what serveObject sets.
func appendObjectFields(b []byte, p *objectPlan) []byte {
	if p.status != http.StatusNotModified {
		b = append(b, "Accept-Ranges: bytes\r\n"...)
	}
	if p.cacheControl != "" {
		b = fastpath.AppendField(b, "Cache-Control: ", p.cacheControl)
	}
	if p.status != http.StatusNotModified {
		b = fastpath.AppendFieldBytes(b, "Content-Length: ", p.field(planLength))
		if v := p.field(planRange); len(v) > 0 {
			b = fastpath.AppendFieldBytes(b, "Content-Range: ", v)
		}
		b = fastpath.AppendField(b, "Content-Type: ", p.contentType)
	}
	if v := p.field(planETag); len(v) > 0 {
		b = fastpath.AppendFieldBytes(b, "Etag: ", v)
	}
	if v := p.field(planLastModified); len(v) > 0 {
		b = fastpath.AppendFieldBytes(b, "Last-Modified: ", v)
	}
	if p.status != http.StatusNotModified {
		if v := p.field(planReprDigest); len(v) > 0 {
			b = fastpath.AppendFieldBytes(b, "Repr-Digest: ", v)
		}
	}
	return b
}

// headMemo is the memo kept in an object's slot: the handler's fields of
// a plain 200 answer to a GET or HEAD of it (appendObjectFields), which
// depend only on the file's version and the bucket's Cache-Control.
type headMemo struct {
	cacheControl string
	size         int64
	fields       []byte
	// sidecars are the answers to NAME.md5 and NAME.sha256 (sidecar*),
	// built at their first request: the fields and the body. An empty
	// answer: the file has no such digest.
	sidecars [2]atomic.Pointer[[]byte]
}

// plainRead reports whether rh can only lead to a 200 with the whole file:
// no conditional and no Range field (If-Range matters only with Range).
func plainRead(rh *readHeaders) bool {
	return rh.rangeSpec == "" && rh.ifMatch == "" && rh.ifNoneMatch == "" &&
		rh.ifModifiedSince == "" && rh.ifUnmodifiedSince == ""
}

// objectMemo returns the head memo of obj for bucket b, building and
// storing it if the slot holds none or one made for another Cache-Control;
// nil if obj keeps no memo.
func objectMemo(obj store.Object, b *store.BucketInfo, scratch []byte) *headMemo {
	mo, ok := obj.(store.Memoizer)
	if !ok {
		return nil
	}
	slot := mo.Memo()
	if m, _ := slot.Load().(*headMemo); m != nil && m.cacheControl == b.CacheControl {
		return m
	}
	var none readHeaders
	plan := planObject(*b, obj.Info(), &none, scratch)
	if plan.status != http.StatusOK {
		return nil // cannot happen without conditionals; do not cache it
	}
	m := &headMemo{cacheControl: b.CacheControl, size: plan.n}
	m.fields = appendObjectFields(make([]byte, 0, 256), &plan)
	slot.Store(m)
	return m
}

// hasS3Headers reports whether a file has object headers the S3 API
// stores (extended attributes "user.cairn.*") and answers with.
func hasS3Headers(x map[string][]byte) bool {
	for k := range x {
		if strings.HasPrefix(k, "user.cairn.") {
			return true
		}
	}
	return false
}

// Sidecar kinds, the index of headMemo.sidecars.
const (
	sidecarMD5 = iota
	sidecarSHA256
)

// planSidecar answers NAME.md5 or NAME.sha256 of a bucket with
// --checksum-sidecars from NAME's digests, as serveSidecar does (same
// bytes), with the fields and body kept in NAME's head memo: a cached
// file's sidecar costs two map lookups (the missing sidecar is a cached
// miss) and a copy. When NAME is not a file with that digest, it answers
// res.err (the sidecar's own 404).
func (pl *planner) planSidecar(req *fastpath.Request, p *fastpath.Plan, res *readResult, t target) {
	base := sidecarBase(t.path)
	kind := sidecarSHA256
	if strings.HasSuffix(t.path, ".md5") {
		kind = sidecarMD5
	}
	var answer []byte
	if obj, err := pl.s.store.Open(context.Background(), t.bucket, base); err == nil {
		memo := objectMemo(obj, &res.bucket, p.Scratch)
		if memo == nil {
			memo = &headMemo{} // an object without a memo slot: build it each time
		}
		answer = memo.sidecar(kind, obj.Info(), &res.bucket)
		obj.Close()
	}
	if len(answer) == 0 {
		pl.planError(req, p, res.err)
		return
	}
	p.Status = http.StatusOK
	b := fastpath.AppendStatusLine(p.Buf, req, http.StatusOK)
	n := bytes.Index(answer, []byte("\r\n\r\n")) + 2
	b = append(b, answer[:n]...)
	b = fastpath.AppendHeadEnd(b, req)
	if !req.Head {
		b = append(b, answer[n+2:]...)
		p.Bytes = int64(len(answer) - n - 2)
	}
	p.Buf = b
}

// sidecar returns the memo's answer of kind for the file info, building
// it at the first call: the fields serveSidecar sets, in net/http's
// order, a blank line, and the body.
func (m *headMemo) sidecar(kind int, info store.ObjectInfo, b *store.BucketInfo) []byte {
	if p := m.sidecars[kind].Load(); p != nil {
		return *p
	}
	answer := []byte{}
	if body, ok := sidecarBody(info, kind == sidecarMD5); ok {
		if b.CacheControl != "" {
			answer = fastpath.AppendField(answer, "Cache-Control: ", b.CacheControl)
		}
		answer = fastpath.AppendField(answer, "Content-Length: ", strconv.Itoa(len(body)))
		answer = append(answer, "Content-Type: text/plain; charset=utf-8\r\n"...)
		if !info.ModTime.IsZero() {
			answer = fastpath.AppendField(answer, "Last-Modified: ", info.ModTime.UTC().Format(http.TimeFormat))
		}
		answer = append(append(answer, "\r\n"...), body...)
	}
	m.sidecars[kind].Store(&answer)
	return answer
}
