package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-fs/cairn/internal/access"
	"github.com/cairn-fs/cairn/internal/store"
)

// writeJSON answers status with v encoded as JSON.
func (s *Server) writeJSON(rs *reqState, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		s.writeError(rs, err)
		return
	}
	body = append(body, '\n')
	// The write deadline was set when the request started; an upload may
	// have taken longer than WriteTimeout to arrive.
	rs.dl.Extend(time.Now())
	h := rs.w.Header()
	h[hdrContentType] = []string{"application/json"}
	rs.w.WriteHeader(status)
	if rs.req.Method != http.MethodHead {
		_, _ = rs.w.Write(body)
	}
}

// setObjectHeaders sets ETag and Repr-Digest of a written file, and, when
// the write was under-replicated, X-Cairn-Copies and
// X-Cairn-Copies-Wanted (docs/http-api.md).
func setObjectHeaders(h http.Header, info store.ObjectInfo) {
	if info.ETag != "" {
		h[hdrETag] = []string{`"` + info.ETag + `"`}
	}
	if d := appendReprDigest(nil, info.SHA256); len(d) > 0 {
		h[hdrReprDigest] = []string{string(d)}
	}
	if info.CopiesWanted > 0 {
		h[hdrCopies] = []string{strconv.Itoa(info.Copies)}
		h[hdrCopiesWanted] = []string{strconv.Itoa(info.CopiesWanted)}
	}
}

// Headers of an under-replicated write's answer.
const (
	hdrCopies       = "X-Cairn-Copies"
	hdrCopiesWanted = "X-Cairn-Copies-Wanted"
)

// writeTarget authorizes act (a write or delete) on t and refuses targets
// that are a bucket (buckets are managed under /_cairn/buckets).
func (s *Server) writeTarget(rs *reqState, t target, act access.Action) error {
	if err := s.authenticate(rs); err != nil {
		return err
	}
	res := access.Resource{Bucket: t.bucket, Path: t.path}
	if p := rs.principal; !p.Admin && t.bucket != "" {
		// An access key may own the bucket; a bucket may be public-read-write.
		if b, err := s.store.Bucket(rs.req.Context(), t.bucket); err == nil {
			res = bucketResource(b, t.path)
			res.PublicRead = false
		}
	}
	if err := s.auth.Authorize(rs.principal, act, res); err != nil {
		return err
	}
	if t.path == "" {
		rs.allow = "GET, HEAD"
		return fmt.Errorf("%w: %s on a bucket; use %sbuckets", ErrMethodNotAllowed, rs.req.Method, NodePrefix)
	}
	return nil
}

// checkIfMatch evaluates If-Match for a write against the current file and
// returns the ETag the store must still see (the check is then atomic).
func (s *Server) checkIfMatch(rs *reqState, t target) (string, error) {
	im := headerValue(rs.req.Header, "If-Match")
	if im == "" {
		return "", nil
	}
	cur, err := s.store.Stat(rs.req.Context(), t.bucket, t.path)
	if errors.Is(err, store.ErrNotFound) {
		return "", fmt.Errorf("%w: If-Match on a missing file", store.ErrPrecondition)
	}
	if err != nil {
		return "", err
	}
	if cur.IsDir {
		if strings.TrimSpace(im) == "*" {
			return "", nil
		}
		return "", fmt.Errorf("%w: If-Match on a directory", store.ErrPrecondition)
	}
	if !etagMatch(im, cur.ETag, false) {
		return "", fmt.Errorf("%w: If-Match does not match", store.ErrPrecondition)
	}
	return cur.ETag, nil
}

