package s3

import (
	"context"
	"encoding/xml"
	"errors"
	"net/http"
	"strings"

	"github.com/cairn-fs/cairn/internal/access"
	"github.com/cairn-fs/cairn/internal/store"
)

// S3 versioning over the bucket's trash (design 0007; store.Versions):
//
//   - PutBucketVersioning Enabled sets the bucket's trash retention to
//     store.VersioningSeconds: every overwrite and delete keeps the old
//     body, without expiry. Suspended and MFA delete are NotImplemented
//     (docs/s3.md says why); GetBucketVersioning answers Enabled or
//     nothing.
//   - Version IDs (store.VersionID) name a file version by its
//     modification time and ETag, so the ID a PUT answers is the one the
//     version keeps in the trash after an overwrite; a delete marker is
//     the trash entry of a deletion. A versioned bucket has no "null"
//     version: an object written before versioning was enabled has an ID
//     like any other.
//   - ListObjectVersions of a versioned bucket lists the files and their
//     trash entries (a deletion's entry as a DeleteMarker above the
//     version it ended); GET, HEAD, GetObjectAcl and copy sources take a
//     versionId; DELETE with a versionId deletes that version for good
//     (deleting the current version makes the previous one current;
//     deleting the latest delete marker undeletes).
//   - In a bucket that is not versioned, versionId "null" is the object
//     itself, and a version ID read or delete still reaches the trash's
//     entries by ID.

// Errors of versioned requests.
var (
	errNoSuchVersion    = &Error{"NoSuchVersion", http.StatusNotFound, "The specified version does not exist."}
	errInvalidVersionID = &Error{"InvalidArgument", http.StatusBadRequest, "Invalid version id specified"}
	errNoVersions       = &Error{"NotImplemented", http.StatusNotImplemented, "This store keeps no versions."}
)

// versions returns the store's versions, if it keeps them.
func (h *Handler) versions() (store.Versions, bool) {
	v, ok := h.st.(store.Versions)
	return v, ok
}

// versionOf is the S3 version ID of a live object.
func versionOf(info store.ObjectInfo) string { return store.VersionID(info.ModTime, info.ETag) }

// versionHeader sets x-amz-version-id for a live object of bucket b when
// b is versioned.
func versionHeader(hdr http.Header, b store.BucketInfo, info store.ObjectInfo) {
	if store.Versioned(b) && !info.IsDir {
		hdr.Set("x-amz-version-id", versionOf(info))
	}
}

// versioningConfiguration is the body of Put/GetBucketVersioning.
type versioningConfiguration struct {
	XMLName   xml.Name `xml:"http://s3.amazonaws.com/doc/2006-03-01/ VersioningConfiguration"`
	Status    string   `xml:"Status,omitempty"`
	MfaDelete string   `xml:"MfaDelete,omitempty"`
}

func (h *Handler) getBucketVersioning(w http.ResponseWriter, r *http.Request, rq *request) {
	b, err := h.authorize(r.Context(), rq, access.ActionList, rq.bucket, "")
	if err != nil {
		h.writeError(w, r, rq, err)
		return
	}
	var out versioningConfiguration
	if store.Versioned(b) {
		out.Status = "Enabled"
	}
	writeXML(w, r, http.StatusOK, out)
}

// putBucketVersioning turns versioning on (Enabled): the bucket's owner,
// or a key with admin on it, only.
func (h *Handler) putBucketVersioning(w http.ResponseWriter, r *http.Request, rq *request) {
	ctx := r.Context()
	b, err := h.authorize(ctx, rq, access.ActionAdmin, rq.bucket, "")
	if err != nil {
		h.writeError(w, r, rq, err)
		return
	}
	body, err := h.body(r, rq)
	if err != nil {
		h.writeError(w, r, rq, err)
		return
	}
	var cfg versioningConfiguration
	if err := readXML(body, 64<<10, &cfg); err != nil {
		h.writeError(w, r, rq, err)
		return
	}
	switch cfg.MfaDelete {
	case "", "Disabled":
	case "Enabled":
		h.writeError(w, r, rq, errorf(http.StatusNotImplemented, "NotImplemented", "MFA delete is not supported"))
		return
	default:
		h.writeError(w, r, rq, errorf(http.StatusBadRequest, "IllegalVersioningConfigurationException",
			"The versioning configuration specified in the request is invalid: MfaDelete %q", cfg.MfaDelete))
		return
	}
	switch cfg.Status {
	case "":
		// Nothing to change (a configuration of MfaDelete alone).
	case "Enabled":
		if _, ok := h.versions(); !ok {
			h.writeError(w, r, rq, errNoVersions)
			return
		}
		if !store.Versioned(b) {
			b.TrashSeconds = store.VersioningSeconds
			if err := h.st.UpdateBucket(ctx, b); err != nil {
				h.writeError(w, r, rq, err)
				return
			}
		}
	case "Suspended":
		h.writeError(w, r, rq, errorf(http.StatusNotImplemented, "NotImplemented",
			"Suspended versioning is not supported: a versioned bucket keeps every version until it is deleted by version ID; "+
				"an administrator ends versioning with cairn bucket set BUCKET --trash off (or a retention, after which the versions expire)"))
		return
	default:
		h.writeError(w, r, rq, errorf(http.StatusBadRequest, "IllegalVersioningConfigurationException",
			"The versioning configuration specified in the request is invalid: Status %q", cfg.Status))
		return
	}
	w.WriteHeader(http.StatusOK)
}

