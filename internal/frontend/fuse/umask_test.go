package fuse

import (
	"os"
	"syscall"
	"testing"
)

// readUmask reads a process's umask from /proc.
func TestReadUmask(t *testing.T) {
	old := syscall.Umask(0o027)
	defer syscall.Umask(old)
	if got := readUmask(uint32(os.Getpid())); got != 0o027 {
		t.Fatalf("umask read %#o, want 027", got)
	}
	if got := readUmask(0x7fffffff); got != defaultUmask {
		t.Fatalf("umask of a missing process %#o, want the default", got)
	}
}
