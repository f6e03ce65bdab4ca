package httpapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"
	"time"

	"github.com/cairn-fs/cairn/internal/access/sigv4"
	"github.com/cairn-fs/cairn/internal/frontend/httpapi/fastpath"
	"github.com/cairn-fs/cairn/internal/store"
)

// planner is the Server's fastpath.Planner (doc.go, "Fast path"): it
// answers a parsed GET or HEAD with the same decisions as ServeHTTP
// (frontDoor, parseTarget, openRead, planObject, the status table) and
// the same bytes on the wire as net/http, or hands it off, having written
// nothing, for what the fast path leaves to net/http: S3 and node
// endpoints, consistent reads, directories, redirects, and what WebDAV
// or S3 would answer otherwise than the native API.
type planner struct{ s *Server }

// Plan implements fastpath.Planner.
func (pl *planner) Plan(req *fastpath.Request, p *fastpath.Plan) bool {
	s := pl.s
	d, dav, ok := pl.enter(req, p)
	switch {
	case !ok:
		return false
	case d == doorRule:
		return true // answered by the rule
	case d == doorS3:
		return pl.planSigned(req, p)
	}
	t, err := parseTarget(p.Path)
	if err != nil {
		pl.planError(req, p, err)
		return true
	}
	if t.slash {
		return false // a directory: index.html or a listing
	}
	var res readResult
	if d == doorPresigned {
		if res, ok = pl.openPresigned(req, p, t); !ok {
			return false
		}
	} else {
		var auth string
		if v := req.Hdr[fastpath.HdrAuthorization]; v != nil {
			auth = string(v)
		}
		res = s.openRead(context.Background(), auth, t)
	}
	p.User = res.principal.Name
	switch res.step {
	case readFailed:
		if dav {
			return false // WebDAV answers its own errors
		}
		pl.planError(req, p, res.err)
		return true
	case readSidecar:
		if dav || d == doorPresigned {
			return false
		}
		pl.planSidecar(req, p, &res, t)
		return true
	case readObject:
		return pl.planObject(req, p, &res, dav)
	}
	return false // a redirect
}

// enter takes req through the front door and the fast path's own
// hand-offs. It sets p.Path (the decoded path, WebDAV's prefix removed,
// as a real string: the store may keep it, errors quote it) and reports
// the door, whether the request is WebDAV's, and false for a hand-off.
// A rule's answer is planned here (doorRule).
func (pl *planner) enter(req *fastpath.Request, p *fastpath.Plan) (d door, dav, ok bool) {
	s := pl.s
	e := entrance{
		host:             fastpath.View(req.Hdr[fastpath.HdrHost]),
		path:             fastpath.View(req.Path),
		rawQuery:         fastpath.View(req.Query),
		authorization:    fastpath.View(req.Hdr[fastpath.HdrAuthorization]),
		hasAuthorization: req.Hdr[fastpath.HdrAuthorization] != nil,
		userAgent:        fastpath.View(req.Hdr[fastpath.HdrUserAgent]),
	}
	if s.cfg.Rules != nil {
		e.ip = s.fastClientIP(req)
	}
	d, decision := s.frontDoor(&e)
	path := req.Path
	switch d {
	case doorRule:
		planRule(req, p, decision)
		return d, false, true
	case doorS3:
		// A request signed in its Authorization header may be a GetObject
		// or HeadObject that S3 plans (planSigned); the rest of S3 is
		// net/http's.
		if !strings.HasPrefix(e.authorization, sigv4.Algorithm+" ") {
			return d, false, false
		}
		p.Path = string(path)
		return d, false, true
	case doorNode, doorSnapshot:
		return d, false, false // net/http routes it
	case doorDAV:
		// A WebDAV GET or HEAD of a file is the native one (same bucket
		// and path, Basic credentials): anything else about it (a
		// directory, an error, a precondition) goes to the WebDAV handler,
		// as does one S3's Match claims (an S3 tool's User-Agent, such as
		// rclone's, an S3 query or signature), as it always did.
		if len(path) <= len(DAVPrefix) || pl.s3Claims(&e) {
			return d, false, false
		}
		dav, path = true, path[len(DAVPrefix)-1:]
	}
	if d != doorPresigned && fastConsistent(req.Query) {
		return d, false, false // a consistent read: net/http runs the barrier
	}
	p.Path = string(path)
	return d, dav, true
}

