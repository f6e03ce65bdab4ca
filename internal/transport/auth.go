package transport

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Header names of the authentication scheme (see doc.go).
const (
	hdrFrom      = "Cairn-From"
	hdrTo        = "Cairn-To"
	hdrTimestamp = "Cairn-Timestamp"
	hdrNonce     = "Cairn-Nonce"
	hdrContent   = "Cairn-Content-Sha256"
	hdrSignature = "Cairn-Signature"
	hdrBodySig   = "Cairn-Body-Signature" // trailer of streamed bodies

	signPrefix  = "CAIRN-RPC-V1\n"
	trailPrefix = "CAIRN-RPC-V1-BODY\n"
	keyLabel    = "cairn rpc v1 key"
	streamTag   = "STREAM:"
)

// emptyDigest is the hex SHA-256 of no bytes: the content of a GET.
var emptyDigest = hexDigest(nil)

func hexDigest(b []byte) string {
	d := sha256.Sum256(b)
	return hex.EncodeToString(d[:])
}

// errAuth is the cause behind every 401; the detail goes to the debug log
// only, so a prober learns nothing from the answer.
var errAuth = errors.New("authentication failed")

// errReplayFull: the replay cache is full; the request is refused with 503.
var errReplayFull = errors.New("replay cache full")

// signer computes and checks request signatures. It is immutable and safe
// for concurrent use.
type signer struct {
	key []byte // HMAC-SHA256(secret, keyLabel)
}

func newSigner(secret []byte) *signer {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(keyLabel))
	return &signer{key: m.Sum(nil)}
}

// authFields are the signed values of one request.
type authFields struct {
	method, uri string
	from, to    NodeID
	ts          int64 // Unix milliseconds
	nonce       string
	content     string
}

// signature returns the hex HMAC of f's string to sign (doc.go).
func (s *signer) signature(f *authFields) string {
	m := hmac.New(sha256.New, s.key)
	var b strings.Builder
	b.Grow(256)
	b.WriteString(signPrefix)
	b.WriteString(f.method)
	b.WriteByte('\n')
	b.WriteString(f.uri)
	b.WriteByte('\n')
	b.WriteString(f.from.String())
	b.WriteByte('\n')
	b.WriteString(f.to.String())
	b.WriteByte('\n')
	b.WriteString(strconv.FormatInt(f.ts, 10))
	b.WriteByte('\n')
	b.WriteString(f.nonce)
	b.WriteByte('\n')
	b.WriteString(f.content)
	m.Write([]byte(b.String()))
	return hex.EncodeToString(m.Sum(nil))
}

// bodySignature returns the hex HMAC that ends a streamed body: it binds the
// digest of the streamed bytes to the request's header signature.
func (s *signer) bodySignature(headerSig string, bodyDigest []byte) string {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(trailPrefix))
	m.Write([]byte(headerSig))
	m.Write([]byte{'\n'})
	m.Write([]byte(hex.EncodeToString(bodyDigest)))
	return hex.EncodeToString(m.Sum(nil))
}

// stamp sets the authentication headers of req, sent by from to to at now,
// with content as the Cairn-Content-Sha256 value, and returns the signature.
func (s *signer) stamp(req *http.Request, from, to NodeID, now time.Time, content string) string {
	var n [16]byte
	_, _ = rand.Read(n[:]) // crypto/rand.Read never fails
	f := authFields{
		method: req.Method, uri: req.URL.RequestURI(), from: from, to: to,
		ts: now.UnixMilli(), nonce: hex.EncodeToString(n[:]), content: content,
	}
	sig := s.signature(&f)
	h := req.Header
	h[hdrFrom] = []string{from.String()}
	h[hdrTo] = []string{to.String()}
	h[hdrTimestamp] = []string{strconv.FormatInt(f.ts, 10)}
	h[hdrNonce] = []string{f.nonce}
	h[hdrContent] = []string{content}
	h[hdrSignature] = []string{sig}
	return sig
}

// verified is what a server knows about an authenticated request.
type verified struct {
	from    NodeID
	content string // the signed Cairn-Content-Sha256 value
	sig     string // the header signature, for a streamed body's trailer
}

