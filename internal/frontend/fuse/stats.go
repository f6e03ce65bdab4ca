package fuse

import (
	"sync/atomic"
	"time"
)

// Counting the calls (issue 19, "Measure first"): every FUSE request the
// kernel sends is counted per opcode with its latency (from the moment
// go-fuse hands it to the file system until the answer is built), and the
// write-back queue reports its depth, bytes, the age of its oldest item,
// and how many publishes succeeded or failed. Mount.Stats reads them;
// internal/node exports them as Prometheus metrics (cairn_fuse_*) and on
// the admin page. The counters are atomics: a call costs two clock reads
// and three atomic adds.

// Op is a FUSE opcode the mount counts.
type Op int

// The opcodes counted. Names are the kernel's (lowercase).
const (
	OpLookup Op = iota
	OpForget
	OpGetattr
	OpSetattr
	OpMknod
	OpMkdir
	OpUnlink
	OpRmdir
	OpRename
	OpLink
	OpSymlink
	OpReadlink
	OpAccess
	OpGetxattr
	OpListxattr
	OpSetxattr
	OpRemovexattr
	OpCreate
	OpOpen
	OpRead
	OpLseek
	OpGetlk
	OpSetlk
	OpSetlkw
	OpRelease
	OpWrite
	OpCopyFileRange
	OpFlush
	OpFsync
	OpFallocate
	OpOpendir
	OpReaddir
	OpReaddirplus
	OpReleasedir
	OpFsyncdir
	OpStatfs
	OpStatx
	OpIoctl
	NumOps
)

var opNames = [NumOps]string{"lookup", "forget", "getattr", "setattr", "mknod", "mkdir", "unlink", "rmdir",
	"rename", "link", "symlink", "readlink", "access", "getxattr", "listxattr", "setxattr", "removexattr",
	"create", "open", "read", "lseek", "getlk", "setlk", "setlkw", "release", "write", "copy_file_range",
	"flush", "fsync", "fallocate", "opendir", "readdir", "readdirplus", "releasedir", "fsyncdir", "statfs",
	"statx", "ioctl"}

// String returns the opcode's name, as the kernel spells it.
func (o Op) String() string {
	if o < 0 || o >= NumOps {
		return "unknown"
	}
	return opNames[o]
}

// LatencyBounds are the upper bounds, in seconds, of the latency buckets
// of OpStats.Buckets (the last bucket, +Inf, is implicit: Calls).
var LatencyBounds = [...]float64{10e-6, 25e-6, 50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3,
	100e-3, 250e-3, 500e-3, 1, 2.5, 5}

// OpStats are one opcode's counts since the mount started.
type OpStats struct {
	Op      Op
	Calls   uint64
	Seconds float64 // total latency
	// Buckets[i] counts the calls that took at most LatencyBounds[i]
	// (cumulative, as Prometheus histograms are).
	Buckets [len(LatencyBounds)]uint64
	Errors  uint64 // calls answered with an error status (ENOENT included)
}

// Stats is a snapshot of a mount's counters.
type Stats struct {
	Bucket, Prefix, Dir string
	// Ops lists the opcodes called at least once, in Op order.
	Ops []OpStats
	// The write-back queue: items (files, directories, attribute changes)
	// queued or being published, their bytes, the age of the oldest.
	QueueItems  int
	QueueBytes  int64
	QueueOldest time.Duration
	// Published and PublishErrors count queued items published, and those
	// whose publish failed (the writer gets EIO at its next fsync or
	// close).
	Published, PublishErrors uint64
	// ZeroCopyBytes counts the bytes READ answered by splicing them from
	// a volume file (splice.go), never copied through the node.
	ZeroCopyBytes uint64
}

// opCounter is one opcode's counters.
type opCounter struct {
	calls, errs, ns atomic.Uint64
	buckets         [len(LatencyBounds)]atomic.Uint64 // not cumulative
}

// counters are a mount's call counters.
type counters struct {
	ops      [NumOps]opCounter
	zeroCopy atomic.Uint64 // bytes spliced (Stats.ZeroCopyBytes)
}

// observe records one call of op that started at start.
func (c *counters) observe(op Op, start time.Time, failed bool) {
	d := time.Since(start)
	oc := &c.ops[op]
	oc.calls.Add(1)
	oc.ns.Add(uint64(d))
	if failed {
		oc.errs.Add(1)
	}
	s := d.Seconds()
	for i, b := range LatencyBounds {
		if s <= b {
			oc.buckets[i].Add(1)
			return
		}
	}
}

// snapshot returns the counts of every opcode called at least once.
func (c *counters) snapshot() []OpStats {
	var out []OpStats
	for op := range NumOps {
		oc := &c.ops[op]
		n := oc.calls.Load()
		if n == 0 {
			continue
		}
		st := OpStats{Op: op, Calls: n, Errors: oc.errs.Load(), Seconds: time.Duration(oc.ns.Load()).Seconds()}
		var cum uint64
		for i := range st.Buckets {
			cum += oc.buckets[i].Load()
			st.Buckets[i] = cum
		}
		out = append(out, st)
	}
	return out
}

// Stats returns a snapshot of the mount's counters. Safe for concurrent
// use; it takes the write-back queue's lock briefly.
func (m *Mount) Stats() Stats {
	st := Stats{Bucket: m.cfg.Bucket, Prefix: m.cfg.Prefix, Dir: m.cfg.Dir, Ops: m.calls.snapshot()}
	wb := m.wb
	wb.mu.Lock()
	st.QueueItems = len(wb.q) + wb.busy
	st.QueueBytes = wb.bytes
	if len(wb.q) > 0 {
		st.QueueOldest = time.Since(wb.q[0].at)
	}
	if wb.busy > 0 && !wb.busySince.IsZero() {
		st.QueueOldest = max(st.QueueOldest, time.Since(wb.busySince))
	}
	wb.mu.Unlock()
	st.Published, st.PublishErrors = wb.published.Load(), wb.failed.Load()
	st.ZeroCopyBytes = m.calls.zeroCopy.Load()
	return st
}
