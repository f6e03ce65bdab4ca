package admin

// The trash (docs/design/0007-undo.md; docs/http-api.md, "Trash"): the
// files a bucket's deletes and overwrites removed, kept for its retention
// (store.BucketInfo.TrashSeconds), through store.Trash. Admin key only:
//
//	GET  /_cairn/trash/BUCKET?prefix=P&after=A&limit=N
//	                                     a page of the entries whose path starts with P
//	                                     (X-Cairn-Next: where the next page starts)
//	POST /_cairn/trash/BUCKET/restore    {"path","at","to"}: put entries back; never overwrites
//	POST /_cairn/trash/BUCKET/empty      {"before"}: drop entries, and their bytes, for good
//
// The usage of every bucket's trash is part of the status view
// (trashUsage), read from the per-bucket counts the namespace keeps.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-fs/cairn/internal/store"
)

// TrashPath is the trash's API (this file).
const TrashPath = "/_cairn/trash"

// trashTimeout bounds a restore or an emptying. The work is not tied to
// the request: a client that hangs up (or an answer cut by the server's
// write timeout, for a very large tree) does not stop it half-way; what
// was not done yet stays in the trash, listed.
const trashTimeout = 10 * time.Minute

// maxTrashBody bounds the JSON body of a restore or an emptying.
const maxTrashBody = 64 << 10

// trashEntryJSON is one entry of GET /_cairn/trash/BUCKET.
type trashEntryJSON struct {
	Path     string    `json:"path"`
	Deleted  time.Time `json:"deleted"` // RFC 3339 with nanoseconds, UTC
	Size     int64     `json:"size"`
	Replaced bool      `json:"replaced"` // overwritten (by a put or a rename), not deleted
	// Origin of the change that removed it: the node that took it, its
	// front end (http, s3, webdav, mount) and the access key ID; "" where
	// unknown (and the key "" for the admin key).
	Node     uint64 `json:"node,string"`
	Frontend string `json:"frontend"`
	Key      string `json:"key"`
	ETag     string `json:"etag,omitempty"`
	SHA256   string `json:"sha256,omitempty"`
}

// trashRestoreRequest is the body of POST /_cairn/trash/BUCKET/restore.
type trashRestoreRequest struct {
	// Path is a file, or a tree: a path ending in "/", or "" for the
	// whole bucket.
	Path *string `json:"path"`
	// At selects, for each path, the newest entry deleted at or before
	// it (RFC 3339); "" the newest.
	At string `json:"at"`
	// To is where to restore: a path for a file, a prefix for a tree;
	// "" the same place.
	To string `json:"to"`
}

// trashEmptyRequest is the body of POST /_cairn/trash/BUCKET/empty (none:
// every entry).
type trashEmptyRequest struct {
	// Before drops only the entries deleted before it (RFC 3339); ""
	// every entry.
	Before string `json:"before"`
}

// TrashUsage is one bucket's trash in the status view: its retention and
// what it holds.
type TrashUsage struct {
	Bucket           string `json:"bucket"`
	RetentionSeconds int64  `json:"retention_seconds"` // 0: off (entries may remain until emptied)
	Entries          int64  `json:"entries"`
	Bytes            int64  `json:"bytes"` // the entries' sizes, one copy each
}

// trashUsage returns the trash of every bucket that has one (a retention,
// or entries left), by bucket name: one read of the namespace's counts
// per bucket.
func trashUsage(ctx context.Context, st Store) ([]TrashUsage, error) {
	bs, err := st.Buckets(ctx)
	if err != nil {
		return nil, err
	}
	out := []TrashUsage{}
	for _, b := range bs {
		n, by, err := st.TrashUsage(ctx, b.Name)
		if err != nil {
			return nil, fmt.Errorf("trash of %s: %w", b.Name, err)
		}
		if b.TrashSeconds > 0 || n > 0 {
			out = append(out, TrashUsage{Bucket: b.Name, RetentionSeconds: b.TrashSeconds, Entries: n, Bytes: by})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Bucket < out[j].Bucket })
	return out, nil
}

