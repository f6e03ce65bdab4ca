package sigv4

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Signature Version 2 (HMAC-SHA1) is still what several clients make
// presigned URLs with by default: boto3's and the aws CLI's
// generate_presigned_url/presign without a configured signature version,
// and s3cmd's signurl. Cairn accepts it, in the Authorization header
// ("AWS ID:SIGNATURE") and in the query (AWSAccessKeyId, Expires,
// Signature), with the same secret lookup, dummy secret for unknown ids,
// constant-time compare and clock checks as SigV4. A V2 request's payload
// is never signed: Result.PayloadHash is UnsignedPayload.

// IsSignedV2 reports whether r carries a SigV2 credential.
func IsSignedV2(r *http.Request) bool {
	if v := r.Header["Authorization"]; len(v) > 0 && strings.HasPrefix(v[0], "AWS ") {
		return true
	}
	return r.URL != nil && strings.Contains(r.URL.RawQuery, "AWSAccessKeyId=") && strings.Contains(r.URL.RawQuery, "Signature=")
}

// v2SubResources are the query parameters that are part of a SigV2
// canonical resource.
var v2SubResources = map[string]bool{
	"acl": true, "cors": true, "delete": true, "lifecycle": true, "location": true, "logging": true,
	"notification": true, "partNumber": true, "policy": true, "requestPayment": true, "tagging": true,
	"torrent": true, "uploadId": true, "uploads": true, "versionId": true, "versioning": true,
	"versions": true, "website": true, "restore": true,
	"response-cache-control": true, "response-content-disposition": true, "response-content-encoding": true,
	"response-content-language": true, "response-content-type": true, "response-expires": true,
}

// VerifyV2 checks the SigV2 signature of r. hostBucket is the bucket named
// by a virtual-hosted Host ("" for path style): it is part of the
// canonical resource.
func (v *Verifier) VerifyV2(r *http.Request, hostBucket string) (*Result, error) {
	q := r.URL.Query()
	var id, sigB64, date string
	presigned := false
	if a := r.Header.Get("Authorization"); strings.HasPrefix(a, "AWS ") {
		cred := strings.TrimPrefix(a, "AWS ")
		i := strings.LastIndexByte(cred, ':')
		if i <= 0 {
			return nil, ErrAuthorizationHeaderMalformed.with("the Authorization header %q is not AWS ID:SIGNATURE", a)
		}
		id, sigB64 = cred[:i], cred[i+1:]
		date = r.Header.Get("Date")
		t, err := http.ParseTime(date)
		if xd := r.Header.Get("X-Amz-Date"); xd != "" {
			date = ""
			t, err = http.ParseTime(xd)
		}
		if err != nil {
			return nil, ErrAccessDenied.with("AWS authentication requires a valid Date or x-amz-date header")
		}
		if skew := v.now().Sub(t); skew > v.maxSkew || -skew > v.maxSkew {
			return nil, ErrRequestTimeTooSkewed.with("the request time %s is %v off the server's clock; at most %v is allowed",
				t.UTC().Format(time.RFC3339), skew.Round(time.Second), v.maxSkew)
		}
	} else {
		presigned = true
		id, sigB64, date = q.Get("AWSAccessKeyId"), q.Get("Signature"), q.Get("Expires")
		exp, err := strconv.ParseInt(date, 10, 64)
		if err != nil || id == "" || sigB64 == "" {
			return nil, ErrAuthorizationQueryParametersError.with("a SigV2 presigned URL needs AWSAccessKeyId, Expires (Unix seconds) and Signature")
		}
		if now := v.now(); now.Unix() > exp {
			return nil, ErrAccessDenied.with("Request has expired: it expired at %s (server time %s)",
				time.Unix(exp, 0).UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
		} else if time.Unix(exp, 0).Sub(now) > v.maxExpiry {
			return nil, ErrAuthorizationQueryParametersError.with("a presigned URL may be valid for at most %v", v.maxExpiry)
		}
	}
	secret, known := v.lookup(id)
	if !known {
		secret = dummySecret
	}
	// The string to sign.
	var b strings.Builder
	b.WriteString(r.Method)
	b.WriteByte('\n')
	b.WriteString(r.Header.Get("Content-Md5"))
	b.WriteByte('\n')
	b.WriteString(r.Header.Get("Content-Type"))
	b.WriteByte('\n')
	b.WriteString(date)
	b.WriteByte('\n')
	var amz []string
	for k := range r.Header {
		if lk := strings.ToLower(k); strings.HasPrefix(lk, "x-amz-") {
			amz = append(amz, lk)
		}
	}
	sort.Strings(amz)
	for _, k := range amz {
		vals := r.Header.Values(k)
		for i := range vals {
			vals[i] = strings.TrimSpace(vals[i])
		}
		b.WriteString(k + ":" + strings.Join(vals, ",") + "\n")
	}
	if hostBucket != "" {
		b.WriteString("/" + hostBucket)
	}
	path := r.URL.EscapedPath()
	if raw := r.RequestURI; raw != "" && !strings.HasPrefix(raw, "http") {
		path, _, _ = strings.Cut(raw, "?")
	}
	b.WriteString(path)
	var subs []string
	for k := range q {
		if v2SubResources[k] {
			subs = append(subs, k)
		}
	}
	sort.Strings(subs)
	for i, k := range subs {
		if i == 0 {
			b.WriteByte('?')
		} else {
			b.WriteByte('&')
		}
		b.WriteString(k)
		if val := q.Get(k); val != "" {
			b.WriteString("=" + val)
		}
	}
	mac := hmac.New(sha1.New, []byte(secret))
	mac.Write([]byte(b.String()))
	want := mac.Sum(nil)
	got, err := base64.StdEncoding.DecodeString(sigB64)
	match := err == nil && subtle.ConstantTimeCompare(got, want) == 1
	if v.afterSign != nil {
		v.afterSign(known)
	}
	if !known {
		return nil, ErrInvalidAccessKeyID.with("the access key id %q does not exist in our records", id)
	}
	if !match {
		return nil, ErrSignatureDoesNotMatch.with("the SigV2 signature we calculated does not match the signature you provided; check your secret key")
	}
	return &Result{AccessKeyID: id, Presigned: presigned, Service: service, PayloadHash: UnsignedPayload}, nil
}
