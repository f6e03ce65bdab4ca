package access

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"
)

// Errors returned by Authenticate and Authorize. Front ends test them with
// errors.Is: ErrUnauthenticated means "present credentials" (HTTP 401),
// ErrForbidden means "these credentials may not do this" (HTTP 403).
var (
	ErrUnauthenticated = errors.New("access: credentials required")
	ErrForbidden       = errors.New("access: forbidden")
)

// Action is what a request wants to do with a Resource.
type Action uint8

// The actions a grant can allow. Later access keys get grants made of these.
const (
	// ActionRead reads file content and metadata (GET, HEAD).
	ActionRead Action = iota + 1
	// ActionList lists a directory.
	ActionList
	// ActionWrite creates, replaces and renames files and directories.
	ActionWrite
	// ActionAdmin manages buckets (create, delete, settings); node-wide
	// (Resource.Bucket ""), the cluster: keys, rules, nodes — the admin
	// key only.
	ActionAdmin
	// ActionDelete deletes files and directories.
	ActionDelete
)

// String returns the lowercase name of a, or "action(N)" for an unknown value.
func (a Action) String() string {
	switch a {
	case ActionRead:
		return "read"
	case ActionList:
		return "list"
	case ActionWrite:
		return "write"
	case ActionAdmin:
		return "admin"
	case ActionDelete:
		return "delete"
	}
	return fmt.Sprintf("action(%d)", uint8(a))
}

// Resource is what an action applies to. Path is inside Bucket (no leading
// slash, "" for the bucket root); both are empty for node-wide admin actions.
type Resource struct {
	Bucket string
	Path   string
	// PublicRead reports that the bucket's policy lets anyone read and list it.
	PublicRead bool
	// Owner is the access key id that owns the bucket (created it): that
	// key may do everything in the bucket.
	Owner string
	// AuthenticatedRead lets any access key read and list (S3's
	// authenticated-read); PublicWrite lets anyone write and delete (S3's
	// public-read-write).
	AuthenticatedRead, PublicWrite bool
}

// Principal is the authenticated identity of a request. The zero value is
// the anonymous principal.
type Principal struct {
	// Name identifies the principal in logs: "" for anonymous, "admin" for
	// the admin key, else the access key id.
	Name string
	// Admin reports that the principal holds the admin key.
	Admin bool
	key   *Key // the access key; nil for the admin key and anonymous
}

// Anonymous reports whether p carries no credentials.
func (p Principal) Anonymous() bool { return p.Name == "" && !p.Admin }

// Config configures an Authorizer.
type Config struct {
	// AdminKey is the secret that grants every action, presented as
	// "Authorization: Bearer AdminKey". Required; no default. At least 16 bytes.
	AdminKey string
	// Now is the clock that expires keys; default time.Now.
	Now func() time.Time
}

// DefaultConfig returns a Config with every optional field at its default.
// AdminKey has no default and must be set.
func DefaultConfig() Config { return Config{} }

// MinKeyLen is the shortest admin key Validate accepts, in bytes.
const MinKeyLen = 16

// ErrBadConfig is returned (wrapped) by Config.Validate.
var ErrBadConfig = errors.New("access: bad config")

// Validate reports a Config that New would refuse, wrapping ErrBadConfig.
func (c Config) Validate() error {
	if len(c.AdminKey) < MinKeyLen {
		return fmt.Errorf("%w: admin key shorter than %d bytes", ErrBadConfig, MinKeyLen)
	}
	return nil
}

// Authorizer authenticates credentials and authorizes actions. It is
// immutable after New and safe for concurrent use; its methods never block
// and do not allocate on success.
type Authorizer struct {
	adminSum [sha256.Size]byte
	adminKey string
	now      func() time.Time
	keys     atomic.Pointer[keyTable] // SetKeys
	failures [failKinds]atomic.Uint64
}

// New returns an Authorizer for cfg, or an error wrapping ErrBadConfig.
func New(cfg Config) (*Authorizer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	a := &Authorizer{adminSum: sha256.Sum256([]byte(cfg.AdminKey)), adminKey: cfg.AdminKey, now: cfg.Now}
	if a.now == nil {
		a.now = time.Now
	}
	return a, nil
}

// adminPrincipal is the principal of a request that presented the admin key.
var adminPrincipal = Principal{Name: "admin", Admin: true}

