package access

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Key is an access key: an id and a secret, with the grants that say what
// it may do. Keys live in the cluster's log (meta.RecordKey records whose
// value is EncodeKey's JSON), so every node knows them.
type Key struct {
	ID      string    `json:"id"`
	Name    string    `json:"name"`
	Secret  string    `json:"secret"`
	Grants  []Grant   `json:"grants"`
	Created time.Time `json:"created"`
	// Expires is when the key stops working; zero: never.
	Expires time.Time `json:"expires,omitzero"`
}

// Grant allows Actions on a bucket (every bucket when Bucket is "") and,
// when Prefix is set, only on the paths inside it that start with Prefix.
type Grant struct {
	Bucket string  `json:"bucket,omitempty"`
	Prefix string  `json:"prefix,omitempty"`
	Allow  Actions `json:"allow"`
}

// Actions is a set of Actions.
type Actions uint8

// Has reports whether set holds act.
func (set Actions) Has(act Action) bool { return act > 0 && act < 8 && set&(1<<act) != 0 }

// ActionsOf returns the set of acts.
func ActionsOf(acts ...Action) Actions {
	var s Actions
	for _, a := range acts {
		s |= 1 << a
	}
	return s
}

// allActions lists the actions in the order they are named.
var allActions = [...]Action{ActionRead, ActionList, ActionWrite, ActionDelete, ActionAdmin}

// DefaultActions is what a key may do when created without --allow.
var DefaultActions = ActionsOf(ActionRead, ActionList, ActionWrite, ActionDelete)

// ParseActions parses a comma-separated list of action names ("read,list").
func ParseActions(s string) (Actions, error) {
	var set Actions
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(strings.ToLower(f))
		if f == "" {
			continue
		}
		i := slices.IndexFunc(allActions[:], func(a Action) bool { return a.String() == f })
		if i < 0 {
			return 0, fmt.Errorf("%w: unknown action %q (want read, list, write, delete or admin)", ErrBadKey, f)
		}
		set |= 1 << allActions[i]
	}
	if set == 0 {
		return 0, fmt.Errorf("%w: no actions", ErrBadKey)
	}
	return set, nil
}

// String returns the names of the actions in set, comma-separated.
func (set Actions) String() string {
	var names []string
	for _, a := range allActions {
		if set.Has(a) {
			names = append(names, a.String())
		}
	}
	return strings.Join(names, ",")
}

// MarshalJSON encodes set as a list of names.
func (set Actions) MarshalJSON() ([]byte, error) {
	names := []string{}
	for _, a := range allActions {
		if set.Has(a) {
			names = append(names, a.String())
		}
	}
	return json.Marshal(names)
}

// UnmarshalJSON decodes a list of names.
func (set *Actions) UnmarshalJSON(b []byte) error {
	var names []string
	if err := json.Unmarshal(b, &names); err != nil {
		return err
	}
	s, err := ParseActions(strings.Join(names, ","))
	if err != nil {
		return err
	}
	*set = s
	return nil
}

// ErrBadKey is returned (wrapped) for an invalid key or grant.
var ErrBadKey = errors.New("access: bad key")

// ParseGrant parses a grant target "BUCKET" or "BUCKET/PREFIX" ("" or
// "*": every bucket).
func ParseGrant(target string, allow Actions) (Grant, error) {
	g := Grant{Allow: allow}
	if target == "" || target == "*" {
		return g, nil
	}
	g.Bucket, g.Prefix, _ = strings.Cut(target, "/")
	if g.Bucket == "" || strings.ContainsAny(g.Bucket, " *") {
		return Grant{}, fmt.Errorf("%w: bad bucket in grant %q", ErrBadKey, target)
	}
	return g, nil
}

// Key id and secret shapes: ids are "CK" + 18 characters of [A-Z2-7]
// (S3 ids are 20), secrets 40 characters of base64url.
const (
	keyIDLen     = 20
	keySecretLen = 40
)

// NewKey returns a key with a fresh random id and secret (crypto/rand).
func NewKey(name string, grants []Grant, created, expires time.Time) (Key, error) {
	if name == "" || len(name) > 128 {
		return Key{}, fmt.Errorf("%w: a key needs a name of 1 to 128 bytes", ErrBadKey)
	}
	if len(grants) == 0 {
		return Key{}, fmt.Errorf("%w: a key needs at least one grant", ErrBadKey)
	}
	const idAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
	const secretAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	id := []byte("CK")
	for _, b := range randBytes(keyIDLen - 2) {
		id = append(id, idAlphabet[int(b)%len(idAlphabet)])
	}
	var secret []byte
	for _, b := range randBytes(keySecretLen) {
		secret = append(secret, secretAlphabet[int(b)%len(secretAlphabet)])
	}
	return Key{ID: string(id), Name: name, Secret: string(secret), Grants: grants, Created: created.UTC(), Expires: expires}, nil
}

func randBytes(n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return b
}

// EncodeKey returns the stored form of k (JSON).
func EncodeKey(k Key) ([]byte, error) { return json.Marshal(k) }

// DecodeKey parses the stored form of a key.
func DecodeKey(b []byte) (Key, error) {
	var k Key
	if err := json.Unmarshal(b, &k); err != nil {
		return Key{}, fmt.Errorf("%w: %v", ErrBadKey, err)
	}
	return k, nil
}

