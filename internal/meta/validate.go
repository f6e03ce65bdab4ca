package meta

import (
	"fmt"
	"net/netip"
	"strings"
	"unicode/utf8"
)

// Path limits enforced by ValidatePath.
const (
	MaxNameLen = 255 // bytes in one path segment
	// MaxPathLen bounds a whole path inside a bucket. It is above Linux's
	// PATH_MAX (4096), which bounds one system call's path argument, not
	// the depth of a tree: a mount creates deeper paths one directory at
	// a time, as a local file system allows. The HTTP API still takes
	// paths of at most 4096 bytes (httpapi.MaxPathBytes).
	MaxPathLen = 16384
)

// ValidBucketName checks name against the S3 bucket naming rules: 3-63
// bytes of lowercase letters, digits, '.' and '-'; starts and ends with a
// letter or digit; no "..", ".-" or "-."; not an IPv4 address; none of the
// prefixes or suffixes S3 reserves ("xn--", "sthree-", "amzn-s3-demo-",
// "-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3"). The error wraps
// ErrInvalid and names the rule broken. Pure; safe for concurrent use.
func ValidBucketName(name string) error {
	bad := func(why string) error {
		return fmt.Errorf("%w: bucket name %q %s", ErrInvalid, name, why)
	}
	if len(name) < 3 || len(name) > 63 {
		return bad("must be 3 to 63 characters long")
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '-') {
			return bad(fmt.Sprintf("has character %q: only lowercase letters, digits, '.' and '-' are allowed", c))
		}
	}
	alnum := func(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }
	if !alnum(name[0]) || !alnum(name[len(name)-1]) {
		return bad("must start and end with a letter or digit")
	}
	for _, s := range []string{"..", ".-", "-."} {
		if strings.Contains(name, s) {
			return bad(fmt.Sprintf("must not contain %q", s))
		}
	}
	if a, err := netip.ParseAddr(name); err == nil && a.Is4() {
		return bad("must not be formatted as an IP address")
	}
	for _, p := range []string{"xn--", "sthree-", "amzn-s3-demo-"} {
		if strings.HasPrefix(name, p) {
			return bad(fmt.Sprintf("must not start with the reserved prefix %q", p))
		}
	}
	for _, s := range []string{"-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3"} {
		if strings.HasSuffix(name, s) {
			return bad(fmt.Sprintf("must not end with the reserved suffix %q", s))
		}
	}
	return nil
}

// ValidatePath checks a slash-separated path inside a bucket: not empty, no
// leading or trailing '/', no empty, "." or ".." segment, no NUL byte,
// valid UTF-8, each segment at most MaxNameLen bytes and the whole at most
// MaxPathLen. The error wraps ErrInvalid and names the problem. Pure; safe
// for concurrent use.
func ValidatePath(p string) error {
	bad := func(why string) error {
		return fmt.Errorf("%w: path %q: %s", ErrInvalid, truncate(p), why)
	}
	switch {
	case p == "":
		return bad("empty")
	case len(p) > MaxPathLen:
		return bad(fmt.Sprintf("longer than %d bytes", MaxPathLen))
	case !utf8.ValidString(p):
		return bad("not valid UTF-8")
	case strings.IndexByte(p, 0) >= 0:
		return bad("contains a NUL byte")
	case p[0] == '/':
		return bad("starts with '/'")
	case p[len(p)-1] == '/':
		return bad("ends with '/'")
	}
	for seg := range strings.SplitSeq(p, "/") {
		switch {
		case seg == "":
			return bad("has an empty segment (\"//\")")
		case seg == "." || seg == "..":
			return bad(fmt.Sprintf("has a %q segment", seg))
		case len(seg) > MaxNameLen:
			return bad(fmt.Sprintf("has a segment longer than %d bytes", MaxNameLen))
		}
	}
	return nil
}

func truncate(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}
