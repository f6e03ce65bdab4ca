package sim

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"slices"
	"sync"
	"time"
)

// trace is the run's event trace: every scheduled event as it is carried
// out, every delivery's fate, every operation's answer, what node 1
// applied, every mid-run check and the final state, each line stamped with
// fake time. Two runs of one seed must produce the same lines (TestSimReplays);
// the digest stands for them, and with Config.KeepTrace the lines are kept
// to show where two runs part.
//
// Lines stamped with the same instant are sorted before they count:
// goroutines woken at one instant run in an order the runtime picks, and
// what they do at that instant is one step of the run, whatever their
// order. Anything the order changes later shows as a difference.
type trace struct {
	mu      sync.Mutex
	h       hash.Hash
	n       int
	keep    bool
	lines   []string
	t0      time.Time
	at      time.Duration // instant of pending
	pending []string
}

func newTrace(keep bool) *trace {
	return &trace{h: sha256.New(), keep: keep, t0: time.Now()}
}

// add records one line (safe from any goroutine).
func (t *trace) add(format string, args ...any) {
	at := time.Since(t.t0)
	line := fmt.Sprintf("%v ", at) + fmt.Sprintf(format, args...)
	t.mu.Lock()
	defer t.mu.Unlock()
	if at != t.at {
		t.flush()
		t.at = at
	}
	t.pending = append(t.pending, line)
}

// flush counts the pending lines of one instant, sorted.
func (t *trace) flush() {
	slices.Sort(t.pending)
	for _, line := range t.pending {
		t.h.Write([]byte(line))
		t.h.Write([]byte{'\n'})
		t.n++
		if t.keep {
			t.lines = append(t.lines, line)
		}
	}
	t.pending = t.pending[:0]
}

// sum returns the number of lines and their digest.
func (t *trace) sum() (int, string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.flush()
	return t.n, hex.EncodeToString(t.h.Sum(nil))
}
