// Package fuse serves a bucket (or a directory of one) as a POSIX mount
// inside the node process, with hanwen/go-fuse/v2. It is a front end like
// httpapi: it calls store.Store (and store.Local's Watch for cache
// invalidation) and nothing below it.
//
// # What works
//
//   - Directories and regular files: lookup, getattr, readdir, mkdir,
//     rmdir, create (O_EXCL), open, read, write at any offset, truncate,
//     unlink, rename (within the mount), fsync, statfs.
//   - Owner, group and mode are stored on the inode (store.Attrs at
//     create and mkdir: the caller's uid and gid; store.SetAttrs for
//     chmod, chown and utimensat) and reported from it; the kernel checks
//     them (default_permissions) and the mount allows other users
//     (allow_other). A published version keeps the file's mode, owner
//     and content type.
//   - Symlinks (store.Symlink; ObjectInfo.Symlink is the target) and
//     user.* xattrs (store.Xattrs, store.SetAttrs.Xattrs); other xattr
//     namespaces answer ENOTSUP.
//   - Hard links (store.Link, meta.OpLink). Attributes and reads go by
//     inode number (store.StatIno, OpenIno): a name another node removed
//     or renamed does not lose the inode. Writes, attribute changes and
//     publishes still go by the path go-fuse knows (a hard-linked file
//     written through a name another node just removed: see the notes).
//   - Shared-writable mmap (the kernel writes dirty pages back through
//     Write) and posix_fallocate (mode 0: extends the content).
//   - POSIX ACLs: the system.posix_acl_* xattrs, enforced by the kernel
//     (CAP_POSIX_ACL); an access ACL sets the mode's bits (aclMode), a
//     directory's default ACL is given to what is made in it (inheritACL),
//     whose mode it narrows instead of the caller's umask, as POSIX has
//     it (CAP_DONT_MASK: the mount applies the umask elsewhere, umask.go).
//   - Times: mtime, ctime and atime (store ObjectInfo.ChangeTime,
//     AccessTime) are kept; reads do not move the atime (as with
//     noatime), utimensat sets it. A mode of 0 is a mode (meta.ModeExplicit
//     carries it through a publish).
//   - Paths over store.MaxPathLen bytes from the bucket's root:
//     ENAMETOOLONG to create, ENOENT to look up.
//   - Statfs reports the cluster's capacity (see Statfs).
//   - noflush (Config.NoFlush, with no-open mode): the first FLUSH is
//     served and answered ENOSYS, so the kernel sends no more (a close
//     costs nothing); the idle publisher (noopen.go) publishes what has
//     not changed for noFlushIdle, and every lock is refused (ENOLCK).
//     OPENDIR is answered ENOSYS too (noopendir.go): the kernel opens
//     directories without asking and keeps their listings cached; a
//     READDIR without a handle is served through a cursor the mount
//     keeps per directory.
//   - mknod makes FIFOs, sockets and devices (meta.TypeFIFO to
//     TypeBlockDev, log version 12), decided in the log as symlinks are.
//     They are names with a kind, mode and device number on every node;
//     each node's kernel makes its own pipe or socket behind a FIFO or
//     socket (processes on one node talk through it, not across nodes),
//     and the mount is nodev. mknod of a regular file makes an empty one,
//     exclusively.
//
// # Writes: the write-back queue
//
// A file opened for writing gets a private buffer (buffer.go), made at its
// first change: empty with O_TRUNC or a new file, else a copy of the
// newest version. It is kept in memory up to 1 MiB, then in an anonymous
// temporary file in the node's data directory (a large copy does not use
// RAM). A new file or directory is the mount's at once: Create and Mkdir
// take an inode number the mount reserved from the store
// (store.ReserveInos, 1024 at a time) and keep its owner, mode and times
// here. Reads, getattr and lookups through the mount see what was written
// at once: a directory's link count counts the subdirectories whose mkdir
// is queued (node.kids), a node keeps its uncommitted attributes until the
// store has them (published), and a getattr whose store read raced a
// publish of its node reads the store again (node.settled), so a stat
// right after a change shows it whenever the queue publishes it.
//
// Closing the file (flush, release) queues that version — its buffer,
// handed over — on the mount's write-back queue (writeback.go) and
// returns; mkdir, chmod, chown and utimensat are queued the same way (an
// attribute change of a node with a queued version or change goes with
// it). One publisher goroutine publishes the queue in order, each item
// once it has been queued 2 ms (settle: the chown, chmod and utimensat a
// writer makes just after close go with it) or at once when someone
// waits for it (fsync, a drain): consecutive
// small files (up to 1 MiB) together with store.PutFiles, which commits
// them in the order given (consensus.OrderedProposer); a large file alone
// with store.Put, streamed from its temporary file; consecutive
// directories, attribute changes and unlinks together with one
// store.ChangeMany (up to 1024: a chmod -R or an rm -rf costs a few log
// entries, not a round trip per name). Each publish is one atomic new
// version: a crash loses what was queued, never shows a torn or mixed
// file.
//
// # Who decides a name: directory ownership (own.go, design 0008)
//
// Create, Mkdir and Unlink decide locally only in a directory this node
// owns: they take the directory's claim first (store.DirOwners.Own: free
// when the node owns it, one commit to claim it, a recall when another
// node owns it), check the name against the namespace this node has
// applied plus the mount's queue, queue the change stamped with the claim,
// and let the claim go. A directory made under a claim is owned under the
// same claim (Adopt): an untar claims once. The log refuses a queued
// change whose claim has moved (ErrFenced, EIO at the next fsync or
// close). A recall of a directory has the mount publish what it decided
// there (FlushDir: its queue, and files created there and still open,
// with the content they have) before the node gives it up. So mkdir,
// O_EXCL, link, symlink and RENAME_NOREPLACE have one winner across the
// cluster. Rmdir is queued too when the node owns the directory and its
// parent and finds it empty in its own view; rename, link and symlink
// (and other rmdirs) are decided in the log (the store stamps them with
// this node's claims after FlushDir, or recalls the directories another
// node owns). A listing never waits for the queue: it lays the mount's
// unpublished creates and removals over the store's entries (overlay).
//
// unlink of a file name is queued too (opUnlink), unless the file has a
// change queued, was never published, or has other names (its link
// count shows through them: removed at once, after the queue): the call
// returns at once, and until the removal is published the mount answers
// as if the name were gone (lookup and create see no file; the node
// reports a link count of 0). A queued removal that fails, or a queued
// mkdir or attribute change whose node has no writer left to tell, is
// returned by the next fsync of a directory of the mount; a removal that
// finds the name gone already (another node removed it) succeeded. Every
// other change through the mount (an rmdir decided in the log, rename,
// link, symlink, xattrs, and a lookup of a queued name the kernel forgot) first waits
// for the queue to be empty, so one mount's changes reach the cluster in
// the order they were made.
//
// fsync of a file returns once its version (and everything queued before
// it) is durable on W replicas and committed; fsync of a directory (for
// example `sync DIR`) once everything queued before it is. go-fuse v2.12.1
// does not implement FUSE_SYNCFS, so syncfs(2) and sync(1) without
// arguments return without asking the mount: use fsync, or sync on a
// directory. A publish that fails is logged and returned (EIO, ENOSPC,
// ...) by the writer's next fsync or close of that file; publishes are
// bounded (30 s plus 1 s per MiB), so a node without its write quorum
// fails them rather than hold the queue. The queue holds at most 4096
// files or 256 MiB; a writer closing a file beyond that waits. Two writers
// of one path: the last publish wins, whole. A rewrite is never published
// empty first: with handles the kernel sends O_TRUNC with the open
// (CAP_ATOMIC_O_TRUNC); in no-open mode it truncates with a SETATTR after
// the open, which the mount keeps with the content until the close (see
// below). Other calls that change the namespace are bounded (writeTimeout,
// 30 s: EIO). Unmounting (SIGTERM) publishes the queue first.
//
// # Caching
//
// The kernel keeps entries, attributes and pages for EntryTimeout and
// AttrTimeout (long: an hour), misses for 5 s. Every applied namespace change, made
// through any node, reaches the mount through store.Local.Watch; the mount
// then invalidates the attributes and pages of the changed inode, the
// listing (readdir cache, FOPEN_CACHE_DIR) of its directory, and the
// kernel's entry for the name unless the name still leads to the same
// inode (dropping a directory's entry would make getcwd fail for every
// process working in it). This runs on a queue, never on the applying
// goroutine: the kernel may wait on locks a FUSE call holds. A lookup of
// a name with a change still queued publishes the queue first (the kernel
// may have forgotten the node that holds the change).
//
// # Reads
//
// A read comes from the content being written, else the version queued,
// else the inode's current committed version (a rewrite keeps the inode,
// and every open handle sees it, as on a local file system). A read of
// 64 KiB or more of a local copy is spliced from the volume file into
// /dev/fuse (splice.go): its bytes never pass through the node. With
// handles, a read-only handle pins the version it opened, read only once
// the inode is gone (a file unlinked or replaced while open), and a
// read-only open answers FOPEN_NOFLUSH: close(2) of such a file sends no
// FLUSH (it has nothing to publish).
//
// # No-open mode (the flush and noflush modes)
//
// A web node opens and closes files all day: a PHP page opens every file
// it includes (about 80 for a WordPress page, opcache or not) and reads
// none of them. With a handle per open file each costs an OPEN and a
// RELEASE round trip to the node. Config.NoOpen answers the first OPEN
// with ENOSYS, which the kernel takes as a success and as "never send
// OPEN again" (no_open): from then on opening a file costs nothing, its
// pages stay cached across opens (FOPEN_KEEP_CACHE: a change anywhere
// invalidates them, see Caching), and close(2) costs one FLUSH, answered
// from memory. There is no RELEASE either, so a file's state lives on its
// node, not on a handle (handle.go: the node's Read, Write, Flush and
// Allocate, with a handle made for the call):
//
//   - Writes go to the node's content; a FLUSH — any close(2) of the file
//     on this node, the kernel does not say which descriptor — queues what
//     was written so far. A reader's close while a writer is still
//     writing can therefore publish a part-written version, the one a
//     reader on this node sees at that moment (the writer's own close
//     publishes the rest); a torn version never reaches other nodes from
//     a crash.
//   - Content written and never flushed (a shared map written after the
//     last close) is published once it has not changed for 2 s
//     (idlePublish, noopen.go), and at unmount.
//   - O_TRUNC comes as a SETATTR of size 0 after the open, without a
//     handle and with nothing to tell it from truncate(2) of a path. A
//     size change is therefore kept with the content until the next
//     FLUSH or until idle: truncate(2) of a path reaches other nodes
//     after 2 to 2.5 s, and a writer that truncates and then writes
//     nothing for 2 s has its empty version published.
//   - An open descriptor cannot pin the version it opened. The node pins
//     the version last read through it, and the version it had when
//     unlinked or replaced (renamed over) through this mount: a file
//     unlinked or replaced while open keeps reading that version, and
//     fstat shows its size with a link count of 0. A file opened but not
//     yet read when another node replaces it reads ENOENT (as NFS answers
//     ESTALE).
//   - A failed publish is returned by the file's next FLUSH (close) on
//     this node, whichever descriptor it is, or its next fsync.
//
// Config.NoOpen false (cairn server --mount-handles) gives back a handle
// per open file and the per-descriptor semantics above.
//
// # Privileges
//
// The mount negotiates FUSE_HANDLE_KILLPRIV_V2: it clears suid and sgid
// itself on a write, truncation or O_TRUNC by a caller without CAP_FSETID
// and on a chown (killpriv.go), and in exchange the kernel asks for a
// file's security.capability once per inode instead of before every
// WRITE.
//
// # Counting
//
// Every FUSE call is counted per opcode with its latency (counting.go,
// stats.go), with the write-back queue's depth, bytes and oldest age and
// the publishes that succeeded or failed: Mount.Stats, exported by
// internal/node as cairn_fuse_* metrics and GET /_cairn/mounts.
package fuse
