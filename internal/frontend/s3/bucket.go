package s3

import (
	"context"
	"encoding/xml"
	"errors"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-fs/cairn/internal/access"
	"github.com/cairn-fs/cairn/internal/store"
)

// timeFormat is S3's XML timestamp format.
const timeFormat = "2006-01-02T15:04:05.000Z"

func xmlTime(t time.Time) string { return t.UTC().Format(timeFormat) }

// writeXML answers v as an XML document with status.
func writeXML(w http.ResponseWriter, r *http.Request, status int, v any) {
	b, err := xml.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	b = append([]byte(xml.Header), b...)
	h := w.Header()
	h.Set("Content-Type", "application/xml")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		_, _ = w.Write(b)
	}
}

// readXML decodes a request body of at most limit bytes into v.
func readXML(r io.Reader, limit int64, v any) error {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return err
	}
	if int64(len(b)) > limit || len(b) == 0 {
		return errMalformedXML
	}
	if err := xml.Unmarshal(b, v); err != nil {
		return errMalformedXML
	}
	return nil
}

type listAllMyBucketsResult struct {
	XMLName xml.Name     `xml:"http://s3.amazonaws.com/doc/2006-03-01/ ListAllMyBucketsResult"`
	Owner   owner        `xml:"Owner"`
	Buckets []bucketJSON `xml:"Buckets>Bucket"`
}

type bucketJSON struct {
	Name         string `xml:"Name"`
	CreationDate string `xml:"CreationDate"`
}

func (h *Handler) listBuckets(w http.ResponseWriter, r *http.Request, rq *request) {
	if rq.principal.Anonymous() {
		h.writeError(w, r, rq, errAnonymousForbidden)
		return
	}
	all, err := h.st.Buckets(r.Context())
	if err != nil {
		h.writeError(w, r, rq, err)
		return
	}
	out := listAllMyBucketsResult{Owner: owner{ID: rq.principal.CanonicalID(), DisplayName: rq.principal.DisplayName()}, Buckets: []bucketJSON{}}
	for _, b := range all {
		if rq.principal.SeesBucket(b.Name, b.Owner) {
			out.Buckets = append(out.Buckets, bucketJSON{Name: b.Name, CreationDate: xmlTime(b.Created)})
		}
	}
	sort.Slice(out.Buckets, func(i, j int) bool { return out.Buckets[i].Name < out.Buckets[j].Name })
	writeXML(w, r, http.StatusOK, out)
}

// serveBucket routes a request on a bucket (no key).
func (h *Handler) serveBucket(w http.ResponseWriter, r *http.Request, rq *request) {
	q := rq.query
	if err := store.ValidBucketName(rq.bucket); err != nil && !(r.Method == http.MethodPut && !q.Has("acl")) {
		// Another kind of name cannot exist: answer as S3 does for it.
		if r.Method == http.MethodPut {
			rq.op = "CreateBucket"
			h.writeError(w, r, rq, errInvalidBucketName)
			return
		}
	}
	switch r.Method {
	case http.MethodPut:
		switch {
		case q.Has("acl"):
			rq.op = "PutBucketAcl"
			h.putBucketACL(w, r, rq)
		case q.Has("policy"):
			rq.op = "PutBucketPolicy"
			h.serveBucketPolicy(w, r, rq)
		case q.Has("versioning"):
			rq.op = "PutBucketVersioning"
			h.putBucketVersioning(w, r, rq)
		case len(q) == 0:
			rq.op = "CreateBucket"
			h.createBucket(w, r, rq)
		default:
			rq.op = "PutBucketOther"
			h.writeError(w, r, rq, errNotImplemented)
		}
	case http.MethodDelete:
		if q.Has("policy") {
			rq.op = "DeleteBucketPolicy"
			h.serveBucketPolicy(w, r, rq)
			return
		}
		if len(q) != 0 {
			rq.op = "DeleteBucketOther"
			h.writeError(w, r, rq, errNotImplemented)
			return
		}
		rq.op = "DeleteBucket"
		h.deleteBucket(w, r, rq)
	case http.MethodHead:
		rq.op = "HeadBucket"
		if _, err := h.authorize(r.Context(), rq, access.ActionList, rq.bucket, ""); err != nil {
			h.writeError(w, r, rq, err)
			return
		}
		w.Header().Set("x-amz-bucket-region", h.cfg.Region)
		w.WriteHeader(http.StatusOK)
	case http.MethodGet:
		switch {
		case q.Has("location"):
			rq.op = "GetBucketLocation"
			if _, err := h.authorize(r.Context(), rq, access.ActionList, rq.bucket, ""); err != nil {
				h.writeError(w, r, rq, err)
				return
			}
			loc := h.cfg.Region
			if loc == "us-east-1" {
				loc = ""
			}
			writeXML(w, r, http.StatusOK, struct {
				XMLName xml.Name `xml:"http://s3.amazonaws.com/doc/2006-03-01/ LocationConstraint"`
				Value   string   `xml:",chardata"`
			}{Value: loc})
		case q.Has("acl"):
			rq.op = "GetBucketAcl"
			h.getACL(w, r, rq, "")
		case q.Has("versioning"):
			rq.op = "GetBucketVersioning"
			h.getBucketVersioning(w, r, rq)
		case q.Has("uploads"):
			rq.op = "ListMultipartUploads"
			h.listUploads(w, r, rq)
		case q.Has("versions"):
			rq.op = "ListObjectVersions"
			h.listObjects(w, r, rq, listVersions)
		case q.Get("list-type") == "2":
			rq.op = "ListObjectsV2"
			h.listObjects(w, r, rq, listV2)
		case q.Has("policy"):
			rq.op = "GetBucketPolicy"
			h.serveBucketPolicy(w, r, rq)
		case q.Has("cors"), q.Has("lifecycle"), q.Has("tagging"), q.Has("website"),
			q.Has("encryption"), q.Has("object-lock"), q.Has("replication"), q.Has("logging"), q.Has("notification"):
			rq.op = "GetBucketOther"
			h.writeError(w, r, rq, errNotImplemented)
		default:
			rq.op = "ListObjects"
			h.listObjects(w, r, rq, listV1)
		}
	case http.MethodPost:
		if q.Has("delete") {
			rq.op = "DeleteObjects"
			h.deleteObjects(w, r, rq)
			return
		}
		rq.op = "PostBucket"
		h.writeError(w, r, rq, errNotImplemented)
	default:
		rq.op = "bucket"
		h.writeError(w, r, rq, errMethodNotAllowed)
	}
}