// servePut stores a file, or creates a directory for a trailing slash.
func (s *Server) servePut(rs *reqState, t target) {
	r := rs.req
	if err := s.writeTarget(rs, t, access.ActionWrite); err != nil {
		s.writeError(rs, err)
		return
	}
	ctx := s.changeCtx(rs)
	if t.slash {
		s.serveMkdir(rs, t)
		return
	}
	opts := store.PutOptions{ContentType: storedContentType(headerValue(r.Header, hdrContentType)), Size: r.ContentLength}
	if v := headerValue(r.Header, "X-Cairn-Mtime"); v != "" {
		mt, err := parseMtime(v)
		if err != nil {
			s.writeError(rs, err)
			return
		}
		opts.ModTime = mt
	}
	if v := headerValue(r.Header, "X-Cairn-Mode"); v != "" {
		m, err := parseMode(v)
		if err != nil {
			s.writeError(rs, err)
			return
		}
		opts.Mode = m
	}
	if inm := strings.TrimSpace(headerValue(r.Header, "If-None-Match")); inm != "" {
		if inm == "*" {
			opts.IfNoneMatchAny = true
		} else {
			cur, err := s.store.Stat(ctx, t.bucket, t.path)
			if err == nil && !cur.IsDir && etagMatch(inm, cur.ETag, true) {
				s.writeError(rs, fmt.Errorf("%w: If-None-Match matches", store.ErrPrecondition))
				return
			}
		}
	}
	im, err := s.checkIfMatch(rs, t)
	if err != nil {
		s.writeError(rs, err)
		return
	}
	opts.IfMatch = im

	info, created, err := s.store.Put(ctx, t.bucket, t.path, &rs.body, opts)
	if err != nil {
		if berr := rs.body.bodyError(); berr != nil {
			// The connection's read side is in an unknown state.
			rs.w.Header()["Connection"] = []string{"close"}
			err = berr
		}
		s.writeError(rs, err)
		return
	}
	setObjectHeaders(rs.w.Header(), info)
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	s.writeJSON(rs, status, info)
}

// serveMkdir creates a directory; an existing one answers 200, or 412
// with If-None-Match: *. The creation is decided in the log: of clients
// racing on several nodes, exactly one gets 201.
func (s *Server) serveMkdir(rs *reqState, t target) {
	ctx := rs.req.Context()
	if rs.req.ContentLength > 0 {
		s.writeError(rs, fmt.Errorf("%w: a directory PUT takes no body", ErrBadRequest))
		return
	}
	status := http.StatusCreated
	if err := s.store.Mkdir(ctx, t.bucket, t.path, store.Attrs{Exclusive: true}); err != nil {
		if !errors.Is(err, store.ErrExists) {
			s.writeError(rs, err)
			return
		}
		if strings.TrimSpace(headerValue(rs.req.Header, "If-None-Match")) == "*" {
			s.writeError(rs, fmt.Errorf("%w: %s/%s exists (If-None-Match: *)", store.ErrPrecondition, t.bucket, t.path))
			return
		}
		if info, serr := s.store.Stat(ctx, t.bucket, t.path); serr != nil || !info.IsDir {
			s.writeError(rs, err)
			return
		}
		status = http.StatusOK
	}
	info, err := s.store.Stat(ctx, t.bucket, t.path)
	if err != nil {
		info = store.ObjectInfo{Bucket: t.bucket, Path: t.path, IsDir: true}
	}
	s.writeJSON(rs, status, info)
}

// serveDelete removes a file or an empty directory.
func (s *Server) serveDelete(rs *reqState, t target) {
	if err := s.writeTarget(rs, t, access.ActionDelete); err != nil {
		s.writeError(rs, err)
		return
	}
	ctx := s.changeCtx(rs)
	if t.slash {
		info, err := s.store.Stat(ctx, t.bucket, t.path)
		if err != nil {
			s.writeError(rs, err)
			return
		}
		if !info.IsDir {
			s.writeError(rs, fmt.Errorf("%w: %s/", store.ErrNotDir, t.path))
			return
		}
	}
	im, err := s.checkIfMatch(rs, t)
	if err != nil {
		s.writeError(rs, err)
		return
	}
	if err := s.store.Delete(ctx, t.bucket, t.path, im); err != nil {
		s.writeError(rs, err)
		return
	}
	rs.w.WriteHeader(http.StatusNoContent)
}

