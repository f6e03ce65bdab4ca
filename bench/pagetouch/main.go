// Command pagetouch measures what a buffered write of new file data costs
// on this machine when the page cache takes fresh memory, against writing
// over pages the kernel has just freed (stdlib only).
//
//	go run ./bench/pagetouch [-dir DIR] [-mb 3072] [-passes 3]
//
// Each pass writes -mb MB into a new file in DIR with pwrite(2) in 2 MiB
// pieces (the size of a download file), printing the CPU time (user +
// system) per piece for each 256 MB, then deletes the file. On a virtual
// machine whose host takes back the guest's free memory, the first pass
// (and any pass after the host has reclaimed the freed pages) pays for the
// host's first touch of every page; a pass that follows at once gets the
// pages the previous one freed. bench/BENCHMARKS.md ("Downloads at line
// rate", churn) cites it.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

func cpu() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func main() {
	dir := flag.String("dir", os.TempDir(), "directory for the scratch file (the file system under test)")
	mb := flag.Int("mb", 3072, "MB written per pass (a multiple of 256)")
	passes := flag.Int("passes", 3, "passes")
	flag.Parse()
	const piece = 2 << 20
	const block = 128 // pieces per report: 256 MB
	buf := make([]byte, piece)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	path := filepath.Join(*dir, fmt.Sprintf("pagetouch-%d.dat", os.Getpid()))
	defer os.Remove(path)
	for pass := 1; pass <= *passes; pass++ {
		f, err := os.Create(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, "pagetouch:", err)
			os.Exit(1)
		}
		fmt.Printf("pass %d, CPU ms per 2 MiB pwrite, each 256 MB:", pass)
		for blk := 0; blk < *mb/256; blk++ {
			c0 := cpu()
			for i := 0; i < block; i++ {
				if _, err := f.WriteAt(buf, int64(blk*block+i)*piece); err != nil {
					fmt.Fprintln(os.Stderr, "\npagetouch:", err)
					os.Exit(1)
				}
			}
			fmt.Printf(" %.2f", float64(cpu()-c0)/block/1e6)
		}
		fmt.Println()
		f.Close()
		os.Remove(path)
	}
}
