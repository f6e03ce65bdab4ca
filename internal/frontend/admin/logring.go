package admin

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// DefaultLogRecords is the size of a LogRing made with size 0.
const DefaultLogRecords = 200

// LogRecord is one kept record, as GET /_cairn/logs shows it.
type LogRecord struct {
	Seq     uint64    `json:"seq"` // 1 for the first record kept, then +1
	Time    time.Time `json:"time"`
	Level   string    `json:"level"` // WARN, ERROR (or ERROR+n)
	Message string    `json:"msg"`
	Attrs   []LogAttr `json:"attrs,omitempty"`
	// Count is how many records in a row had this level and message (the
	// ring keeps one for a burst, so that a storm of the same warning
	// does not push out what caused it): Time and Attrs are the last
	// one's, First the first one's time.
	Count int       `json:"count"`
	First time.Time `json:"first"`
}

// LogAttr is one attribute of a kept record; Key is qualified by its
// groups ("group.key").
type LogAttr struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// ring is the bounded store shared by a LogRing and the handlers derived
// from it with WithAttrs and WithGroup.
type ring struct {
	mu   sync.Mutex
	recs []LogRecord // circular, len ≤ cap
	next int         // where the next record goes once full
	seq  uint64
}

// LogRing is an slog.Handler that keeps the last records at level Warn or
// above in a bounded ring, and passes every record its inner handler is
// enabled for on to it. Records at Warn and above are kept even when the
// inner handler's level is higher (--log-level error). It is safe for
// concurrent use; Handle never blocks beyond a short mutex.
type LogRing struct {
	inner  slog.Handler
	r      *ring
	attrs  []LogAttr // from WithAttrs, qualified
	groups string    // "a.b." from WithGroup
}

// NewLogRing wraps inner, keeping the last size warnings and errors
// (DefaultLogRecords when size ≤ 0).
func NewLogRing(inner slog.Handler, size int) *LogRing {
	if size <= 0 {
		size = DefaultLogRecords
	}
	return &LogRing{inner: inner, r: &ring{recs: make([]LogRecord, 0, size)}}
}

// Enabled implements slog.Handler: Warn and above always, else as inner.
func (h *LogRing) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn || h.inner.Enabled(ctx, l)
}

// Handle implements slog.Handler. It keeps a Warn-or-above record, then
// returns the inner handler's error (nil when inner is not enabled for
// the level).
func (h *LogRing) Handle(ctx context.Context, rec slog.Record) error {
	if rec.Level >= slog.LevelWarn {
		kept := LogRecord{Time: rec.Time, Level: rec.Level.String(), Message: rec.Message,
			Attrs: append([]LogAttr(nil), h.attrs...)}
		rec.Attrs(func(a slog.Attr) bool {
			kept.Attrs = appendAttr(kept.Attrs, h.groups, a)
			return true
		})
		h.r.add(kept)
	}
	if h.inner.Enabled(ctx, rec.Level) {
		return h.inner.Handle(ctx, rec)
	}
	return nil
}

// WithAttrs implements slog.Handler.
func (h *LogRing) WithAttrs(as []slog.Attr) slog.Handler {
	if len(as) == 0 {
		return h
	}
	c := *h
	c.inner = h.inner.WithAttrs(as)
	c.attrs = append([]LogAttr(nil), h.attrs...)
	for _, a := range as {
		c.attrs = appendAttr(c.attrs, h.groups, a)
	}
	return &c
}

// WithGroup implements slog.Handler.
func (h *LogRing) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	c := *h
	c.inner = h.inner.WithGroup(name)
	c.groups = h.groups + name + "."
	return &c
}

// Records returns the kept records, oldest first (a copy).
func (h *LogRing) Records() []LogRecord { return h.r.snapshot() }

// appendAttr flattens a (resolving it, and expanding groups) into as.
func appendAttr(as []LogAttr, prefix string, a slog.Attr) []LogAttr {
	a.Value = a.Value.Resolve()
	if a.Equal(slog.Attr{}) {
		return as
	}
	if a.Value.Kind() == slog.KindGroup {
		p := prefix
		if a.Key != "" {
			p += a.Key + "."
		}
		for _, g := range a.Value.Group() {
			as = appendAttr(as, p, g)
		}
		return as
	}
	return append(as, LogAttr{Key: strings.TrimSuffix(prefix+a.Key, "."), Value: a.Value.String()})
}

func (r *ring) add(rec LogRecord) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seq++
	rec.Seq = r.seq
	if n := len(r.recs); n > 0 {
		last := &r.recs[(r.next+n-1)%n]
		if last.Level == rec.Level && last.Message == rec.Message {
			rec.Count, rec.First = last.Count+1, last.First
			*last = rec
			return
		}
	}
	rec.Count, rec.First = 1, rec.Time
	if len(r.recs) < cap(r.recs) {
		r.recs = append(r.recs, rec)
		return
	}
	r.recs[r.next] = rec
	r.next = (r.next + 1) % len(r.recs)
}

func (r *ring) snapshot() []LogRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]LogRecord, 0, len(r.recs))
	out = append(out, r.recs[r.next:]...)
	return append(out, r.recs[:r.next]...)
}
