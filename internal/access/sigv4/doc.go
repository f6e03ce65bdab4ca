// Package sigv4 verifies AWS Signature Version 4 (SigV4) signatures of
// S3-style requests, decodes and checks their payloads, and presigns URLs.
// It is written from the AWS documentation ("Authenticating Requests: AWS
// Signature Version 4" in the S3 API reference) and tested against the AWS
// SDK for Go v2 as an oracle.
//
// The package does no I/O except reading the request body it is handed,
// takes its clock through Config.Now, and holds no package-level mutable
// state.
//
// # Use
//
//	if sigv4.IsSigned(r) {
//		res, err := v.Verify(r)  // header or presigned authentication
//		...
//		body, err := res.Body(r) // the decoded, checked payload
//		// store from body; commit only if Read returned io.EOF
//	}
//
// A server that parses requests in place (httpapi's fast path) checks a
// GET or HEAD signed in its Authorization header with
// VerifyHeaderRequest (fast.go), which reads the fields through Fields
// and allocates nothing (the cached signing key, the canonical request on
// the stack, HMAC-SHA256 as two SHA-256 sums). It answers true only where
// Verify would accept the same request, and false for every refusal and
// for what it does not take (a repeated or absent signed field, a Date
// field instead of x-amz-date, a streaming payload hash, a query not
// already in canonical form, a signature over the path as sent); the
// caller then calls Verify, which decides and words the error.
//
// # Canonical request
//
//	METHOD \n URI \n QUERY \n name:value \n ... \n \n SIGNED;HEADERS \n PAYLOAD-HASH
//
// Its parts are built as S3 builds them:
//
//   - URI: the decoded path (r.URL.Path) with every byte except A-Z a-z
//     0-9 - _ . ~ and '/' written as uppercase %XX, once (S3 does not
//     double-encode); "/" if empty. A signature over the path exactly as
//     the client sent it (r.URL.EscapedPath) is accepted too: both decode
//     to the same path.
//   - QUERY: every parameter ('+' decodes to a space, a key without '='
//     has an empty value) re-encoded the same way, '/' included, sorted by
//     encoded key then encoded value, X-Amz-Signature left out.
//   - Headers: those named by SignedHeaders (lowercase, host required),
//     values trimmed, inner runs of spaces collapsed, repeated values joined
//     by ','. host, content-length and transfer-encoding are read from
//     where net/http moved them (r.Host, r.ContentLength,
//     r.TransferEncoding).
//   - PAYLOAD-HASH: x-amz-content-sha256 (required for header
//     authentication); for a presigned URL X-Amz-Content-Sha256 from the
//     query, or UNSIGNED-PAYLOAD.
//
// String to sign: "AWS4-HMAC-SHA256\n" + DATE + "\n" +
// "YYYYMMDD/REGION/s3/aws4_request\n" + hex(sha256(canonical request)); the
// key is HMAC-SHA256 chained over "AWS4"+secret, YYYYMMDD, REGION, "s3",
// "aws4_request". Any region is accepted and reported in Result; the
// service must be s3; the scope date must be the date of x-amz-date.
//
// # Payload formats (Result.Body)
//
// x-amz-content-sha256 selects how the body is read:
//
//   - 64 hex digits: the body as is, its SHA-256 compared at the end
//     (XAmzContentSHA256Mismatch) — unless the caller took the check with
//     Body.TakePayloadHash, to compare it with a SHA-256 it computes
//     anyway (the S3 front end hands it to the store: one pass).
//   - UNSIGNED-PAYLOAD: the body as is.
//   - STREAMING-AWS4-HMAC-SHA256-PAYLOAD: aws-chunked with a signature
//     per chunk (layout A below).
//   - STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER: the same, then signed
//     trailers (layout B).
//   - STREAMING-UNSIGNED-PAYLOAD-TRAILER: aws-chunked without signatures,
//     then unsigned trailers (layout C); what the AWS SDKs send over HTTPS.
//
// The byte layouts, with CRLF written as \r\n and spaces added for
// reading:
//
//	A: HEX-SIZE;chunk-signature=SIG \r\n DATA \r\n ... 0;chunk-signature=SIG \r\n \r\n
//	B: HEX-SIZE;chunk-signature=SIG \r\n DATA \r\n ... 0;chunk-signature=SIG \r\n
//	   name:value \r\n ... x-amz-trailer-signature:SIG \r\n \r\n
//	C: HEX-SIZE \r\n DATA \r\n ... 0 \r\n name:value \r\n ... \r\n
//
// A chunk SIG is HMAC(key, "AWS4-HMAC-SHA256-PAYLOAD\n" + DATE + "\n" +
// SCOPE + "\n" + PREVIOUS-SIG + "\n" + hex(sha256("")) + "\n" +
// hex(sha256(DATA))), chained from the request (seed) signature. The
// trailer SIG is HMAC(key, "AWS4-HMAC-SHA256-TRAILER\n" + DATE + "\n" +
// SCOPE + "\n" + PREVIOUS-SIG + "\n" + hex(sha256("name:value\n"...))),
// chained from the final chunk's signature, over the trailer lines as sent.
//
// The final CRLF may be missing (some clients omit it); data lengths and
// every other CRLF are strict, and data after the end is an error. A chunk
// may hold at most MaxChunkSize (16 MiB). The trailer x-amz-trailer
// declares (one of x-amz-checksum-crc32, -crc32c, -crc64nvme, -sha1,
// -sha256, -sha512), or an x-amz-checksum-ALG header on any body, is
// compared with the decoded payload at its end (BadDigest). A chunked
// body's decoded length must equal x-amz-decoded-content-length if that is
// sent (IncompleteBody). Body streams: it never holds more than a 16 KiB
// read buffer, so a chunk's signature is known good only once its last
// byte has been read, and the payload as a whole only at io.EOF. A front
// end stores what it reads and commits only at io.EOF. It must also drop
// "aws-chunked" from the Content-Encoding it stores.
//
// # Security properties
//
//   - Signatures (request, chunk, trailer), payload hashes and checksums
//     are compared with crypto/subtle.
//   - An unknown access key id costs the same work as a known one: the
//     signature is computed with a fixed dummy secret and the request fails
//     with InvalidAccessKeyId only after that.
//   - Header authentication: a request time more than Config.MaxSkew
//     (default 15 min) from Now either way is RequestTimeTooSkewed.
//     Presigned: an X-Amz-Date more than MaxSkew in the future is
//     AccessDenied ("Request is not valid yet"), X-Amz-Date plus
//     X-Amz-Expires before Now is AccessDenied ("Request has expired"), an
//     X-Amz-Expires over Config.MaxPresignExpiry (default and maximum 7
//     days) is AuthorizationQueryParametersError.
//   - Malformed input (headers, query, chunk framing, trailers) is an
//     error, never a panic (a fuzz test covers the chunk decoder); lines
//     and chunks have size bounds, so a body cannot make Body buffer
//     without limit.
//   - Errors are *Error values with the S3 code and HTTP status; the
//     package's Err* sentinels match them with errors.Is.
//
// Not supported: SigV4a (ECDSA), SigV2, POST policy (browser form)
// uploads, session tokens (X-Amz-Security-Token is signed like any other
// header or parameter but not checked), and Content-MD5 (left to the front
// end, which computes the MD5 for the ETag anyway).
package sigv4
