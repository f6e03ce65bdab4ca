package fuse

import (
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// readAheadKB is the kernel's read-ahead window for a Cairn mount, in KiB.
// The kernel starts every FUSE mount at 128 KiB and cannot be told more in
// the protocol (FUSE_INIT's max_readahead only lowers it), so a cold read
// of a 650 KB file costs five or six READ round trips, each of them a
// volume read on the node. At 1 MiB (the largest READ the mount takes,
// MaxWrite: max_pages follows it) the same file comes in two or three,
// and 20 readers of such files read 1.3-1.6x as many files a second
// (bench/BENCHMARKS.md, issue 33). Files under 128 KiB (code, small
// uploads) read as before: the window only grows for sequential reads
// that go on. JuiceFS sets its mounts' read_ahead_kb the same way.
const readAheadKB = 1024

// setReadAhead sets the read-ahead window of the FUSE mount on dir through
// /sys/class/bdi/MAJOR:MINOR/read_ahead_kb (the mount's anonymous device).
// Writing it needs root; a mount made without it keeps the kernel's 128
// KiB and works as before.
func setReadAhead(dir string, kb int) error {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return &os.PathError{Op: "stat", Path: dir, Err: err}
	}
	p := bdiReadAheadPath(st.Dev)
	if err := os.WriteFile(p, []byte(strconv.Itoa(kb)), 0); err != nil {
		return fmt.Errorf("read-ahead of %s: %w", dir, err)
	}
	return nil
}

// bdiReadAheadPath is the sysfs file of the read-ahead window of the
// device dev.
func bdiReadAheadPath(dev uint64) string {
	return fmt.Sprintf("/sys/class/bdi/%d:%d/read_ahead_kb", unix.Major(dev), unix.Minor(dev))
}
