package access

import (
	"errors"
	"testing"
)

const key = "0123456789abcdef-admin"

func newAuth(t *testing.T) *Authorizer {
	t.Helper()
	a, err := New(Config{AdminKey: key})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); !errors.Is(err, ErrBadConfig) {
		t.Fatalf("empty key: got %v, want ErrBadConfig", err)
	}
	if _, err := New(Config{AdminKey: "short"}); !errors.Is(err, ErrBadConfig) {
		t.Fatalf("short key: got %v, want ErrBadConfig", err)
	}
	if err := (Config{AdminKey: key}).Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestBearerToken(t *testing.T) {
	for _, tc := range []struct {
		in    string
		token string
		ok    bool
	}{
		{"Bearer abc", "abc", true},
		{"bearer abc", "abc", true},
		{"BEARER   abc  ", "abc", true},
		{"Bearer ", "", false},
		{"Bearer", "", false},
		{"Basic abc", "", false},
		{"Bearerabc", "", false},
		{"", "", false},
	} {
		tok, ok := BearerToken(tc.in)
		if tok != tc.token || ok != tc.ok {
			t.Errorf("BearerToken(%q) = %q, %v; want %q, %v", tc.in, tok, ok, tc.token, tc.ok)
		}
	}
}

func TestAuthenticate(t *testing.T) {
	a := newAuth(t)
	for _, tc := range []struct {
		header string
		admin  bool
		err    error
	}{
		{"", false, nil},
		{"Bearer " + key, true, nil},
		{"bearer " + key, true, nil},
		{"Bearer " + key + "x", false, ErrForbidden},
		{"Bearer " + key[:len(key)-1], false, ErrForbidden},
		{"Bearer nope", false, ErrForbidden},
		{"Basic " + key, false, ErrUnauthenticated},
		{"Bearer ", false, ErrUnauthenticated},
	} {
		p, err := a.Authenticate(tc.header)
		if !errors.Is(err, tc.err) || (tc.err == nil && err != nil) {
			t.Errorf("Authenticate(%q) err = %v, want %v", tc.header, err, tc.err)
		}
		if p.Admin != tc.admin {
			t.Errorf("Authenticate(%q) admin = %v, want %v", tc.header, p.Admin, tc.admin)
		}
	}
}

func TestAuthorize(t *testing.T) {
	a := newAuth(t)
	admin, _ := a.Authenticate("Bearer " + key)
	anon := Principal{}
	other := Principal{Name: "AKID"}
	pub := Resource{Bucket: "b", PublicRead: true}
	priv := Resource{Bucket: "b"}
	for _, tc := range []struct {
		name string
		p    Principal
		act  Action
		res  Resource
		want error
	}{
		{"admin writes private", admin, ActionWrite, priv, nil},
		{"admin admin", admin, ActionAdmin, Resource{}, nil},
		{"anon reads public", anon, ActionRead, pub, nil},
		{"anon lists public", anon, ActionList, pub, nil},
		{"anon writes public", anon, ActionWrite, pub, ErrUnauthenticated},
		{"anon reads private", anon, ActionRead, priv, ErrUnauthenticated},
		{"anon admin", anon, ActionAdmin, Resource{}, ErrUnauthenticated},
		{"unknown principal reads public", other, ActionRead, pub, nil},
		{"unknown principal writes", other, ActionWrite, pub, ErrForbidden},
	} {
		err := a.Authorize(tc.p, tc.act, tc.res)
		if !errors.Is(err, tc.want) || (tc.want == nil && err != nil) {
			t.Errorf("%s: got %v, want %v", tc.name, err, tc.want)
		}
	}
}

func TestActionString(t *testing.T) {
	if ActionList.String() != "list" || Action(99).String() != "action(99)" {
		t.Fatal("Action.String")
	}
}

func TestAuthenticateNoAllocs(t *testing.T) {
	a := newAuth(t)
	h := "Bearer " + key
	allocs := testing.AllocsPerRun(100, func() {
		p, err := a.Authenticate(h)
		if err != nil || !p.Admin {
			t.Fatal("auth failed")
		}
		if err := a.Authorize(p, ActionRead, Resource{Bucket: "b"}); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 0 {
		t.Fatalf("Authenticate+Authorize allocate %v times per call", allocs)
	}
}
