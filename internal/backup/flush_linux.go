package backup

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// syncEachFile: Linux syncs a whole file system at once (syncfs), so a
// directory location does not sync its files one by one.
const syncEachFile = false

// flushFS makes every write to the file system holding dir durable.
func flushFS(dir *os.File) error { return unix.Syncfs(int(dir.Fd())) }

// lockFile takes an exclusive, non-blocking flock on f.
func lockFile(f *os.File) error {
	return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
}
