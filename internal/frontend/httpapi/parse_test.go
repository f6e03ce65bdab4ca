package httpapi

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestParseTarget(t *testing.T) {
	long := strings.Repeat("a", MaxNameBytes)
	for _, tc := range []struct {
		in   string
		want target
		err  error
	}{
		{"/", target{}, nil},
		{"/b", target{bucket: "b"}, nil},
		{"/b/", target{bucket: "b", slash: true}, nil},
		{"/b/a", target{bucket: "b", path: "a"}, nil},
		{"/b/a/c.txt", target{bucket: "b", path: "a/c.txt"}, nil},
		{"/b/a/d/", target{bucket: "b", path: "a/d", slash: true}, nil},
		{"/b/" + long, target{bucket: "b", path: long}, nil},
		{"/b/héllo wörld", target{bucket: "b", path: "héllo wörld"}, nil},
		{"/b/..x/x..", target{bucket: "b", path: "..x/x.."}, nil},
		{"", target{}, ErrBadPath},
		{"b/a", target{}, ErrBadPath},
		{"*", target{}, ErrBadPath},
		{"//", target{}, ErrBadPath},
		{"/b//a", target{}, ErrBadPath},
		{"/b/a//", target{}, ErrBadPath},
		{"/b/./a", target{}, ErrBadPath},
		{"/b/../a", target{}, ErrBadPath},
		{"/b/a/..", target{}, ErrBadPath},
		{"/b/a/../", target{}, ErrBadPath},
		{"/../a", target{}, ErrBadPath},
		{"/b/a\x00b", target{}, ErrBadPath},
		{"/b/a\nb", target{}, ErrBadPath},
		{"/b/a\x7fb", target{}, ErrBadPath},
		{"/b/\xff\xfe", target{}, ErrBadPath},
		{"/b/" + long + "x", target{}, ErrNameTooLong},
		{"/b/" + strings.Repeat("abcdefgh/", 455) + "x", target{}, ErrPathTooLong},
	} {
		got, err := parseTarget(tc.in)
		if tc.err != nil {
			if !errors.Is(err, tc.err) {
				t.Errorf("parseTarget(%.40q): err %v, want %v", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("parseTarget(%.40q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
}

func TestParseTargetNoAllocs(t *testing.T) {
	if a := testing.AllocsPerRun(100, func() { _, _ = parseTarget("/bucket/dir/file.html") }); a != 0 {
		t.Fatalf("parseTarget allocates %v times", a)
	}
}

func TestValidBucketName(t *testing.T) {
	for name, want := range map[string]bool{
		"abc": true, "my-bucket.example": true, "a1b": true,
		"ab": false, strings.Repeat("a", 64): false, "Abc": false, "-ab": false, "ab-": false,
		"a..b": false, "_cairn": false, "a_b": false, "a/b": false, "": false,
	} {
		if got := validBucketName(name); got != want {
			t.Errorf("validBucketName(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestParseRange(t *testing.T) {
	for _, tc := range []struct {
		h    string
		size int64
		want byteRange
		kind rangeKind
	}{
		{"", 100, byteRange{}, rangeNone},
		{"bytes=0-9", 100, byteRange{0, 10}, rangeOne},
		{"bytes=10-", 100, byteRange{10, 90}, rangeOne},
		{"bytes=-10", 100, byteRange{90, 10}, rangeOne},
		{"bytes=-1000", 100, byteRange{0, 100}, rangeOne},
		{"bytes=90-1000", 100, byteRange{90, 10}, rangeOne},
		{"bytes=99-99", 100, byteRange{99, 1}, rangeOne},
		{"Bytes= 5 - 6 ", 100, byteRange{5, 2}, rangeOne},
		{"bytes=0-99999999999999999999999", 100, byteRange{0, 100}, rangeOne},
		{"bytes=100-", 100, byteRange{}, rangeUnsatisfiable},
		{"bytes=100-200", 100, byteRange{}, rangeUnsatisfiable},
		{"bytes=-0", 100, byteRange{}, rangeUnsatisfiable},
		{"bytes=0-1,5-6", 100, byteRange{}, rangeNone},
		{"bytes=5-1", 100, byteRange{}, rangeNone},
		{"bytes=a-b", 100, byteRange{}, rangeNone},
		{"bytes=-", 100, byteRange{}, rangeNone},
		{"bytes=1", 100, byteRange{}, rangeNone},
		{"bytes=--1", 100, byteRange{}, rangeNone},
		{"items=0-1", 100, byteRange{}, rangeNone},
		{"bytes=0-0", 0, byteRange{}, rangeNone},
	} {
		got, kind := parseRange(tc.h, tc.size)
		if got != tc.want || kind != tc.kind {
			t.Errorf("parseRange(%q, %d) = %v, %v; want %v, %v", tc.h, tc.size, got, kind, tc.want, tc.kind)
		}
	}
}

func TestEtagMatch(t *testing.T) {
	for _, tc := range []struct {
		h, etag string
		weak    bool
		want    bool
	}{
		{`"abc"`, "abc", false, true},
		{`"abc"`, "abd", false, false},
		{`W/"abc"`, "abc", true, true},
		{`W/"abc"`, "abc", false, false},
		{`"x", "abc"`, "abc", false, true},
		{`"x",W/"abc"`, "abc", true, true},
		{` "x" ,  "y"`, "abc", true, false},
		{`*`, "abc", false, true},
		{`*`, "", true, true},
		{`abc`, "abc", true, false},
		{`"abc`, "abc", true, false},
		{`""`, "", true, false},
		{``, "abc", true, false},
	} {
		if got := etagMatch(tc.h, tc.etag, tc.weak); got != tc.want {
			t.Errorf("etagMatch(%q, %q, weak=%v) = %v, want %v", tc.h, tc.etag, tc.weak, got, tc.want)
		}
	}
}

func TestEvalConditions(t *testing.T) {
	mod := time.Date(2024, 1, 2, 3, 4, 5, 600, time.UTC)
	before := mod.Add(-time.Hour).Format(http.TimeFormat)
	same := mod.Format(http.TimeFormat)
	after := mod.Add(time.Hour).Format(http.TimeFormat)
	for _, tc := range []struct {
		name string
		hdr  map[string]string
		want condResult
	}{
		{"none", nil, condProceed},
		{"inm match", map[string]string{"If-None-Match": `"e"`}, condNotModified},
		{"inm weak match", map[string]string{"If-None-Match": `W/"e"`}, condNotModified},
		{"inm star", map[string]string{"If-None-Match": `*`}, condNotModified},
		{"inm miss", map[string]string{"If-None-Match": `"x"`}, condProceed},
		{"ims same", map[string]string{"If-Modified-Since": same}, condNotModified},
		{"ims after", map[string]string{"If-Modified-Since": after}, condNotModified},
		{"ims before", map[string]string{"If-Modified-Since": before}, condProceed},
		{"ims garbage", map[string]string{"If-Modified-Since": "yesterday"}, condProceed},
		{"inm miss wins over ims", map[string]string{"If-None-Match": `"x"`, "If-Modified-Since": after}, condProceed},
		{"inm match wins over ims", map[string]string{"If-None-Match": `"e"`, "If-Modified-Since": before}, condNotModified},
		{"im match", map[string]string{"If-Match": `"e"`}, condProceed},
		{"im weak never matches", map[string]string{"If-Match": `W/"e"`}, condPreconditionFailed},
		{"im miss", map[string]string{"If-Match": `"x"`}, condPreconditionFailed},
		{"im star", map[string]string{"If-Match": `*`}, condProceed},
		{"ius before", map[string]string{"If-Unmodified-Since": before}, condPreconditionFailed},
		{"ius same", map[string]string{"If-Unmodified-Since": same}, condProceed},
		{"im match overrides ius", map[string]string{"If-Match": `"e"`, "If-Unmodified-Since": before}, condProceed},
		{"im ok then inm", map[string]string{"If-Match": `"e"`, "If-None-Match": `"e"`}, condNotModified},
	} {
		h := http.Header{}
		for k, v := range tc.hdr {
			h.Set(k, v)
		}
		rh := readHeadersOf(h)
		if got := evalConditions(&rh, "e", mod); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestIfRangeAllows(t *testing.T) {
	mod := time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		ir   string
		want bool
	}{
		{"", true},
		{`"e"`, true},
		{`"x"`, false},
		{`W/"e"`, false},
		{mod.Format(http.TimeFormat), true},
		{mod.Add(-time.Second).Format(http.TimeFormat), false},
		{"junk", false},
	} {
		if got := ifRangeAllows(tc.ir, "e", mod); got != tc.want {
			t.Errorf("ifRangeAllows(%q) = %v, want %v", tc.ir, got, tc.want)
		}
	}
}

func TestParseMtime(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Time
		ok   bool
	}{
		{"1700000000", time.Unix(1700000000, 0), true},
		{"1700000000.5", time.Unix(1700000000, 500000000), true},
		{"1700000000.123456789", time.Unix(1700000000, 123456789), true},
		{"0", time.Unix(0, 0), true},
		{"-1.5", time.Unix(-1, -500000000), true},
		{"", time.Time{}, false},
		{"1.", time.Time{}, false},
		{".5", time.Time{}, false},
		{"1.1234567890", time.Time{}, false},
		{"1e9", time.Time{}, false},
		{"abc", time.Time{}, false},
		{"99999999999999999999", time.Time{}, false},
	} {
		got, err := parseMtime(tc.in)
		if (err == nil) != tc.ok || (tc.ok && !got.Equal(tc.want)) {
			t.Errorf("parseMtime(%q) = %v, %v; want %v ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrBadRequest) {
			t.Errorf("parseMtime(%q) error %v does not wrap ErrBadRequest", tc.in, err)
		}
	}
}

func TestParseMode(t *testing.T) {
	for in, want := range map[string]int64{"644": 0o644, "0755": 0o755, "7777": 0o7777, "10000": -1, "8": -1, "": -1, "-1": -1} {
		got, err := parseMode(in)
		if want < 0 {
			if err == nil {
				t.Errorf("parseMode(%q) = %o, want error", in, got)
			}
			continue
		}
		if err != nil || int64(got) != want {
			t.Errorf("parseMode(%q) = %o, %v; want %o", in, got, err, want)
		}
	}
}

func TestAcceptsJSON(t *testing.T) {
	for in, want := range map[string]bool{
		"application/json":                    true,
		"Application/JSON; charset=utf-8":     true,
		"text/html, application/json;q=0.9":   true,
		"application/json;q=0":                false,
		"text/html,application/xhtml+xml,*/*": false,
		"":                                    false,
		"application/jsonx":                   false,
	} {
		if got := acceptsJSON(in); got != want {
			t.Errorf("acceptsJSON(%q) = %v, want %v", in, got, want)
		}
	}
}

func TestParseListParams(t *testing.T) {
	for _, tc := range []struct {
		q    map[string][]string
		want listParams
		ok   bool
	}{
		{nil, listParams{limit: 1000}, true},
		{map[string][]string{"limit": {"5"}, "after": {"a/b"}, "recursive": {"1"}, "prefix": {"x"}},
			listParams{limit: 5, after: "a/b", recursive: true, prefix: "x"}, true},
		{map[string][]string{"limit": {"20000"}}, listParams{limit: 10000}, true},
		{map[string][]string{"limit": {"0"}}, listParams{}, false},
		{map[string][]string{"limit": {"x"}}, listParams{}, false},
		{map[string][]string{"recursive": {"yes"}}, listParams{}, false},
		{map[string][]string{"prefix": {"a\x00"}}, listParams{}, false},
		{map[string][]string{"after": {"\xff"}}, listParams{}, false},
	} {
		got, err := parseListParams(tc.q)
		if (err == nil) != tc.ok || (tc.ok && got != tc.want) {
			t.Errorf("parseListParams(%v) = %+v, %v; want %+v ok=%v", tc.q, got, err, tc.want, tc.ok)
		}
	}
}

func TestAppendReprDigest(t *testing.T) {
	// SHA-256 of "abc".
	got := string(appendReprDigest(nil, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"))
	if want := "sha-256=:ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAFa0=:"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	if got := appendReprDigest(nil, "zz"); len(got) != 0 {
		t.Fatalf("bad hex gave %q", got)
	}
}

func TestStoredContentType(t *testing.T) {
	for in, want := range map[string]string{
		"":                                  "",
		"text/css":                          "text/css",
		"application/x-www-form-urlencoded": "",
		"Application/X-WWW-Form-Urlencoded; charset=utf-8": "",
		"multipart/form-data; boundary=x":                  "",
		"image/png":                                        "image/png",
	} {
		if got := storedContentType(in); got != want {
			t.Errorf("storedContentType(%q) = %q, want %q", in, got, want)
		}
	}
}
