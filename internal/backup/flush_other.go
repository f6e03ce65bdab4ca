//go:build !linux

package backup

import "os"

// syncEachFile: without syncfs, a directory location syncs each file
// before renaming it into place.
const syncEachFile = true

// flushFS syncs the root directory (the files were synced one by one).
func flushFS(dir *os.File) error { return dir.Sync() }

// lockFile takes no lock where flock is not portable: do not run two
// backups into one directory at once.
func lockFile(f *os.File) error { return nil }
