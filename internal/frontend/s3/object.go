package s3

import (
	"context"
	"crypto/md5"
	"encoding/base64"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-fs/cairn/internal/access"
	"github.com/cairn-fs/cairn/internal/access/sigv4"
	"github.com/cairn-fs/cairn/internal/store"
)

// Object headers S3 stores and returns, kept as extended attributes of
// the file named xattrPrefix + the lowercase header name (so the mount
// shows them too): x-amz-meta-* and these.
const xattrPrefix = "user.cairn."

var storedHeaders = []string{"Cache-Control", "Content-Disposition", "Content-Encoding", "Content-Language", "Expires", "X-Amz-Website-Redirect-Location"}

// objectXattrs returns the stored headers of a PUT (or a REPLACE copy).
func objectXattrs(h http.Header) (map[string][]byte, error) {
	x := map[string][]byte{}
	size := 0
	for k, vs := range h {
		lk := strings.ToLower(k)
		if strings.HasPrefix(lk, "x-amz-meta-") {
			x[xattrPrefix+lk] = []byte(strings.Join(vs, ","))
			size += len(lk) + len(x[xattrPrefix+lk])
		}
	}
	if size > 2048 {
		return nil, errorf(http.StatusBadRequest, "MetadataTooLarge", "Your metadata headers exceed the maximum allowed metadata size (2 KB).")
	}
	if acl := h.Get("x-amz-acl"); acl != "" {
		if _, _, err := cannedACL(acl); err != nil {
			return nil, err
		}
		x[xattrACL] = []byte(acl)
	}
	for _, k := range storedHeaders {
		v := h.Get(k)
		if k == "Content-Encoding" {
			v = stripAWSChunked(v)
		}
		if v != "" {
			x[xattrPrefix+strings.ToLower(k)] = []byte(v)
		}
	}
	return x, nil
}

// setStoredHeaders writes an object's stored headers into the answer.
func setStoredHeaders(hdr http.Header, x map[string][]byte) {
	for k, v := range x {
		name, ok := strings.CutPrefix(k, xattrPrefix)
		if !ok {
			continue
		}
		// Only the headers S3 stores: other user.cairn.* attributes (ACLs,
		// WebDAV properties) are not headers.
		if strings.HasPrefix(name, "x-amz-meta-") {
			// User metadata keeps S3's lowercase names (clients take the
			// key from the name as sent).
			hdr[name] = []string{string(v)}
		} else if isStoredHeader(name) {
			hdr[http.CanonicalHeaderKey(name)] = []string{string(v)}
		}
	}
}

// contentType is an object's content type for S3 answers.
func contentType(info store.ObjectInfo) string {
	if info.ContentType != "" {
		return info.ContentType
	}
	return "binary/octet-stream"
}

