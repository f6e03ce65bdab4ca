package node

import (
	"net"
	"testing"
)

func TestAdvertisedURL(t *testing.T) {
	tcp := func(s string) net.Addr { a, err := net.ResolveTCPAddr("tcp", s); must(t, err); return a }
	for _, c := range []struct {
		addr, host, want string
	}{
		{"127.0.0.1:8080", "10.0.0.5", "http://127.0.0.1:8080"},
		{"0.0.0.0:8080", "10.0.0.5", "http://10.0.0.5:8080"},
		{"[::]:9080", "10.0.0.5", "http://10.0.0.5:9080"},
		{"[::]:9080", "fd00::5", "http://[fd00::5]:9080"},
		{"10.1.2.3:7070", "10.0.0.5", "http://10.1.2.3:7070"},
	} {
		if got := advertisedURL(tcp(c.addr), c.host); got != c.want {
			t.Errorf("advertisedURL(%s, %s) = %s, want %s", c.addr, c.host, got, c.want)
		}
	}
	if !isWildcard(tcp("0.0.0.0:1")) || !isWildcard(tcp("[::]:1")) || isWildcard(tcp("127.0.0.1:1")) {
		t.Error("isWildcard")
	}
}

// TestLocalURL: the URL printed for the operator reaches the listener from
// its own machine (loopback for a wildcard), IPv6 hosts bracketed.
func TestLocalURL(t *testing.T) {
	tcp := func(s string) net.Addr { a, err := net.ResolveTCPAddr("tcp", s); must(t, err); return a }
	for _, c := range []struct{ addr, want string }{
		{"0.0.0.0:8080", "http://127.0.0.1:8080"},
		{"[::]:8080", "http://127.0.0.1:8080"},
		{":8080", "http://127.0.0.1:8080"},
		{"127.0.0.1:8080", "http://127.0.0.1:8080"},
		{"10.0.0.1:9000", "http://10.0.0.1:9000"},
		{"[::1]:8080", "http://[::1]:8080"},
		{"[fd00::2]:8080", "http://[fd00::2]:8080"},
	} {
		if got := localURL(tcp(c.addr)); got != c.want {
			t.Errorf("localURL(%s) = %s, want %s", c.addr, got, c.want)
		}
	}
}

func TestParseAdvertise(t *testing.T) {
	for in, want := range map[string]string{
		"http://web1.example.com:8080": "http://web1.example.com:8080",
		"http://10.0.0.5:8080/":        "http://10.0.0.5:8080",
		"http://[fd00::5]:8080":        "http://[fd00::5]:8080",
		"https://web1:8080":            "https://web1:8080", // needs --tls-cert (checked at start)
		"ftp://web1:8080":              "",
		"web1:8080":                    "",
		"http://web1:8080/files":       "",
		"http://user@web1:8080":        "",
		"http://web1:8080?x=1":         "",
		"http://":                      "",
	} {
		got, err := parseAdvertise(in)
		if want == "" {
			if err == nil {
				t.Errorf("parseAdvertise(%q) = %q, want an error", in, got)
			}
			continue
		}
		if err != nil || got != want {
			t.Errorf("parseAdvertise(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if h := hostOf("http://[fd00::5]:8080"); h != "fd00::5" {
		t.Errorf("hostOf = %q", h)
	}
}

func TestDefaultHost(t *testing.T) {
	ipn := func(s string) net.Addr { ip, n, err := net.ParseCIDR(s); must(t, err); n.IP = ip; return n }
	cases := []struct {
		addrs []net.Addr
		want  string
	}{
		{[]net.Addr{ipn("127.0.0.1/8"), ipn("203.0.113.7/24"), ipn("192.168.1.20/24")}, "192.168.1.20"},
		{[]net.Addr{ipn("127.0.0.1/8"), ipn("fe80::1/64"), ipn("203.0.113.7/24")}, "203.0.113.7"},
		// IPv4 before IPv6 within a class; private before other.
		{[]net.Addr{ipn("fd00::2/64"), ipn("10.0.0.5/8")}, "10.0.0.5"},
		{[]net.Addr{ipn("127.0.0.1/8"), ipn("192.0.2.2/24"), ipn("::1/128"), ipn("fd00::2/64"), ipn("fe80::fc:ff:fe00:1/64")}, "fd00::2"},
		{[]net.Addr{ipn("2001:db8::7/64"), ipn("203.0.113.7/24")}, "203.0.113.7"},
		{[]net.Addr{ipn("::1/128"), ipn("2001:db8::7/64")}, "2001:db8::7"},
		{[]net.Addr{ipn("127.0.0.1/8")}, "127.0.0.1"},
		{nil, "127.0.0.1"},
	}
	for _, c := range cases {
		if got := defaultHost(c.addrs); got != c.want {
			t.Errorf("defaultHost(%v) = %s, want %s", c.addrs, got, c.want)
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
