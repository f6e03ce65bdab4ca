package fuse

import (
	"bytes"
	"context"
	"os"
	"strconv"
	"sync"
	"time"

	gofuse "github.com/hanwen/go-fuse/v2/fuse"
)

// The mount asks the kernel not to apply the caller's umask to the mode of
// a create or mkdir (CAP_DONT_MASK), because POSIX ignores the umask under
// a directory's default ACL (the ACL narrows the mode instead). Everywhere
// else the mount applies it, reading it from /proc/PID/status: go-fuse
// v2.12.1 does not pass the umask the kernel sends.

// defaultUmask is used when the caller's cannot be read.
const defaultUmask = 0o022

// umaskTTL is how long a process's umask is kept.
const umaskTTL = time.Second

type umaskEntry struct {
	mask uint32
	at   time.Time
}

var umasks sync.Map // pid -> umaskEntry

// callerUmask is the umask of the process making the FUSE call.
func callerUmask(ctx context.Context) uint32 {
	c, ok := gofuse.FromContext(ctx)
	if !ok || c.Pid == 0 {
		return defaultUmask
	}
	if e, ok := umasks.Load(c.Pid); ok && time.Since(e.(umaskEntry).at) < umaskTTL {
		return e.(umaskEntry).mask
	}
	mask := readUmask(c.Pid)
	umasks.Store(c.Pid, umaskEntry{mask: mask, at: time.Now()})
	return mask
}

// readUmask parses the Umask line of /proc/PID/status (Linux 4.7 and later).
func readUmask(pid uint32) uint32 {
	b, err := os.ReadFile("/proc/" + strconv.FormatUint(uint64(pid), 10) + "/status")
	if err != nil {
		return defaultUmask
	}
	_, rest, ok := bytes.Cut(b, []byte("\nUmask:"))
	if !ok {
		return defaultUmask
	}
	line, _, _ := bytes.Cut(rest, []byte("\n"))
	v, err := strconv.ParseUint(string(bytes.TrimSpace(line)), 8, 32)
	if err != nil {
		return defaultUmask
	}
	return uint32(v) & 0o777
}
