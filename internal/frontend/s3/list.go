package s3

import (
	"context"
	"encoding/base64"
	"encoding/xml"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/cairn-fs/cairn/internal/access"
	"github.com/cairn-fs/cairn/internal/store"
)

// listKind is the flavour of a listing request.
type listKind uint8

const (
	listV1 listKind = iota
	listV2
	listVersions
)

// listing is one page of keys and common prefixes, in S3 order.
type listing struct {
	entries   []store.ObjectInfo
	prefixes  []string
	truncated bool
	next      string // the last key or prefix returned, to resume after
}

// list returns at most max keys and common prefixes of bucket under
// prefix, grouped by delim, after the key startAfter. Keys under the
// internal upload directory and .snapshots are left out (a prefix under
// .snapshots/ lists the snapshots: snapshots.go).
func (h *Handler) list(ctx context.Context, bucket, prefix, delim, startAfter string, max int) (listing, error) {
	if strings.HasPrefix(prefix, snapshotsDir+"/") {
		return h.listSnapshots(ctx, bucket, prefix, delim, startAfter, max)
	}
	return listPages(ctx, func(ctx context.Context, opts store.ListOptions) (store.ListResult, error) {
		return h.st.List(ctx, bucket, opts)
	}, prefix, delim, startAfter, max)
}

// listPages is list over the pages of a store listing (the live bucket's
// or a snapshot's): a "/" (or no) delimiter is the store's own listing;
// another delimiter groups a recursive listing here. Hidden paths are
// left out.
func listPages(ctx context.Context, pages func(context.Context, store.ListOptions) (store.ListResult, error),
	prefix, delim, startAfter string, max int) (listing, error) {
	var out listing
	if max <= 0 {
		return out, nil
	}
	if delim == "" || delim == "/" {
		cursor := startAfter
		for {
			res, err := pages(ctx, store.ListOptions{Prefix: prefix, Delimiter: delim, StartAfter: cursor, Limit: max - len(out.entries) - len(out.prefixes)})
			if err != nil {
				return out, err
			}
			// Merge the page: entries and prefixes come back separately,
			// each sorted; S3 wants them merged in key order only for the
			// marker, which is the last of both.
			for _, e := range res.Entries {
				if !hidden(e.Path) {
					out.entries = append(out.entries, e)
					out.next = maxStr(out.next, e.Path)
				}
			}
			for _, p := range res.CommonPrefixes {
				if !hidden(strings.TrimSuffix(p, "/")) {
					out.prefixes = append(out.prefixes, p)
					out.next = maxStr(out.next, p)
				}
			}
			if !res.Truncated {
				return out, nil
			}
			if len(out.entries)+len(out.prefixes) >= max {
				out.truncated = true
				return out, nil
			}
			cursor = res.NextToken
		}
	}
	cursor := startAfter
	for {
		res, err := pages(ctx, store.ListOptions{Prefix: prefix, StartAfter: cursor, Limit: 1000})
		if err != nil {
			return out, err
		}
		for _, e := range res.Entries {
			cursor = e.Path
			if hidden(e.Path) {
				continue
			}
			rest := e.Path[len(prefix):]
			if i := strings.Index(rest, delim); i >= 0 {
				cp := prefix + rest[:i+len(delim)]
				if len(out.prefixes) > 0 && out.prefixes[len(out.prefixes)-1] == cp {
					continue
				}
				if cp <= startAfter {
					continue
				}
				if len(out.entries)+len(out.prefixes) >= max {
					out.truncated = true
					return out, nil
				}
				out.prefixes = append(out.prefixes, cp)
				out.next = cp
				continue
			}
			if len(out.entries)+len(out.prefixes) >= max {
				out.truncated = true
				return out, nil
			}
			out.entries = append(out.entries, e)
			out.next = e.Path
		}
		if !res.Truncated {
			return out, nil
		}
		cursor = res.NextToken
	}
}

func maxStr(a, b string) string {
	if b > a {
		return b
	}
	return a
}

// internalDir is the directory of a bucket that holds unfinished
// multipart uploads' parts (multipart.go); S3 listings leave it out.
const internalDir = ".cairn-uploads"

func isInternal(key string) bool {
	return key == internalDir || strings.HasPrefix(key, internalDir+"/")
}

type objectXML struct {
	Key          string `xml:"Key"`
	VersionID    string `xml:"VersionId,omitempty"`
	IsLatest     *bool  `xml:"IsLatest,omitempty"`
	LastModified string `xml:"LastModified"`
	ETag         string `xml:"ETag"`
	Size         int64  `xml:"Size"`
	Owner        *owner `xml:"Owner,omitempty"`
	StorageClass string `xml:"StorageClass"`
}

type prefixXML struct {
	Prefix string `xml:"Prefix"`
}

type listBucketResult struct {
	XMLName               xml.Name    `xml:"http://s3.amazonaws.com/doc/2006-03-01/ ListBucketResult"`
	Name                  string      `xml:"Name"`
	Prefix                string      `xml:"Prefix"`
	Marker                *string     `xml:"Marker,omitempty"`
	NextMarker            string      `xml:"NextMarker,omitempty"`
	StartAfter            string      `xml:"StartAfter,omitempty"`
	ContinuationToken     *string     `xml:"ContinuationToken,omitempty"`
	NextContinuationToken string      `xml:"NextContinuationToken,omitempty"`
	KeyCount              *int        `xml:"KeyCount,omitempty"`
	MaxKeys               int         `xml:"MaxKeys"`
	Delimiter             string      `xml:"Delimiter,omitempty"`
	EncodingType          string      `xml:"EncodingType,omitempty"`
	IsTruncated           bool        `xml:"IsTruncated"`
	Contents              []objectXML `xml:"Contents"`
	CommonPrefixes        []prefixXML `xml:"CommonPrefixes"`
}

