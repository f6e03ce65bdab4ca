package httpapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cairn-fs/cairn/internal/access/rules"
	"github.com/cairn-fs/cairn/internal/store"
)

// fastOutcome is what serveFast did with a request.
type fastOutcome uint8

const (
	fastDone    fastOutcome = iota // answered (perhaps still pending in the write buffer)
	fastHandoff                    // nothing written: net/http must answer it
	fastClose                      // answered, but the connection must close (a body was cut)
)

var nodePrefixBytes = []byte(NodePrefix)

// fastSendfileMin is the smallest body the fast path sends with sendfile
// from the volume file (fastsend_linux.go); smaller ones are copied into
// the write buffer and leave with their head in one write(2). Measured on
// the 15 KB corpus (bench/BENCHMARKS.md, 2026-11-22 session 2): sendfile
// of a small body saved about 1 µs of CPU per GET at 20 connections but
// cost throughput and latency at 1–5 connections (head and body are two
// system calls), so it starts where the body would not fit the write
// buffer: the bodies WriteRangeTo sent before, opening a descriptor per
// request.
const fastSendfileMin = fastMaxBody + 1

// serveFast answers a parsed GET or HEAD of a file into fc's write buffer,
// with the same decisions as ServeHTTP (openRead, planObject, the status
// table) and the same bytes on the wire as net/http, or reports
// fastHandoff, having written nothing, for what the fast path leaves to
// net/http: node endpoints, malformed escapes, directories, redirects and
// checksum sidecars.
func (s *Server) serveFast(fc *fastConn, req *fastReq) fastOutcome {
	start := time.Now()
	rawPath := req.target
	var presignedQuery []byte // a presigned S3 GET the fast path serves
	if s3 := s.cfg.S3; s3 != nil {
		var rawQuery []byte
		if q := bytes.IndexByte(rawPath, '?'); q >= 0 {
			rawQuery = rawPath[q+1:]
		}
		if s3.Match(view(req.hdr[fhHost]), view(req.hdr[fhAuthorization]), view(rawQuery), view(req.hdr[fhUserAgent])) {
			if req.hdr[fhAuthorization] != nil || !bytes.Contains(rawQuery, []byte("X-Amz-Signature=")) {
				return fastHandoff // net/http routes it to S3
			}
			presignedQuery = rawQuery
		}
	}
	if q := bytes.IndexByte(rawPath, '?'); q >= 0 {
		if presignedQuery == nil && fastConsistent(rawPath[q+1:]) {
			return fastHandoff // a consistent read: net/http runs the barrier
		}
		rawPath = rawPath[:q]
	}
	dec, ok := unescapePath(fc.pathBuf[:0], rawPath)
	fc.pathBuf = dec[:0]
	if !ok || bytes.HasPrefix(dec, nodePrefixBytes) || string(dec) == "/_cairn" {
		return fastHandoff
	}
	// A WebDAV GET or HEAD of a file is the native one (same bucket and
	// path, Basic credentials): anything else about it (a directory, an
	// error, a precondition) goes to the WebDAV handler.
	dav := false
	if s.cfg.DAV != nil && isDAV(view(dec)) {
		if presignedQuery != nil || len(dec) <= len(DAVPrefix) {
			return fastHandoff
		}
		dav, dec = true, dec[len(DAVPrefix)-1:]
	}
	// A real string: the store may keep it (its caches), and errors quote it.
	p := string(dec)
	ctx := context.Background()
	a := fastAnswer{path: p, start: start}

	if s.cfg.Rules != nil {
		if d := s.checkRules(view(req.hdr[fhHost]), p, view(req.hdr[fhUserAgent]), fc.clientIP(req)); d.Action != rules.Allow {
			s.fastRule(fc, req, &a, d)
			return s.fastFinish(fc, req, &a)
		}
	}
	t, err := parseTarget(p)
	if err != nil {
		s.fastError(fc, req, &a, err)
		return s.fastFinish(fc, req, &a)
	}
	if t.slash {
		return fastHandoff
	}
	var res readResult
	if presignedQuery != nil {
		// A presigned S3 URL (bench/BENCHMARKS.md, "S3 GET"): verified
		// here, then served as the native GET; anything the S3 API
		// answers differently (an invalid signature, an error, an object
		// with S3 headers) goes to net/http and the S3 handler.
		method := http.MethodGet
		if req.head {
			method = http.MethodHead
		}
		pr, ok := s.cfg.S3.Presigned(method, view(req.hdr[fhHost]), p, view(presignedQuery))
		if !ok {
			return fastHandoff
		}
		res = s.openReadAs(ctx, pr, t)
		if res.step != readObject {
			if res.obj != nil {
				res.obj.Close()
			}
			return fastHandoff
		}
		if hasS3Headers(res.obj.Info().Xattrs) {
			res.obj.Close()
			return fastHandoff
		}
	} else {
		var auth string
		if v := req.hdr[fhAuthorization]; v != nil {
			auth = string(v)
		}
		res = s.openRead(ctx, auth, t)
	}
	a.user = res.principal.Name
	switch res.step {
	case readFailed:
		if dav {
			return fastHandoff
		}
		s.fastError(fc, req, &a, res.err)
		return s.fastFinish(fc, req, &a)
	case readSidecar:
		if dav || presignedQuery != nil {
			return fastHandoff
		}
		s.fastSidecar(fc, req, &a, &res, t)
		return s.fastFinish(fc, req, &a)
	case readObject:
	default:
		return fastHandoff
	}
	obj := res.obj
	defer obj.Close()

	rh := readHeaders{
		rangeSpec:         view(req.hdr[fhRange]),
		ifRange:           view(req.hdr[fhIfRange]),
		ifMatch:           view(req.hdr[fhIfMatch]),
		ifNoneMatch:       view(req.hdr[fhIfNoneMatch]),
		ifModifiedSince:   view(req.hdr[fhIfModifiedSince]),
		ifUnmodifiedSince: view(req.hdr[fhIfUnmodifiedSince]),
	}
	var plan objectPlan
	var memo *headMemo
	if plainRead(&rh) {
		memo = objectMemo(obj, &res.bucket, fc.planBuf[:0])
	}
	if memo != nil {
		// A plain GET or HEAD of a cached file: its fields are encoded
		// already, and nothing of planObject's is needed but the range.
		plan.status, plan.off, plan.n = http.StatusOK, 0, memo.size
	} else {
		plan = planObject(res.bucket, obj.Info(), &rh, fc.planBuf[:0])
	}
	if dav && plan.status != http.StatusOK && plan.status != http.StatusPartialContent {
		return fastHandoff
	}
	switch plan.status {
	case http.StatusPreconditionFailed:
		a.status, a.code, a.err = plan.status, "PreconditionFailed", store.ErrPrecondition
		s.fastErrorStatus(fc, req, &a)
		return s.fastFinish(fc, req, &a)
	case http.StatusRequestedRangeNotSatisfiable:
		a.status, a.code, a.err = plan.status, "InvalidRange", plan.rangeError(rh.rangeSpec)
		a.rangeSize = plan.size
		s.fastErrorStatus(fc, req, &a)
		return s.fastFinish(fc, req, &a)
	}

	a.status = plan.status
	b := fc.writeBuf()
	headStart := len(b)
	if memo != nil {
		b = appendStatusLine(b, req.http10, http.StatusOK)
		b = append(b, memo.fields...)
		b = appendHeadEnd(b, req, s.fast.date.get(start))
	} else {
		b = appendObjectHead(b, req, &plan, s.fast.date.get(start))
	}
	if req.head || plan.status == http.StatusNotModified || plan.n == 0 {
		*fc.wbuf = b
		return s.fastFinish(fc, req, &a)
	}
	if plan.n >= fastSendfileMin && fc.canSendFile() {
		if la, ok := obj.(store.LocalAccess); ok {
			if f, foff, release, ok := la.LocalSpan(plan.off, plan.n); ok {
				// The body is where LocalSpan checked it: it leaves from the
				// volume file after the head, copied by no one in user space.
				*fc.wbuf = b
				resident := la.Resident(plan.off, plan.n)
				sent, headSent, err := fc.sendFile(f, foff, plan.n, resident)
				release()
				s.fast.sentFile.Add(1)
				a.bytes = sent
				if err != nil {
					if headSent {
						if errors.Is(err, io.ErrUnexpectedEOF) {
							err = fmt.Errorf("%w: volume file shorter than the blob: %w", store.ErrCorrupt, err)
						}
						s.logBodyError(ctx, p, err)
					}
					a.cut = true
				}
				return s.fastFinish(fc, req, &a)
			}
		}
	}
	n := int(plan.n)
	if plan.n <= fastMaxBody && fc.canWritev() {
		if la, ok := obj.(store.LocalAccess); ok {
			if body, ref, ok := la.LocalBytes(plan.off, plan.n); ok {
				// The body is lent from the volume's memory map: the pending
				// answers, this head last, and the body leave in one
				// sendmsg(2), the kernel copying the body from the page
				// cache (no user-space copy).
				*fc.wbuf = b
				sent, err := fc.flushWith(body)
				ref.Release()
				s.fast.sentMapped.Add(1)
				a.bytes = max(0, int64(sent-len(b)))
				if err != nil {
					if sent > headStart {
						if errors.Is(err, syscall.EFAULT) {
							err = fmt.Errorf("%w: volume page lost under its memory map: %w", store.ErrCorrupt, err)
						}
						s.logBodyError(ctx, p, err)
					}
					a.cut = true
				}
				return s.fastFinish(fc, req, &a)
			}
		}
	}
	if plan.n <= fastMaxBody {
		if cap(b)-len(b) < n && headStart > 0 {
			// Send the earlier answers; this head stays pending.
			*fc.wbuf = b[:headStart]
			if !fc.flush() {
				a.cut = true
				return s.fastFinish(fc, req, &a)
			}
			b = append((*fc.wbuf)[:0], b[headStart:]...)
			headStart = 0
		}
		if cap(b)-len(b) < n { // an unusually long head
			b = slices.Grow(b, n)
		}
		// One pread into the buffer, and the header and body leave in
		// one write (with the answers batched before them). Nothing of
		// this answer has been sent yet: a failed read (a blob with no
		// reachable replica, a corrupt needle) becomes an error answer
		// instead of a 200 with a cut body.
		m, err := obj.ReadAt(b[len(b):len(b)+n], plan.off)
		if m < n {
			if err == nil || errors.Is(err, io.EOF) {
				err = fmt.Errorf("%w: short read", store.ErrCorrupt)
			}
			s.logBodyError(ctx, p, err)
			*fc.wbuf = b[:headStart]
			s.fastError(fc, req, &a, err)
			return s.fastFinish(fc, req, &a)
		}
		*fc.wbuf = b[:len(b)+m]
		a.bytes = int64(m)
		return s.fastFinish(fc, req, &a)
	}
	// A large body not sent from a local file (a remote blob, most
	// likely): read its first byte before the head goes out, so that a
	// blob no replica can serve is an error answer, not a cut 200.
	if err := probeBody(obj, plan.off); err != nil {
		s.logBodyError(ctx, p, err)
		*fc.wbuf = b[:headStart]
		s.fastError(fc, req, &a, err)
		return s.fastFinish(fc, req, &a)
	}
	*fc.wbuf = b
	if !fc.flush() {
		a.cut = true
		return s.fastFinish(fc, req, &a)
	}
	written, err := obj.WriteRangeTo(&fc.dl, plan.off, plan.n)
	a.bytes = written
	if err != nil {
		s.logBodyError(ctx, p, err)
		a.cut = true
	}
	return s.fastFinish(fc, req, &a)
}

