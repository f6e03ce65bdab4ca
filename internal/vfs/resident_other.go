//go:build !linux

package vfs

// Resident reports whether the pages of b, a slice of a memory map, are in
// memory; on this platform it cannot tell and reports false (see
// resident_linux.go).
func Resident(b []byte) bool { return false }
