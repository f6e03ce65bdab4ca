package s3

import (
	"encoding/xml"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/cairn-fs/cairn/internal/access"
	"github.com/cairn-fs/cairn/internal/access/sigv4"
	"github.com/cairn-fs/cairn/internal/store"
)

// Error is an S3 error answer: its code, HTTP status and message.
type Error struct {
	Code    string
	Status  int
	Message string
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// errorf returns an *Error.
func errorf(status int, code, format string, args ...any) *Error {
	return &Error{Code: code, Status: status, Message: fmt.Sprintf(format, args...)}
}

// Errors of the S3 API that no lower layer produces.
var (
	errNoSuchUpload       = &Error{"NoSuchUpload", http.StatusNotFound, "The specified multipart upload does not exist. The upload ID may be invalid, or the upload may have been aborted or completed."}
	errInvalidPart        = &Error{"InvalidPart", http.StatusBadRequest, "One or more of the specified parts could not be found. The part may not have been uploaded, or the specified entity tag may not match the part's entity tag."}
	errInvalidPartOrder   = &Error{"InvalidPartOrder", http.StatusBadRequest, "The list of parts was not in ascending order. Parts must be ordered by part number."}
	errEntityTooSmall     = &Error{"EntityTooSmall", http.StatusBadRequest, "Your proposed upload is smaller than the minimum allowed object size (5 MiB for every part but the last)."}
	errMalformedXML       = &Error{"MalformedXML", http.StatusBadRequest, "The XML you provided was not well-formed or did not validate against our published schema."}
	errInvalidDigest      = &Error{"InvalidDigest", http.StatusBadRequest, "The Content-MD5 you specified is not valid."}
	errBadDigest          = &Error{"BadDigest", http.StatusBadRequest, "The Content-MD5 you specified did not match what we received."}
	errPrecondition       = &Error{"PreconditionFailed", http.StatusPreconditionFailed, "At least one of the preconditions you specified did not hold."}
	errNotModified        = &Error{"NotModified", http.StatusNotModified, "Not Modified"}
	errMethodNotAllowed   = &Error{"MethodNotAllowed", http.StatusMethodNotAllowed, "The specified method is not allowed against this resource."}
	errNotImplemented     = &Error{"NotImplemented", http.StatusNotImplemented, "A header or query you provided implies functionality that is not implemented."}
	errInvalidBucketName  = &Error{"InvalidBucketName", http.StatusBadRequest, "The specified bucket is not valid."}
	errAnonymousForbidden = &Error{"AccessDenied", http.StatusForbidden, "Access Denied: anonymous requests may only read public buckets."}
)

// errorTable maps the store's and access's error kinds to S3 codes.
var errorTable = []struct {
	err    error
	status int
	code   string
}{
	{store.ErrBadDigest, http.StatusBadRequest, "BadDigest"},
	{store.ErrSHA256Mismatch, http.StatusBadRequest, "XAmzContentSHA256Mismatch"}, // the signed payload hash (takePayloadHash)
	{store.ErrDeleteMarker, http.StatusMethodNotAllowed, "MethodNotAllowed"},
	{store.ErrInvalidVersion, http.StatusBadRequest, "InvalidArgument"},
	{store.ErrNotUpgraded, http.StatusServiceUnavailable, "ServiceUnavailable"},
	{store.ErrNoBucket, http.StatusNotFound, "NoSuchBucket"},
	{store.ErrNotFound, http.StatusNotFound, "NoSuchKey"},
	{store.ErrBucketExists, http.StatusConflict, "BucketAlreadyOwnedByYou"},
	{store.ErrBucketNotEmpty, http.StatusConflict, "BucketNotEmpty"},
	{store.ErrPrecondition, http.StatusPreconditionFailed, "PreconditionFailed"},
	{store.ErrInvalidName, http.StatusBadRequest, "InvalidArgument"},
	{store.ErrIsDir, http.StatusNotFound, "NoSuchKey"},
	{store.ErrNotDir, http.StatusConflict, "InvalidArgument"},
	{store.ErrExists, http.StatusConflict, "InvalidArgument"},
	{store.ErrNotEmpty, http.StatusConflict, "InvalidArgument"},
	{store.ErrShortBody, http.StatusBadRequest, "IncompleteBody"},
	{store.ErrTooLarge, http.StatusBadRequest, "IncompleteBody"},
	{store.ErrNoSpace, http.StatusInsufficientStorage, "InsufficientStorage"},
	{store.ErrUnavailable, http.StatusServiceUnavailable, "ServiceUnavailable"},
	{store.ErrReadOnly, http.StatusServiceUnavailable, "ServiceUnavailable"},
	{store.ErrCorrupt, http.StatusServiceUnavailable, "ServiceUnavailable"},
	{access.ErrUnauthenticated, http.StatusForbidden, "AccessDenied"},
	{access.ErrForbidden, http.StatusForbidden, "AccessDenied"},
}

// classify returns the S3 error for err.
func classify(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	var se *sigv4.Error
	if errors.As(err, &se) {
		return &Error{Code: se.Code, Status: se.Status, Message: se.Message}
	}
	for _, t := range errorTable {
		if errors.Is(err, t.err) {
			msg := err.Error()
			switch t.code {
			case "NoSuchKey":
				msg = "The specified key does not exist."
			case "NoSuchBucket":
				msg = "The specified bucket does not exist."
			case "BucketNotEmpty":
				msg = "The bucket you tried to delete is not empty."
			case "ServiceUnavailable":
				msg = "The cluster cannot serve this request now; retry: " + err.Error()
			case "MethodNotAllowed":
				msg = "The specified method is not allowed against this resource: the version is a delete marker."
			case "InvalidArgument":
				if errors.Is(err, store.ErrInvalidVersion) {
					msg = errInvalidVersionID.Message
				}
			}
			return &Error{Code: t.code, Status: t.status, Message: msg}
		}
	}
	return &Error{Code: "InternalError", Status: http.StatusInternalServerError, Message: "We encountered an internal error. Please try again."}
}

// errorBody is S3's XML error document.
type errorBody struct {
	XMLName   xml.Name `xml:"Error"`
	Code      string   `xml:"Code"`
	Message   string   `xml:"Message"`
	Resource  string   `xml:"Resource,omitempty"`
	RequestID string   `xml:"RequestId"`
	// Extra elements some codes carry.
	BucketName string `xml:"BucketName,omitempty"`
	Key        string `xml:"Key,omitempty"`
	VersionID  string `xml:"VersionId,omitempty"`
}

// writeError answers err as an S3 XML error (no body for HEAD and 304).
func (h *Handler) writeError(w http.ResponseWriter, r *http.Request, rq *request, err error) {
	e := classify(err)
	if e.Status >= 500 && e.Status != http.StatusNotImplemented {
		h.log.Warn("s3 request failed", "method", r.Method, "path", r.URL.Path, "status", e.Status, "err", err)
	}
	if e.Code == "AccessDenied" || e.Code == "SignatureDoesNotMatch" || e.Code == "InvalidAccessKeyId" {
		h.metrics.authFailures.WithLabelValues(e.Code).Inc()
	}
	hdr := w.Header()
	if e.Status == http.StatusNotModified {
		w.WriteHeader(e.Status)
		return
	}
	body := errorBody{Code: e.Code, Message: e.Message, Resource: r.URL.Path, RequestID: rq.id}
	switch e.Code {
	case "NoSuchBucket", "BucketNotEmpty", "BucketAlreadyOwnedByYou", "BucketAlreadyExists":
		body.BucketName = rq.bucket
	case "NoSuchKey":
		body.Key = rq.key
	case "NoSuchVersion":
		body.Key, body.VersionID = rq.key, rq.query.Get("versionId")
	}
	b, _ := xml.Marshal(body)
	b = append([]byte(xml.Header), b...)
	hdr.Set("Content-Type", "application/xml")
	hdr.Set("Content-Length", strconv.Itoa(len(b)))
	hdr.Del("ETag")
	hdr.Del("Last-Modified")
	if e.Status == http.StatusServiceUnavailable {
		hdr.Set("Retry-After", "1")
	}
	w.WriteHeader(e.Status)
	if r.Method != http.MethodHead {
		_, _ = w.Write(b)
	}
}