// s3Claims reports whether S3's Match claims e, a WebDAV request (which
// the front door gives to WebDAV first).
func (pl *planner) s3Claims(e *entrance) bool {
	s3 := pl.s.cfg.S3
	return s3 != nil && s3.Match(e.host, e.authorization, e.rawQuery, e.userAgent)
}

// planObject plans the answer to a GET or HEAD of the open object of res:
// its head (from the object's memo, or planObject's), then its body.
func (pl *planner) planObject(req *fastpath.Request, p *fastpath.Plan, res *readResult, dav bool) bool {
	obj := res.obj
	rh := readHeaders{
		rangeSpec:         fastpath.View(req.Hdr[fastpath.HdrRange]),
		ifRange:           fastpath.View(req.Hdr[fastpath.HdrIfRange]),
		ifMatch:           fastpath.View(req.Hdr[fastpath.HdrIfMatch]),
		ifNoneMatch:       fastpath.View(req.Hdr[fastpath.HdrIfNoneMatch]),
		ifModifiedSince:   fastpath.View(req.Hdr[fastpath.HdrIfModifiedSince]),
		ifUnmodifiedSince: fastpath.View(req.Hdr[fastpath.HdrIfUnmodifiedSince]),
	}
	var plan objectPlan
	var memo *headMemo
	if plainRead(&rh) {
		memo = objectMemo(obj, &res.bucket, p.Scratch)
	}
	if memo != nil {
		// A plain GET or HEAD of a cached file: its fields are encoded
		// already, and nothing of planObject's is needed but the range.
		plan.status, plan.off, plan.n = http.StatusOK, 0, memo.size
	} else {
		plan = planObject(res.bucket, obj.Info(), &rh, p.Scratch)
	}
	if dav && plan.status != http.StatusOK && plan.status != http.StatusPartialContent {
		obj.Close()
		return false
	}
	p.Source = obj // closed by Done
	switch plan.status {
	case http.StatusPreconditionFailed:
		pl.planErrorStatus(req, p, plan.status, "PreconditionFailed", store.ErrPrecondition, 0)
		return true
	case http.StatusRequestedRangeNotSatisfiable:
		pl.planErrorStatus(req, p, plan.status, "InvalidRange", plan.rangeError(rh.rangeSpec), plan.size)
		return true
	}
	p.Status = plan.status
	headStart := len(p.Buf)
	if memo != nil {
		p.Buf = fastpath.AppendStatusLine(p.Buf, req, http.StatusOK)
		p.Buf = append(p.Buf, memo.fields...)
		p.Buf = fastpath.AppendHeadEnd(p.Buf, req)
	} else {
		p.Buf = fastpath.AppendStatusLine(p.Buf, req, plan.status)
		p.Buf = appendObjectFields(p.Buf, &plan)
		p.Buf = fastpath.AppendHeadEnd(p.Buf, req)
	}
	if req.Head || plan.status == http.StatusNotModified || plan.n == 0 {
		return true
	}
	pl.planBody(req, p, obj, plan.off, plan.n, headStart)
	return true
}

// planBody chooses how bytes [off, off+n) of obj follow the head: from
// the volume file with sendfile (a large local body), lent from the
// volume's memory map (a small one), read into the write buffer (a small
// one the store cannot lend: remote, not mapped), or written by
// WriteRangeTo (a large one not in one local piece) once its first byte
// was read, so that a blob no replica can serve is an error answer, not a
// cut 200. Each way of sending is the fastest measured for its case
// (doc.go, "Fast path").
func (pl *planner) planBody(req *fastpath.Request, p *fastpath.Plan, obj store.Object, off, n int64, headStart int) {
	p.Off, p.N = off, n
	la, local := obj.(store.LocalAccess)
	if local && n >= fastpath.SendfileMin && p.CanSendFile {
		if f, foff, release, ok := la.LocalSpan(off, n); ok {
			// The body is where LocalSpan checked it: it leaves from the
			// volume file after the head, copied by no one in user space.
			p.Body, p.File, p.FileOff, p.Release = fastpath.BodyFile, f, foff, release
			p.Resident = la.Resident(off, n)
			return
		}
	}
	if local && n <= fastpath.MaxBody && p.CanLend {
		if body, hold, ok := la.LocalBytes(off, n); ok {
			p.Body, p.Lent, p.Hold = fastpath.BodyLent, body, hold
			return
		}
	}
	if n <= fastpath.MaxBody {
		p.Body = fastpath.BodyRead
		return
	}
	if err := probeBody(obj, off); err != nil {
		pl.s.logBodyError(context.Background(), p.Path, err)
		p.Buf = p.Buf[:headStart]
		pl.planError(req, p, err)
		return
	}
	p.Body = fastpath.BodyStream
}

