package fastpathtest

import (
	"crypto/tls"
	"io"
	"net"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cairn-fs/cairn/internal/frontend/httpapi/fastpath"
)

// Case is one request of the contract test.
type Case struct {
	Name string
	// Raw is the request's bytes, sent alone on a new connection, which
	// is then half-closed: everything the server sends until it closes is
	// its answer.
	Raw string
	// Fast: the fast path answers it (else it hands it off).
	Fast bool
	// Want is the status net/http answers with, such as "200".
	Want string
}

// Servers are the two servers Run compares.
type Servers struct {
	// Fast is the fast path under test: its Counts tell which requests
	// it answered.
	Fast *fastpath.Server
	// FastAddr is where Fast serves (falling back to net/http).
	FastAddr string
	// SlowAddr is where net/http alone serves the same API.
	SlowAddr string
	// Mask, if set, masks what else may differ between two answers
	// besides the Date value (such as a per-request id), applied to both.
	Mask func(string) string
	// TLS, if set, is the client configuration to reach both over TLS.
	TLS *tls.Config
}

// Run sends each case to both servers, as a subtest, and requires the
// same bytes back (the Date value aside, and what Servers.Mask masks),
// net/http's answer to have the status the case wants, and the fast path
// to have answered it if and only if the case says so (no silent
// hand-off).
func Run(t *testing.T, s Servers, cases []Case) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			before := s.Fast.Counts()
			slow := ExchangeTLS(t, s.SlowAddr, tc.Raw, s.TLS)
			fast := ExchangeTLS(t, s.FastAddr, tc.Raw, s.TLS)
			after := s.Fast.Counts()
			if got := after.Served - before.Served; (got == 1) != tc.Fast {
				t.Errorf("fast path answered %d requests (handed off %d), want fast=%v",
					got, after.HandedOff-before.HandedOff, tc.Fast)
			}
			if !strings.HasPrefix(slow, "HTTP/1.1 "+tc.Want) && !strings.HasPrefix(slow, "HTTP/1.0 "+tc.Want) {
				t.Errorf("net/http answered %.60q, want status %s", slow, tc.Want)
			}
			if s.Mask != nil {
				slow, fast = s.Mask(slow), s.Mask(fast)
			}
			if MaskDate(slow) != MaskDate(fast) {
				t.Errorf("answers differ\nnet/http:\n%s\nfast path:\n%s", Clip(slow), Clip(fast))
			}
		})
	}
}

// Exchange sends raw on a new connection to addr, half-closes it and
// returns all the server sent until it closed.
func Exchange(t testing.TB, addr, raw string) string {
	t.Helper()
	return ExchangeTLS(t, addr, raw, nil)
}

// ExchangeTLS is Exchange over TLS with the client configuration cfg
// (plain TCP if nil).
func ExchangeTLS(t testing.TB, addr, raw string, cfg *tls.Config) string {
	t.Helper()
	tc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c := tc
	if cfg != nil {
		c = tls.Client(tc, cfg)
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	// The TCP half-close, even over TLS: a close_notify would be data
	// that a server closing after its answer may leave unread, and its
	// close would then reset the connection under the answer (net/http
	// does, on "Connection: close").
	if err := tc.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

var dateField = regexp.MustCompile(`(?m)^Date: [^\r]*\r$`)

// MaskDate replaces the value of every Date field of s.
func MaskDate(s string) string { return dateField.ReplaceAllString(s, "Date: DATE\r") }

// Clip shortens s for an error message.
func Clip(s string) string {
	if len(s) > 1500 {
		return s[:1500] + "…"
	}
	return s
}