// check authenticates r's headers: timestamp window, target, signature,
// then the replay cache (only a genuine request may take a nonce). It does
// not read the body: the caller compares the body's digest with
// verified.content. anyTarget admits Cairn-To 0 (Join, sent to a URL).
func (s *signer) check(r *http.Request, self NodeID, now time.Time, skew time.Duration, rc *replayCache, anyTarget bool) (verified, error) {
	var v verified
	h := r.Header
	get := func(k string) string {
		if vs := h[k]; len(vs) == 1 {
			return vs[0]
		}
		return "" // missing or repeated: both refused below
	}
	from, err1 := strconv.ParseUint(get(hdrFrom), 10, 64)
	to, err2 := strconv.ParseUint(get(hdrTo), 10, 64)
	ts, err3 := strconv.ParseInt(get(hdrTimestamp), 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || from == 0 {
		return v, fmt.Errorf("%w: bad or missing %s/%s/%s", errAuth, hdrFrom, hdrTo, hdrTimestamp)
	}
	nonceHex, content, sig := get(hdrNonce), get(hdrContent), get(hdrSignature)
	var nonce [16]byte
	if len(nonceHex) != 32 || len(sig) != 64 || len(content) > 128 {
		return v, fmt.Errorf("%w: bad nonce, signature or content digest", errAuth)
	}
	if _, err := hex.Decode(nonce[:], []byte(nonceHex)); err != nil {
		return v, fmt.Errorf("%w: bad nonce", errAuth)
	}
	if d := now.Sub(time.UnixMilli(ts)); d > skew || d < -skew {
		return v, fmt.Errorf("%w: timestamp %d is %v away from the server clock", errAuth, ts, d)
	}
	if NodeID(to) != self && !(anyTarget && to == 0) {
		return v, fmt.Errorf("%w: request for node %d reached node %d", errAuth, to, self)
	}
	want := s.signature(&authFields{
		method: r.Method, uri: r.URL.RequestURI(), from: NodeID(from), to: NodeID(to),
		ts: ts, nonce: nonceHex, content: content,
	})
	if !hmac.Equal([]byte(want), []byte(strings.ToLower(sig))) {
		return v, fmt.Errorf("%w: bad signature from node %d", errAuth, from)
	}
	switch rc.add(nonce, now) {
	case addReplay:
		return v, fmt.Errorf("%w: replayed nonce from node %d", errAuth, from)
	case addFull:
		return v, errReplayFull
	}
	return verified{from: NodeID(from), content: content, sig: want}, nil
}

type addResult int

const (
	addFresh addResult = iota
	addReplay
	addFull
)

// replayCache remembers the nonces of accepted requests for at least
// 2×skew, the longest time a request stays inside the timestamp window, in
// two generations: a nonce is looked up in both and added to the current
// one; every period (2×skew) the current generation becomes the previous
// one and the old previous one is dropped. Safe for concurrent use.
type replayCache struct {
	mu        sync.Mutex
	cur, prev map[[16]byte]struct{}
	rotated   time.Time
	period    time.Duration
	max       int
}

func newReplayCache(skew time.Duration, maxEntries int) *replayCache {
	return &replayCache{
		cur: map[[16]byte]struct{}{}, prev: map[[16]byte]struct{}{},
		period: 2 * skew, max: maxEntries,
	}
}

func (c *replayCache) add(n [16]byte, now time.Time) addResult {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.rotated.IsZero() {
		c.rotated = now
	}
	if age := now.Sub(c.rotated); age >= 2*c.period {
		c.prev, c.cur, c.rotated = map[[16]byte]struct{}{}, map[[16]byte]struct{}{}, now
	} else if age >= c.period {
		c.prev, c.cur, c.rotated = c.cur, map[[16]byte]struct{}{}, now
	}
	if _, ok := c.cur[n]; ok {
		return addReplay
	}
	if _, ok := c.prev[n]; ok {
		return addReplay
	}
	if len(c.cur)+len(c.prev) >= c.max {
		return addFull
	}
	c.cur[n] = struct{}{}
	return addFresh
}
