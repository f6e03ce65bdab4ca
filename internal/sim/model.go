package sim

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/cairn-fs/cairn/internal/store"
)

// The model: a history of writes per path, each with the logical times it
// was invoked and answered, and what the answer proves.

type outcome int

const (
	pending outcome = iota
	acked           // answered with success: it took effect
	unknown         // answered with an error: it may or may not take effect, now or later
	refused         // answered with store.ErrNoSpace: it never takes effect (no command was proposed)
)

// absent is the value of a path with no file.
const absent = "absent"

type write struct {
	node       uint64
	key        string // bucket/path
	value      string // hex SHA-256 of the body, or absent
	start, end int64  // logical times; end = MaxInt64 while pending or unknown
	outcome    outcome
	err        error
}

type history struct {
	clock atomic.Int64 // logical time: strictly increasing over invocations and answers

	mu                               sync.Mutex
	writes                           map[string][]*write
	written                          map[string]map[string]bool // key → every value a write ever tried
	acked, unknowns, reads, readErrs int
	refused                          int
}

func newHistory() *history {
	return &history{writes: map[string][]*write{}, written: map[string]map[string]bool{}}
}

func hashHex(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// begin records the invocation of a write of value to key.
func (h *history) begin(node uint64, key, value string) *write {
	w := &write{node: node, key: key, value: value, start: h.clock.Add(1), end: math.MaxInt64}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.writes[key] = append(h.writes[key], w)
	if h.written[key] == nil {
		h.written[key] = map[string]bool{}
	}
	h.written[key][value] = true
	return w
}

// end records the answer. A delete of a missing path is a success that
// leaves the path absent; a put refused for want of space (ErrNoSpace:
// a blob could not be stored, so nothing was proposed) never takes
// effect; any other error leaves the outcome unknown (the store cannot
// say whether a timed-out proposal will still apply).
func (h *history) end(w *write, err error) {
	t := h.clock.Add(1)
	h.mu.Lock()
	defer h.mu.Unlock()
	w.err = err
	if err == nil || (w.value == absent && errors.Is(err, store.ErrNotFound)) {
		w.outcome, w.end = acked, t
		h.acked++
		return
	}
	if errors.Is(err, store.ErrMoved) {
		// The bucket's fence refused it in the log (split.go): the
		// command applied as a failure and never takes effect.
		w.outcome, w.end = refused, t
		h.refused++
		return
	}
	if w.value != absent && errors.Is(err, store.ErrNoSpace) {
		w.outcome, w.end = refused, t
		h.refused++
		return
	}
	w.outcome = unknown
	h.unknowns++
}

// wasWritten reports whether some write tried to put value at key.
func (h *history) wasWritten(key, value string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.written[key][value]
}

// allowed returns the values key may hold once every write has been
// answered and the cluster has healed: the value of every write not
// followed (in real time) by an acknowledged one. A write with an unknown
// outcome never ends, so its value stays possible; with no acknowledged
// write the path may still be absent.
func (h *history) allowed(key string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	ws := h.writes[key]
	var out []string
	anyAcked := false
	for _, w := range ws {
		if w.outcome == acked {
			anyAcked = true
		}
	}
	if !anyAcked {
		out = append(out, absent)
	}
	for _, w := range ws {
		if w.outcome == refused {
			continue // the namespace never saw it
		}
		dominated := false
		for _, a := range ws {
			if a.outcome == acked && a.start > w.end {
				dominated = true
				break
			}
		}
		if !dominated && !slices.Contains(out, w.value) {
			out = append(out, w.value)
		}
	}
	return out
}

// keys returns every path written, sorted.
func (h *history) keys() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var ks []string
	for k := range h.writes {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// everWritten reports whether some write of key tried value.
func (h *history) everWritten(key, value string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.written[key][value]
}

// describe lists key's writes, for a failure message.
func (h *history) describe(key string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := ""
	for _, w := range h.writes[key] {
		v := w.value
		if len(v) > 12 {
			v = v[:12]
		}
		o := map[outcome]string{pending: "pending", acked: "acked", unknown: "unknown", refused: "refused"}[w.outcome]
		end := "∞"
		if w.end != math.MaxInt64 {
			end = fmt.Sprint(w.end)
		}
		s += fmt.Sprintf("\n    via node %d [%d, %s] %s → %s", w.node, w.start, end, v, o)
		if w.err != nil {
			s += fmt.Sprintf(" (%v)", w.err)
		}
	}
	return s
}

// now returns a fresh logical time (an invocation or an answer).
func (h *history) now() int64 { return h.clock.Add(1) }

// linearizable reports whether a consistent read of key, invoked at inv
// and answered at end with value, fits a register's linearizable history:
// some write of that value (or the initial absence) was invoked before the
// read answered, was not refused, and was not followed by an acknowledged
// write that began after it ended and ended before the read began (which
// would have overwritten it for good before the read). A write whose
// outcome is unknown may take effect at any later time.
func (h *history) linearizable(key, value string, inv, end int64) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	ws := h.writes[key]
	initial := &write{value: absent, start: 0, end: 0, outcome: acked}
	for _, w := range append([]*write{initial}, ws...) {
		if w.value != value || w.outcome == refused || w.start >= end {
			continue
		}
		superseded := false
		for _, a := range ws {
			if a.outcome == acked && a.start > w.end && a.end < inv {
				superseded = true
				break
			}
		}
		if !superseded {
			return true
		}
	}
	return false
}

// staleValue returns a value of key overwritten for good before inv (for
// the "stale-read" sabotage), or "".
func (h *history) staleValue(key string, inv int64) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	ws := h.writes[key]
	for _, w := range ws {
		for _, a := range ws {
			if w.outcome == acked && a.outcome == acked && a.start > w.end && a.end < inv && a.value != w.value {
				return w.value
			}
		}
	}
	return ""
}