// servePost handles POST /BUCKET/PATH?rename-to=NEWPATH.
func (s *Server) servePost(rs *reqState, t target) {
	ctx := rs.req.Context()
	if kinds, ok := rs.req.URL.Query()["extract"]; ok {
		if len(kinds) != 1 {
			s.writeError(rs, fmt.Errorf("%w: POST needs one extract parameter", ErrBadRequest))
			return
		}
		s.serveExtract(rs, t, kinds[0])
		return
	}
	if err := s.writeTarget(rs, t, access.ActionWrite); err != nil {
		s.writeError(rs, err)
		return
	}
	ctx = s.changeCtx(rs)
	q := rs.req.URL.Query()
	dsts, ok := q["rename-to"]
	if !ok || len(dsts) != 1 {
		s.writeError(rs, fmt.Errorf("%w: POST needs one rename-to parameter", ErrBadRequest))
		return
	}
	dst := strings.TrimSuffix(strings.TrimPrefix(dsts[0], "/"), "/")
	if dst == "" {
		s.writeError(rs, fmt.Errorf("%w: empty rename-to", ErrBadPath))
		return
	}
	if err := checkPath(dst, false); err != nil {
		s.writeError(rs, err)
		return
	}
	if len(t.bucket)+len(dst)+2 > MaxPathBytes {
		s.writeError(rs, fmt.Errorf("%w: rename-to", ErrPathTooLong))
		return
	}
	// The native API makes the destination's directories (rename(2), and
	// the store's Rename, do not).
	if parent := path.Dir(dst); parent != "." {
		if info, err := s.store.Stat(ctx, t.bucket, parent); err != nil || !info.IsDir {
			if err := s.store.Mkdir(ctx, t.bucket, parent, store.Attrs{}); err != nil {
				s.writeError(rs, err)
				return
			}
		}
	}
	if err := s.store.Rename(ctx, t.bucket, t.path, dst); err != nil {
		s.writeError(rs, err)
		return
	}
	info, err := s.store.Stat(ctx, t.bucket, dst)
	if err != nil {
		info = store.ObjectInfo{Bucket: t.bucket, Path: dst}
	}
	s.writeJSON(rs, http.StatusOK, info)
}

// bucketPatch is the body of POST and PATCH /_cairn/buckets: absent fields
// keep their value (PATCH) or default (POST).
type bucketPatch struct {
	Name             *string `json:"name"`
	Public           *bool   `json:"public"`
	ChecksumSidecars *bool   `json:"checksum_sidecars"`
	CacheControl     *string `json:"cache_control"`
	Replicas         *int    `json:"replicas"`
	WriteQuorum      *int    `json:"write_quorum"`
	Strict           *bool   `json:"strict"`
	UID              *uint32 `json:"uid"`
	GID              *uint32 `json:"gid"`
	FileMode         *uint32 `json:"file_mode"`
	DirMode          *uint32 `json:"dir_mode"`
	// TrashSeconds is the trash's retention (store.BucketInfo.TrashSeconds):
	// 0 (off) to maxTrashSeconds.
	TrashSeconds *int64 `json:"trash_seconds"`
}

// maxTrashSeconds bounds a bucket's trash retention: 3650 days.
const maxTrashSeconds = 3650 * 24 * 3600

// maxAdminBody bounds admin JSON bodies.
const maxAdminBody = 64 << 10

