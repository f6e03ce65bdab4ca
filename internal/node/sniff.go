package node

// The public listener in clear serves two protocols on one port when
// node-to-node TLS is on (the default) and there is no --cluster-listen
// nor --tls-cert: HTTP for clients and TLS for peers. A connection whose
// first byte is a TLS handshake record (0x16; no HTTP method starts with
// it) goes to the cluster TLS server, any other to the public server
// (the fast path, which then reads the same bytes: the byte is only
// peeked, and the connection stays the kernel socket the fast path sends
// files on).

import (
	"errors"
	"log/slog"
	"net"
	"sync"
	"time"
)

// tlsRecordHandshake is the first byte of a TLS ClientHello.
const tlsRecordHandshake = 0x16

// splitListener accepts on ln and deals connections to two listeners by
// their first byte. Closing either closes ln and both.
type splitListener struct {
	ln        net.Listener
	plain     *chanListener
	tls       *chanListener
	timeout   time.Duration // for the first byte to arrive
	log       *slog.Logger
	closeOnce sync.Once
	done      chan struct{}

	mu      sync.Mutex
	peeking map[net.Conn]struct{} // waiting for their first byte: closed by close
}

func newSplitListener(ln net.Listener, timeout time.Duration, log *slog.Logger) *splitListener {
	s := &splitListener{ln: ln, timeout: timeout, log: log, done: make(chan struct{}),
		peeking: map[net.Conn]struct{}{}}
	s.plain = &chanListener{s: s, ch: make(chan net.Conn)}
	s.tls = &chanListener{s: s, ch: make(chan net.Conn)}
	go s.run()
	return s
}

func (s *splitListener) run() {
	var delay time.Duration
	for {
		c, err := s.ln.Accept()
		if err != nil {
			select {
			case <-s.done:
				return
			default:
			}
			var te interface{ Temporary() bool }
			if errors.As(err, &te) && te.Temporary() {
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				s.log.Warn("accept failed; retrying", "delay", delay, "err", err)
				time.Sleep(delay)
				continue
			}
			s.log.Error("public listener failed", "err", err)
			s.close()
			return
		}
		delay = 0
		go s.deal(c)
	}
}

// deal waits for c's first byte and hands c to the listener it is for.
func (s *splitListener) deal(c net.Conn) {
	s.mu.Lock()
	select {
	case <-s.done:
		s.mu.Unlock()
		c.Close()
		return
	default:
	}
	s.peeking[c] = struct{}{}
	s.mu.Unlock()
	b, err := peekByte(c, s.timeout)
	s.mu.Lock()
	delete(s.peeking, c)
	s.mu.Unlock()
	if err != nil {
		c.Close() // closed or silent: nothing to serve
		return
	}
	to := s.plain
	if b == tlsRecordHandshake {
		to = s.tls
	}
	select {
	case to.ch <- c:
	case <-s.done:
		c.Close()
	}
}

func (s *splitListener) close() {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		close(s.done)
		for c := range s.peeking {
			c.Close()
		}
		s.mu.Unlock()
		s.ln.Close()
	})
}

// chanListener is one side of a splitListener.
type chanListener struct {
	s  *splitListener
	ch chan net.Conn
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.s.done:
		return nil, net.ErrClosed
	}
}

func (l *chanListener) Close() error {
	l.s.close()
	return nil
}

func (l *chanListener) Addr() net.Addr { return l.s.ln.Addr() }