type listVersionsResult struct {
	XMLName             xml.Name    `xml:"http://s3.amazonaws.com/doc/2006-03-01/ ListVersionsResult"`
	Name                string      `xml:"Name"`
	Prefix              string      `xml:"Prefix"`
	KeyMarker           string      `xml:"KeyMarker"`
	VersionIDMarker     string      `xml:"VersionIdMarker"`
	NextKeyMarker       string      `xml:"NextKeyMarker,omitempty"`
	NextVersionIDMarker string      `xml:"NextVersionIdMarker,omitempty"`
	MaxKeys             int         `xml:"MaxKeys"`
	Delimiter           string      `xml:"Delimiter,omitempty"`
	EncodingType        string      `xml:"EncodingType,omitempty"`
	IsTruncated         bool        `xml:"IsTruncated"`
	Versions            []objectXML `xml:"Version"`
	CommonPrefixes      []prefixXML `xml:"CommonPrefixes"`
}

// etag quotes an ETag for S3.
func etag(e string) string { return `"` + e + `"` }

// listObjects serves ListObjects (V1), ListObjectsV2 and ListObjectVersions.
func (h *Handler) listObjects(w http.ResponseWriter, r *http.Request, rq *request, kind listKind) {
	ctx := r.Context()
	q := rq.query
	prefix, delim := q.Get("prefix"), q.Get("delimiter")
	accessPrefix := prefix
	if isSnapshotKey(prefix) {
		accessPrefix = snapshotAccessPrefix(prefix) // as for the live bucket
	}
	b, err := h.authorize(ctx, rq, access.ActionList, rq.bucket, accessPrefix)
	if err != nil {
		h.writeError(w, r, rq, err)
		return
	}
	maxKeys := 1000
	if v := q.Get("max-keys"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			h.writeError(w, r, rq, errorf(http.StatusBadRequest, "InvalidArgument", "max-keys must be a non-negative integer, not %q", v))
			return
		}
		maxKeys = min(n, 1000)
	}
	enc := q.Get("encoding-type")
	if enc != "" && enc != "url" {
		h.writeError(w, r, rq, errorf(http.StatusBadRequest, "InvalidArgument", "Invalid Encoding Method specified in Request"))
		return
	}
	// encoding-type=url encodes the keys and common prefixes (not '/'),
	// as S3 and RGW do; the echoed prefix, delimiter and markers are left
	// as sent (clients do not decode them).
	encode := func(s string) string {
		if enc == "url" {
			return strings.ReplaceAll(strings.ReplaceAll(url.QueryEscape(s), "+", "%20"), "%2F", "/")
		}
		return s
	}
	plain := func(s string) string { return s }
	if kind == listVersions && store.Versioned(b) && !isSnapshotKey(prefix) {
		h.listObjectVersions(w, r, rq, b, maxKeys, encode)
		return
	}
	var after string
	var token *string
	switch kind {
	case listV1:
		after = q.Get("marker")
	case listVersions:
		after = q.Get("key-marker")
	case listV2:
		after = q.Get("start-after")
		if t := q.Get("continuation-token"); q.Has("continuation-token") {
			token = &t
			dec, err := base64.RawURLEncoding.DecodeString(t)
			if err != nil {
				h.writeError(w, r, rq, errorf(http.StatusBadRequest, "InvalidArgument", "The continuation token provided is incorrect"))
				return
			}
			after = string(dec)
		}
	}
	var page listing
	if !strings.HasPrefix(prefix, "/") { // no key starts with '/'
		page, err = h.list(ctx, rq.bucket, prefix, delim, after, maxKeys)
	}
	if err != nil {
		h.writeError(w, r, rq, err)
		return
	}
	o := ownerOf(b, h.displayName)
	objs := make([]objectXML, 0, len(page.entries))
	for _, e := range page.entries {
		x := objectXML{Key: encode(e.Path), LastModified: xmlTime(e.ModTime), ETag: etag(e.ETag), Size: e.Size, StorageClass: "STANDARD"}
		if kind != listV2 || q.Get("fetch-owner") == "true" {
			x.Owner = &o
		}
		if kind == listVersions {
			t := true
			x.VersionID, x.IsLatest = "null", &t
		}
		objs = append(objs, x)
	}
	prefixes := make([]prefixXML, 0, len(page.prefixes))
	for _, p := range page.prefixes {
		prefixes = append(prefixes, prefixXML{Prefix: encode(p)})
	}
	if kind == listVersions {
		out := listVersionsResult{Name: rq.bucket, Prefix: plain(prefix), KeyMarker: plain(after), MaxKeys: maxKeys,
			Delimiter: plain(delim), EncodingType: enc, IsTruncated: page.truncated, Versions: objs, CommonPrefixes: prefixes}
		if page.truncated {
			out.NextKeyMarker, out.NextVersionIDMarker = encode(page.next), "null"
		}
		writeXML(w, r, http.StatusOK, out)
		return
	}
	out := listBucketResult{Name: rq.bucket, Prefix: plain(prefix), MaxKeys: maxKeys, Delimiter: plain(delim),
		EncodingType: enc, IsTruncated: page.truncated, Contents: objs, CommonPrefixes: prefixes}
	if kind == listV1 {
		m := plain(after)
		out.Marker = &m
		if page.truncated && delim != "" {
			out.NextMarker = encode(page.next)
		}
	} else {
		n := len(objs) + len(prefixes)
		out.KeyCount = &n
		out.StartAfter = plain(q.Get("start-after"))
		out.ContinuationToken = token
		if page.truncated {
			out.NextContinuationToken = base64.RawURLEncoding.EncodeToString([]byte(page.next))
		}
	}
	writeXML(w, r, http.StatusOK, out)
}
