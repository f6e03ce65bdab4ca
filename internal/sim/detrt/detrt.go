package detrt

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// A patch replaces old with new in file; old must appear exactly n times
// (once when n is 0).
type patch struct {
	file, old, new string
	n              int
}

// quiet is a draw that moves no goroutine's random state: the runtime's
// own uses of randomness that change no outcome of the program (a cache's
// eviction, a treap's balance, profiling samples) but happen a number of
// times that depends on the threads (which M ran what, contention on a
// runtime lock) and would otherwise shift the goroutine's state, and with
// it its later selects and map iterations.
func quiet(file, call string, n int) patch {
	return patch{file, call, strings.Replace(strings.Replace(call, "cheaprandn(", "detrtQuietn(", 1), "cheaprand()", "detrtQuiet()", 1), n}
}

var patches = []patch{
	{"runtime/rand.go", "\tseed := &globalRand.seed\n\tif len(startupRand) >= 16 &&",
		"\tseed := &globalRand.seed\n\tif true { // cairn detrt: a fixed seed\n\t\tfor i := range seed {\n\t\t\tseed[i] = byte(i*7 + 1)\n\t\t}\n\t} else if len(startupRand) >= 16 &&", 0},
	{"runtime/rand.go", "\tmp := getg().m\n\tc := &mp.chacha8\n\tfor {",
		"\tif gp := getg(); gp == gp.m.curg { // cairn detrt: the goroutine's own state\n\t\treturn uint64(cheaprand())<<32 | uint64(cheaprand())\n\t}\n\tmp := getg().m\n\tc := &mp.chacha8\n\tfor {", 0},
	{"runtime/rand.go", "func cheaprand() uint32 {\n\tmp := getg().m",
		"func cheaprand() uint32 {\n\tif gp := getg(); gp == gp.m.curg { // cairn detrt: the goroutine's own state\n\t\tgp.detrtRand += 0xa0761d6478bd642f\n\t\thi, lo := math.Mul64(gp.detrtRand, gp.detrtRand^0xe7037ed1a0b428db)\n\t\treturn uint32(hi ^ lo)\n\t}\n\tmp := getg().m", 0},
	{"runtime/runtime2.go", "\tgoid         uint64\n\tschedlink    guintptr",
		"\tgoid         uint64\n\tdetrtRand    uint64 // cairn detrt: this goroutine's random state, split from its creator's\n\tschedlink    guintptr", 0},
	{"runtime/proc.go", "\tnewg.parentGoid = callergp.goid\n\tnewg.gopc = callerpc",
		"\tnewg.parentGoid = callergp.goid\n\tif callergp == callergp.m.curg { // cairn detrt\n\t\tcallergp.detrtRand += 0x9e3779b97f4a7c15\n\t\tnewg.detrtRand = callergp.detrtRand ^ 0x94d049bb133111eb\n\t} else {\n\t\tdetrtSpawn += 0x9e3779b97f4a7c15\n\t\tnewg.detrtRand = detrtSpawn\n\t}\n\tnewg.gopc = callerpc", 0},
	{"runtime/proc.go", "const forcePreemptNS = 10 * 1000 * 1000 // 10ms",
		"const forcePreemptNS = 1 << 62 // cairn detrt: no time-slice preemption\n\nvar detrtSpawn uint64", 0},
	{"internal/sync/mutex.go", "\tstarvationThresholdNs = 1e6", "\tstarvationThresholdNs = 1 << 62 // cairn detrt", 0},
	{"runtime/rand.go", "\treturn uint32((uint64(cheaprand()) * uint64(n)) >> 32)\n}\n",
		"\treturn uint32((uint64(cheaprand()) * uint64(n)) >> 32)\n}\n\n// cairn detrt: draws that move no goroutine's state (see detrt.quiet).\nvar detrtQuietState uint64\n\n//go:nosplit\nfunc detrtQuiet() uint32 {\n\tdetrtQuietState += 0xa0761d6478bd642f\n\thi, lo := math.Mul64(detrtQuietState, detrtQuietState^0xe7037ed1a0b428db)\n\treturn uint32(hi ^ lo)\n}\n\n//go:nosplit\nfunc detrtQuietn(n uint32) uint32 {\n\treturn uint32((uint64(detrtQuiet()) * uint64(n)) >> 32)\n}\n", 0},
	// Timers of a bubble due at one instant fire in the order they were
	// set, not in an order drawn at random (synctest's shuffle, drawn
	// from whichever goroutine or thread set the timer).
	{"runtime/time.go", "\t\t\tt.rand = cheaprand()\n",
		"\t\t\tdetrtTimerSeq++ // cairn detrt: first set, first fired\n\t\t\tt.rand = detrtTimerSeq\n", 0},
	{"runtime/time.go", "func (t *timer) maybeAdd() {", "var detrtTimerSeq uint32\n\nfunc (t *timer) maybeAdd() {", 0},
	quiet("runtime/symtab.go", "ci := cheaprandn(uint32(len(cache.entries[ck])))", 0), // pcvalue cache, per M
	quiet("runtime/lock_spinbit.go", "return cheaprandn(rate32) == 0", 0),
	quiet("runtime/lock_spinbit.go", "antiStarve := cheaprandn(mutexTailWakePeriod) == 0", 0),
	quiet("runtime/mprof.go", "if cheaprandn(gTrackingPeriod) == 0 {", 0),
	quiet("runtime/sema.go", "s.ticket = cheaprand() | 1", 0),
	quiet("runtime/malloc.go", "q := cheaprandn(1<<randomBitCount) + 1", 0),
	quiet("runtime/iface.go", "if cheaprand()&1023 != 0 {", 2),
	quiet("runtime/iface.go", "if cheaprand()&uint32(oldC.Mask) != 0 {", 2),
}

// Env is the environment a deterministic binary must start with.
var Env = []string{"GOMAXPROCS=1", "GODEBUG=asyncpreemptoff=1", "GOGC=off"}

// Write writes the patched files of the toolchain at goroot under dir,
// with overlay.json naming them, and returns overlay.json's path (for go
// build -overlay; the build cache keys on the patched contents, so a
// second build is quick).
func Write(goroot, dir string) (overlay string, err error) {
	out := map[string]string{}
	patched := map[string]string{}
	for _, p := range patches {
		src, ok := patched[p.file]
		if !ok {
			b, err := os.ReadFile(filepath.Join(goroot, "src", p.file))
			if err != nil {
				return "", fmt.Errorf("detrt: %w", err)
			}
			src = string(b)
		}
		want := max(p.n, 1)
		if n := strings.Count(src, p.old); n != want {
			return "", fmt.Errorf("detrt: %s: the text to patch appears %d times, want %d (a Go release this patch list does not know?): %q", p.file, n, want, p.old)
		}
		patched[p.file] = strings.ReplaceAll(src, p.old, p.new)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	for file, src := range patched {
		dst := filepath.Join(dir, strings.ReplaceAll(file, "/", "_"))
		if err := os.WriteFile(dst, []byte(src), 0o644); err != nil {
			return "", err
		}
		out[filepath.Join(goroot, "src", file)] = dst
	}
	b, err := json.Marshal(map[string]any{"Replace": out})
	if err != nil {
		return "", err
	}
	overlay = filepath.Join(dir, "overlay.json")
	if err := os.WriteFile(overlay, b, 0o644); err != nil {
		return "", err
	}
	return overlay, nil
}
