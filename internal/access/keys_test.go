package access

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestKeysAuthenticateAndGrants(t *testing.T) {
	now := time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC)
	a, err := New(Config{AdminKey: key, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	rw, _ := ParseActions("read,list,write")
	g1, _ := ParseGrant("site/uploads/", rw)
	g2, _ := ParseGrant("logs", ActionsOf(ActionRead))
	k1, err := NewKey("deploy", []Grant{g1, g2}, now, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	all, _ := ParseGrant("", ActionsOf(ActionRead, ActionList, ActionWrite, ActionDelete, ActionAdmin))
	k2, _ := NewKey("ops", []Grant{all}, now, now.Add(time.Hour))
	if len(k1.ID) != 20 || !strings.HasPrefix(k1.ID, "CK") || len(k1.Secret) != 40 || k1.ID == k2.ID {
		t.Fatalf("key shapes: %+v %+v", k1, k2)
	}
	// Round trip through the stored form.
	b, _ := EncodeKey(k1)
	if k, err := DecodeKey(b); err != nil || k.Grants[0].Allow != rw || k.Grants[0].Prefix != "uploads/" {
		t.Fatalf("decode: %+v %v", k, err)
	}
	a.SetKeys([]Key{k1, k2})

	p1, err := a.Authenticate("Bearer " + k1.ID + ":" + k1.Secret)
	if err != nil || p1.Name != k1.ID || p1.Admin {
		t.Fatalf("key auth: %+v %v", p1, err)
	}
	basic := func(u, p string) string { return "Basic " + base64.StdEncoding.EncodeToString([]byte(u+":"+p)) }
	if p, err := a.Authenticate(basic(k1.ID, k1.Secret)); err != nil || p.Name != k1.ID {
		t.Fatalf("Basic with a key: %+v %v", p, err)
	}
	if p, err := a.Authenticate(basic("anyone", key)); err != nil || !p.Admin {
		t.Fatalf("Basic with the admin key: %+v %v", p, err)
	}
	if _, err := a.Authenticate(basic(k1.ID, "wrong")); !errors.Is(err, ErrForbidden) {
		t.Fatalf("Basic with a wrong secret: %v", err)
	}
	for _, bad := range []string{k1.ID + ":" + k2.Secret, "CKNOSUCHKEY000000000:" + k1.Secret, k1.ID + ":", k1.ID} {
		if _, err := a.Authenticate("Bearer " + bad); !errors.Is(err, ErrForbidden) {
			t.Errorf("Authenticate(%q) = %v, want ErrForbidden", bad, err)
		}
	}
	for _, tc := range []struct {
		act  Action
		res  Resource
		want bool
	}{
		{ActionWrite, Resource{Bucket: "site", Path: "uploads/a.jpg"}, true},
		{ActionRead, Resource{Bucket: "site", Path: "uploads/a.jpg"}, true},
		{ActionWrite, Resource{Bucket: "site", Path: "index.html"}, false},
		{ActionDelete, Resource{Bucket: "site", Path: "uploads/a.jpg"}, false},
		{ActionRead, Resource{Bucket: "logs", Path: "x"}, true},
		{ActionWrite, Resource{Bucket: "logs", Path: "x"}, false},
		{ActionRead, Resource{Bucket: "other", Path: "x"}, false},
		{ActionAdmin, Resource{Bucket: "site"}, false},
		{ActionList, Resource{}, true},
		{ActionAdmin, Resource{}, false},
	} {
		err := a.Authorize(p1, tc.act, tc.res)
		if (err == nil) != tc.want {
			t.Errorf("deploy %s %+v: %v, want allowed=%v", tc.act, tc.res, err, tc.want)
		}
		if err != nil && !errors.Is(err, ErrForbidden) {
			t.Errorf("deploy %s %+v: %v, want ErrForbidden", tc.act, tc.res, err)
		}
	}
	p2, err := a.Authenticate("Bearer " + k2.ID + ":" + k2.Secret)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Authorize(p2, ActionAdmin, Resource{Bucket: "new"}); err != nil {
		t.Fatalf("a key with admin on every bucket creates buckets: %v", err)
	}
	if err := a.Authorize(p2, ActionAdmin, Resource{}); !errors.Is(err, ErrForbidden) {
		t.Fatalf("cluster administration is the admin key's: %v", err)
	}
	if !p2.SeesBucket("any", "") || p1.SeesBucket("other", "") || !p1.SeesBucket("logs", "") || !p1.SeesBucket("mine", k1.ID) {
		t.Fatal("SeesBucket")
	}
	if err := a.Authorize(p1, ActionDelete, Resource{Bucket: "mine", Path: "x", Owner: k1.ID}); err != nil {
		t.Fatalf("the owner of a bucket may do everything in it: %v", err)
	}
	if err := a.Authorize(p1, ActionAdmin, Resource{Owner: k1.ID}); !errors.Is(err, ErrForbidden) {
		t.Fatalf("owning a bucket is not cluster administration: %v", err)
	}
	// Expiry.
	now = now.Add(2 * time.Hour)
	if _, err := a.Authenticate("Bearer " + k2.ID + ":" + k2.Secret); !errors.Is(err, ErrForbidden) || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("expired key: %v", err)
	}
	// Revocation: the key is gone from the table.
	a.SetKeys([]Key{k2})
	if _, err := a.Authenticate("Bearer " + k1.ID + ":" + k1.Secret); !errors.Is(err, ErrForbidden) {
		t.Fatalf("revoked key: %v", err)
	}
	if s, ok := a.SecretFor(AdminKeyID); !ok || s != key {
		t.Fatal("SecretFor(admin)")
	}
	if _, ok := a.SecretFor(k1.ID); ok {
		t.Fatal("SecretFor(revoked)")
	}
	f := a.Failures()
	if f[failBadKey] == 0 || f[failExpired] == 0 || f[failDenied] == 0 {
		t.Fatalf("failures not counted: %v", f)
	}
}

func TestParseActions(t *testing.T) {
	if s, err := ParseActions("read, LIST,admin"); err != nil || s.String() != "read,list,admin" {
		t.Fatalf("%v %v", s, err)
	}
	for _, bad := range []string{"", "read,fly", ","} {
		if _, err := ParseActions(bad); !errors.Is(err, ErrBadKey) {
			t.Errorf("ParseActions(%q) = %v", bad, err)
		}
	}
	if _, err := ParseGrant("/x", DefaultActions); !errors.Is(err, ErrBadKey) {
		t.Error("grant without bucket")
	}
}
