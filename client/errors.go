package client

import (
	"errors"
	"fmt"
	"net/http"
)

// Sentinel errors. An *Error returned by any method matches (errors.Is) the
// sentinel for its HTTP status; the others are raised by the client itself.
var (
	// ErrBadRequest matches a 400 answer: bad name, path or body.
	ErrBadRequest = errors.New("client: bad request")
	// ErrUnauthorized matches a 401 answer: a key is needed and none was sent.
	ErrUnauthorized = errors.New("client: unauthorized")
	// ErrForbidden matches a 403 answer: the key is wrong or lacks the right.
	ErrForbidden = errors.New("client: forbidden")
	// ErrNotFound matches a 404 answer: no such bucket, file or directory.
	ErrNotFound = errors.New("client: not found")
	// ErrConflict matches a 409 answer: the bucket exists, or a bucket or
	// directory is not empty, or a file/directory type clash.
	ErrConflict = errors.New("client: conflict")
	// ErrPrecondition matches a 412 answer: If-Match or If-None-Match failed.
	ErrPrecondition = errors.New("client: precondition failed")
	// ErrTooLarge matches a 413 answer.
	ErrTooLarge = errors.New("client: too large")
	// ErrRange matches a 416 answer: the range is not satisfiable.
	ErrRange = errors.New("client: range not satisfiable")
	// ErrUnavailable matches a 503 answer: the node cannot serve now.
	ErrUnavailable = errors.New("client: unavailable")
	// ErrNoSpace matches a 507 answer: the cluster is out of disk space.
	ErrNoSpace = errors.New("client: no space left")
	// ErrServer matches any 5xx answer (including 503 and 507).
	ErrServer = errors.New("client: server error")

	// ErrInvalidArgument is returned, without a request, for an empty bucket
	// name or a similar caller mistake.
	ErrInvalidArgument = errors.New("client: invalid argument")
	// ErrProtocol is returned when the server's answer does not follow the
	// contract: a listing that is not JSON (for instance an index.html page),
	// a truncated listing without a next token, an undecodable body.
	ErrProtocol = errors.New("client: unexpected answer from server")
	// ErrSyncFailed is returned by Sync when at least one file could not be
	// uploaded or deleted; SyncStats.Failures lists them.
	ErrSyncFailed = errors.New("client: sync incomplete")
)

// Error is a non-2xx answer of the server. Methods return it wrapped with the
// operation and path; use errors.As to get at it and errors.Is with the
// sentinels above to test its kind.
type Error struct {
	// Status is the HTTP status code, e.g. 404.
	Status int
	// Code is the server's machine-readable code, e.g. "NoSuchKey"; empty
	// when the answer had no JSON body (HEAD, or a proxy in between).
	Code string
	// Message is the server's human-readable message, or the status text.
	Message string
}

// Error formats the error on one line: "404 Not Found: no such key (NoSuchKey)".
func (e *Error) Error() string {
	s := fmt.Sprintf("%d %s", e.Status, http.StatusText(e.Status))
	if e.Message != "" && e.Message != http.StatusText(e.Status) {
		s += ": " + e.Message
	}
	if e.Code != "" {
		s += " (" + e.Code + ")"
	}
	return s
}

// Is reports whether the error's status matches target, one of the
// status sentinels of this package.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrBadRequest:
		return e.Status == http.StatusBadRequest
	case ErrUnauthorized:
		return e.Status == http.StatusUnauthorized
	case ErrForbidden:
		return e.Status == http.StatusForbidden
	case ErrNotFound:
		return e.Status == http.StatusNotFound
	case ErrConflict:
		return e.Status == http.StatusConflict
	case ErrPrecondition:
		return e.Status == http.StatusPreconditionFailed
	case ErrTooLarge:
		return e.Status == http.StatusRequestEntityTooLarge
	case ErrRange:
		return e.Status == http.StatusRequestedRangeNotSatisfiable
	case ErrUnavailable:
		return e.Status == http.StatusServiceUnavailable
	case ErrNoSpace:
		return e.Status == http.StatusInsufficientStorage
	case ErrServer:
		return e.Status >= 500
	}
	return false
}
