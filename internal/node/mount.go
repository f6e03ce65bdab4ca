package node

// Mounts (--mount BUCKET[/PREFIX]:DIR[:OPTIONS], repeatable): the POSIX front end
// (internal/frontend/fuse) runs inside the node process over its store.
// They start once the node serves (in a cluster, bucket creation needs
// the log), and are unmounted first at Close, before the store closes.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-fs/cairn/internal/frontend/fuse"
	"github.com/cairn-fs/cairn/internal/store"
)

// mountStartTimeout bounds the start of one mount (the bucket's creation
// waits for a Raft leader in a new cluster).
const mountStartTimeout = 60 * time.Second

// startMounts mounts every cfg.Mounts spec.
func (n *Node) startMounts() error {
	if len(n.cfg.Mounts) == 0 {
		return nil
	}
	tmp := filepath.Join(n.cfg.DataDir, "tmp")
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		return fmt.Errorf("mount: %w", err)
	}
	for _, spec := range n.cfg.Mounts {
		sp, err := fuse.ParseSpec(spec)
		if err != nil {
			return err
		}
		var locks store.Locker = n.store
		if sp.NoLocks {
			locks = nil
		}
		mode := sp.Mode
		if n.cfg.MountHandles {
			mode = fuse.ModeHandles
		}
		ctx, cancel := context.WithTimeout(context.Background(), mountStartTimeout)
		var m *fuse.Mount
		for {
			m, err = fuse.New(ctx, fuse.Config{Store: n.store, Watch: func(w store.Watcher) func() { return n.store.Watch(w) },
				Bucket: sp.Bucket, Prefix: sp.Prefix, Dir: sp.Dir, TmpDir: tmp, Logger: n.cfg.Logger, Capacity: n.clusterCapacity,
				NoOpen: mode != fuse.ModeHandles, NoFlush: mode == fuse.ModeNoFlush, Locks: locks})
			// A new cluster has no leader for a moment: creating the
			// bucket waits for one.
			if err == nil || !errors.Is(err, store.ErrUnavailable) || ctx.Err() != nil {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		cancel()
		if err != nil {
			return fmt.Errorf("--mount %s: %w%s", spec, err, mountHint(err))
		}
		n.mountsMu.Lock()
		n.mounts = append(n.mounts, m)
		n.mountsMu.Unlock()
	}
	return nil
}

// closeMounts unmounts every mount, last first.
func (n *Node) closeMounts() error {
	n.mountsMu.Lock()
	ms := n.mounts
	n.mounts = nil
	n.mountsMu.Unlock()
	var errs []error
	for i := len(ms) - 1; i >= 0; i-- {
		errs = append(errs, ms[i].Close())
	}
	return errors.Join(errs...)
}

// capSysAdmin is CAP_SYS_ADMIN's bit in /proc/self/status's CapEff.
const capSysAdmin = 21

// mountHint explains a mount that failed for want of CAP_SYS_ADMIN:
// without it go-fuse's direct mount fails and it falls back to the setuid
// fusermount3 (an error naming fusermount says it did), which fails
// under NoNewPrivileges=yes (cairn.service), when not installed, or
// without user_allow_other in /etc/fuse.conf. "" for other errors, when
// the process has the capability, or cannot tell (not Linux).
func mountHint(err error) string {
	if err == nil || !strings.Contains(err.Error(), "fusermount") {
		return ""
	}
	b, rerr := os.ReadFile("/proc/self/status")
	if rerr != nil {
		return ""
	}
	return mountHintFrom(string(b))
}

// mountHintFrom is mountHint's advice for the text of /proc/self/status.
func mountHintFrom(status string) string {
	for line := range strings.SplitSeq(status, "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			caps, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil || caps&(1<<capSysAdmin) != 0 {
				return ""
			}
			return " (this process lacks CAP_SYS_ADMIN, which the node mounts with; the fallback, the setuid fusermount3, failed too." +
				" Under systemd install the drop-in /usr/share/cairn/systemd/mount.conf: docs/operations.md, \"Mounts under systemd\")"
		}
	}
	return ""
}