// fastAnswer is what the fast path records about an answer for the error
// encoder, the metrics and the access log.
// It holds no pointer to the request: the error it may hold escapes (to
// the logger), and escape analysis would take the request along.
type fastAnswer struct {
	path      string // decoded
	start     time.Time
	user      string
	rule      string // the abuse rule that answered
	status    int
	code      string // error code, for error answers
	err       error  // for error answers
	rangeSize int64  // for a 416: the file's size
	bytes     int64  // body bytes written
	cut       bool   // the body was cut short or the connection broke
}

// fastFinish records a's request in the metrics and the access log.
func (s *Server) fastFinish(fc *fastConn, req *fastReq, a *fastAnswer) fastOutcome {
	method, proto := http.MethodGet, "HTTP/1.1"
	if req.head {
		method = http.MethodHead
	}
	if req.http10 {
		proto = "HTTP/1.0"
	}
	s.metrics.observeRequest(method, a.status, 0, a.bytes, time.Since(a.start), false) // never a node path
	s.fast.served.Add(1)
	if s.alog != nil {
		if fc.remote == "" {
			fc.remote = fc.c.RemoteAddr().String()
		}
		ln := logLine{
			remoteAddr: fc.remote, user: a.user, t: a.start,
			method: method, uri: view(req.target), proto: proto, status: a.status, bytes: a.bytes,
			referer: view(req.hdr[fhReferer]), userAgent: view(req.hdr[fhUserAgent]), rule: a.rule,
		}
		s.alog.add(&ln)
	}
	if a.cut {
		return fastClose
	}
	return fastDone
}