// serveObject routes a request on an object.
func (h *Handler) serveObject(w http.ResponseWriter, r *http.Request, rq *request) {
	q := rq.query
	if isSnapshotKey(rq.key) && r.Method != http.MethodGet && r.Method != http.MethodHead {
		rq.op = "SnapshotWrite"
		if _, err := h.st.Bucket(r.Context(), rq.bucket); err != nil {
			h.writeError(w, r, rq, err)
			return
		}
		h.writeError(w, r, rq, errSnapshotReadOnly)
		return
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		switch {
		case q.Has("uploadId"):
			rq.op = "ListParts"
			h.listParts(w, r, rq)
		case q.Has("acl"):
			rq.op = "GetObjectAcl"
			h.getACL(w, r, rq, rq.key)
		case q.Has("tagging"), q.Has("retention"), q.Has("legal-hold"), q.Has("attributes"), q.Has("torrent"):
			rq.op = "GetObjectOther"
			h.writeError(w, r, rq, errNotImplemented)
		default:
			rq.op = "GetObject"
			if q.Has("versionId") {
				rq.op = "GetObjectVersion" // s3:GetObjectVersion in a policy
			}
			if r.Method == http.MethodHead {
				rq.op = "Head" + strings.TrimPrefix(rq.op, "Get")
			}
			h.getObject(w, r, rq)
		}
	case http.MethodPut:
		switch {
		case q.Has("partNumber") && q.Has("uploadId"):
			if r.Header.Get("x-amz-copy-source") != "" {
				rq.op = "UploadPartCopy"
			} else {
				rq.op = "UploadPart"
			}
			h.uploadPart(w, r, rq)
		case q.Has("acl"):
			rq.op = "PutObjectAcl"
			h.putObjectACL(w, r, rq)
		case q.Has("tagging"), q.Has("retention"), q.Has("legal-hold"):
			rq.op = "PutObjectOther"
			h.writeError(w, r, rq, errNotImplemented)
		case r.Header.Get("x-amz-copy-source") != "":
			rq.op = "CopyObject"
			h.copyObject(w, r, rq)
		default:
			rq.op = "PutObject"
			h.putObject(w, r, rq)
		}
	case http.MethodDelete:
		if q.Has("uploadId") {
			rq.op = "AbortMultipartUpload"
			h.abortUpload(w, r, rq)
			return
		}
		rq.op = "DeleteObject"
		if q.Has("versionId") {
			rq.op = "DeleteObjectVersion" // s3:DeleteObjectVersion in a policy
		}
		out, err := h.deleteObject(r.Context(), rq, rq.key, q.Has("versionId"), q.Get("versionId"))
		if err != nil {
			h.writeError(w, r, rq, err)
			return
		}
		if out.versionID != "" {
			w.Header().Set("x-amz-version-id", out.versionID)
		}
		if out.marker {
			w.Header().Set("x-amz-delete-marker", "true")
		}
		w.WriteHeader(http.StatusNoContent)
	case http.MethodPost:
		switch {
		case q.Has("uploads"):
			rq.op = "CreateMultipartUpload"
			h.createUpload(w, r, rq)
		case q.Has("uploadId"):
			rq.op = "CompleteMultipartUpload"
			h.completeUpload(w, r, rq)
		default:
			rq.op = "PostObject"
			h.writeError(w, r, rq, errNotImplemented)
		}
	default:
		rq.op = "object"
		h.writeError(w, r, rq, errMethodNotAllowed)
	}
}

// openKey opens key for reading; "dir/" is a directory marker: an empty
// object when the directory exists.
func (h *Handler) openKey(ctx context.Context, bucket, key string) (store.Object, store.ObjectInfo, error) {
	if strings.HasSuffix(key, "/") {
		info, err := h.st.Stat(ctx, bucket, strings.TrimSuffix(key, "/"))
		if err != nil {
			return nil, info, err
		}
		if !info.IsDir {
			return nil, info, store.ErrNotFound
		}
		info.Size, info.ETag = 0, emptyMD5
		return nil, info, nil
	}
	if isInternal(key) {
		return nil, store.ObjectInfo{}, store.ErrNotFound
	}
	obj, err := h.st.Open(ctx, bucket, key)
	if err != nil {
		if errors.Is(err, store.ErrIsDir) {
			err = store.ErrNotFound
		}
		return nil, store.ObjectInfo{}, err
	}
	return obj, obj.Info(), nil
}

// emptyMD5 is the MD5 of no bytes (the ETag of an empty object).
const emptyMD5 = "d41d8cd98f00b204e9800998ecf8427e"

// source is what a read names (GET, HEAD, a copy's source): a live key,
// a version of it, or a file of a snapshot.
type source struct {
	obj     store.Object // nil: a directory, as an empty object
	info    store.ObjectInfo
	path    string // what access is checked on: the key, or the path in the snapshot
	live    bool   // the live object: a copy may name its blobs
	version string // its version ID, for x-amz-version-id ("": none)
}

// close releases the source's object.
func (s source) close() {
	if s.obj != nil {
		s.obj.Close()
	}
}

