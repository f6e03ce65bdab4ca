//go:build linux

package vfs

import (
	"os"
	"syscall"
	"unsafe"
)

// Resident reports whether every page holding b, a slice of a memory map
// (Mapper.Map), is in memory (mincore(2)), so that reading b, or sending
// the file bytes under it, will not wait for the disk. It is a snapshot:
// a page may be evicted right after. False for an empty b or on any
// error. It makes one raw system call per 4,096 pages (no scheduler
// hand-off: mincore does not block) and does not allocate.
func Resident(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	ps := uintptr(os.Getpagesize())
	start := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	end := start + uintptr(len(b))
	addr := start &^ (ps - 1)
	var vec [4096]byte
	for addr < end {
		pages := min((end-addr+ps-1)/ps, uintptr(len(vec)))
		_, _, errno := syscall.RawSyscall(syscall.SYS_MINCORE, addr, pages*ps, uintptr(unsafe.Pointer(&vec[0])))
		if errno != 0 {
			return false
		}
		for _, v := range vec[:pages] {
			if v&1 == 0 {
				return false
			}
		}
		addr += pages * ps
	}
	return true
}