// fastError answers err with its status from the status table.
func (s *Server) fastError(fc *fastConn, req *fastReq, a *fastAnswer, err error) {
	a.status, a.code = classify(err)
	a.err = err
	s.fastErrorStatus(fc, req, a)
}

// fastErrorStatus encodes an error answer as writeErrorStatus and net/http
// do: the handler's headers in sorted order, then Date, then the
// Content-Length net/http computes for a body it buffered whole (not for
// HEAD, which has no body).
func (s *Server) fastErrorStatus(fc *fastConn, req *fastReq, a *fastAnswer) {
	method := http.MethodGet
	if req.head {
		method = http.MethodHead
	}
	body := s.errorBody(context.Background(), method, a.path, a.status, a.code, a.err)
	b := fc.writeBuf()
	b = appendStatusLine(b, req.http10, a.status)
	if a.status == http.StatusRequestedRangeNotSatisfiable {
		b = append(b, "Content-Range: bytes */"...)
		b = strconv.AppendInt(b, a.rangeSize, 10)
		b = append(b, "\r\n"...)
	}
	b = append(b, "Content-Type: application/json\r\n"...)
	if a.status == http.StatusUnauthorized {
		b = append(b, "Www-Authenticate: "+wwwAuthenticate+"\r\n"...)
	}
	b = append(b, "X-Content-Type-Options: nosniff\r\nDate: "...)
	b = append(b, s.fast.date.get(a.start)...)
	b = append(b, "\r\n"...)
	if !req.head {
		b = append(b, "Content-Length: "...)
		b = strconv.AppendInt(b, int64(len(body)), 10)
		b = append(b, "\r\n"...)
	}
	b = appendConnection(b, req)
	b = append(b, "\r\n"...)
	if !req.head {
		b = append(b, body...)
		a.bytes = int64(len(body))
	}
	*fc.wbuf = b
}