// keyTable is an immutable snapshot of the keys, by id.
type keyTable struct {
	byID map[string]*Key
}

// SetKeys replaces the keys the Authorizer knows (the node calls it when
// the log changes them). Safe concurrently with Authenticate.
func (a *Authorizer) SetKeys(keys []Key) {
	t := &keyTable{byID: make(map[string]*Key, len(keys))}
	for i := range keys {
		k := keys[i]
		t.byID[k.ID] = &k
	}
	a.keys.Store(t)
}

// dummySecret is compared against when a key id is unknown, so that a
// wrong id costs the same time as a wrong secret.
const dummySecret = "cairn-no-such-key-0000000000000000000000"

// lookupKey returns the key of id (nil if unknown) and the secret to check
// against: the key's, or a dummy one.
func (a *Authorizer) lookupKey(id string) (*Key, string) {
	if t := a.keys.Load(); t != nil {
		if k := t.byID[id]; k != nil {
			return k, k.Secret
		}
	}
	return nil, dummySecret
}

// authenticateKey checks "ID:SECRET" in time independent of whether ID
// exists and of the secret's content.
func (a *Authorizer) authenticateKey(token string) (Principal, error) {
	id, secret, _ := strings.Cut(token, ":")
	k, want := a.lookupKey(id)
	gs, ws := sha256.Sum256([]byte(secret)), sha256.Sum256([]byte(want))
	if subtle.ConstantTimeCompare(gs[:], ws[:]) != 1 || k == nil {
		a.fail(failBadKey)
		return Principal{}, fmt.Errorf("%w: unknown access key or wrong secret", ErrForbidden)
	}
	return a.keyPrincipal(k)
}

// keyPrincipal returns the principal of a key whose secret was checked.
func (a *Authorizer) keyPrincipal(k *Key) (Principal, error) {
	if !k.Expires.IsZero() && !a.now().Before(k.Expires) {
		a.fail(failExpired)
		return Principal{}, fmt.Errorf("%w: access key %s expired at %s", ErrForbidden, k.ID, k.Expires.UTC().Format(time.RFC3339))
	}
	return Principal{Name: k.ID, key: k}, nil
}

// SecretFor returns the secret that signs requests of access key id (the
// admin key for AdminKeyID) and the principal it authenticates, for
// signature verifiers (SigV4). ok is false for an unknown id; the secret
// is then a dummy one, to compute a signature with all the same.
func (a *Authorizer) SecretFor(id string) (secret string, ok bool) {
	if id == AdminKeyID {
		return a.adminKey, true
	}
	k, s := a.lookupKey(id)
	return s, k != nil
}

// PrincipalFor returns the principal of access key id after a signature
// made with its secret was verified: ErrForbidden if the key is unknown
// (revoked since) or expired.
func (a *Authorizer) PrincipalFor(id string) (Principal, error) {
	if id == AdminKeyID {
		return adminPrincipal, nil
	}
	k, _ := a.lookupKey(id)
	if k == nil {
		a.fail(failBadKey)
		return Principal{}, fmt.Errorf("%w: unknown access key", ErrForbidden)
	}
	return a.keyPrincipal(k)
}

// AdminKeyID is the access key id under which the admin key signs
// requests (SigV4, signed URLs): the admin key is its secret.
const AdminKeyID = "admin"

// allows reports whether key k allows act on res.
func (k *Key) allows(act Action, res Resource) bool {
	for i := range k.Grants {
		g := &k.Grants[i]
		if !g.Allow.Has(act) {
			continue
		}
		if res.Bucket == "" {
			// Cluster-wide: listing buckets needs any grant with list;
			// nothing else cluster-wide is open to access keys.
			if act == ActionList {
				return true
			}
			continue
		}
		if g.Bucket != "" && g.Bucket != res.Bucket {
			continue
		}
		if act == ActionAdmin && res.Path == "" && g.Prefix == "" {
			return true
		}
		if strings.HasPrefix(res.Path, g.Prefix) {
			return true
		}
	}
	return false
}

// SeesBucket reports whether p lists bucket (owned by owner) among its
// buckets: the admin key sees every bucket; a key the buckets it owns,
// those it has a grant on by name, and every bucket when it may read or
// list them all.
func (p Principal) SeesBucket(bucket, owner string) bool {
	if p.Admin {
		return true
	}
	if p.key == nil {
		return false
	}
	if owner == p.key.ID {
		return true
	}
	for _, g := range p.key.Grants {
		if g.Bucket == bucket || g.Bucket == "" && (g.Allow.Has(ActionRead) || g.Allow.Has(ActionList)) {
			return true
		}
	}
	return false
}

// CanonicalID is the S3 canonical user id of p: its access key id, or
// AdminKeyID for the admin key ("" for anonymous).
func (p Principal) CanonicalID() string {
	if p.Admin {
		return AdminKeyID
	}
	return p.Name
}

// DisplayName is the key's name (S3's owner display name).
func (p Principal) DisplayName() string {
	if p.key != nil {
		return p.key.Name
	}
	return p.Name
}

// KeyName returns the name of access key id ("admin" for AdminKeyID), or
// id itself when the key is unknown.
func (a *Authorizer) KeyName(id string) string {
	if id == AdminKeyID {
		return AdminKeyID
	}
	if k, _ := a.lookupKey(id); k != nil {
		return k.Name
	}
	return id
}