func (h *Handler) createBucket(w http.ResponseWriter, r *http.Request, rq *request) {
	ctx := r.Context()
	if err := store.ValidBucketName(rq.bucket); err != nil {
		h.writeError(w, r, rq, errorf(http.StatusBadRequest, "InvalidBucketName", "%v", err))
		return
	}
	if err := h.auth.Authorize(rq.principal, access.ActionAdmin, access.Resource{Bucket: rq.bucket}); err != nil {
		if rq.principal.Anonymous() {
			err = errAnonymousForbidden
		}
		h.writeError(w, r, rq, err)
		return
	}
	public, aclField, err := cannedACL(r.Header.Get("x-amz-acl"))
	if err != nil {
		h.writeError(w, r, rq, err)
		return
	}
	if r.ContentLength != 0 {
		var cfg struct {
			LocationConstraint string `xml:"LocationConstraint"`
		}
		if err := readXML(r.Body, 64<<10, &cfg); err != nil {
			h.writeError(w, r, rq, err)
			return
		}
		if cfg.LocationConstraint != "" && cfg.LocationConstraint != h.cfg.Region {
			h.writeError(w, r, rq, errorf(http.StatusBadRequest, "InvalidLocationConstraint",
				"The specified location-constraint %q is not valid: this cluster is %q", cfg.LocationConstraint, h.cfg.Region))
			return
		}
	}
	ownerID := ""
	if !rq.principal.Admin {
		ownerID = rq.principal.CanonicalID()
	}
	err = h.st.CreateBucket(ctx, store.BucketInfo{Name: rq.bucket, Public: public, ACL: aclField, Owner: ownerID})
	if errors.Is(err, store.ErrBucketExists) {
		b, berr := h.st.Bucket(ctx, rq.bucket)
		switch {
		case berr == nil && b.Owner != ownerID:
			err = errorf(http.StatusConflict, "BucketAlreadyExists", "The requested bucket name is not available. Please select a different name and try again.")
		case berr == nil && h.cfg.Region == usEast1:
			// As AWS in us-east-1: re-creating a bucket you own succeeds
			// and changes nothing (its objects and settings stay).
			// Elsewhere it is BucketAlreadyOwnedByYou (docs/s3.md).
			err = nil
		}
	}
	if err != nil {
		h.writeError(w, r, rq, err)
		return
	}
	w.Header().Set("Location", "/"+rq.bucket)
	w.WriteHeader(http.StatusOK)
}

// usEast1 is the region whose CreateBucket of an owned bucket answers 200.
const usEast1 = "us-east-1"