// serveTrash serves TrashPath/BUCKET[/ACTION] (authorized by ServeHTTP).
func (h *Handler) serveTrash(w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(strings.TrimPrefix(r.URL.Path, TrashPath), "/")
	bucket, action, _ := strings.Cut(rest, "/")
	if bucket == "" {
		h.fail(w, r, errStatus(http.StatusNotFound, "NotFound", "name a bucket: %s/BUCKET", TrashPath))
		return
	}
	if err := store.ValidBucketName(bucket); err != nil {
		h.fail(w, r, errStatus(http.StatusBadRequest, "BadRequest", "%v", err))
		return
	}
	switch action {
	case "":
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			h.notAllowed(w, r, "GET, HEAD")
			return
		}
		h.listTrash(w, r, bucket)
	case "restore", "empty":
		if r.Method != http.MethodPost {
			h.notAllowed(w, r, "POST")
			return
		}
		if action == "restore" {
			h.restoreTrash(w, r, bucket)
		} else {
			h.emptyTrash(w, r, bucket)
		}
	default:
		h.fail(w, r, errStatus(http.StatusNotFound, "NotFound", "%s/%s/%s: no such call (restore or empty)", TrashPath, bucket, action))
	}
}

// TrashNextHeader carries, on a page of a trash listing that is not the
// last, where the next page starts (its after= parameter).
const TrashNextHeader = "X-Cairn-Next"

// listTrash serves one page of a bucket's trash: prefix, after (a page's
// TrashNextHeader) and limit (default store.DefaultTrashPage, at most
// store.MaxTrashPage) select it.
func (h *Handler) listTrash(w http.ResponseWriter, r *http.Request, bucket string) {
	q := r.URL.Query()
	opts := store.TrashListOptions{Prefix: strings.TrimLeft(q.Get("prefix"), "/"), After: q.Get("after")}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > store.MaxTrashPage {
			h.fail(w, r, errStatus(http.StatusBadRequest, "InvalidArgument", "limit %q: want 1 to %d", v, store.MaxTrashPage))
			return
		}
		opts.Limit = n
	}
	page, err := h.store.TrashList(r.Context(), bucket, opts)
	if err != nil {
		if errors.Is(err, store.ErrInvalidName) {
			h.fail(w, r, errStatus(http.StatusBadRequest, "InvalidArgument", "after %q: not a position a trash listing gave", opts.After))
			return
		}
		h.fail(w, r, trashError(bucket, err))
		return
	}
	out := make([]trashEntryJSON, len(page.Entries))
	for i, e := range page.Entries {
		out[i] = trashEntryJSON{Path: e.Path, Deleted: e.Deleted.UTC(), Size: e.Size, Replaced: e.Replaced,
			Node: e.Node, Frontend: e.Frontend, Key: e.Key, ETag: e.ETag, SHA256: e.SHA256}
	}
	if page.Next != "" {
		w.Header().Set(TrashNextHeader, page.Next)
	}
	h.writeJSON(w, r, http.StatusOK, out)
}

func (h *Handler) restoreTrash(w http.ResponseWriter, r *http.Request, bucket string) {
	var req trashRestoreRequest
	dec := json.NewDecoder(io.LimitReader(r.Body, maxTrashBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		h.fail(w, r, errStatus(http.StatusBadRequest, "BadRequest", `bad restore request: %v (want {"path": "...", "at": "", "to": ""})`, err))
		return
	}
	if req.Path == nil {
		h.fail(w, r, errStatus(http.StatusBadRequest, "BadRequest", `bad restore request: no "path" (a file, a directory ending in "/", or "" for the whole bucket)`))
		return
	}
	at, err := parseAPITime("at", req.At)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	path, to := strings.TrimLeft(*req.Path, "/"), strings.TrimLeft(req.To, "/")
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), trashTimeout)
	defer cancel()
	restored, err := h.store.TrashRestore(ctx, bucket, path, at, to)
	if len(restored) > 0 {
		h.log.Info("restored from the trash", "bucket", bucket, "path", path, "at", req.At, "to", to, "files", len(restored))
	}
	if err != nil {
		h.fail(w, r, h.restoreError(ctx, bucket, path, at, to, restored, err))
		return
	}
	if restored == nil {
		restored = []string{}
	}
	h.writeJSON(w, r, http.StatusOK, struct {
		Restored []string `json:"restored"`
	}{restored})
}

