package meta

import (
	"errors"
	"strings"
	"testing"
)

func TestValidBucketName(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"abc", true},
		{"my-bucket.example.com", true},
		{"a1b", true},
		{"123", true},
		{strings.Repeat("a", 63), true},
		{"ab", false},
		{strings.Repeat("a", 64), false},
		{"ABC", false},
		{"a_b", false},
		{"a b", false},
		{"-abc", false},
		{"abc-", false},
		{".abc", false},
		{"abc.", false},
		{"a..b", false},
		{"a.-b", false},
		{"a-.b", false},
		{"192.168.5.4", false},
		{"192.168.5", true},
		{"xn--abc", false},
		{"sthree-abc", false},
		{"amzn-s3-demo-x", false},
		{"abc-s3alias", false},
		{"abc--ol-s3", false},
		{"abc.mrap", false},
		{"abc--x-s3", false},
		{"abc--table-s3", false},
		{"ümlaut", false},
	} {
		err := ValidBucketName(tc.name)
		if (err == nil) != tc.ok {
			t.Errorf("ValidBucketName(%q) = %v, want ok=%v", tc.name, err, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrInvalid) {
			t.Errorf("ValidBucketName(%q) = %v, does not wrap ErrInvalid", tc.name, err)
		}
	}
}

func TestValidatePath(t *testing.T) {
	long := strings.Repeat("a", MaxNameLen)
	for _, tc := range []struct {
		path string
		want string // "" = valid, else a substring of the error
	}{
		{"a", ""},
		{"a/b/c.txt", ""},
		{"img.png", ""},
		{"...", ""},
		{".hidden/x", ""},
		{"日本/語", ""},
		{long, ""},
		{long + "a", "longer than 255"},
		{strings.Repeat(long+"/", 70)[:MaxPathLen-1], ""},
		{strings.Repeat("a/", 2047) + "ab", ""},
		{strings.Repeat("a/", MaxPathLen/2+1), "longer than 16384"},
		{"", "empty"},
		{"/a", "starts with '/'"},
		{"a/", "ends with '/'"},
		{"a//b", "empty segment"},
		{"./a", `"." segment`},
		{"a/../b", `".." segment`},
		{"..", `".." segment`},
		{"a\x00b", "NUL"},
		{"a\xffb", "UTF-8"},
	} {
		err := ValidatePath(tc.path)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("ValidatePath(%.20q) = %v, want ok", tc.path, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("ValidatePath(%.20q) = %v, want error containing %q", tc.path, err, tc.want)
		case err != nil && !errors.Is(err, ErrInvalid):
			t.Errorf("ValidatePath(%.20q) = %v, does not wrap ErrInvalid", tc.path, err)
		}
	}
}
