// Package backup copies a bucket's snapshot off the cluster and back:
// `cairn backup BUCKET DEST` and `cairn restore SRC BUCKET[/PREFIX]`
// (design 0007, "Backups"; docs/operations.md, "Backups").
//
// # What a backup is
//
// A backup copies the files of one snapshot of a bucket, read through
// /_snapshots/BUCKET/NAME/ (so writes go on while it runs and the copy is
// of one point of the log), to a destination (Location): a local
// directory, a prefix of a bucket of another Cairn cluster (native API,
// small files in bulk tar uploads) or a prefix of an S3 bucket. Each file
// is stored by its path, so a directory backup is a plain tree. A
// destination mirrors the last snapshot copied into it: files the backup
// put there earlier and the snapshot no longer has are removed; files it
// did not put there are left alone (and a destination that holds files
// but no manifest is refused, so that a mistyped path is not filled).
// Empty directories are not copied; a top-level ".cairn-backup/" or
// ".cairn-uploads/" (S3 multipart parts in flight) of the bucket is not
// copied either.
//
// # Metadata at the destination
//
// Under ".cairn-backup/" at the destination's root:
//
//	manifest.json  the last completed backup (Manifest): format 1, the
//	               bucket, the snapshot (name, time, log index), the
//	               source server, when it completed, and for every file
//	               path -> {sha256, size, mtime, mode, content_type};
//	               "hashes" is the number of distinct SHA-256 (the
//	               content addresses the destination holds are exactly the
//	               sha256 of the entries).
//	pending.json   a run in progress (Journal): every path it may write
//	               or delete, written (durably) before its first change.
//	tmp/           a directory destination's files being written.
//
// # Incremental copies and the recovery rule
//
// A file is copied when the destination does not hold its content: the
// destination's own SHA-256 when it knows one (a Cairn destination lists
// them), else the manifest's entry when the path is not pending and the
// size at the destination matches, else the destination is asked
// (Location.Holds: a directory hashes its file, S3 reads the object's
// x-amz-meta-cairn-sha256). Every copied byte is checked against the
// snapshot's SHA-256 while it is copied (verifier): a mismatch fails the
// file before its last byte is written, so nothing wrong is stored
// (a directory's file goes through tmp/ and a rename; a streamed PUT is
// cut short, which the server refuses whole).
//
// The manifest is written last, atomically (a rename, or one PUT), and
// only when every file was copied and, where the destination can tell,
// checked there. So a manifest never names a file it does not hold. An
// interrupted run leaves the previous manifest and pending.json: the next
// run trusts the manifest for every path except the pending ones, which it
// checks at the destination (free for Cairn, a local hash for a directory,
// a HEAD for S3) before copying what is missing — it resumes rather than
// starts over. pending.json is removed after the new manifest is in place;
// paths of several interrupted runs accumulate in it.
//
// # Restore
//
// Restore reads the manifest at the source, checks each file against it
// while reading, and uploads to a bucket with the native API (bulk tar
// uploads for small files). Identical files at the target are skipped; a
// different file at the target refuses the whole restore before anything
// is written, unless Force.
//
// # Memory
//
// A run's memory does not grow with the tree. Its working lists — the
// snapshot's files, the destination's listing, the manifest and the
// journal as read, the plan (lists.go) — are kept in a spill.Map, keyed
// by path: in memory up to 100,000 entries, then in a temporary Pebble
// database under TMPDIR (a few hundred bytes a file). The manifest and the
// journal are read and written as streams (readManifest, writeManifest):
// the document is still the one JSON object of format 1, its "files"
// (or "paths") member last, so a manifest of an earlier release is read
// as is, and one written here is read by it. A new manifest goes to a
// temporary file first (its size and SHA-256 known), then to the
// destination in one atomic write.
//
// The package does network and file I/O itself: it is a client tool, like
// package client, and its pure parts (the plan, the verifier, the manifest
// codec) are tested without either.
package backup
