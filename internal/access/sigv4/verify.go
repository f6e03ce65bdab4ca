package sigv4

import (
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Query parameters of a presigned URL.
const (
	qAlgorithm     = "X-Amz-Algorithm"
	qCredential    = "X-Amz-Credential"
	qDate          = "X-Amz-Date"
	qExpires       = "X-Amz-Expires"
	qSignedHeaders = "X-Amz-SignedHeaders"
	qSignature     = "X-Amz-Signature"
	qContentSHA256 = "X-Amz-Content-Sha256"
)

// dummySecret is the secret an unknown access key id is checked with, so
// that it costs the same work as a known one.
const dummySecret = "cairn-sigv4-dummy-secret-for-unknown-access-key-ids"

// maxSignedHeaders bounds the SignedHeaders list.
const maxSignedHeaders = 128

// IsSigned reports whether r carries SigV4 credentials: an Authorization
// header starting "AWS4-HMAC-SHA256 ", or an X-Amz-Algorithm or
// X-Amz-Credential query parameter. It does not allocate and does not check
// anything else; Verify does.
func IsSigned(r *http.Request) bool {
	if v := r.Header["Authorization"]; len(v) > 0 && strings.HasPrefix(v[0], Algorithm+" ") {
		return true
	}
	if r.URL == nil {
		return false
	}
	q := r.URL.RawQuery
	return strings.Contains(q, qAlgorithm+"=") || strings.Contains(q, qCredential+"=")
}

// Result describes a request whose signature Verify accepted.
type Result struct {
	// AccessKeyID is the verified access key id.
	AccessKeyID string
	// Presigned reports query-string authentication (a presigned URL).
	Presigned bool
	// Region is the region of the credential scope (any region is accepted).
	Region string
	// Service is the service of the credential scope, always "s3".
	Service string
	// Time is the signing time: x-amz-date (or Date) for header
	// authentication, X-Amz-Date for presigned URLs.
	Time time.Time
	// Expires is the end of a presigned URL's validity (zero for header
	// authentication).
	Expires time.Time
	// PayloadHash is the payload hash the signature covers: a lowercase
	// hex SHA-256, UnsignedPayload, or one of the Streaming* values. For a
	// presigned URL it is UnsignedPayload unless the URL carries
	// X-Amz-Content-Sha256.
	PayloadHash string
	// SignedHeaders lists the lowercase names of the signed headers.
	SignedHeaders []string
	// Signature is the verified request signature (lowercase hex), the seed
	// of the chunk signatures of a streaming payload.
	Signature string

	// key is the signing key of the scope, kept to verify chunk and trailer
	// signatures.
	key []byte
	// scope is "YYYYMMDD/region/s3/aws4_request".
	scope string
	// amzDate is Time in amzDateFormat, as signed.
	amzDate string
}

// authParams is what the Authorization header or the X-Amz-* query
// parameters say, before any check against a secret.
type authParams struct {
	presigned        bool
	accessKeyID      string
	date             string // YYYYMMDD of the credential scope
	region           string
	signedHeaders    []string
	signedHeadersRaw string
	signature        [32]byte
	amzDate          string
	t                time.Time
	expires          time.Duration
	payloadHash      string
}

// Verify checks the SigV4 signature of r, by Authorization header or by
// presigned URL query parameters. It reads r's method, URL, Host and
// headers, but not its body: for payload checks (x-amz-content-sha256,
// chunk signatures, trailing checksums) read the body through Result.Body.
//
// Failures are *Error values (see the Err* sentinels). Parsing and clock
// checks come first; then the signature is computed, with a dummy secret if
// Lookup does not know the access key id, and compared in constant time;
// only then is an unknown id reported as ErrInvalidAccessKeyID. Verify is
// safe for concurrent use and does not block beyond Lookup.
func (v *Verifier) Verify(r *http.Request) (*Result, error) {
	if r.URL == nil {
		return nil, ErrAccessDenied.with("request has no URL")
	}
	params := parseQuery(r.URL.RawQuery)
	ap, err := v.parse(r, params)
	if err != nil {
		return nil, err
	}
	secret, known := v.lookup(ap.accessKeyID)
	if !known {
		secret = dummySecret
	}
	key := signingKey(secret, ap.date, ap.region, service)
	scope := ap.date + "/" + ap.region + "/" + service + "/" + scopeTerminator
	skip := ""
	if ap.presigned {
		skip = qSignature
	}
	query := canonicalQuery(params, skip)

	uri := EncodePath(r.URL.Path)
	sig := requestSignature(key, ap.amzDate, scope,
		canonicalRequest(r, uri, query, ap.signedHeaders, ap.signedHeadersRaw, ap.payloadHash))
	match := subtle.ConstantTimeCompare(sig[:], ap.signature[:]) == 1
	if !match {
		// A client may have signed the path exactly as it sent it rather
		// than re-encoded: accept that too. Both forms decode to the same
		// r.URL.Path, so neither lets a signature cover another object.
		if raw := r.URL.EscapedPath(); raw != "" && raw != uri {
			sig = requestSignature(key, ap.amzDate, scope,
				canonicalRequest(r, raw, query, ap.signedHeaders, ap.signedHeadersRaw, ap.payloadHash))
			match = subtle.ConstantTimeCompare(sig[:], ap.signature[:]) == 1
		}
	}
	if v.afterSign != nil {
		v.afterSign(known)
	}
	if !known {
		return nil, ErrInvalidAccessKeyID.with("the access key id %q does not exist in our records", ap.accessKeyID)
	}
	if !match {
		return nil, ErrSignatureDoesNotMatch.with("the request signature we calculated does not match the signature you provided; check your secret key and signing method (canonical URI %s)", uri)
	}
	res := &Result{
		AccessKeyID:   ap.accessKeyID,
		Presigned:     ap.presigned,
		Region:        ap.region,
		Service:       service,
		Time:          ap.t,
		PayloadHash:   ap.payloadHash,
		SignedHeaders: ap.signedHeaders,
		Signature:     hex.EncodeToString(sig[:]),
		key:           key,
		scope:         scope,
		amzDate:       ap.amzDate,
	}
	if ap.presigned {
		res.Expires = ap.t.Add(ap.expires)
	}
	return res, nil
}

// parse reads the authentication parameters of r and runs every check that
// needs no secret: syntax, scope, service and clock.
func (v *Verifier) parse(r *http.Request, params []queryParam) (*authParams, error) {
	auth := r.Header["Authorization"]
	presigned := false
	for _, p := range params {
		if p.key == qAlgorithm || p.key == qCredential || p.key == qSignature {
			presigned = true
			break
		}
	}
	switch {
	case len(auth) > 0 && presigned:
		return nil, ErrInvalidRequest.with("only one auth mechanism allowed; only the X-Amz-Algorithm query parameter, Signature query string parameter or the Authorization header should be specified")
	case presigned:
		return v.parseQueryAuth(r, params)
	case len(auth) > 1:
		return nil, ErrAuthorizationHeaderMalformed.with("the request has %d Authorization headers; want one", len(auth))
	case len(auth) == 1:
		if !strings.HasPrefix(auth[0], Algorithm+" ") {
			return nil, ErrInvalidRequest.with("the authorization mechanism you have provided is not supported; please use %s", Algorithm)
		}
		return v.parseHeaderAuth(r, auth[0])
	}
	return nil, ErrAccessDenied.with("the request carries no AWS Signature Version 4 credentials")
}

// parseHeaderAuth parses "AWS4-HMAC-SHA256 Credential=AKID/DATE/REGION/s3/aws4_request,
// SignedHeaders=a;b, Signature=HEX" and the request's date and payload hash.
func (v *Verifier) parseHeaderAuth(r *http.Request, auth string) (*authParams, error) {
	bad := ErrAuthorizationHeaderMalformed
	var cred, signed, sig string
	var seen [3]bool
	for _, part := range strings.Split(auth[len(Algorithm)+1:], ",") {
		part = strings.TrimSpace(part)
		name, val, ok := strings.Cut(part, "=")
		i := -1
		switch name {
		case "Credential":
			i, cred = 0, val
		case "SignedHeaders":
			i, signed = 1, val
		case "Signature":
			i, sig = 2, val
		}
		if !ok || i < 0 {
			return nil, bad.with("the authorization header is malformed; unexpected component %q, want Credential=, SignedHeaders= and Signature=", part)
		}
		if seen[i] {
			return nil, bad.with("the authorization header is malformed; %s appears twice", name)
		}
		seen[i] = true
	}
	if !seen[0] || !seen[1] || !seen[2] {
		return nil, bad.with("the authorization header is malformed; it needs Credential=, SignedHeaders= and Signature=")
	}
	ap := &authParams{}
	if err := parseCredential(ap, cred, bad); err != nil {
		return nil, err
	}
	if err := parseSignedHeaders(ap, signed, bad); err != nil {
		return nil, err
	}
	if err := parseSignature(ap, sig, bad); err != nil {
		return nil, err
	}

	if d := r.Header["X-Amz-Date"]; len(d) > 1 {
		return nil, bad.with("the request has %d x-amz-date headers; want one", len(d))
	} else if len(d) == 1 {
		t, err := time.Parse(amzDateFormat, d[0])
		if err != nil || len(d[0]) != len(amzDateFormat) {
			return nil, bad.with("x-amz-date %q is not in the format YYYYMMDD'T'HHMMSS'Z'", d[0])
		}
		ap.t, ap.amzDate = t, d[0]
	} else if d := r.Header.Get("Date"); d != "" {
		t, err := http.ParseTime(d)
		if err != nil {
			return nil, ErrAccessDenied.with("AWS authentication requires a valid Date or x-amz-date header; Date %q is not an HTTP date", d)
		}
		ap.t, ap.amzDate = t.UTC(), t.UTC().Format(amzDateFormat)
	} else {
		return nil, ErrAccessDenied.with("AWS authentication requires a valid Date or x-amz-date header")
	}
	if ap.amzDate[:8] != ap.date {
		return nil, bad.with("the authorization header is malformed; the credential scope date %s does not match the request date %s", ap.date, ap.amzDate[:8])
	}
	now := v.now()
	if skew := now.Sub(ap.t); skew > v.maxSkew || -skew > v.maxSkew {
		dir := "behind"
		if skew < 0 {
			dir, skew = "ahead of", -skew
		}
		return nil, ErrRequestTimeTooSkewed.with("the request time %s is %v %s the server's clock (%s); at most %v is allowed",
			ap.amzDate, skew.Round(time.Second), dir, now.UTC().Format(amzDateFormat), v.maxSkew)
	}

	ph := r.Header["X-Amz-Content-Sha256"]
	if len(ph) == 0 {
		return nil, ErrInvalidRequest.with("missing required header for this request: x-amz-content-sha256")
	}
	if len(ph) > 1 {
		return nil, ErrInvalidArgument.with("the request has %d x-amz-content-sha256 headers; want one", len(ph))
	}
	if !validPayloadHash(ph[0]) {
		return nil, ErrInvalidArgument.with("x-amz-content-sha256 %q must be %s, %s, %s, %s or a hex SHA-256",
			ph[0], UnsignedPayload, StreamingPayload, StreamingPayloadTrailer, StreamingUnsignedTrailer)
	}
	ap.payloadHash = ph[0]
	return ap, nil
}

// parseQueryAuth parses the X-Amz-* parameters of a presigned URL.
func (v *Verifier) parseQueryAuth(r *http.Request, params []queryParam) (*authParams, error) {
	bad := ErrAuthorizationQueryParametersError
	get := func(name string, required bool) (string, error) {
		val, n := "", 0
		for _, p := range params {
			if p.key == name {
				val = p.value
				n++
			}
		}
		switch {
		case n > 1:
			return "", bad.with("query parameter %s appears %d times", name, n)
		case n == 0 && required:
			return "", bad.with("query-string authentication requires the %s, %s, %s, %s, %s and %s parameters; %s is missing",
				qAlgorithm, qCredential, qSignature, qDate, qSignedHeaders, qExpires, name)
		}
		return val, nil
	}
	var vals [7]string
	for i, name := range []string{qAlgorithm, qCredential, qDate, qExpires, qSignedHeaders, qSignature, qContentSHA256} {
		val, err := get(name, name != qContentSHA256)
		if err != nil {
			return nil, err
		}
		vals[i] = val
	}
	alg, cred, date, expires, signed, sig, ph := vals[0], vals[1], vals[2], vals[3], vals[4], vals[5], vals[6]
	if alg != Algorithm {
		return nil, bad.with("X-Amz-Algorithm %q is not supported; only %s is", alg, Algorithm)
	}
	ap := &authParams{presigned: true}
	if err := parseCredential(ap, cred, bad); err != nil {
		return nil, err
	}
	if err := parseSignedHeaders(ap, signed, bad); err != nil {
		return nil, err
	}
	if err := parseSignature(ap, sig, bad); err != nil {
		return nil, err
	}
	t, err := time.Parse(amzDateFormat, date)
	if err != nil || len(date) != len(amzDateFormat) {
		return nil, bad.with("X-Amz-Date %q is not in the format YYYYMMDD'T'HHMMSS'Z'", date)
	}
	ap.t, ap.amzDate = t, date
	if date[:8] != ap.date {
		return nil, bad.with("the credential scope date %s does not match X-Amz-Date %s", ap.date, date[:8])
	}
	// An expiry out of range is AccessDenied (403), as S3 answers it
	// (ceph/s3-tests test_object_raw_get_x_amz_expires_out_*).
	secs, err := strconv.ParseInt(expires, 10, 64)
	if err != nil {
		return nil, bad.with("X-Amz-Expires %q must be a non-negative number of seconds", expires)
	}
	if secs < 0 {
		return nil, ErrAccessDenied.with("X-Amz-Expires %d is negative: it must be 0 to %d seconds", secs, int64(v.maxExpiry/time.Second))
	}
	if max := int64(v.maxExpiry / time.Second); secs > max {
		return nil, ErrAccessDenied.with("X-Amz-Expires must be less than a week (in seconds) that is %d; it is %d", max, secs)
	}
	ap.expires = time.Duration(secs) * time.Second

	now := v.now()
	if ahead := t.Sub(now); ahead > v.maxSkew {
		return nil, ErrAccessDenied.with("Request is not valid yet: X-Amz-Date %s is %v ahead of the server's clock (%s); at most %v is allowed",
			date, ahead.Round(time.Second), now.UTC().Format(amzDateFormat), v.maxSkew)
	}
	if end := t.Add(ap.expires); now.After(end) {
		return nil, ErrAccessDenied.with("Request has expired: it was signed at %s for %d s and expired %v ago (server time %s)",
			date, secs, now.Sub(end).Round(time.Second), now.UTC().Format(amzDateFormat))
	}

	ap.payloadHash = UnsignedPayload
	if ph != "" {
		if ph != UnsignedPayload && !isHexSHA256(ph) {
			return nil, bad.with("X-Amz-Content-Sha256 %q must be %s or a hex SHA-256", ph, UnsignedPayload)
		}
		ap.payloadHash = ph
	}
	return ap, nil
}

// parseCredential parses "AKID/YYYYMMDD/REGION/s3/aws4_request". The id is
// everything before the last four components.
func parseCredential(ap *authParams, cred string, bad *Error) error {
	parts := strings.Split(cred, "/")
	n := len(parts)
	if n < 5 || parts[0] == "" {
		return bad.with("the Credential %q is malformed; expecting \"<YOUR-AKID>/YYYYMMDD/REGION/SERVICE/aws4_request\"", cred)
	}
	ap.accessKeyID = strings.Join(parts[:n-4], "/")
	date, region, svc, term := parts[n-4], parts[n-3], parts[n-2], parts[n-1]
	if _, err := time.Parse("20060102", date); err != nil || len(date) != 8 {
		return bad.with("the Credential %q is malformed; its date %q is not YYYYMMDD", cred, date)
	}
	if region == "" {
		return bad.with("the Credential %q is malformed; its region is empty", cred)
	}
	if svc != service {
		return bad.with("the Credential %q is malformed; incorrect service %q, this endpoint belongs to %q", cred, svc, service)
	}
	if term != scopeTerminator {
		return bad.with("the Credential %q is malformed; incorrect terminal %q, this endpoint uses %q", cred, term, scopeTerminator)
	}
	ap.date, ap.region = date, region
	return nil
}

// parseSignedHeaders parses "host;x-amz-date;..." (lowercase names, no
// duplicates, host included). The order given is the order signed.
func parseSignedHeaders(ap *authParams, s string, bad *Error) error {
	if s == "" {
		return bad.with("SignedHeaders is empty; it must include host")
	}
	names := strings.Split(s, ";")
	if len(names) > maxSignedHeaders {
		return bad.with("SignedHeaders lists %d headers; at most %d are allowed", len(names), maxSignedHeaders)
	}
	host := false
	for i, name := range names {
		if name == "" || strings.ToLower(name) != name || strings.ContainsAny(name, " \t:") {
			return bad.with("SignedHeaders %q is malformed; want lowercase header names separated by ';'", s)
		}
		for _, prev := range names[:i] {
			if prev == name {
				return bad.with("SignedHeaders %q lists %q twice", s, name)
			}
		}
		host = host || name == "host"
	}
	if !host {
		return bad.with("SignedHeaders %q must include host", s)
	}
	ap.signedHeaders, ap.signedHeadersRaw = names, s
	return nil
}

func parseSignature(ap *authParams, s string, bad *Error) error {
	if len(s) != 64 {
		return bad.with("Signature %q is not 64 hex digits", s)
	}
	if _, err := hex.Decode(ap.signature[:], []byte(s)); err != nil {
		return bad.with("Signature %q is not 64 hex digits", s)
	}
	return nil
}

func isHexSHA256(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

func validPayloadHash(s string) bool {
	switch s {
	case UnsignedPayload, StreamingPayload, StreamingPayloadTrailer, StreamingUnsignedTrailer:
		return true
	}
	return isHexSHA256(s)
}
