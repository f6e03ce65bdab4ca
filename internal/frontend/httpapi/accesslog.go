package httpapi

import (
	"io"
	"log/slog"
	"strconv"
	"sync"
	"time"
)

// accessLog writes combined-format lines to a writer without making requests
// wait for it: requests append to an in-memory buffer under a mutex, and one
// goroutine swaps the buffer out and writes it. When the buffer is full
// (the writer is slow or stuck), new lines are dropped and counted.
type accessLog struct {
	w        io.Writer
	max      int           // buffer limit in bytes
	interval time.Duration // flush period
	dropped  func(n int)   // counts dropped lines
	log      *slog.Logger

	mu      sync.Mutex
	buf     []byte // pending lines
	lines   int    // lines in buf
	closed  bool
	kick    chan struct{} // cap 1: flush soon
	done    chan struct{} // closed by Close
	stopped chan struct{} // closed when the flusher has exited
}

func newAccessLog(w io.Writer, max int, interval time.Duration, dropped func(int), log *slog.Logger) *accessLog {
	l := &accessLog{
		w: w, max: max, interval: interval, dropped: dropped, log: log,
		buf:     make([]byte, 0, min(max, 64<<10)),
		kick:    make(chan struct{}, 1),
		done:    make(chan struct{}),
		stopped: make(chan struct{}),
	}
	go l.run()
	return l
}

// logLine is what one access log line is made of.
type logLine struct {
	remoteAddr string // host:port or host
	user       string // "" for anonymous
	t          time.Time
	method     string
	uri        string
	proto      string
	status     int
	bytes      int64
	referer    string
	userAgent  string
	rule       string // the abuse rule that answered, "" if none
}

// add formats ln into the buffer, or drops it if the buffer is full or the
// log is closed. It never blocks on the writer.
func (l *accessLog) add(ln *logLine) {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		l.dropped(1)
		return
	}
	mark := len(l.buf)
	l.buf = appendCombined(l.buf, ln)
	if len(l.buf) > l.max {
		l.buf = l.buf[:mark]
		l.mu.Unlock()
		l.dropped(1)
		return
	}
	l.lines++
	full := len(l.buf) >= l.max/2
	l.mu.Unlock()
	if full {
		select {
		case l.kick <- struct{}{}:
		default:
		}
	}
}

// run flushes every interval, when kicked, and once more on Close.
func (l *accessLog) run() {
	defer close(l.stopped)
	t := time.NewTicker(l.interval)
	defer t.Stop()
	var spare []byte
	for {
		select {
		case <-t.C:
		case <-l.kick:
		case <-l.done:
			l.flush(&spare)
			return
		}
		l.flush(&spare)
	}
}

// flush swaps the pending buffer with spare and writes it out; only the
// flusher goroutine calls it.
func (l *accessLog) flush(spare *[]byte) {
	l.mu.Lock()
	out, n := l.buf, l.lines
	l.buf, l.lines = (*spare)[:0], 0
	l.mu.Unlock()
	if len(out) > 0 {
		if _, err := l.w.Write(out); err != nil {
			l.dropped(n)
			l.log.Warn("access log write failed", slog.Int("lines", n), slog.Any("err", err))
		}
	}
	*spare = out[:0]
}

// Close stops accepting lines, writes what is buffered and waits for the
// flusher goroutine to exit. If the writer is stuck, Close waits for it.
// Safe to call more than once.
func (l *accessLog) Close() {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		<-l.stopped
		return
	}
	l.closed = true
	l.mu.Unlock()
	close(l.done)
	<-l.stopped
}

const hexDigits = "0123456789abcdef"

// appendCombined appends ln in the Apache/nginx combined format:
//
//	%h - %u [%d/%b/%Y:%H:%M:%S %z] "%r" %>s %b "%{Referer}i" "%{User-Agent}i"
//
// Client-supplied text is escaped as Apache does: `"` and `\` with a
// backslash, \n \r \t by name, other control and non-ASCII bytes as \xHH.
func appendCombined(b []byte, ln *logLine) []byte {
	host := ln.remoteAddr
	if i := lastColon(host); i >= 0 {
		host = host[:i]
		if len(host) > 1 && host[0] == '[' && host[len(host)-1] == ']' {
			host = host[1 : len(host)-1]
		}
	}
	if host == "" {
		host = "-"
	}
	b = appendEscaped(b, host)
	b = append(b, " - "...)
	if ln.user == "" {
		b = append(b, '-')
	} else {
		b = appendEscaped(b, ln.user)
	}
	b = append(b, " ["...)
	b = ln.t.AppendFormat(b, "02/Jan/2006:15:04:05 -0700")
	b = append(b, `] "`...)
	b = appendEscaped(b, ln.method)
	b = append(b, ' ')
	b = appendEscaped(b, ln.uri)
	b = append(b, ' ')
	b = appendEscaped(b, ln.proto)
	b = append(b, `" `...)
	b = strconv.AppendInt(b, int64(ln.status), 10)
	b = append(b, ' ')
	if ln.bytes > 0 {
		b = strconv.AppendInt(b, ln.bytes, 10)
	} else {
		b = append(b, '-')
	}
	b = append(b, ` "`...)
	b = appendField(b, ln.referer)
	b = append(b, `" "`...)
	b = appendField(b, ln.userAgent)
	if ln.rule != "" {
		// An extra field after the combined format's: which abuse rule
		// answered instead of the store.
		b = append(b, `" rule=`...)
		b = append(b, ln.rule...)
		return append(b, '\n')
	}
	return append(b, "\"\n"...)
}

// lastColon finds the port separator of host:port, "[v6]:port" included.
func lastColon(s string) int {
	for i := len(s) - 1; i >= 0; i-- {
		switch s[i] {
		case ':':
			return i
		case ']':
			return -1
		}
	}
	return -1
}

func appendField(b []byte, s string) []byte {
	if s == "" {
		return append(b, '-')
	}
	return appendEscaped(b, s)
}

func appendEscaped(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c == '\n':
			b = append(b, '\\', 'n')
		case c == '\r':
			b = append(b, '\\', 'r')
		case c == '\t':
			b = append(b, '\\', 't')
		case c < 0x20 || c >= 0x7f:
			b = append(b, '\\', 'x', hexDigits[c>>4], hexDigits[c&15])
		default:
			b = append(b, c)
		}
	}
	return b
}
