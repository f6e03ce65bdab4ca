// Package vfs is the file-system seam of Cairn's storage engine.
//
// Everything that stores bytes on a node (volume files, the blob index
// checkpoint) goes through the FS and File interfaces declared in vfs.go, so
// that tests can swap the real disk for Mem, an in-memory file system that
// can crash and inject faults.
//
// Two implementations:
//
//   - OS() returns the real file system. ReadAt and WriteAt are pread(2) and
//     pwrite(2) on one open descriptor; SyncDir opens the directory and
//     fsyncs it; Statfs uses statfs(2). Its files implement OSFile so that
//     the HTTP layer can hand the *os.File to sendfile. It implements Mapper
//     with mmap(2) (PROT_READ, MAP_SHARED) on 64-bit platforms, so the blob
//     store can serve small reads from the page cache without a pread.
//
//   - NewMem() returns a Mem. Mem models what a real disk promises and no
//     more: for every file it keeps the durable content (as of the last
//     Sync) apart from the current content, and for every directory entry
//     whether it is durable (created, renamed or removed and then SyncDir'ed
//     on its parent). Crash() throws away everything that was not made
//     durable; CrashTorn(rng) does the same but keeps, for each file whose
//     unsynced bytes extend its synced content, a random prefix of those
//     bytes, sometimes overwritten with garbage or zeros, as a torn write
//     would. SetFault injects errors (EIO on fsync, ENOSPC on write, a short
//     write followed by an error via ShortWrite) and SetFree controls what
//     Statfs reports. Mem implements Mapper only to say it cannot map
//     (errors.ErrUnsupported), so code on Mem takes its ReadAt fallback.
//
// Invariants of Mem:
//
//   - A file's durable content only changes in Sync (and Crash).
//   - A directory entry's durability only changes in SyncDir (and Crash).
//     Directories themselves are always durable (MkdirAll is modelled as
//     durable at once: Cairn creates its directories once at start-up).
//   - After Crash every File opened before it fails with ErrCrashed, as the
//     descriptors of a dead process would be gone.
package vfs
