// Package volume implements one append-only volume file: a superblock
// followed by needles, each holding one blob (or a tombstone for one).
//
// All integers are little-endian.
//
// # Superblock (16 bytes, at offset 0)
//
//	off len field
//	  0   4 magic   "CRNV" (0x43 0x52 0x4e 0x56)
//	  4   1 version 1
//	  5   3 reserved, zero
//	  8   4 volume id (uint32, never 0)
//	 12   4 CRC32C (Castagnoli) of bytes 0..12
//
// # Needle (at an 8-byte aligned offset >= 16)
//
//	off len field
//	  0   4 magic    "CRNN" (0x43 0x52 0x4e 0x4e)
//	  4   1 version  1
//	  5   1 flags    0 = live blob, 1 = tombstone (FlagTombstone); other values invalid
//	  6   2 reserved, zero
//	  8  32 hash     the blob's SHA-256
//	 40   4 length   data length n in bytes (0 for a tombstone; <= MaxDataLen)
//	 44   4 CRC32C   Castagnoli CRC of bytes 0..44 followed by the n data bytes
//	 48   n data
//	48+n  p padding  zeros, p = (8 - (48+n)%8) % 8, so the next needle is 8-byte aligned
//
// A needle thus occupies NeedleSize(n) = align8(48+n) bytes; a needle's
// offset divided by 8 fits in a uint32 for volumes up to 32 GiB, which is
// what the blob index stores.
//
// # Invariants
//
//   - A volume only grows by Append/AppendTombstone, each a single pwrite of
//     a whole needle at the current end. Append never fsyncs: the caller
//     (the blob store) groups fsyncs with Sync.
//   - A failed append is truncated away so the file always ends at a needle
//     boundary; if that truncate fails too the volume refuses further
//     appends (ErrBroken).
//   - Reads never take the append lock: a reader only reads offsets below
//     the end it learned, which are never rewritten.
//   - A volume may be memory-mapped read-only (Map, through vfs.Mapper) for
//     more than its size; ReadMapped serves only bytes below both Size() and
//     the end of the map, under a fault guard (SetPanicOnFault) that turns
//     a page lost to truncation into ErrCorrupt. Close releases the map;
//     the owner must not call it while ReadMapped may run.
//   - Verify checks a whole needle (header, the length the caller expects,
//     CRC) through the map when it covers the needle, else with preads
//     through the caller's scratch buffer; the blob store runs it before it
//     first serves a needle.
//
// # Recovery rule
//
// Scan walks needles from an offset and stops at the first needle that is
// incomplete (file ends inside it), has a bad magic, version, flags or
// length, or whose CRC does not match, and returns the end of the valid
// prefix.
//
// ScanHeaders, which compaction uses for a volume whose blobs are all
// dead, walks the same chain of needles by their headers alone: it checks
// the CRC of tombstones (header-only needles) but not the data of blobs,
// and stops at the first invalid header.
//
// ScanRecover, which recovery uses, tells a torn tail from mid-volume
// corruption: at an invalid needle at X it searches forward, at 8-byte
// aligned offsets (needles are 8-byte padded), for the first offset holding
// a needle with a valid header and CRC. If there is one, at Y, [X, Y) is
// mid-volume corruption (bit rot, a bad sector): it is reported, skipped and
// never truncated, and the scan goes on at Y. If there is none, X starts a
// torn tail (a crash during an append: a partial, zero-filled or garbage
// write) and recovery truncates the file at X. A damaged last needle cannot
// be told from a torn one and is truncated. The search reads the rest of the
// file once and CRC-checks only offsets that carry a needle magic, within a
// budget (see ScanRecover); if the budget runs out nothing is truncated.
package volume
