package fuse

import "testing"

// The invalidation queue keeps each invalidation once until it is taken,
// never drops one, and ends once closed and empty.
func TestInvalQueue(t *testing.T) {
	var q invalQueue
	q.init()
	a, b := inval{name: "a", path: "d/a"}, inval{name: "b", path: "d/b"}
	for range 1000 {
		q.add(a)
	}
	for i := range 5000 { // more than the old channel held
		q.add(inval{name: "x", path: string(rune('a'+i%26)) + "/" + string(rune(i))})
	}
	q.add(b)
	got := q.take()
	if len(got) != 1+5000+1 || got[0] != a || got[len(got)-1] != b {
		t.Fatalf("took %d invalidations (first %v, last %v), want 5002 in order, each once", len(got), got[0], got[len(got)-1])
	}
	q.add(a) // queued again once taken
	q.close()
	q.add(b) // after close: dropped
	if got := q.take(); len(got) != 1 || got[0] != a {
		t.Fatalf("after close: %v, want the one queued before", got)
	}
	if got := q.take(); got != nil {
		t.Fatalf("closed and empty: %v", got)
	}
}
