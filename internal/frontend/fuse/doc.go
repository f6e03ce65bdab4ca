// Package fuse serves a bucket (or a directory of one) as a POSIX mount
// inside the node process, with hanwen/go-fuse/v2. It is a front end like
// httpapi: it calls store.Store (and store.Local's Watch for cache
// invalidation) and nothing below it.
//
// # What works (issue 9, first increment)
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
//     directory's default ACL is given to what is made in it (inheritACL).
//   - Not yet: write-back across files (each close publishes), the
//     cluster's capacity in statfs. FIFOs, sockets and
//     devices are refused (EPERM).
//
// # Writes
//
// A file opened for writing gets a private temporary file (in the node's
// data directory, so a large copy does not use RAM) holding its content:
// empty with O_TRUNC or a new file, else a copy of the committed content
// made at the first write. Reads and getattr through the mount see the
// temporary content at once. The content is published — store.Put, one
// atomic new version, visible on every node — at fsync, at flush (close)
// and at release; a failure is returned to the caller of that call (EIO,
// ENOSPC). Two writers of one path: the last publish wins, whole. The
// kernel sends O_TRUNC with the open (CAP_ATOMIC_O_TRUNC), so a rewrite
// is never published empty first; a truncate while the file is open for
// writing joins the content being written. Calls that change the
// namespace are bounded (writeTimeout, 30 s: EIO), so a node without its
// write quorum never hangs a caller.
//
// # Caching
//
// The kernel keeps entries, attributes and pages for EntryTimeout and
// AttrTimeout (long: an hour), misses for 5 s. Every applied namespace change, made
// through any node, reaches the mount through store.Local.Watch; the mount
// then invalidates the kernel's entry for the changed name and the
// attributes and pages of its inode (on a queue, never on the applying
// goroutine: the kernel may wait on locks a FUSE call holds).
package fuse
