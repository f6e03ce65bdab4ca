package sim

import (
	"fmt"
	"hash/fnv"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

const probeTag = "cairn-detrt-probe"

// TestDeterministicRuntime runs a probe of the runtime's sources of
// order several times, each in a child process over the deterministic
// runtime, and expects one answer: goroutines that select among ready
// channels, iterate maps, call runtime.Callers (whose per-thread cache
// once drew from the goroutine's random state) and wake from timers due
// at one instant (which synctest once shuffled with a fresh draw). A
// difference is a leak of the threads into the program's choices, the
// kind that made TestSimReplays fail one run in two on seed 23.
func TestDeterministicRuntime(t *testing.T) {
	if os.Getenv("CAIRN_DETRT_PROBE") != "" {
		fmt.Printf("%s %s\n", probeTag, detrtProbe(t))
		return
	}
	if testing.Short() || os.Getenv(childEnv) != "" {
		t.Skip("builds the deterministic runtime")
	}
	bin := deterministicBinary(t)
	seen := map[string]int{}
	const runs = 8
	for range runs {
		cmd := exec.Command(bin, "-test.run", "^TestDeterministicRuntime$")
		cmd.Args[0] = "sim.test"
		cmd.Env = childEnviron(0, false, "CAIRN_DETRT_PROBE=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("probe: %v\n%s", err, out)
		}
		for _, line := range strings.Split(string(out), "\n") {
			if h, ok := strings.CutPrefix(line, probeTag+" "); ok {
				seen[h]++
			}
		}
	}
	if len(seen) != 1 {
		t.Fatalf("%d runs of the probe gave %d different answers: %v", runs, len(seen), seen)
	}
}

// detrtProbe exercises, in a synctest bubble, every choice the runtime
// makes among equals, and returns a digest of the choices made.
func detrtProbe(t *testing.T) string {
	h := fnv.New64a()
	var mu sync.Mutex
	note := func(format string, args ...any) {
		mu.Lock()
		fmt.Fprintf(h, format, args...)
		mu.Unlock()
	}
	synctest.Test(t, func(t *testing.T) {
		a, b := make(chan int, 4096), make(chan int, 4096)
		for range 2000 {
			a <- 1
			b <- 2
		}
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Go(func() {
				pcs := make([]uintptr, 32)
				m := map[int]int{}
				for i := range 40 {
					m[i] = i
				}
				for round := range 20 {
					runtime.Callers(1, pcs)
					for k := range m {
						note("g%d m%d ", g, k)
						break
					}
					select {
					case v := <-a:
						note("g%d a%d ", g, v)
					case v := <-b:
						note("g%d b%d ", g, v)
					}
					time.Sleep(time.Duration(10-round%3) * time.Millisecond) // shared instants
					tm := time.NewTimer(5 * time.Millisecond)
					<-tm.C
					note("g%d r%d ", g, round)
				}
			})
		}
		wg.Wait()
	})
	return fmt.Sprintf("%016x", h.Sum64())
}