// versionXML is a <Version> or a <DeleteMarker> of ListObjectVersions.
type versionXML struct {
	XMLName      xml.Name
	Key          string  `xml:"Key"`
	VersionID    string  `xml:"VersionId"`
	IsLatest     bool    `xml:"IsLatest"`
	LastModified string  `xml:"LastModified"`
	ETag         string  `xml:"ETag,omitempty"`
	Size         *int64  `xml:"Size,omitempty"`
	Owner        *owner  `xml:"Owner,omitempty"`
	StorageClass *string `xml:"StorageClass,omitempty"`
}

// versionsResult is ListObjectVersions' answer for a versioned bucket:
// versions and delete markers in order.
type versionsResult struct {
	XMLName             xml.Name     `xml:"http://s3.amazonaws.com/doc/2006-03-01/ ListVersionsResult"`
	Name                string       `xml:"Name"`
	Prefix              string       `xml:"Prefix"`
	KeyMarker           string       `xml:"KeyMarker"`
	VersionIDMarker     string       `xml:"VersionIdMarker"`
	NextKeyMarker       string       `xml:"NextKeyMarker,omitempty"`
	NextVersionIDMarker string       `xml:"NextVersionIdMarker,omitempty"`
	MaxKeys             int          `xml:"MaxKeys"`
	Delimiter           string       `xml:"Delimiter,omitempty"`
	EncodingType        string       `xml:"EncodingType,omitempty"`
	IsTruncated         bool         `xml:"IsTruncated"`
	Items               []versionXML // Version and DeleteMarker elements
	CommonPrefixes      []prefixXML  `xml:"CommonPrefixes"`
}

// versionPage is one page of ListObjectVersions of a versioned bucket.
type versionPage struct {
	items     []store.Version
	prefixes  []string
	truncated bool
	nextKey   string
	nextID    string
}

// versionPageOf walks the versions of bucket under prefix after the
// markers, grouping by delim, for at most max versions, delete markers
// and common prefixes. A common prefix or a hidden path makes the walk
// start again after it (each restart moves past what it skips, so the
// loop ends).
func versionPageOf(ctx context.Context, vs store.Versions, bucket, prefix, delim, keyMarker, idMarker string, max int) (versionPage, error) {
	var out versionPage
	if max <= 0 {
		return out, nil
	}
	cursor := store.VersionCursor{Path: keyMarker, ID: idMarker}
	if idMarker == "null" {
		cursor.ID = ""
	}
	if cursor.ID == "" && delim != "" && strings.HasPrefix(keyMarker, prefix) && strings.HasSuffix(keyMarker, delim) {
		// The marker is a common prefix of the previous page: past it.
		cursor.Path = keyMarker + "\xff"
	}
	for {
		var skip string // restart after this
		full := false
		err := vs.WalkVersions(ctx, bucket, prefix, cursor, func(v store.Version) bool {
			if hidden(v.Path) {
				skip = hiddenRoot(v.Path) + "\xff"
				return false
			}
			rest := v.Path[len(prefix):]
			if i := strings.Index(rest, delim); delim != "" && i >= 0 {
				cp := prefix + rest[:i+len(delim)]
				if len(out.items)+len(out.prefixes) >= max {
					full = true
					return false
				}
				out.prefixes = append(out.prefixes, cp)
				out.nextKey, out.nextID = cp, ""
				skip = cp + "\xff"
				return false
			}
			if len(out.items)+len(out.prefixes) >= max {
				full = true
				return false
			}
			out.items = append(out.items, v)
			out.nextKey, out.nextID = v.Path, v.ID
			return true
		})
		if err != nil {
			return out, err
		}
		if full {
			out.truncated = true
			return out, nil
		}
		if skip == "" {
			return out, nil
		}
		cursor = store.VersionCursor{Path: skip}
	}
}

// hiddenRoot is the top of the hidden tree a hidden path is in.
func hiddenRoot(p string) string {
	if isInternal(p) {
		return internalDir
	}
	return snapshotsDir
}