// Authenticate resolves the value of an HTTP Authorization header to a
// Principal. An empty header is the anonymous principal. "Bearer KEY" (the
// scheme is case-insensitive) with the admin key is the admin principal;
// "Bearer ID:SECRET" is access key ID's principal; "Basic" carries the
// same as user and password (any user with the admin key). A wrong key or secret,
// or an expired key, fails with ErrForbidden (in time that does not say
// whether ID exists). Any other scheme, or a Bearer header without a
// token, fails with ErrUnauthenticated.
func (a *Authorizer) Authenticate(authorization string) (Principal, error) {
	if authorization == "" {
		return Principal{}, nil
	}
	token, ok := BearerToken(authorization)
	if !ok {
		user, pass, isBasic := basicCredentials(authorization)
		if !isBasic {
			a.fail(failScheme)
			return Principal{}, fmt.Errorf("%w: unsupported authorization scheme, want Bearer or Basic (or an S3 signature)", ErrUnauthenticated)
		}
		// Basic (WebDAV clients, browsers): any user with the admin key
		// as the password, or an access key's id and secret.
		if a.isAdminKey(pass) {
			return adminPrincipal, nil
		}
		return a.authenticateKey(user + ":" + pass)
	}
	if a.isAdminKey(token) {
		return adminPrincipal, nil
	}
	if strings.IndexByte(token, ':') < 0 {
		a.fail(failBadKey)
		return Principal{}, fmt.Errorf("%w: wrong key: want the admin key or ACCESS_KEY_ID:SECRET", ErrForbidden)
	}
	return a.authenticateKey(token)
}

// isAdminKey compares key with the admin key in time independent of both
// their contents and lengths.
func (a *Authorizer) isAdminKey(key string) bool {
	sum := sha256.Sum256([]byte(key))
	return subtle.ConstantTimeCompare(sum[:], a.adminSum[:]) == 1
}

// Authorize reports whether p may do act on res: nil if so, ErrUnauthenticated
// if an anonymous principal needs credentials, ErrForbidden if p's
// credentials do not allow it.
func (a *Authorizer) Authorize(p Principal, act Action, res Resource) error {
	if p.Admin {
		return nil
	}
	readish := act == ActionRead || act == ActionList
	if res.PublicRead && readish || res.PublicWrite && (act == ActionWrite || act == ActionDelete) {
		// Public means anyone, with or without credentials.
		return nil
	}
	if res.AuthenticatedRead && readish && !p.Anonymous() {
		return nil
	}
	if p.Anonymous() {
		a.fail(failAnonymous)
		return ErrUnauthenticated
	}
	if p.key != nil && (res.Bucket != "" && res.Owner == p.key.ID || p.key.allows(act, res)) {
		return nil
	}
	a.fail(failDenied)
	if p.key == nil {
		return ErrForbidden
	}
	return fmt.Errorf("%w: access key %s may not %s %s", ErrForbidden, p.key.ID, act, describe(res))
}

func describe(res Resource) string {
	switch {
	case res.Bucket == "":
		return "the cluster"
	case res.Path == "":
		return "bucket " + res.Bucket
	}
	return res.Bucket + "/" + res.Path
}

// Kinds of authentication and authorization failures, counted for metrics.
const (
	failScheme    = iota // an unsupported Authorization scheme
	failBadKey           // unknown key id, wrong secret or signature
	failExpired          // an expired key
	failAnonymous        // credentials required
	failDenied           // the credentials do not allow the action
	failKinds
)

// FailureReasons names the failure kinds Failures counts, by index.
var FailureReasons = [failKinds]string{"scheme", "bad_key", "expired", "anonymous", "denied"}

func (a *Authorizer) fail(kind int) { a.failures[kind].Add(1) }

// CountFailure counts a failure found outside the Authorizer (a bad
// signature found by a verifier): reason is "bad_key" or "expired".
func (a *Authorizer) CountFailure(reason string) {
	for i, r := range FailureReasons {
		if r == reason {
			a.fail(i)
		}
	}
}

// Failures returns the failures counted so far, by FailureReasons index.
func (a *Authorizer) Failures() [failKinds]uint64 {
	var out [failKinds]uint64
	for i := range out {
		out[i] = a.failures[i].Load()
	}
	return out
}

// BearerToken extracts the token of an "Authorization: Bearer TOKEN" header
// value (RFC 6750; the scheme is case-insensitive, surrounding spaces are
// ignored). ok is false for another scheme or an empty token.
func BearerToken(authorization string) (token string, ok bool) {
	const scheme = "bearer "
	if len(authorization) < len(scheme) {
		return "", false
	}
	for i := 0; i < len(scheme); i++ {
		c := authorization[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != scheme[i] {
			return "", false
		}
	}
	token = trimSpace(authorization[len(scheme):])
	return token, token != ""
}

func trimSpace(s string) string {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}

// basicCredentials decodes an "Authorization: Basic ..." value.
func basicCredentials(authorization string) (user, pass string, ok bool) {
	const scheme = "basic "
	if len(authorization) < len(scheme) || !strings.EqualFold(authorization[:len(scheme)], scheme) {
		return "", "", false
	}
	b, err := base64.StdEncoding.DecodeString(trimSpace(authorization[len(scheme):]))
	if err != nil {
		return "", "", false
	}
	user, pass, ok = strings.Cut(string(b), ":")
	return user, pass, ok
}
