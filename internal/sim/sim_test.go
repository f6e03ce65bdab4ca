package sim

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// testSeeds run in `make test`; CAIRN_SOAK=1 (make soak) runs
// CAIRN_SOAK_SEEDS more (default soakSeeds: 1000, 1001, ...),
// CAIRN_SIM_SEED=n replays one.
var testSeeds = []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}

const soakSeeds = 200

func seeds(t *testing.T) []uint64 {
	if s := os.Getenv("CAIRN_SIM_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("CAIRN_SIM_SEED=%q: %v", s, err)
		}
		return []uint64{v}
	}
	if testing.Short() {
		return testSeeds[:2]
	}
	if os.Getenv("CAIRN_SOAK") != "" {
		n := uint64(soakSeeds)
		if v := os.Getenv("CAIRN_SOAK_SEEDS"); v != "" {
			var err error
			if n, err = strconv.ParseUint(v, 10, 32); err != nil {
				t.Fatalf("CAIRN_SOAK_SEEDS=%q: want a count of seeds: %v", v, err)
			}
		}
		out := append([]uint64(nil), testSeeds...)
		for i := range n {
			out = append(out, 1000+i)
		}
		return out
	}
	return testSeeds
}

// TestSim runs the whole node stack of five nodes (three voters, two
// learners) under the seeded schedule of faults and operations, then
// checks the invariants (see doc.go). A failure names the seed and the
// command that replays it.
func TestSim(t *testing.T) {
	for _, seed := range seeds(t) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			cfg := DefaultConfig(seed)
			if testing.Short() {
				cfg.Duration, cfg.Ops, cfg.MaxBigFiles = 8*time.Second, 50, 1
			}
			if testing.Verbose() && os.Getenv("CAIRN_SIM_SEED") != "" {
				cfg.Logf = t.Logf
			}
			res, err := Run(cfg)
			if err != nil {
				t.Fatalf("seed %d: invariant violated:\n%v\nreplay: CAIRN_SIM_SEED=%d go test ./internal/sim -run TestSim -v\n(run: %v)",
					seed, err, seed, res)
			}
			t.Logf("seed %d: %v", seed, res)
		})
	}
}

// TestSimDetects breaks each invariant on purpose and expects the run to
// fail: a check that cannot fail proves nothing.
func TestSimDetects(t *testing.T) {
	for _, c := range []struct{ sabotage, want string }{
		{"namespace", "namespace of node 2 differs"},
		{"history", "allowed"},
		{"blob", "unreadable"},
		{"blob-heal", "after heal 1 (mid-run), "},
	} {
		t.Run(c.sabotage, func(t *testing.T) {
			cfg := DefaultConfig(42)
			cfg.Duration, cfg.Ops, cfg.MaxBigFiles = 5*time.Second, 40, 0
			cfg.sabotage = c.sabotage
			_, err := Run(cfg)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("sabotage %q: got %v, want an error containing %q", c.sabotage, err, c.want)
			}
		})
	}
}
