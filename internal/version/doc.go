// Package version says which Cairn this binary is: its release version,
// the git commit it was built from (from the Go build's VCS stamp) and the
// Go toolchain. It owns those facts and nothing else: no I/O, no import
// of the rest of Cairn.
package version
