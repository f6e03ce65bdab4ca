package cluster

import (
	"slices"
	"testing"
	"time"
)

// TestSetSeeds: a detector started without seeds joins the cluster as soon
// as it is given one, without a restart, and keeps its port.
func TestSetSeeds(t *testing.T) {
	a := start(t, testConfig(1))
	b := start(t, testConfig(2))
	addr := b.Addr()
	wa, wb := watch(t, a), watch(t, b)
	if len(b.Seeds()) != 0 {
		t.Fatalf("seeds %v, want none", b.Seeds())
	}
	b.SetSeeds([]string{a.Addr()})
	if got := b.Seeds(); !slices.Equal(got, []string{a.Addr()}) {
		t.Fatalf("Seeds() = %v", got)
	}
	wb.waitFor(5*time.Second, "node 2 sees node 1", aliveAll(b, 1, 2))
	wa.waitFor(5*time.Second, "node 1 sees node 2", aliveAll(a, 1, 2))
	if b.Addr() != addr {
		t.Fatalf("address changed from %s to %s", addr, b.Addr())
	}
	b.Close()
	b.SetSeeds(nil) // after Close: no effect, no panic
}
