package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// needFuse skips the test where a FUSE mount cannot be made: not root, no
// /dev/fuse, no fusermount3 (make test installs fuse3 on Debian as root).
func needFuse(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mount tests need root (allow_other, mounting)")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skip("no /dev/fuse")
	}
	if _, err := exec.LookPath("fusermount3"); err != nil {
		if _, err := exec.LookPath("fusermount"); err != nil {
			t.Skip("no fusermount3 (Debian package fuse3)")
		}
	}
}

// fuseUsable reports whether a FUSE mount can be made here (needFuse's
// conditions), for tests that mount only where they can.
func fuseUsable() bool {
	if os.Geteuid() != 0 {
		return false
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		return false
	}
	_, err := exec.LookPath("fusermount3")
	if err != nil {
		_, err = exec.LookPath("fusermount")
	}
	return err == nil
}

// waitFile waits until path holds want (nil: until it does not exist).
func waitFile(t *testing.T, bound time.Duration, path string, want []byte, logs ...*server) time.Duration {
	t.Helper()
	start := time.Now()
	waitFor(t, bound, "mount file "+path, func() bool {
		got, err := os.ReadFile(path)
		if want == nil {
			return errors.Is(err, os.ErrNotExist)
		}
		return err == nil && bytes.Equal(got, want)
	}, logs...)
	return time.Since(start)
}

// startMountCluster starts a cluster of n nodes, node i mounting bucket
// web on BASE/mnt<i> (reachable by other users), and waits for the
// members and the mounts.
func startMountCluster(t *testing.T, n int) ([]*server, []string) {
	t.Helper()
	return startMountClusterWith(t, n, "")
}

// startMountClusterWith is startMountCluster with mount options (the
// --mount spec's third part, "" for none) and extra server args.
func startMountClusterWith(t *testing.T, n int, opts string, extra ...string) ([]*server, []string) {
	t.Helper()
	base := t.TempDir()
	// Other users must reach the mount points (t.TempDir makes 0700 dirs).
	for _, d := range []string{filepath.Dir(base), base} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var nodes []*server
	var mnts []string
	for i := 1; i <= n; i++ {
		mnt := filepath.Join(base, fmt.Sprintf("mnt%d", i))
		spec := "web:" + mnt
		if opts != "" {
			spec += ":" + opts
		}
		args := append([]string{"--mount", spec}, extra...)
		if i > 1 {
			args = append(args, "--join", nodes[0].url)
		}
		nodes = append(nodes, startCairn(t, "server", filepath.Join(base, fmt.Sprintf("n%d", i)), freeAddr(t), args...))
		mnts = append(mnts, mnt)
	}
	t.Cleanup(func() {
		for _, m := range mnts {
			syscall.Unmount(m, syscall.MNT_DETACH) // if a node failed to
		}
	})
	waitMembers(t, nodes[0], n, nodes...)
	for _, m := range mnts {
		waitFor(t, 30*time.Second, "the mount "+m, func() bool { return mounted(m) }, nodes...)
	}
	return nodes, mnts
}

