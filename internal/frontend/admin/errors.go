package admin

// Answers, in the API's JSON error format ({"error","code"}, as httpapi),
// and the one table from error to status and code (classify).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/cairn-fs/cairn/internal/access"
	"github.com/cairn-fs/cairn/internal/store"
)

// The kinds of error a Cluster reports, checked with errors.Is. An
// implementation gives its errors these kinds (keeping their text: the
// 4xx answers show it) so that the API answers them as it documents.
var (
	// ErrNoSuchNode: the node is not in the cluster map (404 NoSuchNode).
	ErrNoSuchNode = errors.New("admin: no such node")
	// ErrBadMembership: Raft refused the membership change (409
	// BadMembership).
	ErrBadMembership = errors.New("admin: membership change refused")
	// ErrInvalid: the command was refused as invalid (400 BadRequest).
	ErrInvalid = errors.New("admin: invalid")
	// ErrUnavailable: no leader or no quorum (503 Unavailable, with a
	// generic message; the error is logged).
	ErrUnavailable = errors.New("admin: cluster unavailable")
)

// apiError is an answer other than 2xx.
type apiError struct {
	status int
	code   string
	err    error
}

func (e *apiError) Error() string { return e.err.Error() }
func (e *apiError) Unwrap() error { return e.err }

func errStatus(status int, code, format string, args ...any) error {
	return &apiError{status: status, code: code, err: fmt.Errorf(format, args...)}
}

var errNotACluster = errStatus(http.StatusNotImplemented, "NotACluster",
	"not a cluster: this node runs alone (started without a cluster secret), so it has no members to manage")

// classify maps an error to a status and code. 5xx messages are generic;
// the error is logged.
func classify(err error) (int, string) {
	var ae *apiError
	switch {
	case errors.As(err, &ae):
		return ae.status, ae.code
	case errors.Is(err, access.ErrUnauthenticated):
		return http.StatusUnauthorized, "Unauthorized"
	case errors.Is(err, access.ErrForbidden):
		return http.StatusForbidden, "AccessDenied"
	case errors.Is(err, ErrBadMembership):
		return http.StatusConflict, "BadMembership"
	case errors.Is(err, ErrNoSuchNode):
		return http.StatusNotFound, "NoSuchNode"
	case errors.Is(err, ErrInvalid):
		return http.StatusBadRequest, "BadRequest"
	case errors.Is(err, ErrUnavailable), errors.Is(err, context.DeadlineExceeded), errors.Is(err, store.ErrUnavailable):
		return http.StatusServiceUnavailable, "Unavailable"
	// The store's kinds, for calls that have no better word for them.
	case errors.Is(err, store.ErrNoBucket):
		return http.StatusNotFound, "NoSuchBucket"
	case errors.Is(err, store.ErrNotFound):
		return http.StatusNotFound, "NotFound"
	case errors.Is(err, store.ErrExists):
		return http.StatusConflict, "Exists"
	case errors.Is(err, store.ErrNotDir):
		return http.StatusConflict, "NotADirectory"
	case errors.Is(err, store.ErrIsDir):
		return http.StatusConflict, "IsADirectory"
	case errors.Is(err, store.ErrInvalidName):
		return http.StatusBadRequest, "BadRequest"
	case errors.Is(err, store.ErrNotUpgraded):
		return http.StatusConflict, "NotUpgraded"
	}
	return http.StatusInternalServerError, "InternalError"
}

func (h *Handler) writeJSON(w http.ResponseWriter, r *http.Request, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	body = append(body, '\n')
	hdr := w.Header()
	hdr.Set("Content-Type", "application/json")
	hdr.Set("Cache-Control", "no-store")
	hdr.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		_, _ = w.Write(body)
	}
}

func (h *Handler) notAllowed(w http.ResponseWriter, r *http.Request, allow string) {
	w.Header().Set("Allow", allow)
	h.fail(w, r, errStatus(http.StatusMethodNotAllowed, "MethodNotAllowed", "method %s not allowed (allowed: %s)", r.Method, allow))
}

func (h *Handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	status, code := classify(err)
	msg := err.Error()
	if status >= 500 && status != http.StatusNotImplemented {
		lvl := slog.LevelError
		if status == http.StatusServiceUnavailable {
			lvl = slog.LevelWarn
			msg = "cluster unavailable (no leader or no quorum); try again"
		} else {
			msg = http.StatusText(status)
		}
		h.log.Log(r.Context(), lvl, "request failed", "method", r.Method, "path", r.URL.Path, "status", status, "err", err)
	}
	body, _ := json.Marshal(struct {
		Error string `json:"error"`
		Code  string `json:"code"`
	}{msg, code})
	body = append(body, '\n')
	hdr := w.Header()
	if status == http.StatusUnauthorized {
		hdr.Set("WWW-Authenticate", `Bearer realm="cairn"`)
	}
	hdr.Set("Content-Type", "application/json")
	hdr.Set("X-Content-Type-Options", "nosniff")
	hdr.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		_, _ = w.Write(body)
	}
}