// openPresigned verifies a presigned S3 GET or HEAD (bench/BENCHMARKS.md,
// "S3 GET") and opens its object, to be served as the native GET; ok is
// false for anything the S3 API answers otherwise than the native one (an
// invalid signature, an error, an object with S3 headers), which goes to
// net/http and the S3 handler.
func (pl *planner) openPresigned(req *fastpath.Request, p *fastpath.Plan, t target) (res readResult, ok bool) {
	s := pl.s
	method := http.MethodGet
	if req.Head {
		method = http.MethodHead
	}
	pr, ok := s.cfg.S3.Presigned(method, fastpath.View(req.Hdr[fastpath.HdrHost]), p.Path, fastpath.View(req.Query))
	if !ok {
		return res, false
	}
	res = s.openReadAs(context.Background(), pr, t)
	if res.step != readObject {
		if res.obj != nil {
			res.obj.Close()
		}
		return res, false
	}
	if hasS3Headers(res.obj.Info().Xattrs) {
		res.obj.Close()
		return res, false
	}
	return res, true
}

// planSigned plans the answer to a GET or HEAD signed with SigV4 in its
// Authorization header: S3 plans its head (S3Handler.PlanSigned, the
// bytes its ServeHTTP would send) and this planner the body, as a native
// GET's. Anything S3 does not plan goes to net/http. A body that cannot
// be read before its head leaves (a corrupt or unreachable blob) is the
// native 500 here (planBody, Unreadable), where ServeHTTP would send the
// head and cut the connection.
func (pl *planner) planSigned(req *fastpath.Request, p *fastpath.Plan) bool {
	headStart := len(p.Buf)
	obj, ok := pl.s.cfg.S3.PlanSigned(req, p)
	if !ok {
		return false
	}
	if req.Head || p.N == 0 {
		return true
	}
	pl.planBody(req, p, obj, p.Off, p.N, headStart)
	return true
}

// Unreadable implements fastpath.Planner: a BodyRead body that could not
// be read is an error answer (a short read is a corrupt blob).
func (pl *planner) Unreadable(req *fastpath.Request, p *fastpath.Plan, err error) {
	if err == nil || errors.Is(err, io.EOF) {
		err = fmt.Errorf("%w: short read", store.ErrCorrupt)
	}
	pl.s.logBodyError(context.Background(), p.Path, err)
	p.Body = fastpath.BodyNone
	pl.planError(req, p, err)
}

// Done implements fastpath.Planner: it logs a body that failed after its
// head, closes the object, and records the request in the metrics and
// the access log as ServeHTTP does.
func (pl *planner) Done(req *fastpath.Request, p *fastpath.Plan) {
	s := pl.s
	if p.Err != nil {
		err := p.Err
		switch {
		case p.Body == fastpath.BodyFile && errors.Is(err, io.ErrUnexpectedEOF):
			err = fmt.Errorf("%w: volume file shorter than the blob: %w", store.ErrCorrupt, err)
		case p.Body == fastpath.BodyLent && errors.Is(err, syscall.EFAULT):
			err = fmt.Errorf("%w: volume page lost under its memory map: %w", store.ErrCorrupt, err)
		}
		s.logBodyError(context.Background(), p.Path, err)
	}
	if p.Source != nil {
		_ = p.Source.Close()
	}
	method, proto := http.MethodGet, "HTTP/1.1"
	if req.Head {
		method = http.MethodHead
	}
	if req.HTTP10 {
		proto = "HTTP/1.0"
	}
	s.metrics.observeRequest(method, p.Status, 0, p.Bytes, time.Since(req.Start), false) // never a node path
	if s.alog != nil {
		ln := logLine{
			remoteAddr: req.Peer.RemoteAddr(), user: p.User, t: req.Start,
			method: method, uri: fastpath.View(req.Target), proto: proto, status: p.Status, bytes: p.Bytes,
			referer:   fastpath.View(req.Hdr[fastpath.HdrReferer]),
			userAgent: fastpath.View(req.Hdr[fastpath.HdrUserAgent]), rule: p.Rule,
		}
		s.alog.add(&ln)
	}
}
