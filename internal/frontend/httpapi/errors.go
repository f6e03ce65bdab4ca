package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/cairn-fs/cairn/internal/access"
	"github.com/cairn-fs/cairn/internal/store"
)

// errorKind is one row of the status table.
type errorKind struct {
	err    error
	status int
	code   string
}

// statusTable maps every error kind the API can meet to its status and
// code: the one place where errors become statuses. The first row whose
// err matches (errors.Is) wins; anything else is a 500.
var statusTable = [...]errorKind{
	// Front-end validation.
	{ErrBadPath, http.StatusBadRequest, "InvalidPath"},
	{ErrNameTooLong, http.StatusBadRequest, "NameTooLong"},
	{ErrPathTooLong, http.StatusBadRequest, "PathTooLong"},
	{ErrBadRequest, http.StatusBadRequest, "BadRequest"},
	{ErrIncompleteBody, http.StatusBadRequest, "IncompleteBody"},
	{ErrBodyTimeout, http.StatusRequestTimeout, "RequestTimeout"},
	{ErrMethodNotAllowed, http.StatusMethodNotAllowed, "MethodNotAllowed"},
	// Access.
	{access.ErrUnauthenticated, http.StatusUnauthorized, "Unauthorized"},
	{access.ErrForbidden, http.StatusForbidden, "AccessDenied"},
	// Store.
	{store.ErrNotFound, http.StatusNotFound, "NoSuchKey"},
	{store.ErrNoBucket, http.StatusNotFound, "NoSuchBucket"},
	{store.ErrBucketExists, http.StatusConflict, "BucketAlreadyExists"},
	{store.ErrBucketNotEmpty, http.StatusConflict, "BucketNotEmpty"},
	{store.ErrExists, http.StatusConflict, "AlreadyExists"},
	{store.ErrNotEmpty, http.StatusConflict, "DirectoryNotEmpty"},
	{store.ErrIsDir, http.StatusConflict, "IsADirectory"},
	{store.ErrNotDir, http.StatusConflict, "NotADirectory"},
	{store.ErrInvalidName, http.StatusBadRequest, "InvalidName"},
	{store.ErrPrecondition, http.StatusPreconditionFailed, "PreconditionFailed"},
	{store.ErrShortBody, http.StatusBadRequest, "IncompleteBody"},
	{store.ErrTooLarge, http.StatusRequestEntityTooLarge, "EntityTooLarge"},
	{store.ErrNoSpace, http.StatusInsufficientStorage, "InsufficientStorage"},
	{store.ErrReadOnly, http.StatusServiceUnavailable, "ReadOnly"},
	{store.ErrUnavailable, http.StatusServiceUnavailable, "Unavailable"},
	{store.ErrCorrupt, http.StatusInternalServerError, "DataCorrupt"},
	// A change the cluster's log version does not carry yet (a bucket's
	// trash before every node is upgraded); the message says what waits.
	{store.ErrNotUpgraded, http.StatusConflict, "NotUpgraded"},
	// The client went away; the status only reaches the access log.
	{context.Canceled, 499, "ClientClosedRequest"},
	{context.DeadlineExceeded, http.StatusServiceUnavailable, "Timeout"},
}

// classify returns the status and code for err.
func classify(err error) (status int, code string) {
	for i := range statusTable {
		if errors.Is(err, statusTable[i].err) {
			return statusTable[i].status, statusTable[i].code
		}
	}
	return http.StatusInternalServerError, "InternalError"
}

// errorBody is the JSON body of every error response.
type errorBody struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}

// writeError answers err with its status from statusTable and a JSON body.
// 4xx messages carry the error text; 5xx messages are generic and the error
// is logged instead, as it may name internal state.
func (s *Server) writeError(rs *reqState, err error) {
	status, code := classify(err)
	s.writeErrorStatus(rs, status, code, err)
}

func (s *Server) writeErrorStatus(rs *reqState, status int, code string, err error) {
	body := s.errorBody(rs.req.Context(), rs.req.Method, rs.req.URL.Path, status, code, err)
	h := rs.w.Header()
	delete(h, hdrContentLength)
	delete(h, hdrETag)
	delete(h, hdrLastModified)
	delete(h, hdrReprDigest)
	delete(h, hdrAcceptRanges)
	if status == http.StatusUnauthorized {
		h[hdrWWWAuthenticate] = []string{wwwAuthenticate}
	}
	if status == http.StatusMethodNotAllowed && rs.allow != "" {
		h["Allow"] = []string{rs.allow}
	}
	h[hdrContentType] = []string{"application/json"}
	h["X-Content-Type-Options"] = []string{"nosniff"}
	rs.dl.Extend(time.Now()) // see writeJSON
	rs.w.WriteHeader(status)
	if rs.req.Method != http.MethodHead {
		_, _ = rs.w.Write(body)
	}
}

// wwwAuthenticate is the WWW-Authenticate value of every 401.
const wwwAuthenticate = `Bearer realm="cairn"`

// errorBody returns the JSON body of an error answer, newline included.
// 4xx messages carry the error text; for a 5xx the message is generic and
// the error is logged instead, as it may name internal state.
func (s *Server) errorBody(ctx context.Context, method, path string, status int, code string, err error) []byte {
	body, _ := json.Marshal(errorBody{Error: s.errorMessage(ctx, method, path, status, err), Code: code})
	return append(body, '\n')
}

// errorMessage is the message of an error answer: the error's text for a
// 4xx; for a 5xx a generic text, and the error is logged.
func (s *Server) errorMessage(ctx context.Context, method, path string, status int, err error) string {
	msg := err.Error()
	if status >= 500 {
		lvl := slog.LevelError
		if status == http.StatusServiceUnavailable || status == http.StatusInsufficientStorage {
			lvl = slog.LevelWarn
		}
		s.log.LogAttrs(ctx, lvl, "request failed",
			slog.String("method", method), slog.String("path", path),
			slog.Int("status", status), slog.Any("err", err))
		msg = http.StatusText(status)
		if errors.Is(err, errNoReadIndex) {
			msg = errNoReadIndex.Error() // says nothing internal, and what to do
		}
		if qe, ok := errors.AsType[*store.QuorumError](err); ok {
			msg = qe.Error() // the copies reachable and required, nothing else
		}
	}
	return msg
}
