package admin

// Snapshots (design 0007), for the admin key:
//
//	GET    /_cairn/snapshots/BUCKET        the bucket's snapshots, oldest first
//	POST   /_cairn/snapshots/BUCKET        take one: {"name": ""} ("" names it by the time)
//	DELETE /_cairn/snapshots/BUCKET/NAME   delete one
//	POST   /_cairn/snapshots/BUCKET/NAME/restore
//	                                       put a file or tree back: {"path","to","delete"}
//
// Reading a snapshot is /_snapshots/BUCKET/NAME/PATH (httpapi), the
// mount's .snapshots/NAME/, or S3 (docs/s3.md).

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/cairn-fs/cairn/internal/store"
)

// SnapshotsPath is the root of the snapshot endpoints; SchedulesPath
// that of the buckets' snapshot schedules:
//
//	GET /_cairn/snapshot-schedules/BUCKET  {"hourly","daily","weekly"} (zeros: none)
//	PUT /_cairn/snapshot-schedules/BUCKET  the same JSON; all zero removes it
const (
	SnapshotsPath = "/_cairn/snapshots"
	SchedulesPath = "/_cairn/snapshot-schedules"
)

// serveSchedules serves SchedulesPath/BUCKET.
func (h *Handler) serveSchedules(w http.ResponseWriter, r *http.Request) {
	if err := h.authorize(r); err != nil {
		h.fail(w, r, err)
		return
	}
	snaps, ok := h.store.(store.Snapshots)
	if !ok {
		h.fail(w, r, errStatus(http.StatusNotImplemented, "NotImplemented", "this store keeps no snapshots"))
		return
	}
	bucket := strings.Trim(strings.TrimPrefix(r.URL.Path, SchedulesPath), "/")
	if bucket == "" || strings.Contains(bucket, "/") {
		h.fail(w, r, errStatus(http.StatusBadRequest, "BadRequest", "%s/BUCKET", SchedulesPath))
		return
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		sc, err := snaps.GetSnapshotSchedule(r.Context(), bucket)
		if err != nil {
			h.fail(w, r, storeErr(err))
			return
		}
		h.writeJSON(w, r, http.StatusOK, sc)
	case http.MethodPut:
		var sc store.SnapshotSchedule
		if err := json.NewDecoder(io.LimitReader(r.Body, 4096)).Decode(&sc); err != nil {
			h.fail(w, r, errStatus(http.StatusBadRequest, "BadRequest", "schedule: %v", err))
			return
		}
		if err := snaps.SetSnapshotSchedule(r.Context(), bucket, sc); err != nil {
			h.fail(w, r, storeErr(err))
			return
		}
		h.writeJSON(w, r, http.StatusOK, sc)
	default:
		h.notAllowed(w, r, "GET, HEAD, PUT")
	}
}

// serveSnapshots serves SnapshotsPath/...
func (h *Handler) serveSnapshots(w http.ResponseWriter, r *http.Request) {
	if err := h.authorize(r); err != nil {
		h.fail(w, r, err)
		return
	}
	snaps, ok := h.store.(store.Snapshots)
	if !ok {
		h.fail(w, r, errStatus(http.StatusNotImplemented, "NotImplemented", "this store keeps no snapshots"))
		return
	}
	rest := strings.Trim(strings.TrimPrefix(r.URL.Path, SnapshotsPath), "/")
	bucket, name, _ := strings.Cut(rest, "/")
	name, verb, _ := strings.Cut(name, "/")
	if bucket == "" {
		h.fail(w, r, errStatus(http.StatusBadRequest, "BadRequest", "%s/BUCKET[/NAME]", SnapshotsPath))
		return
	}
	ctx := r.Context()
	switch {
	case name == "" && (r.Method == http.MethodGet || r.Method == http.MethodHead):
		list, err := snaps.SnapshotList(ctx, bucket)
		if err != nil {
			h.fail(w, r, storeErr(err))
			return
		}
		h.writeJSON(w, r, http.StatusOK, list)
	case name == "" && r.Method == http.MethodPost:
		var req struct {
			Name string `json:"name"`
		}
		if err := json.NewDecoder(io.LimitReader(r.Body, 4096)).Decode(&req); err != nil && !errors.Is(err, io.EOF) {
			h.fail(w, r, errStatus(http.StatusBadRequest, "BadRequest", "snapshot request: %v", err))
			return
		}
		info, err := snaps.SnapshotCreate(ctx, bucket, req.Name)
		if err != nil {
			h.fail(w, r, storeErr(err))
			return
		}
		h.writeJSON(w, r, http.StatusCreated, info)
	case name != "" && verb == "restore" && r.Method == http.MethodPost:
		var req struct {
			Path   string `json:"path"`
			To     string `json:"to"`
			Delete bool   `json:"delete"`
		}
		if err := json.NewDecoder(io.LimitReader(r.Body, 16<<10)).Decode(&req); err != nil && !errors.Is(err, io.EOF) {
			h.fail(w, r, errStatus(http.StatusBadRequest, "BadRequest", "restore request: %v", err))
			return
		}
		st, err := snaps.SnapshotRestore(ctx, bucket, name, store.RestoreOptions{Path: req.Path, To: req.To, Delete: req.Delete})
		if err != nil {
			h.fail(w, r, storeErr(err))
			return
		}
		h.writeJSON(w, r, http.StatusOK, st)
	case verb != "":
		h.fail(w, r, errStatus(http.StatusNotFound, "NotFound", "no such snapshot endpoint %q", verb))
	case name != "" && r.Method == http.MethodDelete:
		if err := snaps.SnapshotDelete(ctx, bucket, name); err != nil {
			h.fail(w, r, storeErr(err))
			return
		}
		w.WriteHeader(http.StatusNoContent)
	case name == "":
		h.notAllowed(w, r, "GET, HEAD, POST")
	default:
		h.notAllowed(w, r, "DELETE")
	}
}

// storeErr gives a store error its answer: what the client did wrong is a
// 4xx with the store's message.
func storeErr(err error) error {
	for _, m := range []struct {
		err    error
		status int
		code   string
	}{
		{store.ErrNoBucket, http.StatusNotFound, "NoSuchBucket"},
		{store.ErrNotFound, http.StatusNotFound, "NotFound"},
		{store.ErrExists, http.StatusConflict, "Exists"},
		{store.ErrInvalidName, http.StatusBadRequest, "InvalidName"},
		{store.ErrNotUpgraded, http.StatusConflict, "NotUpgraded"},
		{store.ErrUnavailable, http.StatusServiceUnavailable, "Unavailable"},
	} {
		if errors.Is(err, m.err) {
			return &apiError{status: m.status, code: m.code, err: err}
		}
	}
	return err
}
