package rules

import (
	"fmt"
	"net/netip"
	"strings"
)

// ClientIP returns the client address of a request: the peer address
// (remoteAddr, "ip:port" as in http.Request.RemoteAddr; a bare IP is
// accepted too), unless the peer is in trusted (the --trusted-proxy
// prefixes). Then the X-Forwarded-For values (xForwardedFor, one string per
// header line, each a comma-separated list) are walked from the right,
// skipping trusted addresses, and the first untrusted address is the
// client; if all are trusted, the leftmost is. A malformed entry stops the
// walk and the last good address (the trusted hop that sent it) wins; empty
// list elements are skipped (RFC 9110, 5.6.1). Entries may carry a port
// ("192.0.2.1:4711", "[2001:db8::1]:80").
//
// Addresses from an untrusted peer's X-Forwarded-For are never believed, so
// clients cannot spoof their address. IPv4-mapped IPv6 addresses are
// returned as IPv4, and zones are dropped. The result is invalid
// (IsValid() == false) if remoteAddr cannot be parsed. ClientIP does not
// allocate when trusted is empty, nor in the common cases when it is not.
// It is safe for concurrent use.
func ClientIP(remoteAddr string, xForwardedFor []string, trusted []netip.Prefix) netip.Addr {
	peer, ok := parseEntry(remoteAddr)
	if !ok {
		return netip.Addr{}
	}
	if !isTrusted(peer, trusted) {
		return peer
	}
	last := peer
	for i := len(xForwardedFor) - 1; i >= 0; i-- {
		v := xForwardedFor[i]
		for end := len(v); ; {
			start := strings.LastIndexByte(v[:end], ',') + 1
			if e := trimSpace(v[start:end]); e != "" {
				a, ok := parseEntry(e)
				if !ok {
					return last
				}
				if !isTrusted(a, trusted) {
					return a
				}
				last = a
			}
			if start == 0 {
				break
			}
			end = start - 1
		}
	}
	return last
}

// parseEntry parses "ip", "ip:port" or "[ip]:port" into an unmapped,
// zoneless address. It picks the form by syntax and parses once, because a
// failed netip parse allocates its error.
func parseEntry(s string) (netip.Addr, bool) {
	var a netip.Addr
	if strings.HasPrefix(s, "[") || strings.Count(s, ":") == 1 {
		ap, err := netip.ParseAddrPort(s)
		if err != nil {
			return netip.Addr{}, false
		}
		a = ap.Addr()
	} else {
		var err error
		if a, err = netip.ParseAddr(s); err != nil {
			return netip.Addr{}, false
		}
	}
	return a.Unmap().WithZone(""), true
}

func isTrusted(a netip.Addr, trusted []netip.Prefix) bool {
	for _, p := range trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// ParsePrefixes parses the --trusted-proxy list: CIDR prefixes
// ("10.0.0.0/8", "2001:db8::/32") or bare addresses (taken as /32 or /128).
// Surrounding spaces are ignored; IPv4-mapped IPv6 forms become IPv4 and
// host bits are cleared. An entry that does not parse fails the whole list
// with an error wrapping ErrBadAddress.
func ParsePrefixes(cidrs []string) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(cidrs))
	for _, s := range cidrs {
		p, err := parsePrefix(strings.TrimSpace(s))
		if err != nil {
			return nil, &kindError{kind: ErrBadAddress, msg: fmt.Sprintf("bad ip or cidr %q", s), cause: err}
		}
		out = append(out, p)
	}
	return out, nil
}

// trimSpace trims spaces and tabs, the optional whitespace of HTTP lists.
func trimSpace(s string) string {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}