// TestMountAcrossNodes: three nodes, each mounting bucket "web" under its
// data directory. A file written through node 1's mount reads back
// through node 3's, with its ETag over HTTP; a file PUT over HTTP appears
// in the mounts; a rename through node 2's mount is seen on 1 and 3; an
// unlink too. Each change is seen by the other mounts within the kernel
// cache invalidation, not the cache timeout (an hour).
func TestMountAcrossNodes(t *testing.T) {
	defer syscall.Umask(syscall.Umask(0o022)) // the modes below assume it
	needFuse(t)
	// flush mode: each step here expects a close on one node to be seen
	// by the next step on another (close-to-open); TestMountNoFlush covers
	// the default mode's bound instead.
	nodes, mnts := startMountClusterWith(t, 3, "flush")

	// Written through node 1's mount, read through node 3's and over HTTP.
	data := []byte(strings.Repeat("written through a mount\n", 1000))
	if err := os.MkdirAll(filepath.Join(mnts[0], "site", "img"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(mnts[0], "site", "index.html"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	took := waitFile(t, 5*time.Second, filepath.Join(mnts[2], "site", "index.html"), data, nodes...)
	t.Logf("node 1's write read on node 3's mount after %v", took)
	getOK(t, nodes[1].url+"/web/site/index.html", data, nodes...)

	// Read on node 3 first (so its kernel caches the old content), then
	// overwrite on node 1: node 3 sees the new content.
	if got, err := os.ReadFile(filepath.Join(mnts[2], "site", "index.html")); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read on node 3: %v", err)
	}
	data2 := []byte("version 2, shorter")
	if err := os.WriteFile(filepath.Join(mnts[0], "site", "index.html"), data2, 0o644); err != nil {
		t.Fatal(err)
	}
	took = waitFile(t, 5*time.Second, filepath.Join(mnts[2], "site", "index.html"), data2, nodes...)
	t.Logf("node 1's overwrite seen on node 3's mount after %v", took)

	// A PUT over HTTP appears in every mount.
	putOK(t, nodes[0].url+"/web/site/img/logo.png", []byte("png bytes"), nodes...)
	for _, m := range mnts {
		waitFile(t, 5*time.Second, filepath.Join(m, "site", "img", "logo.png"), []byte("png bytes"), nodes...)
	}

	// Files written over HTTP get the bucket's default owner and modes.
	if out, err := nodes[0].cli("bucket", "set", "web", "--uid", "33", "--gid", "33", "--file-mode", "0640", "--dir-mode", "0750"); err != nil ||
		!strings.Contains(out, "uid=33 gid=33 file-mode=0640 dir-mode=0750") {
		t.Fatalf("bucket set --uid ...: %v\n%s", err, out)
	}
	// Look the directory up on node 3 before it exists: the kernel caches
	// the miss (a negative entry), which the upload must invalidate.
	if _, err := os.Stat(filepath.Join(mnts[2], "uploads")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("uploads/ before the upload: %v", err)
	}
	putOK(t, nodes[0].url+"/web/uploads/a.jpg", []byte("jpeg"), nodes...)
	waitFor(t, 5*time.Second, "an HTTP upload owned by 33:33, 0640, on node 3's mount", func() bool {
		st, err := os.Stat(filepath.Join(mnts[2], "uploads", "a.jpg"))
		if err != nil {
			return false
		}
		sys := st.Sys().(*syscall.Stat_t)
		return sys.Uid == 33 && sys.Gid == 33 && st.Mode().Perm() == 0o640
	}, nodes...)
	if err := os.RemoveAll(filepath.Join(mnts[0], "uploads")); err != nil {
		t.Fatal(err)
	}

	// A rename through node 2's mount is seen on 1 and 3.
	if err := os.Rename(filepath.Join(mnts[1], "site", "img", "logo.png"), filepath.Join(mnts[1], "site", "logo.png")); err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{mnts[0], mnts[2]} {
		waitFile(t, 5*time.Second, filepath.Join(m, "site", "logo.png"), []byte("png bytes"), nodes...)
		waitFile(t, 5*time.Second, filepath.Join(m, "site", "img", "logo.png"), nil, nodes...)
	}
	// A directory renamed onto a name node 3 has just missed (a negative
	// entry in its kernel) is seen there at once, not after the miss
	// expires.
	if _, err := os.Stat(filepath.Join(mnts[2], "gallery")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("gallery/ before the rename: %v", err)
	}
	if err := os.Mkdir(filepath.Join(mnts[0], "album"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(mnts[0], "album"), filepath.Join(mnts[0], "gallery")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 2*time.Second, "the renamed directory on node 3", func() bool {
		st, err := os.Stat(filepath.Join(mnts[2], "gallery"))
		return err == nil && st.IsDir()
	}, nodes...)
	if err := os.Remove(filepath.Join(mnts[0], "gallery")); err != nil {
		t.Fatal(err)
	}

	// Unlink on node 3, seen on node 1; listings agree.
	if err := os.Remove(filepath.Join(mnts[2], "site", "logo.png")); err != nil {
		t.Fatal(err)
	}
	waitFile(t, 5*time.Second, filepath.Join(mnts[0], "site", "logo.png"), nil, nodes...)
	for _, m := range mnts {
		var names []string
		waitFor(t, 5*time.Second, "listing of "+m, func() bool {
			ents, err := os.ReadDir(filepath.Join(m, "site"))
			names = names[:0]
			for _, e := range ents {
				names = append(names, e.Name())
			}
			return err == nil && strings.Join(names, ",") == "img,index.html"
		}, nodes...)
	}

	// Write-back: files closed through a mount are queued; fsync of their
	// directory returns once they are committed, so the node serves every
	// one of them at once, in full.
	burst := filepath.Join(mnts[0], "burst")
	if err := os.Mkdir(burst, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		// New directories as an untar makes them: each one's files are
		// created while its mkdir is being committed (a create once
		// failed ENOENT when the commit landed during it).
		if i%10 == 0 {
			if err := os.Mkdir(filepath.Join(burst, fmt.Sprintf("d%02d", i/10)), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		name := filepath.Join(fmt.Sprintf("d%02d", i/10), fmt.Sprintf("f%03d", i))
		if err := os.WriteFile(filepath.Join(burst, name), []byte(fmt.Sprint("file ", i)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	d, err := os.Open(burst)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Sync(); err != nil {
		t.Fatalf("fsync of a directory of the mount: %v", err)
	}
	d.Close()
	for i := range 200 {
		getOK(t, fmt.Sprintf("%s/web/burst/d%02d/f%03d", nodes[0].url, i/10, i), []byte(fmt.Sprint("file ", i)), nodes...)
	}

	// statfs reports the cluster's room: three nodes on this one disk, each
	// file three times, so about this disk's size (not three times it).
	var disk, fsx syscall.Statfs_t
	if err := syscall.Statfs(nodes[1].dir, &disk); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Statfs(mnts[1], &fsx); err != nil {
		t.Fatal(err)
	}
	diskBytes, fsBytes := float64(disk.Blocks)*float64(disk.Bsize), float64(fsx.Blocks)*float64(fsx.Bsize)
	if fsBytes < 0.9*diskBytes || fsBytes > 1.1*diskBytes || fsx.Bavail == 0 {
		t.Fatalf("statfs of the mount: %.0f bytes (%d available blocks), want about the disk's %.0f", fsBytes, fsx.Bavail, diskBytes)
	}

	// Errors: no hang, a clear errno.
	if err := os.Mkdir(filepath.Join(mnts[0], "site"), 0o755); !errors.Is(err, os.ErrExist) {
		t.Fatalf("mkdir of an existing directory: %v", err)
	}
	if err := syscall.Mkfifo(filepath.Join(mnts[0], "site"), 0o644); !errors.Is(err, syscall.EEXIST) {
		t.Fatalf("mkfifo over a directory: %v, want EEXIST", err)
	}
	if err := os.Remove(filepath.Join(mnts[0], "site")); !errors.Is(err, syscall.ENOTEMPTY) && !errors.Is(err, syscall.EEXIST) {
		t.Fatalf("rmdir of a non-empty directory: %v", err)
	}

	// Unlink of an open file: its data stays readable until close.
	p := filepath.Join(mnts[0], "site", "open.txt")
	if err := os.WriteFile(p, []byte("still here"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	n, err := f.ReadAt(buf, 0)
	f.Close()
	if string(buf[:n]) != "still here" {
		t.Fatalf("read of an unlinked open file: %q, %v", buf[:n], err)
	}

	// Modes and owners are stored, replicated and enforced by the kernel
	// for a non-root user (nobody, 65534).
	secret := filepath.Join(mnts[0], "site", "secret.txt")
	if err := os.WriteFile(secret, []byte("for root"), 0o600); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(mnts[2], "site", "secret.txt")
	waitFile(t, 5*time.Second, other, []byte("for root"), nodes...)
	if err := asNobody("cat", other); err == nil || !strings.Contains(err.Error(), "Permission denied") {
		t.Fatalf("nobody read a 0600 root file through node 3's mount: %v", err)
	}
	if err := os.Chmod(secret, 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the chmod seen on node 3", func() bool { return asNobody("cat", other) == nil }, nodes...)
	if st, err := os.Stat(other); err != nil || st.Mode().Perm() != 0o644 {
		t.Fatalf("mode on node 3: %v, %v", st.Mode(), err)
	}
	if err := os.Chown(secret, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the chown seen on node 3", func() bool {
		st, err := os.Stat(other)
		return err == nil && st.Sys().(*syscall.Stat_t).Uid == 65534
	}, nodes...)
	if err := asNobody("sh", "-c", "echo mine >> "+other); err != nil {
		t.Fatalf("nobody cannot write its own file: %v", err)
	}
	if err := asNobody("touch", filepath.Join(mnts[2], "site", "by-nobody")); err == nil {
		t.Fatal("nobody created a file in root's 0755 directory")
	}
	// POSIX ACLs (as setfacl writes them): an ACL entry lets nobody read a
	// 0600 file through another node's mount; a directory's default ACL
	// is inherited by what is made in it.
	aclf := filepath.Join(mnts[0], "site", "acl.txt")
	if err := os.WriteFile(aclf, []byte("acl"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Setxattr(aclf, "system.posix_acl_access", posixACL(0o6, 65534, 0o4, 0, 0o4, 0), 0); err != nil {
		t.Fatalf("set an access ACL: %v", err)
	}
	waitFor(t, 5*time.Second, "the ACL enforced on node 3", func() bool {
		return asNobody("cat", filepath.Join(mnts[2], "site", "acl.txt")) == nil
	}, nodes...)
	acld := filepath.Join(mnts[0], "site", "shared")
	if err := os.Mkdir(acld, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Setxattr(acld, "system.posix_acl_access", posixACL(0o7, 65534, 0o5, 0, 0o5, 0), 0); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Setxattr(acld, "system.posix_acl_default", posixACL(0o6, 65534, 0o6, 0, 0o6, 0), 0); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(acld, "inherited.txt"), []byte("x"), 0o666); err != nil {
		t.Fatal(err)
	}
	// The new file's access ACL is the directory's default, narrowed by
	// the create mode (0666) and not by the umask (022), as POSIX has it:
	// the mask stays rw-, and so do the mode's group bits (0660). Outside
	// such a directory the umask applies (0644).
	waitFor(t, 5*time.Second, "the inherited ACL on node 3", func() bool {
		buf := make([]byte, 256)
		p := filepath.Join(mnts[2], "site", "shared", "inherited.txt")
		n, err := syscall.Getxattr(p, "system.posix_acl_access", buf)
		st, serr := os.Stat(p)
		return err == nil && serr == nil && n == len(posixACL(0, 0, 0, 0, 0, 0)) &&
			bytes.Contains(buf[:n], []byte{0x02, 0, 6, 0, 0xfe, 0xff, 0, 0}) && // user:nobody:rw-
			bytes.Contains(buf[:n], []byte{0x10, 0, 6, 0}) && // mask::rw-
			st.Mode().Perm() == 0o660
	}, nodes...)
	plain := filepath.Join(mnts[0], "site", "umasked.txt")
	if err := os.WriteFile(plain, []byte("x"), 0o666); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(plain); err != nil || st.Mode().Perm() != 0o644 {
		t.Fatalf("a file created 0666 under umask 022: %v, %v; want 0644", st.Mode(), err)
	}

	when, accessed := time.Unix(1600000000, 0), time.Unix(1500000000, 7)
	if err := os.Chtimes(secret, accessed, when); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the mtime and atime seen on node 3", func() bool {
		st, err := os.Stat(other)
		if err != nil {
			return false
		}
		at := st.Sys().(*syscall.Stat_t).Atim
		return st.ModTime().Equal(when) && time.Unix(at.Sec, at.Nsec).Equal(accessed)
	}, nodes...)

	// Symlinks and user xattrs, seen on another node.
	if err := os.Symlink("index.html", filepath.Join(mnts[0], "site", "home")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the symlink on node 3", func() bool {
		target, err := os.Readlink(filepath.Join(mnts[2], "site", "home"))
		got, rerr := os.ReadFile(filepath.Join(mnts[2], "site", "home"))
		return err == nil && target == "index.html" && rerr == nil && bytes.Equal(got, data2)
	}, nodes...)
	if err := os.Symlink("x", filepath.Join(mnts[0], "site", "home")); !errors.Is(err, os.ErrExist) {
		t.Fatalf("symlink over an existing name: %v", err)
	}
	idx := filepath.Join(mnts[0], "site", "index.html")
	if err := syscall.Setxattr(idx, "user.origin", []byte("node1"), 0); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the xattr on node 3", func() bool {
		buf := make([]byte, 64)
		n, err := syscall.Getxattr(filepath.Join(mnts[2], "site", "index.html"), "user.origin", buf)
		return err == nil && string(buf[:n]) == "node1"
	}, nodes...)
	if err := syscall.Setxattr(idx, "trusted.x", []byte("no"), 0); !errors.Is(err, syscall.ENOTSUP) && !errors.Is(err, syscall.EPERM) {
		t.Fatalf("a trusted.* xattr: %v, want ENOTSUP", err)
	}
	if err := syscall.Removexattr(idx, "user.origin"); err != nil {
		t.Fatal(err)
	}

	// Shared-writable mmap and posix_fallocate, seen on node 3.
	mp := filepath.Join(mnts[0], "site", "mapped.bin")
	if err := os.WriteFile(mp, bytes.Repeat([]byte("a"), 8192), 0o644); err != nil {
		t.Fatal(err)
	}
	mf, err := os.OpenFile(mp, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	mem, err := syscall.Mmap(int(mf.Fd()), 0, 8192, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	copy(mem, "MAPPED")
	if err := syscall.Munmap(mem); err != nil {
		t.Fatal(err)
	}
	if err := mf.Close(); err != nil {
		t.Fatal(err)
	}
	want := append([]byte("MAPPED"), bytes.Repeat([]byte("a"), 8192-6)...)
	waitFile(t, 5*time.Second, filepath.Join(mnts[2], "site", "mapped.bin"), want, nodes...)
	ff, err := os.OpenFile(filepath.Join(mnts[0], "site", "alloc.bin"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Fallocate(int(ff.Fd()), 0, 0, 100000); err != nil {
		t.Fatalf("posix_fallocate: %v", err)
	}
	ff.Close()
	waitFor(t, 5*time.Second, "the allocated size on node 3", func() bool {
		st, err := os.Stat(filepath.Join(mnts[2], "site", "alloc.bin"))
		return err == nil && st.Size() == 100000
	}, nodes...)

	// Hard links: one inode, two names, on every node.
	if err := os.Link(idx, filepath.Join(mnts[0], "index.html")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the hard link on node 3", func() bool {
		a, err1 := os.Stat(filepath.Join(mnts[2], "site", "index.html"))
		b, err2 := os.Stat(filepath.Join(mnts[2], "index.html"))
		return err1 == nil && err2 == nil && os.SameFile(a, b) && a.Sys().(*syscall.Stat_t).Nlink == 2
	}, nodes...)
	if err := os.WriteFile(filepath.Join(mnts[0], "index.html"), []byte("through the link"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFile(t, 5*time.Second, filepath.Join(mnts[2], "site", "index.html"), []byte("through the link"), nodes...)
	if err := os.Remove(filepath.Join(mnts[0], "index.html")); err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{mnts[0], mnts[2]} {
		waitFor(t, 5*time.Second, "one name left on "+m, func() bool {
			st, err := os.Stat(filepath.Join(m, "site", "index.html"))
			return err == nil && st.Sys().(*syscall.Stat_t).Nlink == 1
		}, nodes...)
	}
	waitFile(t, 5*time.Second, filepath.Join(mnts[2], "index.html"), nil, nodes...)
	waitFile(t, 5*time.Second, filepath.Join(mnts[2], "site", "index.html"), []byte("through the link"), nodes...)

	posixCalls(t, mnts[1], mnts[0], nodes)

	// SIGTERM unmounts cleanly.
	nodes[2].stop()
	if _, err := os.ReadDir(mnts[2]); err != nil {
		t.Fatalf("mount point after SIGTERM: %v (want an empty directory)", err)
	}
}

// TestDevMount runs the README's mount example: cairn dev --mount web,
// a file written through node 1's mount read through node 3's; and a
// second mount with options (--mount web/db:flush) whose fcntl lock works
// and whose flock is refused (ENOLCK).
func TestDevMount(t *testing.T) {
	needFuse(t)
	data := t.TempDir()
	port := 20000 + int(time.Now().UnixNano()%10000)
	for !portsFree(port, 3) {
		port++
	}
	cmd := exec.Command(cairnBin, "dev", "--data", data, "--port", fmt.Sprint(port), "--mount", "web", "--mount", "web/db:flush")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.Env = append(os.Environ(), "CAIRN_ADMIN_KEY="+adminKey)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
		for i := 1; i <= 3; i++ {
			for _, m := range []string{"web", "web_db"} {
				syscall.Unmount(filepath.Join(data, "mnt", fmt.Sprintf("node%d", i), m), syscall.MNT_DETACH)
			}
		}
	}()
	m1, m3 := filepath.Join(data, "mnt", "node1", "web"), filepath.Join(data, "mnt", "node3", "web")
	waitFor(t, 30*time.Second, "the dev cluster's mounts", func() bool {
		return strings.Contains(out.String(), "Mounted web on every node") && mounted(m1) && mounted(m3)
	})
	if err := os.WriteFile(filepath.Join(m1, "hello.txt"), []byte("hello\n"), 0o644); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	waitFile(t, 5*time.Second, filepath.Join(m3, "hello.txt"), []byte("hello\n"))
	db := filepath.Join(data, "mnt", "node1", "web_db")
	waitFor(t, 30*time.Second, "the flush mount", func() bool { return mounted(db) })
	f, err := os.OpenFile(filepath.Join(db, "app.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	lk := syscall.Flock_t{Type: syscall.F_WRLCK}
	if err := syscall.FcntlFlock(f.Fd(), syscall.F_SETLK, &lk); err != nil {
		t.Fatalf("an fcntl lock on the flush mount: %v", err)
	}
	// flock needs a handle (RELEASE): the flush mode refuses it, with the
	// documented error (docs/operations.md, the mode table).
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); !errors.Is(err, syscall.ENOLCK) {
		t.Errorf("flock on the flush mount: %v, want ENOLCK", err)
	}
}

// portsFree reports whether ports p..p+n-1 (and their gossip ports, +100)
// are free on 127.0.0.1.
func portsFree(p, n int) bool {
	for i := 0; i < n; i++ {
		for _, q := range []int{p + i, p + i + 100} {
			ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", q))
			if err != nil {
				return false
			}
			ln.Close()
		}
	}
	return true
}

// mounted reports whether dir is a mount point.
func mounted(dir string) bool {
	var st, pst syscall.Stat_t
	return syscall.Stat(dir, &st) == nil && syscall.Stat(filepath.Dir(dir), &pst) == nil && st.Dev != pst.Dev
}

// TestMountNodeKilled: three nodes with mounts. SIGKILL a node that does
// not lead: the other mounts keep reading every file and take new writes.
// SIGKILL another node in the middle of a large write through its mount:
// no other node ever sees the file torn (the old version stays whole),
// and the node restarts on its stale mount point.
func TestMountNodeKilled(t *testing.T) {
	needFuse(t)
	base := t.TempDir()
	var nodes []*server
	var mnts, gossip []string
	for i := 1; i <= 3; i++ {
		dir := filepath.Join(base, fmt.Sprintf("n%d", i))
		mnt := filepath.Join(base, fmt.Sprintf("mnt%d", i))
		g := freeAddr(t)
		args := []string{"--mount", "web:" + mnt, "--gossip-listen", g}
		if i == 1 {
			args = append(args, "--mount", "strict:"+filepath.Join(base, "mnt-strict"))
		}
		if i > 1 {
			args = append(args, "--join", nodes[0].url)
		}
		nodes = append(nodes, startCairn(t, "server", dir, freeAddr(t), args...))
		mnts, gossip = append(mnts, mnt), append(gossip, g)
	}
	t.Cleanup(func() {
		for _, m := range append(mnts, filepath.Join(base, "mnt-strict")) {
			syscall.Unmount(m, syscall.MNT_DETACH)
		}
	})
	v := waitMembers(t, nodes[0], 3, nodes...)
	if out, err := nodes[0].cli("bucket", "set", "strict", "strict=true", "write-quorum=3"); err != nil {
		t.Fatalf("bucket set strict: %v\n%s", err, out)
	}
	files := map[string][]byte{}
	for i := range 20 {
		p := fmt.Sprintf("f%02d.txt", i)
		files[p] = []byte(strings.Repeat(p, 100+i))
		if err := os.WriteFile(filepath.Join(mnts[0], p), files[p], 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Kill a node that does not lead.
	victim := 1
	for _, n := range v.Nodes {
		if n.Leader && n.URL == nodes[1].url {
			victim = 2
		}
	}
	live := []int{0, 3 - victim}
	nodes[victim].kill()

	// A publish that fails (a strict bucket that needs all three copies)
	// is logged and reported to the writer: by fsync, and by the next
	// fsync or close of a file whose close queued it.
	strictMnt := filepath.Join(base, "mnt-strict")
	sf, err := os.Create(filepath.Join(strictMnt, "synced.txt"))
	if err != nil {
		t.Fatal(err)
	}
	sf.WriteString("needs three copies")
	if err := sf.Sync(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("fsync of a file whose publish fails: %v, want EIO", err)
	}
	sf.Close()
	closed := filepath.Join(strictMnt, "closed.txt")
	if err := os.WriteFile(closed, []byte("queued at close"), 0o644); err != nil {
		t.Fatalf("close queues the file and returns: %v", err)
	}
	waitFor(t, 10*time.Second, "the failed publish reported at the next fsync", func() bool {
		f, err := os.OpenFile(closed, os.O_WRONLY, 0)
		if err != nil {
			return false
		}
		defer f.Close()
		return errors.Is(f.Sync(), syscall.EIO)
	}, nodes[0])
	if !strings.Contains(nodes[0].logs.String(), "publishing a written file failed") {
		t.Fatalf("no log of the failed publish:\n%s", nodes[0].logs)
	}

	for _, i := range live {
		for p, data := range files {
			// A file closed on another node is published by its write-back
			// queue: visible within the propagation bound, not at once.
			waitFile(t, 5*time.Second, filepath.Join(mnts[i], p), data, nodes[0], nodes[3-victim])
		}
		p := fmt.Sprintf("after-kill-%d.txt", i)
		start := time.Now()
		if err := os.WriteFile(filepath.Join(mnts[i], p), []byte(p), 0o644); err != nil {
			t.Fatalf("write through mount %d with a node killed: %v", i+1, err)
		}
		t.Logf("write through mount %d with node %d killed took %v", i+1, victim+1, time.Since(start))
		files[p] = []byte(p)
	}
	// A large write through the other live mount, killed half-way.
	writer := live[1]
	big := filepath.Join(mnts[writer], "big.bin")
	old := bytes.Repeat([]byte("old version\n"), 1000)
	if err := os.WriteFile(big, old, 0o644); err != nil {
		t.Fatal(err)
	}
	waitFile(t, 5*time.Second, filepath.Join(mnts[0], "big.bin"), old, nodes...)
	f, err := os.OpenFile(big, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	chunk := bytes.Repeat([]byte("new"), 1<<16)
	for range 20 {
		if _, err := f.Write(chunk); err != nil {
			t.Fatal(err)
		}
	}
	nodes[writer].kill() // before close: nothing of the new version was published
	f.Close()
	if got, err := os.ReadFile(filepath.Join(mnts[0], "big.bin")); err != nil || !bytes.Equal(got, old) {
		t.Fatalf("after a crash during the write, node 1 reads %d bytes (%v), want the old version whole", len(got), err)
	}
	// The killed writer restarts on its stale mount point and serves the
	// old version whole too.
	nodes[writer] = startCairn(t, "server", nodes[writer].dir, nodes[writer].addr, "--mount", "web:"+mnts[writer],
		"--gossip-listen", gossip[writer], "--join", nodes[0].url)
	waitFile(t, 10*time.Second, filepath.Join(mnts[writer], "big.bin"), old, nodes[0], nodes[writer])
	for p, data := range files {
		waitFile(t, 10*time.Second, filepath.Join(mnts[writer], p), data, nodes[0], nodes[writer])
	}
}

// posixACL encodes an access or default ACL as the system.posix_acl_*
// xattrs hold it: owner, one named user, group, mask, other (perm bits
// 0-7), the format setfacl writes (version 2, little-endian entries of
// tag, perm, id).
func posixACL(owner uint16, user uint32, userPerm, group, mask, other uint16) []byte {
	le := func(b []byte, v uint64, n int) []byte {
		for i := 0; i < n; i++ {
			b = append(b, byte(v>>(8*i)))
		}
		return b
	}
	b := le(nil, 2, 4)
	for _, e := range []struct {
		tag, perm uint16
		id        uint32
	}{{0x01, owner, 0xffffffff}, {0x02, userPerm, user}, {0x04, group, 0xffffffff}, {0x10, mask, 0xffffffff}, {0x20, other, 0xffffffff}} {
		b = le(b, uint64(e.tag), 2)
		b = le(b, uint64(e.perm), 2)
		b = le(b, uint64(e.id), 4)
	}
	return b
}

// posixCalls checks the calls of issue 9 through mount mnt, each result
// read back through mount other (another node): O_EXCL, O_APPEND, writes
// past the end (a sparse file), ftruncate and truncate, rename across
// directories, over an existing file (while it is open: the reader keeps
// the old content) and over an empty directory.
func posixCalls(t *testing.T, mnt, other string, nodes []*server) {
	t.Helper()
	d := filepath.Join(mnt, "posix")
	if err := os.MkdirAll(filepath.Join(d, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	at := func(name string) string { return filepath.Join(d, name) }
	seen := func(name string, want []byte) {
		t.Helper()
		waitFile(t, 5*time.Second, filepath.Join(other, "posix", name), want, nodes...)
	}
	// O_EXCL.
	f, err := os.OpenFile(at("excl"), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, err := os.OpenFile(at("excl"), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644); !errors.Is(err, os.ErrExist) {
		t.Fatalf("O_EXCL over an existing file: %v, want EEXIST", err)
	}
	// O_APPEND, through two opens.
	for _, part := range []string{"one ", "two"} {
		f, err := os.OpenFile(at("log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteString(part); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	seen("log", []byte("one two"))
	// A write past the end leaves zeros (a sparse file).
	f, err = os.Create(at("sparse"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("end"), 1<<20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	seen("sparse", append(make([]byte, 1<<20), "end"...))
	// ftruncate (shorter, then longer: zeros) and truncate(2).
	if err := os.WriteFile(at("trunc"), []byte("0123456789"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err = os.OpenFile(at("trunc"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(4); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(6); err != nil {
		t.Fatal(err)
	}
	f.Close()
	seen("trunc", []byte("0123\x00\x00"))
	if err := os.Truncate(at("trunc"), 2); err != nil {
		t.Fatal(err)
	}
	seen("trunc", []byte("01"))
	// Each step its own process, as a shell script runs them: a version
	// queued while the kernel forgets the file's node (invalidated by the
	// commit of the previous version) is what a lookup answers (it once
	// answered the committed, older size: 40 of 120 stats).
	run := func(name string, args ...string) string {
		t.Helper()
		out, err := exec.Command(name, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s %v: %v: %s", name, args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	for i := range 20 {
		f := at(fmt.Sprintf("steps%d", i))
		run("touch", f)
		for _, size := range []string{"1234567", "567"} {
			run("truncate", "-s", size, f)
			if got := run("stat", "-c", "%s", f); got != size {
				t.Fatalf("%s: size %s after truncate -s %s", f, got, size)
			}
		}
	}
	// A process working in a new directory keeps its working directory when
	// the directory's creation (and a chmod of it) is committed: the mount
	// does not drop the kernel's entry of a name whose inode is the same
	// (getcwd once failed with ENOENT: prove could not run there).
	if err := os.Mkdir(at("cwd"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", "-c", "sleep 0.3; chmod 0750 .; sleep 0.3; /bin/pwd -P")
	cmd.Dir = at("cwd")
	if out, err := cmd.CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != at("cwd") {
		t.Fatalf("getcwd in a directory made through the mount: %q, %v", out, err)
	}
	// A file open for writing and unlinked stays readable and describable
	// (link count 0) through its descriptor; a create moves its directory's
	// mtime at once.
	dst0, err := os.Stat(d)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	run("touch", at("doomed"))
	if dst1, err := os.Stat(d); err != nil || !dst1.ModTime().After(dst0.ModTime()) {
		t.Fatalf("a create left its directory's mtime at %v (before %v): %v", dst1.ModTime(), dst0.ModTime(), err)
	}
	wf, err := os.OpenFile(at("doomed"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wf.WriteAt([]byte("Hello, World!"), 0); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(at("doomed")); err != nil {
		t.Fatal(err)
	}
	rb := make([]byte, 13)
	if _, err := wf.ReadAt(rb, 0); err != nil || string(rb) != "Hello, World!" {
		t.Fatalf("read of a file unlinked while open for writing: %q, %v", rb, err)
	}
	if st, err := wf.Stat(); err != nil || st.Sys().(*syscall.Stat_t).Nlink != 0 || st.Size() != 13 {
		t.Fatalf("fstat of a file unlinked while open for writing: %v", err)
	}
	wf.Close()
	// lchown changes a symlink's owner, at once and on the other node.
	if err := os.Symlink("target", at("link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(at("link"), 123, 456); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Lstat(at("link")); err != nil || st.Sys().(*syscall.Stat_t).Uid != 123 || st.Sys().(*syscall.Stat_t).Gid != 456 {
		t.Fatalf("lchown of a symlink: %v", err)
	}
	waitFor(t, 5*time.Second, "a symlink's owner on the other node", func() bool {
		st, err := os.Lstat(filepath.Join(other, "posix", "link"))
		return err == nil && st.Sys().(*syscall.Stat_t).Uid == 123
	}, nodes...)
	// A truncate moves the mtime and ctime at once, not at the publish.
	f0 := at("steps0")
	st0, err := os.Stat(f0)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	run("truncate", "-s", "10", f0)
	st1, err := os.Stat(f0)
	if err != nil {
		t.Fatal(err)
	}
	c0, c1 := st0.Sys().(*syscall.Stat_t).Ctim, st1.Sys().(*syscall.Stat_t).Ctim
	if !st1.ModTime().After(st0.ModTime()) || c1.Sec*1e9+c1.Nsec <= c0.Sec*1e9+c0.Nsec {
		t.Fatalf("truncate left mtime %v -> %v, ctime %v -> %v", st0.ModTime(), st1.ModTime(), c0, c1)
	}
	// Rename across directories.
	if err := os.WriteFile(at("moved"), []byte("moved"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(at("moved"), at("sub/moved")); err != nil {
		t.Fatal(err)
	}
	seen("sub/moved", []byte("moved"))
	seen("moved", nil)
	// Rename over a file another process has open: the new content takes
	// the name at once, the open file keeps reading the old one.
	if err := os.WriteFile(at("target"), []byte("old content"), 0o644); err != nil {
		t.Fatal(err)
	}
	open, err := os.Open(at("target"))
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	if err := os.WriteFile(at("new"), []byte("new content"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(at("new"), at("target")); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(at("target")); err != nil || string(got) != "new content" {
		t.Fatalf("after rename over it: %q, %v", got, err)
	}
	buf := make([]byte, 64)
	if n, _ := open.ReadAt(buf, 0); string(buf[:n]) != "old content" {
		t.Fatalf("the file open before the rename reads %q, want the old content", buf[:n])
	}
	seen("target", []byte("new content"))
	// Rename of a directory over an empty one; not over a non-empty one.
	if err := os.MkdirAll(at("dirA/x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(at("dirB"), 0o755); err != nil {
		t.Fatal(err)
	}
	// (syscall.Rename: os.Rename refuses any directory as its target.)
	if err := syscall.Rename(at("dirA"), at("dirB")); err != nil {
		t.Fatalf("rename over an empty directory: %v", err)
	}
	if err := os.Mkdir(at("dirC"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Rename(at("dirC"), at("dirB")); !errors.Is(err, syscall.ENOTEMPTY) && !errors.Is(err, syscall.EEXIST) {
		t.Fatalf("rename over a non-empty directory: %v, want ENOTEMPTY", err)
	}
	waitFor(t, 5*time.Second, "the renamed directory on the other node", func() bool {
		st, err := os.Stat(filepath.Join(other, "posix", "dirB", "x"))
		return err == nil && st.IsDir()
	}, nodes...)
	// A name longer than 255 bytes; a path longer than the store keeps.
	if err := os.WriteFile(at(strings.Repeat("n", 256)), nil, 0o644); !errors.Is(err, syscall.ENAMETOOLONG) {
		t.Fatalf("a 256-byte name: %v, want ENAMETOOLONG", err)
	}
	// A tree deeper than PATH_MAX (4096 bytes, a bound on one call's path)
	// is made one directory at a time, as on a local file system, up to
	// the store's 16384 bytes from the bucket's root; past that,
	// ENAMETOOLONG.
	fd, err := syscall.Open(d, syscall.O_DIRECTORY|syscall.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	comp, inBucket := strings.Repeat("p", 200), len("posix")
	for ; inBucket+1+len(comp) <= 16384; inBucket += 1 + len(comp) {
		if err := syscall.Mkdirat(fd, comp, 0o755); err != nil {
			t.Fatalf("mkdir at %d bytes in the bucket: %v", inBucket, err)
		}
		next, err := syscall.Openat(fd, comp, syscall.O_DIRECTORY|syscall.O_RDONLY, 0)
		if err != nil {
			t.Fatalf("open at %d bytes in the bucket: %v", inBucket, err)
		}
		syscall.Close(fd)
		fd = next
	}
	err = syscall.Mkdirat(fd, comp, 0o755)
	syscall.Close(fd)
	if !errors.Is(err, syscall.ENAMETOOLONG) {
		t.Fatalf("mkdir past 16384 bytes in the bucket: %v, want ENAMETOOLONG", err)
	}
	// Mode 0 is a mode: stored, replicated, enforced.
	if err := os.WriteFile(at("zero"), []byte("nobody may read"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(at("zero"), 0); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "mode 0 on the other node", func() bool {
		st, err := os.Stat(filepath.Join(other, "posix", "zero"))
		return err == nil && st.Mode().Perm() == 0
	}, nodes...)
	if asNobody("cat", filepath.Join(other, "posix", "zero")) == nil {
		t.Fatal("nobody read a file of mode 0")
	}
	// A directory's link count counts its subdirectories; chmod changes
	// the ctime, not the mtime.
	if err := os.Mkdir(at("sub/deeper"), 0o755); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "a directory's link count on the other node", func() bool {
		st, err := os.Stat(filepath.Join(other, "posix", "sub"))
		return err == nil && st.Sys().(*syscall.Stat_t).Nlink == 3
	}, nodes...)
	before, err := os.Stat(at("log"))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	if err := os.Chmod(at("log"), 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the ctime of a chmod on the other node", func() bool {
		st, err := os.Stat(filepath.Join(other, "posix", "log"))
		if err != nil {
			return false
		}
		sys, old := st.Sys().(*syscall.Stat_t), before.Sys().(*syscall.Stat_t)
		return st.Mode().Perm() == 0o600 && st.ModTime().Equal(before.ModTime()) &&
			(sys.Ctim.Sec > old.Ctim.Sec || sys.Ctim.Sec == old.Ctim.Sec && sys.Ctim.Nsec > old.Ctim.Nsec)
	}, nodes...)
}

// asNobody runs a command as user and group nobody (65534).
func asNobody(name string, args ...string) error {
	cmd := exec.Command(name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%v: %s", err, out)
	}
	return nil
}

// TestMountMetrics: the mount counts its FUSE calls per opcode with their
// latency, and reports its write-back queue and publishes, as Prometheus
// metrics (cairn_fuse_*) and at GET /_cairn/mounts (admin key). Each
// metric is checked after calls that must move it.
func TestMountMetrics(t *testing.T) {
	needFuse(t)
	base := t.TempDir()
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	mnt := filepath.Join(base, "mnt")
	n := startCairn(t, "server", filepath.Join(base, "n1"), freeAddr(t), "--mount", "web:"+mnt)
	t.Cleanup(func() { syscall.Unmount(mnt, syscall.MNT_DETACH) })
	waitFor(t, 30*time.Second, "the mount", func() bool { return mounted(mnt) }, n)

	f := filepath.Join(mnt, "dir", "a.txt")
	if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f, []byte("some bytes"), 0o644); err != nil {
		t.Fatal(err)
	}
	fh, err := os.OpenFile(f, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	fh.WriteAt([]byte("SOME"), 0)
	if err := fh.Sync(); err != nil { // waits for the publish
		t.Fatal(err)
	}
	fh.Close()
	if _, err := os.ReadFile(f); err != nil {
		t.Fatal(err)
	}
	// A large file PUT over HTTP (not in the kernel's cache) is read
	// through the mount spliced from its volume file: zero-copy bytes.
	big := bytes.Repeat([]byte("0123456789abcdef"), 256<<10/16*3)
	putOK(t, n.url+"/web/dir/big.bin", big, n)
	if got, err := os.ReadFile(filepath.Join(mnt, "dir", "big.bin")); err != nil || !bytes.Equal(got, big) {
		t.Fatalf("a large file read through the mount: %v (%d bytes, want %d)", err, len(got), len(big))
	}
	os.Stat(filepath.Join(mnt, "dir", "missing.php")) // an ENOENT lookup
	os.ReadDir(filepath.Join(mnt, "dir"))
	if err := os.Rename(f, f+".old"); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(f + ".old"); err != nil {
		t.Fatal(err)
	}
	syncDir(t, filepath.Dir(f)) // the unlink is queued: publish it

	_, scrape := do(t, "GET", n.url+"/_cairn/metrics", nil)
	metrics := string(scrape)
	lbl := fmt.Sprintf(`mount=%q`, mnt)
	for _, op := range []string{"lookup", "getattr", "mkdir", "create", "write", "flush", "fsync", "release", "open", "read", "opendir", "rename", "unlink"} {
		line := regexpFind(t, metrics, `cairn_fuse_requests_total\{`+regexpQuote(lbl)+`,op="`+op+`"\} ([0-9]+)`)
		if line == "" || line == "0" {
			t.Errorf("cairn_fuse_requests_total for %s: %q", op, line)
		}
		if c := regexpFind(t, metrics, `cairn_fuse_request_duration_seconds_count\{`+regexpQuote(lbl)+`,op="`+op+`"\} ([0-9]+)`); c != line {
			t.Errorf("the latency histogram of %s counts %q calls, the counter %q", op, c, line)
		}
	}
	if v := regexpFind(t, metrics, `cairn_fuse_request_errors_total\{`+regexpQuote(lbl)+`,op="lookup"\} ([0-9]+)`); v == "" || v == "0" {
		t.Errorf("the ENOENT lookup is not counted as an error: %q", v)
	}
	for _, m := range []string{"cairn_fuse_writeback_queue_items", "cairn_fuse_writeback_queue_bytes", "cairn_fuse_writeback_oldest_seconds", "cairn_fuse_publish_errors_total"} {
		if v := regexpFind(t, metrics, m+`\{`+regexpQuote(lbl)+`\} ([0-9.e+-]+)`); v != "0" {
			t.Errorf("%s = %q, want 0 (the queue is drained, nothing failed)", m, v)
		}
	}
	if v := regexpFind(t, metrics, `cairn_fuse_published_total\{`+regexpQuote(lbl)+`\} ([0-9]+)`); v == "" || v == "0" {
		t.Errorf("cairn_fuse_published_total = %q, want the published files and directory", v)
	}

	if v := regexpFind(t, metrics, `cairn_fuse_read_zero_copy_bytes_total\{`+regexpQuote(lbl)+`\} ([0-9.e+]+)`); v == "" || v == "0" {
		t.Errorf("cairn_fuse_read_zero_copy_bytes_total = %q, want the large file's bytes", v)
	}
	// Directory ownership: the mount claimed its root and made dir under
	// that claim (2 directories, 1 claim at least); nobody recalled them.
	if v := regexpFind(t, metrics, `\ncairn_owner_dirs ([0-9]+)\n`); v == "" || v == "0" || v == "1" {
		t.Errorf("cairn_owner_dirs = %q, want the mount's root and dir", v)
	}
	if v := regexpFind(t, metrics, `\ncairn_owner_claims_total ([0-9]+)\n`); v == "" || v == "0" {
		t.Errorf("cairn_owner_claims_total = %q, want the mount's claims", v)
	}
	for _, m := range []string{"cairn_owner_recalls_total", "cairn_owner_handovers_total", "cairn_owner_fenced_total", "cairn_owner_lost_dirs_total"} {
		if v := regexpFind(t, metrics, `\n`+m+` ([0-9]+)\n`); v != "0" {
			t.Errorf("%s = %q, want 0 (one node, no recall)", m, v)
		}
	}
	resp, body := do(t, "GET", n.url+"/_cairn/status", nil, auth()...)
	expect(t, resp, body, 200)
	type ownedDir struct {
		Path string `json:"path"`
	}
	var st struct {
		Owners struct {
			Owned  int        `json:"owned"`
			Dirs   []ownedDir `json:"dirs"`
			ByNode []struct {
				Dirs int `json:"dirs"`
			} `json:"by_node"`
		} `json:"owners"`
	}
	if err := json.Unmarshal(body, &st); err != nil {
		t.Fatal(err)
	}
	if o := st.Owners; o.Owned < 2 || !slices.Contains(o.Dirs, ownedDir{"web/dir"}) || len(o.ByNode) != 1 || o.ByNode[0].Dirs != o.Owned {
		t.Errorf("the owners of /_cairn/status: %s", body)
	}

	resp, body = do(t, "GET", n.url+"/_cairn/mounts", nil)
	expect(t, resp, body, 401)
	resp, body = do(t, "GET", n.url+"/_cairn/mounts", nil, auth()...)
	expect(t, resp, body, 200)
	var view struct {
		Mounts []struct {
			Bucket, Dir string
			Calls       uint64
			Published   uint64
			Ops         []struct {
				Op    string
				Calls uint64
			}
		}
	}
	if err := json.Unmarshal(body, &view); err != nil || len(view.Mounts) != 1 {
		t.Fatalf("/_cairn/mounts: %v %s", err, body)
	}
	m := view.Mounts[0]
	if m.Bucket != "web" || m.Dir != mnt || m.Calls == 0 || m.Published == 0 || len(m.Ops) < 10 {
		t.Fatalf("/_cairn/mounts: %s", body)
	}
}

// regexpFind returns the first submatch of expr in s ("" if none).
func regexpFind(t *testing.T, s, expr string) string {
	t.Helper()
	m := regexp.MustCompile(expr).FindStringSubmatch(s)
	if len(m) < 2 {
		return ""
	}
	return m[1]
}

// regexpQuote is regexp.QuoteMeta.
func regexpQuote(s string) string { return regexp.QuoteMeta(s) }

// syncDir fsyncs directory dir: on a mount, it waits for everything the
// mount queued (an unlink included) and returns a failure of it.
func syncDir(t *testing.T, dir string) {
	t.Helper()
	d, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		t.Fatalf("fsync %s: %v", dir, err)
	}
}

// TestMountUnlinkBatchCrash: unlinks through the mount join its write-back
// queue and are published in batches. Half the files are removed and the
// directory fsynced (durable), then the other half removed and the node
// killed before it could publish them all. After the restart, the fsynced
// removals hold, and every other file is either gone or whole: a batch cut
// by a crash leaves no torn state, and the mount, HTTP and a listing
// agree.
func TestMountUnlinkBatchCrash(t *testing.T) {
	needFuse(t)
	base := t.TempDir()
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	mnt := filepath.Join(base, "mnt")
	dir := filepath.Join(base, "n1")
	addr := freeAddr(t)
	n := startCairn(t, "server", dir, addr, "--mount", "web:"+mnt)
	t.Cleanup(func() { syscall.Unmount(mnt, syscall.MNT_DETACH) })
	waitFor(t, 30*time.Second, "the mount", func() bool { return mounted(mnt) }, n)

	const files = 400
	data := func(i int) []byte { return []byte(strings.Repeat(fmt.Sprintf("file %d\n", i), 50+i)) }
	d := filepath.Join(mnt, "tree")
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range files {
		if err := os.WriteFile(filepath.Join(d, fmt.Sprintf("f%03d", i)), data(i), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	syncDir(t, d)
	for i := range files / 2 {
		if err := os.Remove(filepath.Join(d, fmt.Sprintf("f%03d", i))); err != nil {
			t.Fatal(err)
		}
	}
	syncDir(t, d) // the first half's removals are durable
	for i := files / 2; i < files; i++ {
		if err := os.Remove(filepath.Join(d, fmt.Sprintf("f%03d", i))); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(d, fmt.Sprintf("f%03d", i))); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("a removed name is still seen through the mount: %v", err)
		}
	}
	n.kill() // the queue may still hold some of them
	syscall.Unmount(mnt, syscall.MNT_DETACH)

	n = startCairn(t, "server", dir, addr, "--mount", "web:"+mnt)
	waitFor(t, 30*time.Second, "the mount after the restart", func() bool { return mounted(mnt) }, n)
	left := 0
	for i := range files {
		p := fmt.Sprintf("f%03d", i)
		got, err := os.ReadFile(filepath.Join(d, p))
		resp, body := do(t, "GET", n.url+"/web/tree/"+p, nil, auth()...)
		switch {
		case errors.Is(err, os.ErrNotExist):
			if resp.StatusCode != 404 {
				t.Fatalf("%s: gone from the mount, HTTP answers %d", p, resp.StatusCode)
			}
		case err != nil:
			t.Fatalf("%s after the crash: %v", p, err)
		case i < files/2:
			t.Fatalf("%s was removed and its directory fsynced before the crash, and is back", p)
		case !bytes.Equal(got, data(i)) || !bytes.Equal(body, data(i)):
			t.Fatalf("%s after the crash: %d bytes through the mount, %d over HTTP, want %d whole", p, len(got), len(body), len(data(i)))
		default:
			left++
		}
	}
	ents, err := os.ReadDir(d)
	if err != nil || len(ents) != left {
		t.Fatalf("listing after the crash: %d entries (%v), %d files read", len(ents), err, left)
	}
	t.Logf("%d of %d unlinks not fsynced were lost with the crash; every file whole or gone", left, files/2)
	// The mount works on: the rest goes.
	if err := os.RemoveAll(d); err != nil {
		t.Fatal(err)
	}
	syncDir(t, mnt)
	if resp, _ := do(t, "GET", n.url+"/web/tree/f399", nil, auth()...); resp.StatusCode != 404 {
		t.Fatalf("after rm -rf: f399 answers %d", resp.StatusCode)
	}
}

// TestMountNoOpen: mounts run in the kernel's no-open mode by default
// (fuse.Config.NoOpen): opening and closing a file costs no OPEN and no
// RELEASE call, the kernel keeps a file's pages across opens, and a
// file's state lives on its node. Two nodes, each mounting bucket web:
//   - another node's rewrite drops the pages node 2's kernel cached;
//   - a descriptor open on node 2 keeps reading the version it read
//     when node 1 replaces the file by a rename (the node pins it);
//   - a rewrite with O_TRUNC is published whole: the truncation alone
//     (a SETATTR after the open, in this mode) is not;
//   - truncate(2) of a path, with no descriptor to close, is published
//     once idle;
//   - a write through a shared memory map after the last close (no FLUSH
//     follows it) is published once idle;
//   - node 2's mount answered at most one OPEN (the ENOSYS that turns the
//     mode on) and no RELEASE.
func TestMountNoOpen(t *testing.T) {
	needFuse(t)
	nodes, mnts := startMountClusterWith(t, 2, "flush")
	at := func(i int, name string) string { return filepath.Join(mnts[i], name) }

	// Another node's rewrite drops the cached pages.
	v1 := bytes.Repeat([]byte("<?php echo 'version one'; ?>\n"), 500)
	if err := os.WriteFile(at(0, "page.php"), v1, 0o644); err != nil {
		t.Fatal(err)
	}
	waitFile(t, 5*time.Second, at(1, "page.php"), v1, nodes...)
	waitFile(t, time.Second, at(1, "page.php"), v1, nodes...) // from node 2's page cache
	v2 := bytes.Repeat([]byte("<?php echo 'version two'; ?>\n"), 400)
	if err := os.WriteFile(at(0, "page.php"), v2, 0o644); err != nil {
		t.Fatal(err)
	}
	took := waitFile(t, 5*time.Second, at(1, "page.php"), v2, nodes...)
	t.Logf("node 1's rewrite read on node 2 after %v", took)

	// A descriptor open on node 2 keeps the version it read when node 1
	// replaces the file by a rename.
	old := make([]byte, 4<<20)
	for i := range old {
		old[i] = byte(i*7 + i>>12)
	}
	if err := os.WriteFile(at(0, "big.bin"), old, 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "big.bin on node 2", func() bool {
		st, err := os.Stat(at(1, "big.bin"))
		return err == nil && st.Size() == int64(len(old))
	}, nodes...)
	fd, err := os.Open(at(1, "big.bin"))
	if err != nil {
		t.Fatal(err)
	}
	defer fd.Close()
	head := make([]byte, 4096)
	if _, err := fd.ReadAt(head, 0); err != nil || !bytes.Equal(head, old[:4096]) {
		t.Fatalf("the first read through node 2: %v", err)
	}
	repl := bytes.Repeat([]byte("replacement "), 1000)
	if err := os.WriteFile(at(0, "big.new"), repl, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(at(0, "big.new"), at(0, "big.bin")); err != nil {
		t.Fatal(err)
	}
	waitFile(t, 5*time.Second, at(1, "big.bin"), repl, nodes...)
	tail := make([]byte, 64<<10)
	if n, err := fd.ReadAt(tail, 3<<20); err != nil || !bytes.Equal(tail[:n], old[3<<20:3<<20+n]) || n != len(tail) {
		t.Fatalf("the descriptor open before the replacement read %d bytes (%v), want the old version's", n, err)
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(fd.Fd()), &st); err != nil || st.Size != int64(len(old)) {
		t.Fatalf("fstat of the replaced file: size %d (%v), want the old version's %d", st.Size, err, len(old))
	}

	// A rewrite with O_TRUNC is published whole, never empty first.
	if err := os.WriteFile(at(0, "conf.php"), v1, 0o644); err != nil {
		t.Fatal(err)
	}
	waitFile(t, 5*time.Second, at(1, "conf.php"), v1, nodes...)
	w, err := os.OpenFile(at(0, "conf.php"), os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(v2[:100]); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // more than a publish takes, less than idlePublish
	if got, err := os.ReadFile(at(1, "conf.php")); err != nil || !bytes.Equal(got, v1) {
		t.Fatalf("node 2 read %d bytes of conf.php while node 1 rewrote it (%v): want the old version whole", len(got), err)
	}
	if _, err := w.Write(v2[100:]); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	waitFile(t, 5*time.Second, at(1, "conf.php"), v2, nodes...)

	// truncate(2) of a path, which the kernel sends as open(O_TRUNC)'s
	// truncation is sent, is published once idle (2 s).
	if err := os.Truncate(at(0, "conf.php"), 9); err != nil {
		t.Fatal(err)
	}
	var st1 syscall.Stat_t // a stat sends no FLUSH: the idle publish does it
	if err := syscall.Stat(at(0, "conf.php"), &st1); err != nil || st1.Size != 9 {
		t.Fatalf("node 1 stats conf.php at %d bytes after truncate(2) (%v), want 9", st1.Size, err)
	}
	took = waitFile(t, 5*time.Second, at(1, "conf.php"), v2[:9], nodes...)
	t.Logf("truncate(2) on node 1 read on node 2 after %v", took)

	// A write through a shared map after the last close is published once
	// idle (no FLUSH follows it).
	mf, err := os.OpenFile(at(0, "mapped.bin"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if err := mf.Truncate(4096); err != nil {
		t.Fatal(err)
	}
	mem, err := syscall.Mmap(int(mf.Fd()), 0, 4096, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	mf.Close()
	copy(mem, "written through a map")
	syscall.Munmap(mem) // the kernel writes the page back, with no FLUSH after it
	want := append([]byte("written through a map"), make([]byte, 4096-21)...)
	took = waitFile(t, 10*time.Second, at(1, "mapped.bin"), want, nodes...)
	t.Logf("a write through a map after close read on node 2 after %v", took)

	// Node 2's mount answered no RELEASE and at most the one OPEN.
	_, scrape := do(t, "GET", nodes[1].url+"/_cairn/metrics", nil)
	lbl := regexpQuote(fmt.Sprintf(`mount=%q`, mnts[1]))
	for op, most := range map[string]int{"open": 1, "release": 0} {
		v := regexpFind(t, string(scrape), `cairn_fuse_requests_total\{`+lbl+`,op="`+op+`"\} ([0-9]+)`)
		if n, _ := strconv.Atoi(v); n > most {
			t.Errorf("node 2's mount answered %s %d times, want at most %d (no-open mode)", op, n, most)
		}
	}
}

// TestMountKillPriv: the mount clears suid and sgid where Linux does
// (FUSE_HANDLE_KILLPRIV_V2, internal/frontend/fuse/killpriv.go), and a
// file's writes cost no security.capability lookup each.
func TestMountKillPriv(t *testing.T) {
	needFuse(t)
	base := t.TempDir()
	for _, d := range []string{filepath.Dir(base), base} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	mnt := filepath.Join(base, "mnt")
	n := startCairn(t, "server", filepath.Join(base, "n1"), freeAddr(t), "--mount", "web:"+mnt)
	t.Cleanup(func() { syscall.Unmount(mnt, syscall.MNT_DETACH) })
	waitFor(t, 30*time.Second, "the mount", func() bool { return mounted(mnt) }, n)
	f := filepath.Join(mnt, "prog")
	if err := os.WriteFile(f, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	mode := func() os.FileMode {
		t.Helper()
		st, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		return st.Mode() & (os.ModePerm | os.ModeSetuid | os.ModeSetgid | os.ModeSticky)
	}
	chmod := func(m os.FileMode) {
		t.Helper()
		if err := os.Chmod(f, m); err != nil {
			t.Fatal(err)
		}
	}
	nobody := func(args ...string) {
		t.Helper()
		cmd := exec.Command(args[0], args[1:]...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%v as nobody: %v: %s", args, err, out)
		}
	}
	suidgid := os.ModeSetuid | os.ModeSetgid
	for _, c := range []struct {
		name       string
		from       os.FileMode
		do         func()
		want       os.FileMode
		whoseCheck string
	}{
		{"chown by root", suidgid | 0o755, func() { os.Chown(f, 1000, 1000) }, 0o755, "Linux clears both on chown"},
		{"chown -1 -1", suidgid | 0o755, func() { os.Chown(f, -1, -1) }, 0o755, "even to the same owner"},
		{"write by an unprivileged user", suidgid | 0o777, func() { nobody("sh", "-c", "echo more >> "+f) }, 0o777, "WRITE_KILL_SUIDGID"},
		{"truncate by an unprivileged user", suidgid | 0o777, func() { nobody("truncate", "-s", "3", f) }, 0o777, "FATTR_KILL_SUIDGID"},
		{"write by root", suidgid | 0o777, func() {
			fh, err := os.OpenFile(f, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			fh.WriteString("root\n")
			fh.Close()
		}, suidgid | 0o777, "CAP_FSETID keeps them"},
		{"chown of sgid without group exec", os.ModeSetgid | 0o745, func() { os.Chown(f, 1001, -1) }, os.ModeSetgid | 0o745, "sgid without g+x is kept"},
	} {
		chmod(c.from)
		c.do()
		if got := mode(); got != c.want {
			t.Errorf("%s: mode %v, want %v (%s)", c.name, got, c.want, c.whoseCheck)
		}
	}
	d := filepath.Join(mnt, "dir")
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(d, os.ModeSetgid|0o775)
	os.Chown(d, 1000, 1000)
	if st, err := os.Stat(d); err != nil || st.Mode()&os.ModeSetgid == 0 {
		t.Errorf("a directory's chown cleared its sgid: %v %v", st.Mode(), err)
	}

	// 200 writes of one file cost at most one security.capability lookup.
	metric := func() int {
		_, scrape := do(t, "GET", n.url+"/_cairn/metrics", nil)
		v := regexpFind(t, string(scrape), `cairn_fuse_requests_total\{`+regexpQuote(fmt.Sprintf(`mount=%q`, mnt))+`,op="getxattr"\} ([0-9]+)`)
		k, _ := strconv.Atoi(v)
		return k
	}
	before := metric()
	w, err := os.Create(filepath.Join(mnt, "log.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 200; i++ {
		if _, err := w.Write([]byte("a line of a log\n")); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	if got := metric() - before; got > 2 {
		t.Errorf("200 writes of one file cost %d GETXATTR calls, want at most 2 (the capability check once per inode)", got)
	}
}