// openSource opens key of bucket b, or its version versionID ("": the
// live object; "null": the live object of a bucket that is not
// versioned), or a file of a snapshot (.snapshots/NAME/PATH).
func (h *Handler) openSource(ctx context.Context, b store.BucketInfo, key, versionID string) (source, error) {
	switch {
	case isSnapshotKey(key):
		if versionID != "" && versionID != "null" {
			_, path, _ := snapshotKey(key)
			return source{path: path}, errNoSuchVersion
		}
		obj, info, path, err := h.openSnapshotKey(ctx, b.Name, key)
		return source{obj: obj, info: info, path: path}, err
	case versionID == "" || versionID == "null" && !store.Versioned(b):
		obj, info, err := h.openKey(ctx, b.Name, key)
		src := source{obj: obj, info: info, path: key, live: true}
		if err == nil && store.Versioned(b) && obj != nil {
			src.version = versionOf(info)
		}
		return src, err
	case versionID == "null":
		return source{path: key}, errNoSuchVersion // a versioned bucket has no null version
	case !store.ValidVersionID(versionID):
		return source{path: key}, errInvalidVersionID
	}
	vs, ok := h.versions()
	if !ok || strings.HasSuffix(key, "/") || hidden(key) {
		return source{path: key}, errNoSuchVersion
	}
	obj, err := vs.OpenVersion(ctx, b.Name, key, versionID)
	if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrInvalidName) {
		err = errNoSuchVersion
	}
	if err != nil {
		return source{path: key, version: versionID}, err
	}
	return source{obj: obj, info: obj.Info(), path: key, version: versionID}, nil
}

func (h *Handler) getObject(w http.ResponseWriter, r *http.Request, rq *request) {
	ctx := r.Context()
	b, err := h.st.Bucket(ctx, rq.bucket)
	if err != nil {
		h.writeError(w, r, rq, err)
		return
	}
	hdr := w.Header()
	versionID := rq.query.Get("versionId")
	if rq.query.Has("versionId") && versionID == "" {
		h.writeError(w, r, rq, errInvalidVersionID)
		return
	}
	src, err := h.openSource(ctx, b, rq.key, versionID)
	if err != nil {
		// A caller who may not read the key learns it is missing only if
		// it may list where it would be (as S3 answers).
		if aerr := h.authorizeObject(ctx, rq, access.ActionRead, b, src.path, "", ""); aerr != nil {
			if lerr := h.authorizeObject(ctx, rq, access.ActionList, b, src.path, "", src.path); lerr != nil {
				err = aerr
			}
		}
		switch {
		case errors.Is(err, store.ErrDeleteMarker):
			// A delete marker has no body (S3's 405, which says so).
			hdr.Set("x-amz-delete-marker", "true")
			hdr.Set("x-amz-version-id", versionID)
		case errors.Is(err, store.ErrNotFound) && versionID == "" && !hidden(rq.key):
			h.markerHeaders(ctx, hdr, b, rq.key)
		}
		h.writeError(w, r, rq, err)
		return
	}
	defer src.close()
	obj, info := src.obj, src.info
	if err := h.authorizeObject(ctx, rq, access.ActionRead, b, src.path, objectACL(info), ""); err != nil {
		h.writeError(w, r, rq, err)
		return
	}
	if src.version != "" {
		hdr.Set("x-amz-version-id", src.version)
	}
	if err := checkConditions(r.Header, info, ""); err != nil {
		if errors.Is(err, errNotModified) {
			setObjectHeaders(w.Header(), info)
		}
		h.writeError(w, r, rq, err)
		return
	}
	off, n := int64(0), info.Size
	status := http.StatusOK
	if spec := r.Header.Get("Range"); spec != "" && ifRangeHolds(r.Header.Get("If-Range"), info) {
		start, length, ok, err := parseRange(spec, info.Size)
		if err != nil {
			hdr.Set("Content-Range", "bytes */"+strconv.FormatInt(info.Size, 10))
			h.writeError(w, r, rq, err)
			return
		}
		if ok {
			off, n, status = start, length, http.StatusPartialContent
			hdr.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", start, start+length-1, info.Size))
		}
	}
	setObjectHeaders(hdr, info)
	for _, o := range [...]struct{ param, header string }{
		{"response-content-type", "Content-Type"}, {"response-content-language", "Content-Language"},
		{"response-expires", "Expires"}, {"response-cache-control", "Cache-Control"},
		{"response-content-disposition", "Content-Disposition"}, {"response-content-encoding", "Content-Encoding"},
	} {
		if v := rq.query.Get(o.param); v != "" {
			hdr.Set(o.header, v)
		}
	}
	hdr.Set("Content-Length", strconv.FormatInt(n, 10))
	w.WriteHeader(status)
	if r.Method == http.MethodHead || n == 0 || obj == nil {
		return
	}
	if _, err := obj.WriteRangeTo(w, off, n); err != nil {
		// The head is out: cut the connection so the client sees a short body.
		h.log.Warn("s3 GET body cut", "bucket", rq.bucket, "key", rq.key, "err", err)
		panic(http.ErrAbortHandler)
	}
}

