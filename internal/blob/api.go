package blob

import (
	"errors"
	"log/slog"
	"time"

	"github.com/cairn-fs/cairn/internal/cas"
	"github.com/cairn-fs/cairn/internal/clock"
	"github.com/cairn-fs/cairn/internal/vfs"
	"github.com/cairn-fs/cairn/internal/volume"
)

// The content address lives in internal/cas, a leaf package that the
// namespace and placement share without importing the blob store; these
// are its names here.

// MaxSize is the largest blob: files are cut into blobs of at most 4 MiB.
const MaxSize = cas.MaxSize

// Hash names a blob: the SHA-256 of its bytes.
type Hash = cas.Hash

// Sum returns the Hash of b.
func Sum(b []byte) Hash { return cas.Sum(b) }

// ParseHash parses the hex form produced by Hash.String.
func ParseHash(s string) (Hash, error) { return cas.ParseHash(s) }

// Errors returned by the Store. Callers test them with errors.Is. A read
// that finds its copy corrupt quarantines it (see "Verified reads" in the
// package documentation) and returns an error wrapping both ErrCorrupt and
// ErrNotFound: the copy is gone from this node, so a caller that reads
// another replica when a blob is not here does so.
var (
	ErrNotFound = errors.New("blob: not found")
	ErrCorrupt  = errors.New("blob: corrupt")
	ErrNoSpace  = errors.New("blob: no space left on device")
	ErrReadOnly = errors.New("blob: store is read-only after a write or fsync failure")
	ErrTooLarge = errors.New("blob: larger than MaxSize")
	ErrClosed   = errors.New("blob: store closed")
)

// Config configures a Store.
type Config struct {
	// Dir is the directory holding volume files and the index checkpoint. Required.
	Dir string
	// FS is the file system. Default: vfs.OS.
	FS vfs.FS
	// MaxVolumeSize is the size in bytes after which a new volume is started. Default 1 GiB; max 32 GiB.
	MaxVolumeSize int64
	// CompactGarbageRatio: a sealed volume whose dead bytes exceed this
	// fraction of its size is a candidate for compaction; one older than
	// CompactAge is compacted at the latest then, one with more garbage
	// sooner (the LFS cleaner's cost-benefit: see "Compaction" in the
	// package documentation). Default 0.5.
	CompactGarbageRatio float64
	// CompactAge is how long after it was sealed a volume whose garbage
	// just exceeds CompactGarbageRatio waits before it is compacted, so
	// that young volumes whose live needles are about to die are left
	// until they have (a volume with no live needle left is compacted at
	// once). Default 1h; negative: no wait (a volume is compacted as soon
	// as its garbage exceeds the ratio).
	CompactAge time.Duration
	// MinFreeBytes: writes fail with ErrNoSpace when the file system has less free space than this. Default 64 MiB.
	MinFreeBytes int64
	// Logger receives lifecycle and error logs. Default: slog.Default().
	Logger *slog.Logger
	// CheckpointInterval is the number of bytes appended to volumes (blobs,
	// tombstones and compaction copies, headers and padding included) after
	// which the index checkpoint is written again in the background, so that
	// recovery after a crash scans only what was appended since. Default
	// 64 MiB; negative: only Close writes a checkpoint.
	CheckpointInterval int64
	// OnFsync, if not nil, is called after every fsync of a volume's data
	// (group commit, sealing a full volume, Close, truncating a torn tail at
	// Open) with the fsync's duration, error or not, on the goroutine that
	// issued it; it must not block or call the Store. The fsyncs inside
	// creating a volume and writing the checkpoint are not reported. Default nil.
	OnFsync func(d time.Duration)
	// Now is the clock used to time fsyncs for OnFsync. Default: time.Now.
	Now func() time.Time
	// DisableMmap turns off the memory maps of volume files: every read is
	// then a pread, as on a file system that cannot map (vfs.Mem). Default
	// false: volumes are mapped read-only when FS implements vfs.Mapper and
	// small reads are copies from the map (see "Read path" in the package
	// documentation).
	DisableMmap bool
	// OnCorrupt, if not nil, is called after a copy that failed its
	// checksum (found by a read or the scrub) was quarantined, with the
	// blob's hash (the zero Hash when the needle's header is too damaged
	// to name it), on the goroutine that found it; it must not block or
	// call the Store. The node asks the repairer for a pass. Default nil.
	OnCorrupt func(h Hash)
	// OnRead, if not nil, is called with the blob's hash after each read
	// of a stored blob that succeeded through ReadAt, Get, Locate or
	// MappedData (not Has, Size, Resident, Range or the scrub), on the
	// reader's goroutine; it must be cheap, must not block and must not
	// call the Store. A client node's cache of blobs read from other
	// nodes keeps its recency with it (replica.DiskCache). Default nil.
	OnRead func(h Hash)
	// OnDelete, if not nil, is called with the blob's hash after a copy
	// left the store through Delete or a quarantine (a copy that failed
	// its checksum), on that caller's goroutine; compaction, which moves
	// copies, does not call it. It must not block or call the Store. A
	// client node's cache keeps its index with it (replica.DiskCache).
	// Default nil.
	OnDelete func(h Hash)
	// ScrubRate is the rate in bytes per second at which the background
	// scrub re-reads and checks the live needles (scrub.go). 0 (the
	// default) derives it at the start of each pass from ScrubPeriod:
	// max(MinScrubRate, live bytes / ScrubPeriod).
	ScrubRate int64
	// ScrubPeriod is how often a scrub pass starts: each pass begins
	// ScrubPeriod after the previous one began (or at once when it took
	// longer), and a derived rate finishes it within the period. Default
	// 336h (2 weeks); negative: no background passes (StartScrub still
	// runs one).
	ScrubPeriod time.Duration
	// Clock paces the scrub and dates its passes. Default clock.Real.
	Clock clock.Clock

	// checkpointHook, for tests, is called after each background checkpoint
	// with the bytes of volume files it covers.
	checkpointHook func(covered int64)
	// scrubSleeping, for tests, is called when the scrub starts waiting on
	// Clock for d (0: for StartScrub or Close only).
	scrubSleeping func(d time.Duration)
}

// NeedleSize is the bytes a blob of n bytes takes in a volume (its
// needle: header, data, padding).
func NeedleSize(n int) int64 { return volume.NeedleSize(n) }

// Stats describes a Store.
type Stats struct {
	Blobs       int64 // live blobs in the index
	Volumes     int   // volume files
	Bytes       int64 // total size of volume files
	LiveBytes   int64 // bytes of live needles
	IndexBytes  int64 // bytes of RAM used by the in-memory index
	Fsyncs      int64 // fsyncs issued
	ReadOnly    bool
	Compactions int64
	// Checkpoints is the number of index checkpoints written since Open.
	Checkpoints int64
	// RecoveryScannedBytes is the number of volume bytes Open scanned: the
	// parts of the volumes past their checkpointed offsets.
	RecoveryScannedBytes int64
	// CorruptRegions is the number of damaged regions in the middle of
	// volumes that Open skipped (logged at Error); the blobs in them are lost.
	CorruptRegions int64
	// MappedVolumes is the number of volume files read through a memory map
	// (0 with DisableMmap or a file system that cannot map).
	MappedVolumes int
	// CorruptCopies is the number of copies quarantined since Open because
	// they failed a check on a read or in the scrub (logged at Error).
	CorruptCopies int64
}
