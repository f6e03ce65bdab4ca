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
//     private address, IPv4 (RFC 1918) before IPv6 (ULA), else its first
//     other non-loopback one, IPv4 before IPv6, else 127.0.0.1, and (in
//     cluster mode) logs which it chose.
//
// What the operator is told to open is another matter: a lone node records
// no URL anywhere, and the address picked for peers may not be one a
// browser on this machine reaches (a ULA on eth0). LocalURL gives the URL
// that works from the node's own machine: a wildcard listener is reached on
// 127.0.0.1 (Go's wildcard listeners are dual-stack, so also for ::).

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
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("node: --advertise %q: want http://HOST[:PORT] or https://HOST[:PORT] (the URL peers and clients reach this node at)", s)
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
// --advertise was given, in this order: the first private IPv4 address, the
// first private IPv6 one (ULA), the first other IPv4 one, the first other
// IPv6 one (loopback and link-local never), else 127.0.0.1.
func defaultHost(addrs []net.Addr) string {
	var best [4]string // by rank: private v4, private v6, other v4, other v6
	for _, a := range addrs {
		n, ok := a.(*net.IPNet)
		if !ok || n.IP.IsLoopback() || n.IP.IsLinkLocalUnicast() || n.IP.IsUnspecified() {
			continue
		}
		rank := 0
		if n.IP.To4() == nil {
			rank = 1
		}
		if !n.IP.IsPrivate() {
			rank += 2
		}
		if best[rank] == "" {
			best[rank] = n.IP.String()
		}
	}
	for _, h := range best {
		if h != "" {
			return h
		}
	}
	return "127.0.0.1"
}

// localURL returns the http URL that reaches a listener bound to addr from
// this machine: its own address, or 127.0.0.1 for a wildcard one. An IPv6
// host is bracketed.
func localURL(addr net.Addr) string {
	return advertisedURL(addr, "127.0.0.1")
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