// setObjectHeaders sets the headers that describe an object.
func setObjectHeaders(hdr http.Header, info store.ObjectInfo) {
	hdr.Set("ETag", etag(info.ETag))
	hdr.Set("Last-Modified", info.ModTime.UTC().Format(http.TimeFormat))
	hdr.Set("Content-Type", contentType(info))
	hdr.Set("Accept-Ranges", "bytes")
	setStoredHeaders(hdr, info.Xattrs)
}

// checkConditions evaluates If-Match, If-Unmodified-Since, If-None-Match
// and If-Modified-Since (prefix "" for GET/HEAD, "x-amz-copy-source-" for
// a copy's source) in RFC 9110's order.
func checkConditions(hdr http.Header, info store.ObjectInfo, prefix string) error {
	get := func(k string) string { return hdr.Get(prefix + k) }
	im, inm := get("If-Match"), get("If-None-Match")
	if im != "" {
		if !etagListMatch(im, info.ETag) {
			return errPrecondition
		}
	} else if v := get("If-Unmodified-Since"); v != "" {
		if t, err := http.ParseTime(v); err == nil && info.ModTime.Truncate(time.Second).After(t) {
			return errPrecondition
		}
	}
	if inm != "" {
		if etagListMatch(inm, info.ETag) {
			if prefix != "" {
				return errPrecondition
			}
			return errNotModified
		}
	} else if v := get("If-Modified-Since"); v != "" {
		if t, err := http.ParseTime(v); err == nil && !info.ModTime.Truncate(time.Second).After(t) {
			if prefix != "" {
				return errPrecondition
			}
			return errNotModified
		}
	}
	return nil
}

// etagListMatch reports whether an If-Match/If-None-Match list names tag.
func etagListMatch(list, tag string) bool {
	for v := range strings.SplitSeq(list, ",") {
		v = strings.TrimSpace(v)
		v = strings.TrimPrefix(v, "W/")
		if v == "*" || strings.Trim(v, `"`) == tag {
			return true
		}
	}
	return false
}

// ifRangeHolds reports whether a Range applies under If-Range.
func ifRangeHolds(v string, info store.ObjectInfo) bool {
	if v == "" {
		return true
	}
	if strings.HasPrefix(v, `"`) {
		return strings.Trim(v, `"`) == info.ETag
	}
	t, err := http.ParseTime(v)
	return err == nil && !info.ModTime.Truncate(time.Second).After(t)
}

// parseRange parses a single "bytes=" range against size. ok is false for
// a range S3 ignores (several ranges, another unit); an unsatisfiable one
// is InvalidRange.
func parseRange(spec string, size int64) (off, n int64, ok bool, err error) {
	rs, found := strings.CutPrefix(spec, "bytes=")
	if !found || strings.Contains(rs, ",") {
		return 0, 0, false, nil
	}
	a, b, found := strings.Cut(strings.TrimSpace(rs), "-")
	if !found {
		return 0, 0, false, nil
	}
	invalid := errorf(http.StatusRequestedRangeNotSatisfiable, "InvalidRange", "The requested range is not satisfiable")
	if a == "" {
		k, perr := strconv.ParseInt(b, 10, 64)
		if perr != nil || k < 0 {
			return 0, 0, false, nil
		}
		if k == 0 || size == 0 {
			return 0, 0, false, invalid
		}
		k = min(k, size)
		return size - k, k, true, nil
	}
	start, perr := strconv.ParseInt(a, 10, 64)
	if perr != nil || start < 0 {
		return 0, 0, false, nil
	}
	end := size - 1
	if b != "" {
		e, perr := strconv.ParseInt(b, 10, 64)
		if perr != nil || e < start {
			return 0, 0, false, nil
		}
		end = min(e, size-1)
	}
	if start >= size {
		return 0, 0, false, invalid
	}
	return start, end - start + 1, true, nil
}

