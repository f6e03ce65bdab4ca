// Package blob is the node-local blob store: blobs named by their SHA-256,
// packed into append-only volume files (package volume), found through a
// compact in-memory index.
//
// # Layout in Config.Dir
//
//	00000001.vol, 00000002.vol, ...   volume files; the highest id is active
//	index.ckpt                        index checkpoint written by Close and in the background (layout in checkpoint.go)
//	scrub.state                       the scrub's progress (layout in scrub.go)
//	*.tmp                             leftovers of an interrupted checkpoint or scrub save, removed at Open
//
// # Write path and group commit
//
// Put appends the needle to the active volume under the store mutex, inserts
// it into the index, gives the append a sequence number and then waits until
// that sequence is durable. The first waiter that finds no fsync in flight
// becomes the leader and fsyncs the active volume for every append that
// completed before it started; the others wait on a condition variable. N
// concurrent Puts therefore cost about two fsyncs, not N. When the active
// volume would pass MaxVolumeSize it is fsynced (sealed) and a new volume is
// created durably (file fsync + directory fsync). Config.OnFsync observes
// the duration of every fsync of volume data.
//
// PutMany (a replica's batch of blobs from one PutBlobs call) does the same
// for many blobs under one acquisition of the mutex: the blobs not stored
// yet are encoded back to back and written with one pwrite
// (volume.AppendMany, all or nothing; one per volume when the batch crosses
// a volume roll), then it waits once for the highest sequence. Each blob's
// error is nil only once it is durable, as with Put.
//
// # Failures
//
// A failed write or fsync is never retried: the store becomes read-only
// (ErrReadOnly on every later write, reads continue), logs at Error, and
// removes from the index every Put that was not yet durable, so nothing
// unacknowledged is reported as stored. ENOSPC from a write, or free space
// below MinFreeBytes, returns ErrNoSpace; the volume truncates the partial
// needle away, so the store stays consistent and writable once space is
// freed. Delete and compaction, which free space, may use the MinFreeBytes
// reserve; only a real ENOSPC stops them.
//
// # Index
//
// See index.go: 20-byte slots (hash bytes 0..8, volume, offset/8, length) in
// 256 open-addressing shards chosen by hash byte 8; under 54 bytes of RAM per
// blob at any load. Every read checks the full hash in the needle header on
// disk, so hash-prefix collisions are handled correctly.
//
// # Read path
//
// Reads take a shard read lock, then an atomic reference on the volume
// (which keeps compaction from closing it and its map from being released),
// then read the needle.
//
// Memory maps: when Config.FS implements vfs.Mapper (the OS file system on
// 64-bit platforms) and Config.DisableMmap is false (the default), every
// volume is mapped read-only and shared (mmap PROT_READ, MAP_SHARED) once:
// at Open after recovery (so torn tails are truncated before mapping), and
// when a volume is created, before it is published. A sealed volume is
// mapped for its size, the active one for the most it can grow to
// (MaxVolumeSize, or one blob past an empty volume, at most 32 GiB); mapping
// past the end of the file is legal, and appends are pwrites into the page
// cache the map shares, so new needles are readable without remapping. The
// map is released when the volume is closed: for a compacted volume, when
// its last reader reference is released. ReadAt (and the header check of
// Size, Has and Locate) then reads through the map: it checks the needle
// header there (magic, version, flags, the full hash, the length) and copies
// the asked-for range straight into the caller's buffer, with no system call
// and no intermediate buffer. Get (which checks the CRC), Range, recovery
// and compaction keep using pread; Locate still hands out the file for
// sendfile. A read outside the map or past the volume's known size falls
// back to pread, as does everything when the file system cannot map or
// mmap fails (logged at Warn).
//
// Only indexed bytes are read through a map, and those are never rewritten
// or truncated: recovery truncates torn tails before mapping, and a failed
// append (ENOSPC) or an abandoned compaction truncates only bytes that no
// index entry points at. A file truncated behind the store's back, or a
// page the disk cannot read, would make the copy fault (SIGBUS); the copy
// runs with runtime/debug.SetPanicOnFault, and the fault is recovered and
// returned as ErrCorrupt instead of crashing the process. (A truncation
// that keeps the needle's page leaves zeros there, which the header check
// reports as ErrCorrupt too, or, inside the data, goes unnoticed, as bit rot
// would: ReadAt does not check the CRC.)
//
// Costs of the maps: virtual address space (one map per volume, the active
// one sized for MaxVolumeSize; 64-bit address spaces hold over 100 TiB) and
// one entry of vm.max_map_count (65530 by default) per volume; page-table
// memory for the pages read; the pages read count in the process's RSS as
// shared file pages (page cache, not heap). A page that is not in the page
// cache is read on the fault with the kernel's read-around (up to 128 KiB),
// where a pread reads what was asked for plus readahead.
//
// Without a map, ReadAt of up to 64 KiB reads header and data in one pread
// into a pooled buffer; larger reads are a header pread and a data pread
// into the caller's buffer. Either way nothing is allocated per read.
//
// # Verified reads and quarantine
//
// No byte of a needle that fails its checksum leaves the store: the first
// ReadAt, MappedData (and so Resident) or Locate of a needle since Open
// checks it whole — header, length, and the CRC32C over header and data
// (volume.Verify: through the map when there is one, else preads through a
// pooled 64 KiB buffer) — before anything is copied, lent or handed out
// for sendfile, even for a range far from the damage. A needle that passes
// gets the verified bit in its index slot (index.go), and later reads
// check only its header, as before: one CRC per needle per process
// lifetime (a 4 MiB blob costs about a millisecond once), where a check on
// every read would cost a CRC of the whole blob per small-range read. Get
// checks the CRC on every call anyway. Bit rot after the first check is the
// scrub's to find (scrub.go), or the first read after a restart's.
//
// A copy that fails a check, on any read path or in the scrub, is
// quarantined (verify.go): taken out of the index at once (Has is false,
// nothing serves it again, and a Put of the same blob — a repair — stores a
// good copy instead of deduplicating against it), made durable with a
// tombstone (when its header still names its blob and the store is
// writable; otherwise a background checkpoint records the index without
// it, and until then a restart finds it again on its first read), counted
// in Stats.CorruptCopies, logged at Error and reported to
// Config.OnCorrupt, which the node wires to the repairer. The volume is
// left alone by compaction from then on. The read gets an error wrapping
// ErrCorrupt and ErrNotFound, so a caller that falls back to another
// replica when a blob is not here (the store, the replica server) does so;
// on a single node the store answers with its ErrCorrupt.
//
// # Checkpoints
//
// Every Config.CheckpointInterval appended bytes (default 64 MiB) a
// background goroutine writes index.ckpt; Put only bumps a counter and
// signals it. The checkpoint describes one instant T0 taken under the store
// mutex: the volumes' sizes then, fsynced (through group commit) before
// anything is written, so it only records durable offsets, and the index
// then. The index is walked without the mutex, reads go on under shard read
// locks; entries appended after T0 are left out (recovery finds them in the
// tails) and entries Delete removed during the walk are put back (their
// tombstones are in the tails). Compaction waits for a checkpoint and vice
// versa. A failed checkpoint is logged at Warn; the previous one stays valid.
//
// # Recovery
//
// Open loads index.ckpt if its CRC and its per-volume valid offsets match the
// volumes on disk (otherwise it is ignored with a Warn and every volume is
// scanned in full), then scans every volume in id order from its
// checkpointed offset to the end; the startup log and
// Stats.RecoveryScannedBytes give the bytes scanned. A later needle for a
// hash supersedes an earlier one and a tombstone removes the hash. At an
// invalid needle (volume.ScanRecover) the scan looks for a valid needle
// further on. If there is one, the invalid bytes are mid-volume corruption:
// they are skipped and never truncated, logged at Error with the byte range
// and counted in Stats.CorruptRegions, the scan goes on, and the volume
// takes no more appends (if it was the active one a new volume is started)
// and is not compacted. A live needle found that way must also hash to its
// hash. If there is none, the invalid bytes are a torn tail (a crash during
// an append): the volume is truncated there, logged at Warn. Appends only
// go to the highest volume (compaction copies into it too), so (volume id,
// offset) order is the order of operations. Per-volume live bytes are
// recomputed from the index; tombstone bytes are kept in the checkpoint.
// Once a checkpoint covers a damaged volume it is not scanned (nor reported)
// again.
//
// # Compaction
//
// Compact rewrites sealed volumes chosen by the cost-benefit policy of a
// log-structured file system's cleaner (compact.go): a volume with no live
// needle at once, walking only its needle headers for the tombstones to
// carry (its dead data is not read); one whose garbage exceeds CompactGarbageRatio r once its
// (1−u)·age/(1+u) — u the fraction to copy, age the time since it was
// sealed (its file's modification time if it was sealed before Open) —
// reaches r·A/(2−r), A = CompactAge, so that a young volume whose live
// needles are about to die waits until they have, and no volume sealed
// longer than A ago holds more than r of garbage; all candidates, without
// waiting, when the garbage held back exceeds the free space. For each,
// live needles are appended to the active volume and made durable, the
// index entries that still point at the old location are switched, and the
// old volume is removed once no reader holds a reference. A crash in
// between leaves two copies, and the scan keeps the later one. Volumes with
// corrupt regions found at Open, with a quarantined copy, or that a
// compaction found not to scan to their end are left alone (logged at
// Error; the pass goes on with the others).
//
// # Scrub
//
// A background goroutine re-reads every live needle, in volume and offset
// order, at Config.ScrubRate bytes per second (by default derived from
// Config.ScrubPeriod, two weeks, so the whole store is checked once per
// period), checks its CRC and that its data hashes to its name, and
// quarantines what fails. Passes are paced on Config.Clock, resumable
// across restarts (scrub.state), reported by ScrubStatus and started on
// demand by StartScrub; see scrub.go.
//
// Compaction is the only thing that gives space back (Delete appends a
// tombstone), so it must work on a full disk: its copies are not held to
// MinFreeBytes. Instead, before copying anything, it checks that the
// volume's live bytes (and tombstones it would carry) fit in the free space
// reported by Statfs less a 1 MiB margin, and otherwise skips the volume
// for this pass. Candidates are taken in the order of their benefit per
// cost, highest first, so entirely dead volumes (nothing to copy) go
// first. A compaction that fails partway (a real ENOSPC, a read error) is
// abandoned: the old volume and its index
// entries stay, and its copies are truncated off the active volume unless
// other appends followed them, so repeated failing passes do not pile up
// garbage.
package blob
