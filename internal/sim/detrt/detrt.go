package detrt

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

type patch struct{ file, old, new string }

var patches = []patch{
	{"runtime/rand.go", "\tseed := &globalRand.seed\n\tif len(startupRand) >= 16 &&",
		"\tseed := &globalRand.seed\n\tif true { // cairn detrt: a fixed seed\n\t\tfor i := range seed {\n\t\t\tseed[i] = byte(i*7 + 1)\n\t\t}\n\t} else if len(startupRand) >= 16 &&"},
	{"runtime/rand.go", "\tmp := getg().m\n\tc := &mp.chacha8\n\tfor {",
		"\tif gp := getg(); gp == gp.m.curg { // cairn detrt: the goroutine's own state\n\t\treturn uint64(cheaprand())<<32 | uint64(cheaprand())\n\t}\n\tmp := getg().m\n\tc := &mp.chacha8\n\tfor {"},
	{"runtime/rand.go", "func cheaprand() uint32 {\n\tmp := getg().m",
		"func cheaprand() uint32 {\n\tif gp := getg(); gp == gp.m.curg { // cairn detrt: the goroutine's own state\n\t\tgp.detrtRand += 0xa0761d6478bd642f\n\t\thi, lo := math.Mul64(gp.detrtRand, gp.detrtRand^0xe7037ed1a0b428db)\n\t\treturn uint32(hi ^ lo)\n\t}\n\tmp := getg().m"},
	{"runtime/runtime2.go", "\tgoid         uint64\n\tschedlink    guintptr",
		"\tgoid         uint64\n\tdetrtRand    uint64 // cairn detrt: this goroutine's random state, split from its creator's\n\tschedlink    guintptr"},
	{"runtime/proc.go", "\tnewg.parentGoid = callergp.goid\n\tnewg.gopc = callerpc",
		"\tnewg.parentGoid = callergp.goid\n\tif callergp == callergp.m.curg { // cairn detrt\n\t\tcallergp.detrtRand += 0x9e3779b97f4a7c15\n\t\tnewg.detrtRand = callergp.detrtRand ^ 0x94d049bb133111eb\n\t} else {\n\t\tdetrtSpawn += 0x9e3779b97f4a7c15\n\t\tnewg.detrtRand = detrtSpawn\n\t}\n\tnewg.gopc = callerpc"},
	{"runtime/proc.go", "const forcePreemptNS = 10 * 1000 * 1000 // 10ms",
		"const forcePreemptNS = 1 << 62 // cairn detrt: no time-slice preemption\n\nvar detrtSpawn uint64"},
	{"internal/sync/mutex.go", "\tstarvationThresholdNs = 1e6", "\tstarvationThresholdNs = 1 << 62 // cairn detrt"},
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
		if n := strings.Count(src, p.old); n != 1 {
			return "", fmt.Errorf("detrt: %s: the text to patch appears %d times, want once (a Go release this patch list does not know?): %q", p.file, n, p.old)
		}
		patched[p.file] = strings.Replace(src, p.old, p.new, 1)
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
