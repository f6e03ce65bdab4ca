// Package detrt writes a go build -overlay that makes the Go runtime
// deterministic for the simulator's replays: the simulator's own test
// binary is built with it, then run with GOMAXPROCS=1,
// GODEBUG=asyncpreemptoff=1 and GOGC=off, and a seed then replays its
// execution byte for byte (internal/sim/doc.go, "What replays").
//
// The overlay patches, in a copy of the installed toolchain's source (never
// the toolchain itself):
//   - runtime/rand.go: the process's random seed is fixed, and a user
//     goroutine draws from its own state (split from its creator's at its
//     creation) instead of its thread's, so select's choice among ready
//     channels and map iteration order follow the goroutine tree, not the
//     threads or the process;
//   - runtime/runtime2.go and runtime/proc.go: that state, and no
//     time-slice preemption by sysmon;
//   - internal/sync/mutex.go: no starvation mode (a waiter's real wait
//     would change the order of hand-over);
//   - runtime/time.go: timers of a bubble due at one instant fire in the
//     order they were set (synctest shuffles them with a draw from
//     whichever goroutine or thread set the timer);
//   - the runtime's own draws that change no outcome but happen a number
//     of times that depends on the threads — the per-M pcvalue cache's
//     eviction (runtime.Callers, on a user goroutine), runtime-lock
//     contention and profiling samples, semaphore treap tickets, heap
//     profile sampling, the type-switch cache — draw from a state of
//     their own (detrtQuiet), so that they never move a goroutine's
//     state and, with it, its later selects and map iterations.
//
// It owns the patch list and nothing else: it must not be imported by
// anything but internal/sim's tests. A patch whose text is not found (a
// new Go release) is an error naming it, never a silent skip.
package detrt
