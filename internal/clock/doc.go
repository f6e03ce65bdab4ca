// Package clock is the time seam: Real is the wall clock, Fake a clock that
// only moves when a test advances it, with timers that fire in due order.
//
// Packages take time through their Config (a func() time.Time, a ticker
// channel, a scheduling function); tests and internal/sim pass a Fake's
// methods there so that timeouts, ticks and network delays happen in
// simulated time.
//
// It owns the seam and nothing else: it must not import anything of Cairn.
package clock
