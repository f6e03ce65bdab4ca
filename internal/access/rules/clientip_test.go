package rules

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"
)

func TestClientIP(t *testing.T) {
	trusted := mustPrefixes(t, "10.0.0.0/8", "2001:db8:ffff::/48", "192.0.2.1")
	tests := []struct {
		name    string
		remote  string
		xff     []string
		trusted []netip.Prefix
		want    string // "" = invalid
	}{
		{"no proxies", "198.51.100.7:5555", nil, nil, "198.51.100.7"},
		{"no proxies ignores xff", "198.51.100.7:5555", []string{"1.2.3.4"}, nil, "198.51.100.7"},
		{"untrusted peer xff spoof ignored", "198.51.100.7:5555", []string{"10.1.1.1, 1.2.3.4"}, trusted, "198.51.100.7"},
		{"trusted peer, one hop", "10.0.0.5:80", []string{"203.0.113.9"}, trusted, "203.0.113.9"},
		{"trusted peer, no xff", "10.0.0.5:80", nil, trusted, "10.0.0.5"},
		{"trusted peer, empty xff", "10.0.0.5:80", []string{""}, trusted, "10.0.0.5"},
		{"chain of proxies", "10.0.0.5:80", []string{"203.0.113.9, 10.2.2.2, 10.3.3.3"}, trusted, "203.0.113.9"},
		{"spoofed left part ignored", "10.0.0.5:80", []string{"6.6.6.6, 203.0.113.9, 10.2.2.2"}, trusted, "203.0.113.9"},
		{"spoofed trusted entry left of client", "10.0.0.5:80", []string{"10.9.9.9, 203.0.113.9"}, trusted, "203.0.113.9"},
		{"several headers, rightmost last", "10.0.0.5:80", []string{"6.6.6.6, 203.0.113.9", "10.4.4.4"}, trusted, "203.0.113.9"},
		{"all trusted: leftmost", "10.0.0.5:80", []string{"10.1.1.1, 192.0.2.1", "10.2.2.2"}, trusted, "10.1.1.1"},
		{"malformed stops walk", "10.0.0.5:80", []string{"203.0.113.9, garbage, 10.2.2.2"}, trusted, "10.2.2.2"},
		{"malformed right away", "10.0.0.5:80", []string{"unknown"}, trusted, "10.0.0.5"},
		{"empty elements skipped", "10.0.0.5:80", []string{"203.0.113.9,, 10.2.2.2 ,"}, trusted, "203.0.113.9"},
		{"entry with port", "10.0.0.5:80", []string{"203.0.113.9:4711"}, trusted, "203.0.113.9"},
		{"v6 peer", "[2001:db8:1::5]:443", []string{"203.0.113.9"}, trusted, "2001:db8:1::5"},
		{"v6 trusted peer, v6 client", "[2001:db8:ffff::1]:443", []string{"2001:db8:2::7"}, trusted, "2001:db8:2::7"},
		{"v6 entry with port", "[2001:db8:ffff::1]:443", []string{"[2001:db8:2::7]:80"}, trusted, "2001:db8:2::7"},
		{"mapped v4 peer unmapped", "[::ffff:198.51.100.7]:5555", nil, nil, "198.51.100.7"},
		{"mapped v4 peer trusted by v4 prefix", "[::ffff:10.0.0.5]:80", []string{"203.0.113.9"}, trusted, "203.0.113.9"},
		{"mapped v4 in xff", "10.0.0.5:80", []string{"::ffff:203.0.113.9"}, trusted, "203.0.113.9"},
		{"bare ip remote", "198.51.100.7", nil, nil, "198.51.100.7"},
		{"zone dropped", "[fe80::1%eth0]:80", nil, nil, "fe80::1"},
		{"bad remote", "not-an-address", []string{"1.2.3.4"}, trusted, ""},
		{"empty remote", "", nil, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ClientIP(tt.remote, tt.xff, tt.trusted)
			if tt.want == "" {
				if got.IsValid() {
					t.Fatalf("ClientIP = %v, want invalid", got)
				}
				return
			}
			if want := netip.MustParseAddr(tt.want); got != want {
				t.Fatalf("ClientIP = %v, want %v", got, want)
			}
		})
	}
}

func TestClientIPAllocs(t *testing.T) {
	trusted := mustPrefixes(t, "10.0.0.0/8")
	xff := []string{"6.6.6.6, 203.0.113.9, 10.2.2.2"}
	if n := testing.AllocsPerRun(100, func() { ClientIP("198.51.100.7:5555", xff, nil) }); n != 0 {
		t.Errorf("no trusted proxies: %v allocs, want 0", n)
	}
	if n := testing.AllocsPerRun(100, func() { ClientIP("10.0.0.5:80", xff, trusted) }); n != 0 {
		t.Errorf("chain of proxies: %v allocs, want 0", n)
	}
}

func TestParsePrefixes(t *testing.T) {
	tests := []struct {
		in      []string
		want    []string
		wantErr string
	}{
		{nil, []string{}, ""},
		{[]string{"10.0.0.0/8", " 192.0.2.7 ", "2001:db8::/32", "2001:db8::1"},
			[]string{"10.0.0.0/8", "192.0.2.7/32", "2001:db8::/32", "2001:db8::1/128"}, ""},
		{[]string{"10.1.2.3/8"}, []string{"10.0.0.0/8"}, ""},
		{[]string{"::ffff:10.0.0.0/104"}, []string{"10.0.0.0/8"}, ""},
		{[]string{"::ffff:192.0.2.7"}, []string{"192.0.2.7/32"}, ""},
		{[]string{"10.0.0.0/8", "nope"}, nil, `rules: bad ip or cidr "nope"`},
		{[]string{"10.0.0.0/33"}, nil, `bad ip or cidr "10.0.0.0/33"`},
		{[]string{""}, nil, `bad ip or cidr ""`},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.in, ","), func(t *testing.T) {
			got, err := ParsePrefixes(tt.in)
			if tt.wantErr != "" {
				if err == nil || !errors.Is(err, ErrBadAddress) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParsePrefixes = %v, %v; want error with %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var s []string
			for _, p := range got {
				s = append(s, p.String())
			}
			if !slices.Equal(s, tt.want) && !(len(s) == 0 && len(tt.want) == 0) {
				t.Fatalf("ParsePrefixes = %v, want %v", s, tt.want)
			}
		})
	}
}

func mustPrefixes(t testing.TB, s ...string) []netip.Prefix {
	t.Helper()
	p, err := ParsePrefixes(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
