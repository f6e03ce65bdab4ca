package sigv4

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/textproto"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Algorithm is the only signing algorithm this package accepts.
const Algorithm = "AWS4-HMAC-SHA256"

// Payload hash values of x-amz-content-sha256 other than a hex SHA-256.
const (
	// UnsignedPayload: the body is not covered by the signature.
	UnsignedPayload = "UNSIGNED-PAYLOAD"
	// StreamingPayload: an aws-chunked body with a signature per chunk.
	StreamingPayload = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"
	// StreamingPayloadTrailer: as StreamingPayload, then signed trailers.
	StreamingPayloadTrailer = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER"
	// StreamingUnsignedTrailer: an aws-chunked body without chunk
	// signatures, then unsigned trailers (a checksum).
	StreamingUnsignedTrailer = "STREAMING-UNSIGNED-PAYLOAD-TRAILER"
)

// EmptySHA256 is the hex SHA-256 of the empty string, the payload hash of a
// request without a body.
const EmptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// amzDateFormat is the ISO 8601 basic format of x-amz-date and X-Amz-Date.
const amzDateFormat = "20060102T150405Z"

// scopeTerminator ends every credential scope.
const scopeTerminator = "aws4_request"

// service is the only service this package verifies signatures for.
const service = "s3"

const upperHex = "0123456789ABCDEF"

// unreserved reports whether c is in RFC 3986's unreserved set, the bytes
// SigV4 never percent-encodes.
func unreserved(c byte) bool {
	return 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' ||
		c == '-' || c == '_' || c == '.' || c == '~'
}

// appendEncoded appends s to dst with every byte except the unreserved ones
// (and '/' if keepSlash) written as uppercase %XX.
func appendEncoded(dst []byte, s string, keepSlash bool) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if unreserved(c) || keepSlash && c == '/' {
			dst = append(dst, c)
			continue
		}
		dst = append(dst, '%', upperHex[c>>4], upperHex[c&15])
	}
	return dst
}

// EncodePath returns the canonical URI of a decoded path: each byte
// except the unreserved ones and '/' percent-encoded once, "/" for an empty
// path. S3 does not encode twice, unlike other AWS services.
func EncodePath(path string) string {
	if path == "" {
		return "/"
	}
	return string(appendEncoded(make([]byte, 0, len(path)+16), path, true))
}

// queryParam is one decoded query parameter.
type queryParam struct{ key, value string }

// parseQuery splits a raw query into decoded parameters in their order.
// Empty segments ("a=1&&b=2") are skipped; a key without '=' has an empty
// value; '+' decodes to a space, as in url.ParseQuery. A component with a
// broken escape is kept literally, so that it still takes part in the
// signature rather than vanishing from it.
func parseQuery(raw string) []queryParam {
	if raw == "" {
		return nil
	}
	params := make([]queryParam, 0, strings.Count(raw, "&")+1)
	for raw != "" {
		var seg string
		seg, raw, _ = strings.Cut(raw, "&")
		if seg == "" {
			continue
		}
		k, v, _ := strings.Cut(seg, "=")
		params = append(params, queryParam{unescapeQuery(k), unescapeQuery(v)})
	}
	return params
}

func unescapeQuery(s string) string {
	if strings.IndexByte(s, '%') < 0 && strings.IndexByte(s, '+') < 0 {
		return s
	}
	u, err := url.QueryUnescape(s)
	if err != nil {
		return s
	}
	return u
}

// canonicalQuery returns the canonical query string of params: each key and
// value encoded, the pairs sorted by encoded key then encoded value (SigV4
// sorts after encoding), joined by '&'. A parameter named skip (the
// signature of a presigned URL) is left out.
func canonicalQuery(params []queryParam, skip string) string {
	enc := make([]queryParam, 0, len(params))
	n := 0
	for _, p := range params {
		if skip != "" && p.key == skip {
			continue
		}
		e := queryParam{
			key:   string(appendEncoded(nil, p.key, false)),
			value: string(appendEncoded(nil, p.value, false)),
		}
		n += len(e.key) + len(e.value) + 2
		enc = append(enc, e)
	}
	slices.SortFunc(enc, func(a, b queryParam) int {
		if c := strings.Compare(a.key, b.key); c != 0 {
			return c
		}
		return strings.Compare(a.value, b.value)
	})
	var sb strings.Builder
	sb.Grow(n)
	for i, e := range enc {
		if i > 0 {
			sb.WriteByte('&')
		}
		sb.WriteString(e.key)
		sb.WriteByte('=')
		sb.WriteString(e.value)
	}
	return sb.String()
}

