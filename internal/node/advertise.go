package node

import (
	"fmt"
	"net"
	"net/url"
	"strings"
)

// The URLs a node records in the cluster map (meta.Node.URL, ClusterURL)
// are how its peers and the clients sent to it reach it. They come from the
// listeners' addresses, except:
//
//   - --advertise URL sets the public URL outright (a node behind NAT, a
//     name in DNS, a port mapped by a container runtime);
//   - a listener bound to every interface (0.0.0.0, ::, or an empty host)
//     has no address another machine can use: the node advertises the
//     advertised public host if --advertise was given, else its first
//     private (RFC 1918 / ULA) address, else its first non-loopback one,
//     else 127.0.0.1, and logs which it chose.

// advertisedURL returns the http URL for a listener bound to addr, with
// host standing in for an unspecified listen host.
func advertisedURL(addr net.Addr, host string) string {
	h, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return "http://" + addr.String()
	}
	if ip := net.ParseIP(h); h == "" || (ip != nil && ip.IsUnspecified()) {
		h = host
	}
	return "http://" + net.JoinHostPort(h, port)
}

// parseAdvertise checks an --advertise value: an http URL with a host
// and no path, query or user; it returns it without a trailing slash.
func parseAdvertise(s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "http" || u.Host == "" || u.User != nil ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("node: --advertise %q: want http://HOST[:PORT] (the URL peers and clients reach this node at)", s)
	}
	return strings.TrimSuffix(s, "/"), nil
}

// hostOf returns the host part of an http URL made by parseAdvertise.
func hostOf(u string) string {
	pu, err := url.Parse(u)
	if err != nil {
		return ""
	}
	return pu.Hostname()
}

// defaultHost picks the address advertised for a wildcard listener when no
// --advertise was given: the first private address, else the first
// non-loopback one, else 127.0.0.1.
func defaultHost(addrs []net.Addr) string {
	var other string
	for _, a := range addrs {
		n, ok := a.(*net.IPNet)
		if !ok || n.IP.IsLoopback() || n.IP.IsLinkLocalUnicast() {
			continue
		}
		if n.IP.IsPrivate() {
			return n.IP.String()
		}
		if other == "" {
			other = n.IP.String()
		}
	}
	if other != "" {
		return other
	}
	return "127.0.0.1"
}

// isWildcard reports whether a listen address binds every interface.
func isWildcard(addr net.Addr) bool {
	h, _, err := net.SplitHostPort(addr.String())
	if err != nil {
		return false
	}
	ip := net.ParseIP(h)
	return h == "" || (ip != nil && ip.IsUnspecified())
}
