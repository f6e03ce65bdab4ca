package fastpath

import (
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"time"
)

// TLS on the fast path (doc.go, "TLS"). With Config.TLS, each accepted
// connection's handshake runs in its own goroutine (as net/http's does),
// and the fast path then reads and writes through the *tls.Conn:
// crypto/tls decrypts what the parser reads and encrypts each batch of
// answers as one write of whole records.

// tlsStart is what startTLS did with a connection.
type tlsStart uint8

const (
	tlsServe  tlsStart = iota // the fast path serves it over TLS
	tlsDirect                 // handed to net/http whole, before any request
	tlsFailed                 // the handshake failed: close it
)

// startTLS runs the server side of the TLS handshake on fc's connection,
// bounded by ReadHeaderTimeout from accept (as net/http bounds its
// handshake), and switches fc's I/O to the *tls.Conn. A connection that
// negotiated another protocol than HTTP/1.1 by ALPN (HTTP/2), or whose
// client authenticated with a certificate (mutual TLS: the handlers need
// it in the request's TLS state), goes to net/http whole: it is handed
// off as a *tls.Conn, so net/http serves it as its own.
func (fc *conn) startTLS() tlsStart {
	s := fc.s
	tc := tls.Server(underTLS(fc.c), s.cfg.TLS)
	// Waiting for the client's hello is idle: Shutdown may close it.
	fc.state.Store(connIdle)
	if s.shutdown.Load() {
		return tlsFailed
	}
	if d := s.cfg.ReadHeaderTimeout; d > 0 {
		_ = fc.c.SetDeadline(time.Now().Add(d))
	}
	err := tc.Handshake()
	fc.state.Store(connActive)
	if err != nil {
		// As net/http: plain HTTP sent to the HTTPS port gets a 400 that
		// says so, in plain text.
		reason := err.Error()
		var re tls.RecordHeaderError
		if errors.As(err, &re) && re.Conn != nil && looksLikeHTTP(re.RecordHeader) {
			_, _ = io.WriteString(re.Conn, "HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n")
			reason = "client sent an HTTP request to an HTTPS server"
		}
		s.log.Debug("TLS handshake failed", slog.String("remote", fc.c.RemoteAddr().String()), slog.String("reason", reason))
		return tlsFailed
	}
	_ = fc.c.SetDeadline(time.Time{})
	fc.c = tc
	fc.peer.c = tc
	fc.sink = connSink{c: tc}
	fc.dl.Ctl = tc
	cs := tc.ConnectionState()
	if (cs.NegotiatedProtocol != "" && cs.NegotiatedProtocol != "http/1.1") || len(cs.PeerCertificates) > 0 {
		return tlsDirect
	}
	return tlsServe
}

// handoffDirect gives the connection, with nothing read from it after its
// handshake, to net/http as it is (a *tls.Conn).
func (fc *conn) handoffDirect() bool {
	fc.s.handedOff.Add(1)
	return fc.s.handoff.deliver(fc.c)
}

// TLSState returns the TLS state of a connection the fast path handed to
// its Fallback after reading from it (net/http then sees a plain
// net.Conn and leaves Request.TLS nil: a Fallback that needs it takes it
// from here, in its ConnContext), or nil for a plain connection.
func TLSState(c net.Conn) *tls.ConnectionState {
	h, ok := c.(*handoffConn)
	if !ok {
		return nil
	}
	tc, ok := h.Conn.(*tls.Conn)
	if !ok {
		return nil
	}
	cs := tc.ConnectionState()
	return &cs
}

// looksLikeHTTP: the first bytes of a TLS record are those of an HTTP
// request (net/http's test).
func looksLikeHTTP(hdr [5]byte) bool {
	switch string(hdr[:]) {
	case "GET /", "HEAD ", "POST ", "PUT /", "OPTIO":
		return true
	}
	return false
}