func (s *Server) readBucketPatch(rs *reqState) (bucketPatch, error) {
	var p bucketPatch
	dec := json.NewDecoder(io.LimitReader(&rs.body, maxAdminBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		if berr := rs.body.bodyError(); berr != nil {
			return p, berr
		}
		return p, fmt.Errorf("%w: bucket JSON: %v", ErrBadRequest, err)
	}
	// The value goes verbatim into response headers: no control byte but
	// HTAB, as in any field value net/http reads.
	if p.CacheControl != nil && strings.ContainsFunc(*p.CacheControl, func(r rune) bool { return (r < ' ' && r != '\t') || r == 0x7f }) {
		return p, fmt.Errorf("%w: cache_control has control characters", ErrBadRequest)
	}
	if p.TrashSeconds != nil && (*p.TrashSeconds < 0 || *p.TrashSeconds > maxTrashSeconds) {
		return p, fmt.Errorf("%w: trash_seconds %d: want 0 (no trash) to %d (3650 days)", ErrBadRequest, *p.TrashSeconds, maxTrashSeconds)
	}
	return p, nil
}

func (p bucketPatch) apply(b *store.BucketInfo) {
	if p.Public != nil {
		b.Public = *p.Public
	}
	if p.ChecksumSidecars != nil {
		b.ChecksumSidecars = *p.ChecksumSidecars
	}
	if p.CacheControl != nil {
		b.CacheControl = *p.CacheControl
	}
	if p.Replicas != nil {
		b.Replicas = *p.Replicas
	}
	if p.WriteQuorum != nil {
		b.WriteQuorum = *p.WriteQuorum
	}
	if p.Strict != nil {
		b.Strict = *p.Strict
	}
	if p.TrashSeconds != nil {
		b.TrashSeconds = *p.TrashSeconds
	}
	for _, f := range []struct {
		src *uint32
		dst *uint32
	}{{p.UID, &b.UID}, {p.GID, &b.GID}, {p.FileMode, &b.FileMode}, {p.DirMode, &b.DirMode}} {
		if f.src != nil {
			*f.dst = *f.src
		}
	}
}

// serveBuckets handles /_cairn/buckets[/NAME]; name is "" for the collection.
func (s *Server) serveBuckets(rs *reqState, name string) {
	r := rs.req
	ctx := r.Context()
	if err := s.authorize(rs, access.ActionAdmin, access.Resource{Bucket: name}); err != nil {
		s.writeError(rs, err)
		return
	}
	if name == "" {
		switch r.Method {
		case http.MethodGet, http.MethodHead:
			bs, err := s.store.Buckets(ctx)
			if err != nil {
				s.writeError(rs, err)
				return
			}
			if bs == nil {
				bs = []store.BucketInfo{}
			}
			s.writeJSON(rs, http.StatusOK, bs)
		case http.MethodPost:
			p, err := s.readBucketPatch(rs)
			if err != nil {
				s.writeError(rs, err)
				return
			}
			if p.Name == nil || !validBucketName(*p.Name) {
				s.writeErrorStatus(rs, http.StatusBadRequest, "InvalidBucketName",
					fmt.Errorf("bucket names are 3-63 bytes of a-z, 0-9, '-' and '.'"))
				return
			}
			b := store.BucketInfo{Name: *p.Name}
			p.apply(&b)
			if err := s.store.CreateBucket(ctx, b); err != nil {
				s.writeError(rs, err)
				return
			}
			if got, err := s.store.Bucket(ctx, b.Name); err == nil {
				b = got
			}
			rs.w.Header()[hdrLocation] = []string{NodePrefix + "buckets/" + b.Name}
			s.writeJSON(rs, http.StatusCreated, b)
		default:
			rs.allow = "GET, HEAD, POST"
			s.writeError(rs, ErrMethodNotAllowed)
		}
		return
	}
	if strings.Contains(name, "/") {
		s.writeError(rs, fmt.Errorf("%w: bucket path", ErrBadPath))
		return
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		b, err := s.store.Bucket(ctx, name)
		if err != nil {
			s.writeError(rs, err)
			return
		}
		s.writeJSON(rs, http.StatusOK, b)
	case http.MethodPatch:
		p, err := s.readBucketPatch(rs)
		if err != nil {
			s.writeError(rs, err)
			return
		}
		if p.Name != nil && *p.Name != name {
			s.writeError(rs, fmt.Errorf("%w: a bucket cannot be renamed", ErrBadRequest))
			return
		}
		b, err := s.store.Bucket(ctx, name)
		if err != nil {
			s.writeError(rs, err)
			return
		}
		p.apply(&b)
		if err := s.store.UpdateBucket(ctx, b); err != nil {
			s.writeError(rs, err)
			return
		}
		if got, err := s.store.Bucket(ctx, name); err == nil {
			b = got
		}
		s.writeJSON(rs, http.StatusOK, b)
	case http.MethodDelete:
		if err := s.store.DeleteBucket(ctx, name); err != nil {
			s.writeError(rs, err)
			return
		}
		rs.w.WriteHeader(http.StatusNoContent)
	default:
		rs.allow = "GET, HEAD, PATCH, DELETE"
		s.writeError(rs, ErrMethodNotAllowed)
	}
}

// storedContentType is the Content-Type of a PUT to keep with the file. A
// form encoding is what curl -d/--data-binary and many HTTP libraries send
// by default for a raw body, never the type of a stored file: it is
// dropped, so the file is served with the type of its extension.
func storedContentType(ct string) string {
	base := ct
	if i := strings.IndexByte(base, ';'); i >= 0 {
		base = base[:i]
	}
	switch strings.ToLower(strings.TrimSpace(base)) {
	case "application/x-www-form-urlencoded", "multipart/form-data":
		return ""
	}
	return ct
}
