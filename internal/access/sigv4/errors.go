package sigv4

import (
	"errors"
	"fmt"
	"net/http"
)

// Error is a request that failed authentication or whose payload failed a
// check. Code is the S3 error code and Status the HTTP status a front end
// answers with; Message explains this particular failure in words a client
// can act on.
//
// The package-level Err* values are sentinels. Verify and the Body reader
// return *Error values derived from them, with a specific Message; test the
// kind with errors.Is (errors.Is(err, ErrSignatureDoesNotMatch)) and read
// Code, Status and Message with errors.As.
type Error struct {
	// Code is the S3 error code, e.g. "SignatureDoesNotMatch".
	Code string
	// Status is the HTTP status code, e.g. 403.
	Status int
	// Message describes the failure.
	Message string

	// kind is the sentinel this error is an instance of; nil for a sentinel.
	kind *Error
}

// Error returns "sigv4: CODE: MESSAGE".
func (e *Error) Error() string { return "sigv4: " + e.Code + ": " + e.Message }

// Is reports whether target is e or the sentinel e was derived from, so
// that errors.Is(err, ErrAccessDenied) holds for every AccessDenied error.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	if !ok {
		return false
	}
	return e == t || (e.kind != nil && e.kind == t)
}

// with returns a new error of e's kind with a specific message.
func (e *Error) with(format string, args ...any) *Error {
	k := e
	if e.kind != nil {
		k = e.kind
	}
	return &Error{Code: k.Code, Status: k.Status, Message: fmt.Sprintf(format, args...), kind: k}
}

// The sentinel errors. Each carries the S3 error code and HTTP status of its
// kind; the errors actually returned carry a more specific Message.
var (
	// ErrAccessDenied (403 AccessDenied): the request carries no SigV4
	// credentials, a presigned URL has expired ("Request has expired") or
	// is not valid yet, the request time is missing, or X-Amz-Expires is out of range (as S3).
	ErrAccessDenied = &Error{Code: "AccessDenied", Status: http.StatusForbidden,
		Message: "access denied"}
	// ErrSignatureDoesNotMatch (403): the signature of the request, of a
	// chunk or of the trailer is not the one computed with the secret of
	// the access key id.
	ErrSignatureDoesNotMatch = &Error{Code: "SignatureDoesNotMatch", Status: http.StatusForbidden,
		Message: "the request signature we calculated does not match the signature you provided; check your key and signing method"}
	// ErrInvalidAccessKeyID (403 InvalidAccessKeyId): Lookup does not know
	// the access key id. It is returned only after a full signature was
	// computed with a dummy secret, so that timing does not reveal it early.
	ErrInvalidAccessKeyID = &Error{Code: "InvalidAccessKeyId", Status: http.StatusForbidden,
		Message: "the access key id you provided does not exist in our records"}
	// ErrRequestTimeTooSkewed (403): a header-signed request's time is
	// further from the server's clock than Config.MaxSkew.
	ErrRequestTimeTooSkewed = &Error{Code: "RequestTimeTooSkewed", Status: http.StatusForbidden,
		Message: "the difference between the request time and the server's time is too large"}
	// ErrAuthorizationHeaderMalformed (400): the Authorization header, its
	// credential scope or the request date cannot be parsed or disagree.
	ErrAuthorizationHeaderMalformed = &Error{Code: "AuthorizationHeaderMalformed", Status: http.StatusBadRequest,
		Message: "the authorization header is malformed"}
	// ErrAuthorizationQueryParametersError (400): the X-Amz-* query
	// parameters of a presigned request are missing, malformed or out of
	// range (X-Amz-Expires beyond Config.MaxPresignExpiry).
	ErrAuthorizationQueryParametersError = &Error{Code: "AuthorizationQueryParametersError", Status: http.StatusBadRequest,
		Message: "the authorization query parameters are malformed"}
	// ErrContentSHA256Mismatch (400 XAmzContentSHA256Mismatch): the body
	// does not hash to the x-amz-content-sha256 the request was signed with.
	ErrContentSHA256Mismatch = &Error{Code: "XAmzContentSHA256Mismatch", Status: http.StatusBadRequest,
		Message: "the provided x-amz-content-sha256 header does not match what was computed"}
	// ErrIncompleteBody (400): the body ended early, or its decoded length
	// differs from x-amz-decoded-content-length.
	ErrIncompleteBody = &Error{Code: "IncompleteBody", Status: http.StatusBadRequest,
		Message: "you did not provide the number of bytes specified"}
	// ErrBadDigest (400): a checksum (x-amz-checksum-* header or trailer)
	// does not match the payload.
	ErrBadDigest = &Error{Code: "BadDigest", Status: http.StatusBadRequest,
		Message: "the checksum you specified did not match the computed checksum"}
	// ErrInvalidDigest (400): a checksum value is not the base64 of a digest
	// of its algorithm's size.
	ErrInvalidDigest = &Error{Code: "InvalidDigest", Status: http.StatusBadRequest,
		Message: "the checksum you specified is not valid"}
	// ErrInvalidArgument (400): x-amz-content-sha256 or
	// x-amz-decoded-content-length has a value this package does not accept.
	ErrInvalidArgument = &Error{Code: "InvalidArgument", Status: http.StatusBadRequest,
		Message: "invalid argument"}
	// ErrInvalidRequest (400): an unsupported authorization mechanism, two
	// mechanisms at once, a missing x-amz-content-sha256, an unsupported or
	// repeated checksum algorithm.
	ErrInvalidRequest = &Error{Code: "InvalidRequest", Status: http.StatusBadRequest,
		Message: "invalid request"}
	// ErrMalformedChunk (400, S3 code InvalidRequest): the aws-chunked
	// framing is broken: a bad chunk header, a chunk over MaxChunkSize, a
	// missing CRLF after chunk data, or data after the final chunk.
	ErrMalformedChunk = &Error{Code: "InvalidRequest", Status: http.StatusBadRequest,
		Message: "the aws-chunked payload is malformed"}
	// ErrMalformedTrailer (400 MalformedTrailerError): the trailer section
	// of an aws-chunked payload is malformed, lacks a declared trailer, or
	// holds one that x-amz-trailer did not declare.
	ErrMalformedTrailer = &Error{Code: "MalformedTrailerError", Status: http.StatusBadRequest,
		Message: "the request contained trailing data that was not well-formed"}
)

// ErrBadConfig is returned (wrapped) by Config.Validate and New.
var ErrBadConfig = errors.New("sigv4: bad config")

// ErrBadPresign is returned (wrapped) by Presign for arguments it cannot sign.
var ErrBadPresign = errors.New("sigv4: bad presign arguments")
