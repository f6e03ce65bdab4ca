package sigv4

import (
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Presign returns a presigned URL (query-string authentication) that lets
// its holder send method to rawURL until now+expires, as the access key
// accessKeyID with the given secret, in region, for service s3. Only the
// host header is signed and the payload is UnsignedPayload, as the AWS
// SDKs do for S3. expires is whole seconds from 1 s to 7 days.
//
// The returned URL has rawURL's scheme and host (a default port, :80 for
// http or :443 for https, removed, because clients do not send it in the
// Host header), its path encoded the SigV4 way, and its query parameters
// plus the X-Amz-* ones in canonical order. Arguments Presign cannot sign
// (a relative URL, userinfo, X-Amz-* authentication parameters already in
// the query, an expiry out of range, empty credentials) are errors wrapping
// ErrBadPresign. Presign is a pure function.
func Presign(method, rawURL, accessKeyID, secret, region string, now time.Time, expires time.Duration) (string, error) {
	bad := func(format string, args ...any) (string, error) {
		return "", fmt.Errorf("%w: %s", ErrBadPresign, fmt.Sprintf(format, args...))
	}
	switch {
	case method == "":
		return bad("empty method")
	case accessKeyID == "" || secret == "":
		return bad("empty access key id or secret")
	case strings.Contains(accessKeyID, "/"):
		return bad("access key id %q contains '/'", accessKeyID)
	case region == "" || strings.Contains(region, "/"):
		return bad("region %q is empty or contains '/'", region)
	case expires < time.Second || expires > MaxPresignExpiry:
		return bad("expiry %v outside [1s, %v]", expires, MaxPresignExpiry)
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return bad("%v", err)
	}
	if u.Scheme == "" || u.Host == "" || u.Opaque != "" {
		return bad("URL %q is not absolute", rawURL)
	}
	if u.User != nil {
		return bad("URL %q has userinfo", rawURL)
	}
	host := u.Host
	if h, port, err := net.SplitHostPort(host); err == nil &&
		(port == "80" && u.Scheme == "http" || port == "443" && u.Scheme == "https") {
		host = h
		if strings.Contains(h, ":") {
			host = "[" + h + "]"
		}
	}

	params := parseQuery(u.RawQuery)
	for _, p := range params {
		switch p.key {
		case qAlgorithm, qCredential, qDate, qExpires, qSignedHeaders, qSignature:
			return bad("URL %q already has the authentication parameter %s", rawURL, p.key)
		}
	}
	t := now.UTC()
	amzDate := t.Format(amzDateFormat)
	date := amzDate[:8]
	scope := date + "/" + region + "/" + service + "/" + scopeTerminator
	params = append(params,
		queryParam{qAlgorithm, Algorithm},
		queryParam{qCredential, accessKeyID + "/" + scope},
		queryParam{qDate, amzDate},
		queryParam{qExpires, strconv.FormatInt(int64(expires/time.Second), 10)},
		queryParam{qSignedHeaders, "host"},
	)
	query := canonicalQuery(params, "")
	uri := EncodePath(u.Path)
	req := &http.Request{Method: method, Host: host, Header: http.Header{}}
	canonical := canonicalRequest(req, uri, query, []string{"host"}, "host", UnsignedPayload)
	sig := requestSignature(signingKey(secret, date, region, service), amzDate, scope, canonical)
	return u.Scheme + "://" + host + uri + "?" + query + "&" + qSignature + "=" + hex.EncodeToString(sig[:]), nil
}