// appendObjectHead encodes the status line and header block of a 200,
// 206 or 304 planned by planObject, byte for byte as net/http writes what
// serveObject sets: the handler's fields sorted by name, then Date, then
// Connection.
func appendObjectHead(b []byte, req *fastReq, p *objectPlan, date []byte) []byte {
	b = appendStatusLine(b, req.http10, p.status)
	b = appendObjectFields(b, p)
	return appendHeadEnd(b, req, date)
}

// appendHeadEnd ends a head after its handler fields: Date, Connection and
// the blank line.
func appendHeadEnd(b []byte, req *fastReq, date []byte) []byte {
	b = append(b, "Date: "...)
	b = append(b, date...)
	b = append(b, "\r\n"...)
	b = appendConnection(b, req)
	return append(b, "\r\n"...)
}

// appendObjectFields encodes the handler's fields of appendObjectHead.
func appendObjectFields(b []byte, p *objectPlan) []byte {
	if p.status != http.StatusNotModified {
		b = append(b, "Accept-Ranges: bytes\r\n"...)
	}
	if p.cacheControl != "" {
		b = appendFieldString(b, "Cache-Control: ", p.cacheControl)
	}
	if p.status != http.StatusNotModified {
		b = appendFieldBytes(b, "Content-Length: ", p.field(planLength))
		if v := p.field(planRange); len(v) > 0 {
			b = appendFieldBytes(b, "Content-Range: ", v)
		}
		b = appendFieldString(b, "Content-Type: ", p.contentType)
	}
	if v := p.field(planETag); len(v) > 0 {
		b = appendFieldBytes(b, "Etag: ", v)
	}
	if v := p.field(planLastModified); len(v) > 0 {
		b = appendFieldBytes(b, "Last-Modified: ", v)
	}
	if p.status != http.StatusNotModified {
		if v := p.field(planReprDigest); len(v) > 0 {
			b = appendFieldBytes(b, "Repr-Digest: ", v)
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

// appendConnection adds the Connection field net/http adds: "keep-alive"
// for an HTTP/1.0 keep-alive request (every fast-path answer has a length
// or no body), "close" for an HTTP/1.1 request that asked for it.
func appendConnection(b []byte, req *fastReq) []byte {
	switch {
	case req.keepAlive10:
		return append(b, "Connection: keep-alive\r\n"...)
	case req.close && !req.http10:
		return append(b, "Connection: close\r\n"...)
	}
	return b
}

// appendStatusLine writes the status line as net/http does, in the
// request's HTTP version.
func appendStatusLine(b []byte, http10 bool, code int) []byte {
	if http10 {
		b = append(b, "HTTP/1.0 "...)
	} else {
		b = append(b, "HTTP/1.1 "...)
	}
	text := http.StatusText(code)
	if text == "" {
		return fmt.Appendf(b, "%03d status code %d\r\n", code, code)
	}
	b = strconv.AppendInt(b, int64(code), 10)
	b = append(b, ' ')
	b = append(b, text...)
	return append(b, "\r\n"...)
}

// appendFieldBytes appends "Name: " + v + CRLF for a value built here.
func appendFieldBytes(b []byte, nameColon string, v []byte) []byte {
	b = append(b, nameColon...)
	b = append(b, v...)
	return append(b, "\r\n"...)
}

// appendFieldString appends "Name: " + v + CRLF for a stored value (a
// content type, a bucket's Cache-Control), sanitized as net/http's
// Header.Write does: CR and LF become spaces, surrounding white space goes.
func appendFieldString(b []byte, nameColon string, v string) []byte {
	b = append(b, nameColon...)
	for len(v) > 0 && isASCIISpace(v[0]) {
		v = v[1:]
	}
	for len(v) > 0 && isASCIISpace(v[len(v)-1]) {
		v = v[:len(v)-1]
	}
	for {
		i := strings.IndexAny(v, "\r\n")
		if i < 0 {
			break
		}
		b = append(b, v[:i]...)
		b = append(b, ' ')
		v = v[i+1:]
	}
	b = append(b, v...)
	return append(b, "\r\n"...)
}

func isASCIISpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

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

// fastSidecar answers NAME.md5 or NAME.sha256 of a bucket with
// --checksum-sidecars from NAME's digests, as serveSidecar does (same
// bytes), with the fields and body kept in NAME's head memo: a cached
// file's sidecar costs two map lookups (the missing sidecar is a cached
// miss) and a copy. When NAME is not a file with that digest, it answers
// res.err (the sidecar's own 404).
func (s *Server) fastSidecar(fc *fastConn, req *fastReq, a *fastAnswer, res *readResult, t target) {
	base := sidecarBase(t.path)
	kind := sidecarSHA256
	if strings.HasSuffix(t.path, ".md5") {
		kind = sidecarMD5
	}
	var answer []byte
	if obj, err := s.store.Open(context.Background(), t.bucket, base); err == nil {
		memo := objectMemo(obj, &res.bucket, fc.planBuf[:0])
		if memo == nil {
			memo = &headMemo{} // an object without a memo slot: build it each time
		}
		answer = memo.sidecar(kind, obj.Info(), &res.bucket)
		obj.Close()
	}
	if len(answer) == 0 {
		s.fastError(fc, req, a, res.err)
		return
	}
	a.status = http.StatusOK
	b := fc.writeBuf()
	b = appendStatusLine(b, req.http10, http.StatusOK)
	n := bytes.Index(answer, []byte("\r\n\r\n")) + 2
	b = append(b, answer[:n]...)
	b = appendHeadEnd(b, req, s.fast.date.get(a.start))
	if !req.head {
		b = append(b, answer[n+2:]...)
		a.bytes = int64(len(answer) - n - 2)
	}
	*fc.wbuf = b
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
			answer = appendFieldString(answer, "Cache-Control: ", b.CacheControl)
		}
		answer = appendFieldString(answer, "Content-Length: ", strconv.Itoa(len(body)))
		answer = append(answer, "Content-Type: text/plain; charset=utf-8\r\n"...)
		if !info.ModTime.IsZero() {
			answer = appendFieldString(answer, "Last-Modified: ", info.ModTime.UTC().Format(http.TimeFormat))
		}
		answer = append(append(answer, "\r\n"...), body...)
	}
	m.sidecars[kind].Store(&answer)
	return answer
}