// body returns the request's payload, decoded and checked as its
// signature says (aws-chunked, payload hash, trailing checksums), with
// x-amz-checksum-* headers checked too.
func (h *Handler) body(r *http.Request, rq *request) (io.Reader, error) {
	res := rq.sig
	if res == nil {
		res = &sigv4.Result{PayloadHash: sigv4.UnsignedPayload}
		if ph := r.Header.Get("X-Amz-Content-Sha256"); ph == sigv4.StreamingUnsignedTrailer {
			res.PayloadHash = ph
		}
	}
	return res.Body(r)
}

// payloadSize is the decoded length of the request's payload, or -1.
func payloadSize(r *http.Request) int64 {
	if v := r.Header.Get("X-Amz-Decoded-Content-Length"); v != "" {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			return n
		}
		return -1
	}
	if strings.Contains(r.Header.Get("Content-Encoding"), "aws-chunked") {
		return -1
	}
	return r.ContentLength
}

// contentMD5 parses a Content-MD5 header (nil when absent).
func contentMD5(hdr http.Header) ([]byte, error) {
	vs, ok := hdr["Content-Md5"]
	if !ok {
		return nil, nil
	}
	b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(vs[0]))
	if err != nil || len(b) != md5.Size {
		return nil, errInvalidDigest
	}
	return b, nil
}

// takePayloadHash returns the signed x-amz-content-sha256 of a plain body
// (nil for UNSIGNED-PAYLOAD, STREAMING-* or an unsigned request) and stops
// body from hashing the payload: the caller hands it to the store as
// PutOptions.ContentSHA256, which the store checks while computing the
// SHA-256 it computes anyway (one SHA-256 pass instead of two). A mismatch
// is store.ErrSHA256Mismatch, answered XAmzContentSHA256Mismatch as before.
func takePayloadHash(body io.Reader) []byte {
	sb, ok := body.(*sigv4.Body)
	if !ok {
		return nil
	}
	want, _ := sb.TakePayloadHash()
	return want
}

// bodyReader wraps a request's payload for a store write: it remembers why
// reading failed, so that
// the answer names the payload's fault (BadDigest, SignatureDoesNotMatch,
// IncompleteBody...) rather than the store's wrapping of it.
type bodyReader struct {
	r   io.Reader
	err error
}

func newBodyReader(body io.Reader) *bodyReader { return &bodyReader{r: body} }

func (b *bodyReader) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err != nil && err != io.EOF && b.err == nil {
		b.err = err
	}
	return n, err
}

// cause returns the payload's error behind a failed write, or err.
func (b *bodyReader) cause(err error) error {
	var se *sigv4.Error
	var e *Error
	if b.err != nil && (errors.As(b.err, &se) || errors.As(b.err, &e)) {
		return b.err
	}
	return err
}

func (h *Handler) putObject(w http.ResponseWriter, r *http.Request, rq *request) {
	ctx := r.Context()
	b, err := h.authorize(ctx, rq, access.ActionWrite, rq.bucket, rq.key)
	if err == nil {
		err = h.authorizeACL(r, rq, b)
	}
	if err != nil {
		h.writeError(w, r, rq, err)
		return
	}
	if isInternal(rq.key) {
		h.writeError(w, r, rq, errorf(http.StatusBadRequest, "InvalidArgument", "keys under %s/ are reserved for multipart uploads", internalDir))
		return
	}
	want, err := contentMD5(r.Header)
	if err != nil {
		h.writeError(w, r, rq, err)
		return
	}
	x, err := objectXattrs(r.Header)
	if err != nil {
		h.writeError(w, r, rq, err)
		return
	}
	body, err := h.body(r, rq)
	if err != nil {
		h.writeError(w, r, rq, err)
		return
	}
	size := payloadSize(r)
	if strings.HasSuffix(rq.key, "/") {
		// A directory marker: an empty object named "dir/" is a directory.
		if size > 0 {
			h.writeError(w, r, rq, errorf(http.StatusBadRequest, "InvalidArgument", "a key ending in '/' names a directory: its body must be empty"))
			return
		}
		if err := h.st.Mkdir(ctx, rq.bucket, strings.TrimSuffix(rq.key, "/"), store.Attrs{}); err != nil {
			h.writeError(w, r, rq, err)
			return
		}
		w.Header().Set("ETag", etag(emptyMD5))
		w.WriteHeader(http.StatusOK)
		return
	}
	opts := store.PutOptions{ContentType: r.Header.Get("Content-Type"), Size: size, Xattrs: x}
	if v := r.Header.Get("If-None-Match"); v == "*" {
		opts.IfNoneMatchAny = true
	}
	if v := r.Header.Get("If-Match"); v != "" {
		opts.IfMatch = strings.Trim(v, `"`)
	}
	rd := newBodyReader(body)
	opts.ContentMD5 = want // checked by the store, which computes the MD5 anyway
	opts.ContentSHA256 = takePayloadHash(body)
	info, _, err := h.st.Put(ctx, rq.bucket, rq.key, rd, opts)
	if err != nil {
		h.writeError(w, r, rq, rd.cause(err))
		return
	}
	hdr := w.Header()
	hdr.Set("ETag", etag(info.ETag))
	versionHeader(hdr, b, info)
	if cb, ok := body.(*sigv4.Body); ok {
		if c, ok := cb.Checksum(); ok {
			hdr.Set("x-amz-checksum-"+strings.ToLower(c.Algorithm), c.Value)
		}
	}
	w.WriteHeader(http.StatusOK)
}

