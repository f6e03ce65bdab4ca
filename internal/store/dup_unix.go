package store

import (
	"os"
)

// dupFile returns a new *os.File for the same file with its own file
// offset: sendfile reads from the descriptor's offset, and descriptors made
// by dup(2) share one, so concurrent requests must each open the file.
func dupFile(f *os.File) (*os.File, error) {
	return os.Open(f.Name())
}