// headerValues returns the values a signed header name (lowercase) had on
// the wire. net/http moves some headers out of r.Header: Host into r.Host,
// Transfer-Encoding into r.TransferEncoding, and Content-Length (when the
// body is chunked) into r.ContentLength; those are read from there.
func headerValues(r *http.Request, name string) []string {
	switch name {
	case "host":
		if r.Host != "" {
			return []string{r.Host}
		}
		if r.URL != nil {
			return []string{r.URL.Host}
		}
		return nil
	case "content-length":
		if v := r.Header["Content-Length"]; len(v) > 0 {
			return v
		}
		if r.ContentLength >= 0 {
			return []string{strconv.FormatInt(r.ContentLength, 10)}
		}
		return nil
	case "transfer-encoding":
		if v := r.Header["Transfer-Encoding"]; len(v) > 0 {
			return v
		}
		if len(r.TransferEncoding) > 0 {
			return []string{strings.Join(r.TransferEncoding, ",")}
		}
		return nil
	}
	key := textproto.CanonicalMIMEHeaderKey(name)
	vals := r.Header[key]
	// A request built in code (not parsed by net/http) may hold keys that
	// are not in canonical form; take their values too.
	for k, v := range r.Header {
		if k != key && strings.EqualFold(k, name) {
			vals = append(slices.Clip(vals), v...)
		}
	}
	return vals
}

// appendHeaderValue appends v with leading and trailing spaces and tabs
// removed and each inner run of spaces collapsed to one.
func appendHeaderValue(dst []byte, v string) []byte {
	v = strings.Trim(v, " \t")
	if !strings.Contains(v, "  ") {
		return append(dst, v...) // the usual value: nothing to collapse
	}
	space := false
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c == ' ' {
			if space {
				continue
			}
			space = true
		} else {
			space = false
		}
		dst = append(dst, c)
	}
	return dst
}

// canonicalRequest builds the canonical request of r:
//
//	METHOD \n URI \n QUERY \n name:value \n ... \n \n signed;headers \n PAYLOADHASH
func canonicalRequest(r *http.Request, uri, query string, signedHeaders []string, signedHeadersRaw, payloadHash string) []byte {
	b := make([]byte, 0, 512+len(uri)+len(query))
	b = append(b, r.Method...)
	b = append(b, '\n')
	b = append(b, uri...)
	b = append(b, '\n')
	b = append(b, query...)
	b = append(b, '\n')
	for _, name := range signedHeaders {
		b = append(b, name...)
		b = append(b, ':')
		for i, v := range headerValues(r, name) {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendHeaderValue(b, v)
		}
		b = append(b, '\n')
	}
	b = append(b, '\n')
	b = append(b, signedHeadersRaw...)
	b = append(b, '\n')
	b = append(b, payloadHash...)
	return b
}

func hmacSHA256(key []byte, data string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(data))
	return m.Sum(nil)
}

// signingKey derives the key of a secret for a day (YYYYMMDD), region and
// service: HMAC chains over "AWS4"+secret, the date, region, service and
// "aws4_request". The four HMACs are done once a day per key: the derived
// keys are kept (keyCache), as a client signs every request of the day
// with the same one.
func signingKey(secret, date, region, svc string) []byte {
	// The cache key is built on the stack: a hit does not allocate.
	var kb [192]byte
	ck := append(kb[:0], secret...)
	ck = append(ck, 0)
	ck = append(ck, date...)
	ck = append(ck, 0)
	ck = append(ck, region...)
	ck = append(ck, 0)
	ck = append(ck, svc...)
	if k, ok := keys.get(ck); ok {
		return k
	}
	k := hmacSHA256([]byte("AWS4"+secret), date)
	k = hmacSHA256(k, region)
	k = hmacSHA256(k, svc)
	k = hmacSHA256(k, scopeTerminator)
	keys.put(string(ck), k)
	return k
}

// keyCache holds derived signing keys by secret, date, region and
// service. It is bounded: when full it starts over (a day's keys come back
// at their next request). The keys are as secret as the secrets they come
// from, which the process holds anyway.
type keyCache struct {
	mu sync.RWMutex
	m  map[string][]byte
}

// maxCachedKeys bounds keyCache.
const maxCachedKeys = 4096

var keys = &keyCache{m: map[string][]byte{}}

func (c *keyCache) get(k []byte) ([]byte, bool) {
	c.mu.RLock()
	v, ok := c.m[string(k)]
	c.mu.RUnlock()
	return v, ok
}

func (c *keyCache) put(k string, v []byte) {
	c.mu.Lock()
	if len(c.m) >= maxCachedKeys {
		clear(c.m)
	}
	c.m[k] = v
	c.mu.Unlock()
}

// requestSignature returns the signature of a canonical request:
// HMAC(key, "AWS4-HMAC-SHA256\n" + amzDate + "\n" + scope + "\n" + hex(sha256(canonical))).
func requestSignature(key []byte, amzDate, scope string, canonical []byte) [sha256.Size]byte {
	sum := sha256.Sum256(canonical)
	m := hmac.New(sha256.New, key)
	m.Write([]byte(Algorithm + "\n"))
	m.Write([]byte(amzDate))
	m.Write([]byte{'\n'})
	m.Write([]byte(scope))
	m.Write([]byte{'\n'})
	var hx [2 * sha256.Size]byte
	hex.Encode(hx[:], sum[:])
	m.Write(hx[:])
	var sig [sha256.Size]byte
	m.Sum(sig[:0])
	return sig
}