// restoreError explains a failed restore: which targets exist (a
// restore never overwrites), or what the trash lacks.
func (h *Handler) restoreError(ctx context.Context, bucket, path string, at time.Time, to string, restored []string, err error) error {
	tree := path == "" || strings.HasSuffix(path, "/")
	when := ""
	if !at.IsZero() {
		when = " deleted at or before " + at.UTC().Format(time.RFC3339Nano)
	}
	switch {
	case errors.Is(err, store.ErrExists) && !tree:
		return errStatus(http.StatusConflict, "TargetExists",
			"not restored: %q exists in bucket %s, and a restore never overwrites: move or delete it first (what it replaces goes to the trash too), or restore to another path (\"to\")",
			orPath(to, path), bucket)
	case errors.Is(err, store.ErrExists):
		blocked := h.blockedTargets(ctx, bucket, path, at, to, restored)
		msg := fmt.Sprintf("restored %d files under %q; %d not restored because something exists at their target, and a restore never overwrites: move or delete those first, or restore to another prefix (\"to\")",
			len(restored), path, len(blocked))
		if len(blocked) > 0 {
			const show = 5
			q := make([]string, 0, show)
			for _, b := range blocked[:min(show, len(blocked))] {
				q = append(q, fmt.Sprintf("%q", b))
			}
			msg += ": " + strings.Join(q, ", ")
			if len(blocked) > show {
				msg += ", …"
			}
		}
		return errStatus(http.StatusConflict, "TargetExists", "%s", msg)
	case errors.Is(err, store.ErrNotFound) && tree:
		return errStatus(http.StatusNotFound, "NoSuchEntry", "nothing under %q in the trash of bucket %s%s", path, bucket, when)
	case errors.Is(err, store.ErrNotFound):
		return errStatus(http.StatusNotFound, "NoSuchEntry", "no entry of %q in the trash of bucket %s%s", path, bucket, when)
	}
	return trashError(bucket, err)
}

// maxBlocked bounds the targets a failed tree restore names.
const maxBlocked = 1000

// blockedTargets returns the targets of the paths under prefix that a
// tree restore left in the trash: each path with an entry deleted at or
// before at that was not restored (the first maxBlocked).
func (h *Handler) blockedTargets(ctx context.Context, bucket, prefix string, at time.Time, to string, restored []string) []string {
	done := make(map[string]bool, len(restored))
	for _, p := range restored {
		done[p] = true
	}
	var out []string
	opts := store.TrashListOptions{Prefix: prefix}
	for len(out) < maxBlocked {
		page, err := h.store.TrashList(ctx, bucket, opts)
		if err != nil {
			return out
		}
		for _, e := range page.Entries {
			if !at.IsZero() && e.Deleted.After(at) {
				continue
			}
			dst := e.Path
			if to != "" {
				dst = strings.TrimSuffix(to, "/") + "/" + strings.TrimPrefix(e.Path, prefix)
			}
			if !done[dst] && (len(out) == 0 || out[len(out)-1] != dst) && len(out) < maxBlocked {
				out = append(out, dst)
			}
		}
		if page.Next == "" {
			return out
		}
		opts.After = page.Next
	}
	return out
}

func orPath(to, path string) string {
	if to != "" {
		return to
	}
	return path
}

func (h *Handler) emptyTrash(w http.ResponseWriter, r *http.Request, bucket string) {
	var req trashEmptyRequest
	dec := json.NewDecoder(io.LimitReader(r.Body, maxTrashBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil && !errors.Is(err, io.EOF) {
		h.fail(w, r, errStatus(http.StatusBadRequest, "BadRequest", `bad empty request: %v (want {"before": "RFC 3339 time"}, or no body)`, err))
		return
	}
	before, err := parseAPITime("before", req.Before)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), trashTimeout)
	defer cancel()
	n, err := h.store.TrashEmpty(ctx, bucket, before)
	if n > 0 {
		h.log.Info("trash emptied", "bucket", bucket, "before", req.Before, "entries", n)
	}
	if err != nil {
		h.fail(w, r, trashError(bucket, err))
		return
	}
	h.writeJSON(w, r, http.StatusOK, struct {
		Emptied int `json:"emptied"`
	}{n})
}

// trashError names the bucket of a store error it has no better word for.
func trashError(bucket string, err error) error {
	if errors.Is(err, store.ErrNoBucket) {
		return errStatus(http.StatusNotFound, "NoSuchBucket", "no bucket %q", bucket)
	}
	return err
}

// parseAPITime parses the RFC 3339 time of field name; "" is the zero
// time.
func parseAPITime(name, v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, errStatus(http.StatusBadRequest, "BadRequest", "%q: %q is not an RFC 3339 time (such as 2026-11-27T09:26:09Z)", name, v)
	}
	return t, nil
}
