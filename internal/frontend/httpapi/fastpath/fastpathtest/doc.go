// Package fastpathtest is the contract test of a fastpath.Planner: Run
// sends the same raw requests to a server answering through the fast
// path and to net/http alone serving the same API, and requires the same
// bytes back (the Date value aside), and the fast path to answer exactly
// the requests it should, handing off the rest. httpapi's
// TestFastPathDifferential runs it for Cairn's native API; fastpath's own
// tests run it for a small planner of every Body kind.
//
// It is for tests: no production code imports it. It does network I/O on
// loopback only, through the addresses it is given.
package fastpathtest