func (h *Handler) deleteBucket(w http.ResponseWriter, r *http.Request, rq *request) {
	ctx := r.Context()
	if _, err := h.authorize(ctx, rq, access.ActionAdmin, rq.bucket, ""); err != nil {
		h.writeError(w, r, rq, err)
		return
	}
	err := h.st.DeleteBucket(ctx, rq.bucket)
	if errors.Is(err, store.ErrBucketNotEmpty) && h.noObjects(ctx, rq.bucket) {
		// Unfinished multipart uploads and empty directories do not keep
		// a bucket alive: S3 has no directories.
		h.abortAllUploads(ctx, rq.bucket, time.Time{})
		h.removeEmptyDirs(ctx, rq.bucket, "")
		h.dropHiddenTrash(ctx, rq.bucket, internalDir+"/")
		err = h.st.DeleteBucket(ctx, rq.bucket)
	}
	if err != nil {
		h.writeError(w, r, rq, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// Access control policies (GetBucketAcl, GetObjectAcl): the owner has
// FULL_CONTROL; a public bucket adds READ for AllUsers.
type accessControlPolicy struct {
	XMLName xml.Name `xml:"http://s3.amazonaws.com/doc/2006-03-01/ AccessControlPolicy"`
	Owner   owner    `xml:"Owner"`
	Grants  []grant  `xml:"AccessControlList>Grant"`
}

type grant struct {
	Grantee    grantee `xml:"Grantee"`
	Permission string  `xml:"Permission"`
}

type grantee struct {
	XMLNS       string `xml:"xmlns:xsi,attr"`
	Type        string `xml:"xsi:type,attr"`
	ID          string `xml:"ID,omitempty"`
	DisplayName string `xml:"DisplayName,omitempty"`
	URI         string `xml:"URI,omitempty"`
}

const allUsersURI = "http://acs.amazonaws.com/groups/global/AllUsers"

const authUsersURI = "http://acs.amazonaws.com/groups/global/AuthenticatedUsers"

// aclPolicy is the access control policy of a canned ACL for bucket b's
// owner: group grants first (as RGW lists them; clients sort by display
// name, which a group lacks), then the owner's FULL_CONTROL.
func (h *Handler) aclPolicy(b store.BucketInfo, acl string) accessControlPolicy {
	o := ownerOf(b, h.displayName)
	p := accessControlPolicy{Owner: o}
	group := func(uri, perm string) {
		p.Grants = append(p.Grants, grant{Grantee: grantee{XMLNS: "http://www.w3.org/2001/XMLSchema-instance", Type: "Group", URI: uri}, Permission: perm})
	}
	switch acl {
	case "public-read":
		group(allUsersURI, "READ")
	case "public-read-write":
		group(allUsersURI, "READ")
		group(allUsersURI, "WRITE")
	case "authenticated-read":
		group(authUsersURI, "READ")
	}
	p.Grants = append(p.Grants, grant{
		Grantee:    grantee{XMLNS: "http://www.w3.org/2001/XMLSchema-instance", Type: "CanonicalUser", ID: o.ID, DisplayName: o.DisplayName},
		Permission: "FULL_CONTROL"})
	return p
}

// getACL answers the ACL of the bucket (key "") or of an object: its own
// canned ACL if it was given one, else its bucket's.
func (h *Handler) getACL(w http.ResponseWriter, r *http.Request, rq *request, key string) {
	ctx := r.Context()
	b, err := h.authorize(ctx, rq, access.ActionRead, rq.bucket, key)
	if err != nil {
		h.writeError(w, r, rq, err)
		return
	}
	acl := bucketACL(b)
	if key != "" {
		var info store.ObjectInfo
		if v := rq.query.Get("versionId"); v != "" || isSnapshotKey(key) {
			src, err := h.openSource(ctx, b, key, v)
			if err != nil {
				h.writeError(w, r, rq, err)
				return
			}
			src.close()
			info = src.info
			if src.version != "" {
				w.Header().Set("x-amz-version-id", src.version)
			}
		} else if info, err = h.st.Stat(ctx, rq.bucket, strings.TrimSuffix(key, "/")); err != nil {
			h.writeError(w, r, rq, err)
			return
		}
		if a := objectACL(info); a != "" {
			acl = a
		}
	}
	writeXML(w, r, http.StatusOK, h.aclPolicy(b, acl))
}

// putBucketACL sets a bucket's canned ACL (x-amz-acl, or an
// AccessControlPolicy body that is one of the canned ones).
func (h *Handler) putBucketACL(w http.ResponseWriter, r *http.Request, rq *request) {
	ctx := r.Context()
	b, err := h.authorize(ctx, rq, access.ActionAdmin, rq.bucket, "")
	if err != nil {
		h.writeError(w, r, rq, err)
		return
	}
	acl, err := h.requestedACL(r)
	if err != nil {
		h.writeError(w, r, rq, err)
		return
	}
	public, field, _ := cannedACL(acl)
	if b.Public != public || b.ACL != field {
		b.Public, b.ACL = public, field
		if err := h.st.UpdateBucket(ctx, b); err != nil {
			h.writeError(w, r, rq, err)
			return
		}
	}
	w.WriteHeader(http.StatusOK)
}

// requestedACL reads the canned ACL of a Put*Acl request: the x-amz-acl
// header, or a policy body equal to a canned one (owner FULL_CONTROL plus
// the group grants of public-read, public-read-write or
// authenticated-read).
func (h *Handler) requestedACL(r *http.Request) (string, error) {
	if v := r.Header.Get("x-amz-acl"); v != "" || r.ContentLength == 0 {
		if v == "" {
			v = "private"
		}
		_, _, err := cannedACL(v)
		return v, err
	}
	var p struct {
		Grants []struct {
			Grantee struct {
				URI string `xml:"URI"`
				ID  string `xml:"ID"`
			} `xml:"Grantee"`
			Permission string `xml:"Permission"`
		} `xml:"AccessControlList>Grant"`
	}
	if err := readXML(r.Body, 64<<10, &p); err != nil {
		return "", err
	}
	all := map[string]bool{}
	authRead := false
	for _, g := range p.Grants {
		switch {
		case g.Grantee.URI == allUsersURI && (g.Permission == "READ" || g.Permission == "WRITE"):
			all[g.Permission] = true
		case g.Grantee.URI == authUsersURI && g.Permission == "READ":
			authRead = true
		case g.Grantee.URI == "" && g.Permission == "FULL_CONTROL":
		default:
			return "", errorf(http.StatusNotImplemented, "NotImplemented",
				"only canned ACLs are supported (grant %s to %s%s)", g.Permission, g.Grantee.URI, g.Grantee.ID)
		}
	}
	switch {
	case all["READ"] && all["WRITE"]:
		return "public-read-write", nil
	case all["READ"]:
		return "public-read", nil
	case authRead:
		return "authenticated-read", nil
	}
	return "private", nil
}

// deleteObjects serves POST /BUCKET?delete (DeleteObjects).
func (h *Handler) deleteObjects(w http.ResponseWriter, r *http.Request, rq *request) {
	ctx := r.Context()
	if _, err := h.authorize(ctx, rq, access.ActionList, rq.bucket, ""); err != nil {
		if !errors.Is(err, access.ErrForbidden) {
			h.writeError(w, r, rq, err)
			return
		}
	}
	var req struct {
		Quiet   bool `xml:"Quiet"`
		Objects []struct {
			Key       string  `xml:"Key"`
			VersionID *string `xml:"VersionId"`
		} `xml:"Object"`
	}
	body, err := h.body(r, rq)
	if err != nil {
		h.writeError(w, r, rq, err)
		return
	}
	if err := readXML(body, 2<<20, &req); err != nil {
		h.writeError(w, r, rq, err)
		return
	}
	if len(req.Objects) > 1000 {
		h.writeError(w, r, rq, errMalformedXML)
		return
	}
	type deleted struct {
		Key                   string `xml:"Key"`
		VersionID             string `xml:"VersionId,omitempty"`
		DeleteMarker          bool   `xml:"DeleteMarker,omitempty"`
		DeleteMarkerVersionID string `xml:"DeleteMarkerVersionId,omitempty"`
	}
	type delError struct {
		Key       string `xml:"Key"`
		VersionID string `xml:"VersionId,omitempty"`
		Code      string `xml:"Code"`
		Message   string `xml:"Message"`
	}
	out := struct {
		XMLName xml.Name   `xml:"http://s3.amazonaws.com/doc/2006-03-01/ DeleteResult"`
		Deleted []deleted  `xml:"Deleted"`
		Errors  []delError `xml:"Error"`
	}{}
	for _, o := range req.Objects {
		v := ""
		if o.VersionID != nil {
			v = *o.VersionID
		}
		res, err := h.deleteObject(r.Context(), rq, o.Key, o.VersionID != nil, v)
		if err != nil {
			e := classify(err)
			out.Errors = append(out.Errors, delError{Key: o.Key, VersionID: v, Code: e.Code, Message: e.Message})
			continue
		}
		if req.Quiet {
			continue
		}
		d := deleted{Key: o.Key, VersionID: v}
		if res.marker {
			d.DeleteMarker, d.DeleteMarkerVersionID = true, res.versionID
		}
		out.Deleted = append(out.Deleted, d)
	}
	writeXML(w, r, http.StatusOK, out)
}

// deleteObject deletes key as DeleteObject does, after authorizing it:
// with a version ID (hasVersion), that version for good; in a versioned
// bucket, the live object's deletion is a delete marker, whose ID the
// outcome gives. A missing key is not an error; "dir/" removes an empty
// directory; a key under .snapshots/ is AccessDenied.
func (h *Handler) deleteObject(ctx context.Context, rq *request, key string, hasVersion bool, versionID string) (deleteOutcome, error) {
	b, err := h.authorize(ctx, rq, access.ActionDelete, rq.bucket, key)
	if err != nil {
		return deleteOutcome{}, err
	}
	if isSnapshotKey(key) {
		return deleteOutcome{}, errSnapshotReadOnly
	}
	if hasVersion {
		if versionID == "" {
			return deleteOutcome{}, errInvalidVersionID
		}
		return h.deleteVersion(ctx, b, key, versionID)
	}
	if err := h.deleteLive(ctx, b.Name, key); err != nil {
		return deleteOutcome{}, err
	}
	var out deleteOutcome
	if vs, ok := h.versions(); ok && store.Versioned(b) && !strings.HasSuffix(key, "/") && !hidden(key) {
		// The deletion's trash entry is the key's latest delete marker.
		if v, ok := latestOf(ctx, vs, b.Name, key); ok && v.DeleteMarker {
			out = deleteOutcome{versionID: v.ID, marker: true}
		}
	}
	return out, nil
}

// deleteLive deletes the live object at key: a missing key is not an
// error; "dir/" removes an empty directory.
func (h *Handler) deleteLive(ctx context.Context, bucket, key string) error {
	p := strings.TrimSuffix(key, "/")
	if p == "" || hidden(p) {
		return nil
	}
	err := h.st.Delete(ctx, bucket, p, "")
	if err == nil && !strings.HasSuffix(key, "/") {
		h.pruneParents(ctx, bucket, p)
	}
	if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrNotDir) || errors.Is(err, store.ErrInvalidName) ||
		errors.Is(err, store.ErrNotEmpty) && !strings.HasSuffix(key, "/") {
		// A key that does not exist (as a file) is deleted already.
		return nil
	}
	return err
}

// dropHiddenTrash drops the trash entries under prefix: the multipart
// uploads' parts and records, which a bucket with a trash (or versioned)
// keeps like any file but which are nobody's versions. One seek when
// there are none.
func (h *Handler) dropHiddenTrash(ctx context.Context, bucket, prefix string) {
	vs, ok := h.versions()
	if !ok {
		return
	}
	if _, err := vs.DropTrash(ctx, bucket, prefix); err != nil {
		h.log.Warn("trash of multipart uploads not dropped", "bucket", bucket, "prefix", prefix, "err", err)
	}
}

// pruneParents removes the directories above a deleted file that it
// leaves empty, as S3 has no directories: deleting the last key under
// "a/" makes "a/" disappear from listings. A directory is removed only
// when a local listing finds it empty (the delete itself refuses a
// directory that is not).
func (h *Handler) pruneParents(ctx context.Context, bucket, p string) {
	for {
		i := strings.LastIndexByte(p, '/')
		if i < 0 {
			return
		}
		p = p[:i]
		res, err := h.st.List(ctx, bucket, store.ListOptions{Prefix: p + "/", Delimiter: "/", Limit: 1})
		if err != nil || len(res.Entries) > 0 || len(res.CommonPrefixes) > 0 {
			return
		}
		if err := h.st.Delete(ctx, bucket, p, ""); err != nil {
			return
		}
	}
}

// noObjects reports whether bucket holds no file outside the uploads.
func (h *Handler) noObjects(ctx context.Context, bucket string) bool {
	page, err := h.list(ctx, bucket, "", "", "", 1)
	return err == nil && len(page.entries) == 0
}

// removeEmptyDirs removes the empty directories under dir (a prefix
// ending in "/", or "" for the root), deepest first.
func (h *Handler) removeEmptyDirs(ctx context.Context, bucket, dir string) {
	res, err := h.st.List(ctx, bucket, store.ListOptions{Prefix: dir, Delimiter: "/", Limit: 1000})
	if err != nil {
		return
	}
	for _, cp := range res.CommonPrefixes {
		h.removeEmptyDirs(ctx, bucket, cp)
		_ = h.st.Delete(ctx, bucket, strings.TrimSuffix(cp, "/"), "")
	}
}