func (h *Handler) putObjectACL(w http.ResponseWriter, r *http.Request, rq *request) {
	ctx := r.Context()
	b, err := h.authorize(ctx, rq, access.ActionWrite, rq.bucket, rq.key)
	if err != nil {
		h.writeError(w, r, rq, err)
		return
	}
	if err := h.auth.Authorize(rq.principal, access.ActionAdmin, access.Resource{Bucket: b.Name, Owner: b.Owner}); err != nil {
		h.writeError(w, r, rq, err)
		return
	}
	acl, err := h.requestedACL(r)
	if err != nil {
		h.writeError(w, r, rq, err)
		return
	}
	if v := rq.query.Get("versionId"); v != "" && (v != "null" || store.Versioned(b)) {
		// The current version's ACL is the file's; an older version's is
		// kept as it was in the trash, which nothing rewrites.
		src, err := h.openSource(ctx, b, rq.key, v)
		if err != nil {
			h.writeError(w, r, rq, err)
			return
		}
		src.close()
		if info, err := h.st.Stat(ctx, rq.bucket, rq.key); err != nil || info.IsDir || versionOf(info) != v {
			h.writeError(w, r, rq, errorf(http.StatusNotImplemented, "NotImplemented",
				"the ACL of a noncurrent version cannot be changed: copy the version onto its key to make it current"))
			return
		}
		w.Header().Set("x-amz-version-id", v)
	}
	if _, err := h.st.SetAttrs(ctx, rq.bucket, strings.TrimSuffix(rq.key, "/"), store.SetAttrs{Xattrs: map[string][]byte{xattrACL: []byte(acl)}}); err != nil {
		h.writeError(w, r, rq, err)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// copySource parses x-amz-copy-source ("/bucket/key" or "bucket/key",
// URL-encoded, optionally "?versionId=ID").
func copySource(v string) (bucket, key, version string, err error) {
	v, q, hasQuery := strings.Cut(v, "?")
	if hasQuery {
		var found bool
		if version, found = strings.CutPrefix(q, "versionId="); !found || version == "" {
			return "", "", "", errorf(http.StatusBadRequest, "InvalidArgument", "bad x-amz-copy-source query %q: only versionId=ID", q)
		}
	}
	dec, uerr := url.PathUnescape(v)
	if uerr != nil {
		return "", "", "", errorf(http.StatusBadRequest, "InvalidArgument", "bad x-amz-copy-source %q", v)
	}
	bucket, key, _ = strings.Cut(strings.TrimPrefix(dec, "/"), "/")
	if bucket == "" || key == "" {
		return "", "", "", errorf(http.StatusBadRequest, "InvalidArgument", "x-amz-copy-source must be BUCKET/KEY, not %q", v)
	}
	return bucket, key, version, nil
}

// copyObject serves CopyObject: the new object names the source's blobs
// (store.Concat), no byte is copied; a version or a snapshot's file is
// read and written again (the same blobs: they are stored once).
func (h *Handler) copyObject(w http.ResponseWriter, r *http.Request, rq *request) {
	ctx := r.Context()
	sb, sk, sv, err := copySource(r.Header.Get("x-amz-copy-source"))
	if err != nil {
		h.writeError(w, r, rq, err)
		return
	}
	src, err := h.openCopySource(ctx, rq, sb, sk, sv)
	if err != nil {
		h.writeError(w, r, rq, err)
		return
	}
	defer src.close()
	b, err := h.authorize(ctx, rq, access.ActionWrite, rq.bucket, rq.key)
	if err == nil {
		err = h.authorizeACL(r, rq, b)
	}
	if err != nil {
		h.writeError(w, r, rq, err)
		return
	}
	if err := checkConditions(r.Header, src.info, "x-amz-copy-source-"); err != nil {
		h.writeError(w, r, rq, err)
		return
	}
	// The copy takes the source's headers (COPY) but not its ACL: a copy
	// has the ACL its request gives.
	copied := map[string][]byte{}
	for k, v := range src.info.Xattrs {
		if k != xattrACL {
			copied[k] = v
		}
	}
	if acl := r.Header.Get("x-amz-acl"); acl != "" {
		if _, _, err := cannedACL(acl); err != nil {
			h.writeError(w, r, rq, err)
			return
		}
		copied[xattrACL] = []byte(acl)
	}
	opts := store.PutOptions{ContentType: src.info.ContentType, Xattrs: copied}
	switch d := r.Header.Get("x-amz-metadata-directive"); d {
	case "", "COPY":
		// Copying a version onto its own key is how a version is restored.
		if sb == rq.bucket && sk == rq.key && sv == "" && r.Header.Get("x-amz-acl") == "" {
			h.writeError(w, r, rq, errorf(http.StatusBadRequest, "InvalidRequest",
				"This copy request is illegal because it is trying to copy an object to itself without changing the object's metadata, storage class, website redirect location or encryption attributes."))
			return
		}
	case "REPLACE":
		x, err := objectXattrs(r.Header)
		if err != nil {
			h.writeError(w, r, rq, err)
			return
		}
		opts.ContentType, opts.Xattrs = r.Header.Get("Content-Type"), x
	default:
		h.writeError(w, r, rq, errorf(http.StatusBadRequest, "InvalidArgument", "Unknown metadata directive %q", d))
		return
	}
	if opts.Xattrs == nil {
		opts.Xattrs = map[string][]byte{}
	}
	var info store.ObjectInfo
	if src.live {
		info, _, err = h.st.Concat(ctx, rq.bucket, rq.key, []store.ObjectRef{{Bucket: sb, Path: sk}}, src.info.ETag, opts)
	} else {
		opts.Size = src.info.Size
		info, _, err = h.st.Put(ctx, rq.bucket, rq.key, io.NewSectionReader(src.obj, 0, src.info.Size), opts)
	}
	if err != nil {
		h.writeError(w, r, rq, err)
		return
	}
	if src.version != "" {
		w.Header().Set("x-amz-copy-source-version-id", src.version)
	}
	versionHeader(w.Header(), b, info)
	writeXML(w, r, http.StatusOK, struct {
		XMLName      xml.Name `xml:"http://s3.amazonaws.com/doc/2006-03-01/ CopyObjectResult"`
		LastModified string   `xml:"LastModified"`
		ETag         string   `xml:"ETag"`
	}{LastModified: xmlTime(info.ModTime), ETag: etag(info.ETag)})
}

// hexMD5 decodes a hex ETag (no quotes), or nil.
func hexMD5(e string) []byte {
	b, err := hex.DecodeString(e)
	if err != nil || len(b) != md5.Size {
		return nil
	}
	return b
}

// stripAWSChunked removes the aws-chunked coding, which describes the
// request's framing, not the object, from a Content-Encoding value.
func stripAWSChunked(v string) string {
	if !strings.Contains(v, "aws-chunked") {
		return v
	}
	var keep []string
	for c := range strings.SplitSeq(v, ",") {
		if c = strings.TrimSpace(c); c != "" && c != "aws-chunked" {
			keep = append(keep, c)
		}
	}
	return strings.Join(keep, ",")
}

// isStoredHeader reports whether name (lowercase) is one of storedHeaders.
func isStoredHeader(name string) bool {
	for _, h := range storedHeaders {
		if strings.EqualFold(h, name) {
			return true
		}
	}
	return false
}