// listObjectVersions serves ListObjectVersions of a versioned bucket b.
func (h *Handler) listObjectVersions(w http.ResponseWriter, r *http.Request, rq *request, b store.BucketInfo, maxKeys int, encode func(string) string) {
	vs, _ := h.versions()
	q := rq.query
	prefix, delim := q.Get("prefix"), q.Get("delimiter")
	keyMarker, idMarker := q.Get("key-marker"), q.Get("version-id-marker")
	if idMarker != "" && keyMarker == "" {
		h.writeError(w, r, rq, errorf(http.StatusBadRequest, "InvalidArgument", "A version-id marker cannot be specified without a key marker."))
		return
	}
	if idMarker != "" && idMarker != "null" && !store.ValidVersionID(idMarker) {
		h.writeError(w, r, rq, errInvalidVersionID)
		return
	}
	var page versionPage
	var err error
	if !strings.HasPrefix(prefix, "/") {
		page, err = versionPageOf(r.Context(), vs, rq.bucket, prefix, delim, keyMarker, idMarker, maxKeys)
	}
	if err != nil {
		h.writeError(w, r, rq, err)
		return
	}
	o := ownerOf(b, h.displayName)
	out := versionsResult{Name: rq.bucket, Prefix: prefix, KeyMarker: keyMarker, VersionIDMarker: idMarker, MaxKeys: maxKeys,
		Delimiter: delim, EncodingType: q.Get("encoding-type"), IsTruncated: page.truncated}
	for _, v := range page.items {
		x := versionXML{Key: encode(v.Path), VersionID: v.ID, IsLatest: v.Latest, LastModified: xmlTime(v.Info.ModTime), Owner: &o}
		// The element's name is its XMLName: in S3's namespace, which the
		// encoder then repeats (an empty one would be xmlns="").
		x.XMLName.Space = "http://s3.amazonaws.com/doc/2006-03-01/"
		if v.DeleteMarker {
			x.XMLName.Local = "DeleteMarker"
		} else {
			size, class := v.Info.Size, "STANDARD"
			x.XMLName.Local, x.ETag, x.Size, x.StorageClass = "Version", etag(v.Info.ETag), &size, &class
		}
		out.Items = append(out.Items, x)
	}
	for _, p := range page.prefixes {
		out.CommonPrefixes = append(out.CommonPrefixes, prefixXML{Prefix: encode(p)})
	}
	if page.truncated {
		out.NextKeyMarker, out.NextVersionIDMarker = encode(page.nextKey), page.nextID
	}
	writeXML(w, r, http.StatusOK, out)
}

// latestOf returns the newest version of path in bucket (its file, or
// its latest delete marker); ok is false when it has none.
func latestOf(ctx context.Context, vs store.Versions, bucket, path string) (v store.Version, ok bool) {
	_ = vs.WalkVersions(ctx, bucket, path, store.VersionCursor{}, func(x store.Version) bool {
		if x.Path == path {
			v, ok = x, x.Latest
		}
		return false
	})
	return v, ok
}

// markerHeaders says, on a 404 of a key, whether its latest version is a
// delete marker (x-amz-delete-marker true, and the marker's ID), as S3
// and RGW do.
func (h *Handler) markerHeaders(ctx context.Context, hdr http.Header, b store.BucketInfo, key string) {
	hdr.Set("x-amz-delete-marker", "false")
	vs, ok := h.versions()
	if !ok || !store.Versioned(b) || strings.HasSuffix(key, "/") {
		return
	}
	if v, ok := latestOf(ctx, vs, b.Name, key); ok && v.DeleteMarker {
		hdr.Set("x-amz-delete-marker", "true")
		hdr.Set("x-amz-version-id", v.ID)
	}
}

// deleteOutcome is what a DELETE of a key did, for the answer's headers
// and DeleteObjects' Deleted element.
type deleteOutcome struct {
	versionID string // the version deleted, or the delete marker made
	marker    bool   // versionID is a delete marker
}

// deleteVersion deletes version id of key for good (DELETE ?versionId).
func (h *Handler) deleteVersion(ctx context.Context, b store.BucketInfo, key, id string) (deleteOutcome, error) {
	out := deleteOutcome{versionID: id}
	p := strings.TrimSuffix(key, "/")
	if id == "null" {
		if store.Versioned(b) {
			return out, nil // a versioned bucket has no null version
		}
		out.versionID = ""
		return out, h.deleteLive(ctx, b.Name, key)
	}
	if !store.ValidVersionID(id) {
		return out, errInvalidVersionID
	}
	vs, ok := h.versions()
	if !ok || p == "" || hidden(p) || strings.HasSuffix(key, "/") {
		return out, nil
	}
	v, _, err := vs.DeleteVersion(ctx, b.Name, p, id)
	if errors.Is(err, store.ErrInvalidName) || errors.Is(err, store.ErrNotFound) {
		return out, nil
	}
	if err != nil {
		return out, err
	}
	out.marker = v.DeleteMarker
	if _, err := h.st.Stat(ctx, b.Name, p); errors.Is(err, store.ErrNotFound) {
		h.pruneParents(ctx, b.Name, p)
	}
	return out, nil
}
