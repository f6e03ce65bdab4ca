package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/cairn-fs/cairn/internal/meta"
)

// RestoreStats says what a snapshot restore did.
type RestoreStats struct {
	Restored  int `json:"restored"`  // files and symlinks put back (new, or replacing a live version that differed)
	Unchanged int `json:"unchanged"` // already as in the snapshot
	Dirs      int `json:"dirs"`      // directories made
	Deleted   int `json:"deleted"`   // live files absent from the snapshot, removed (with Delete)
}

// RestoreOptions choose what SnapshotRestore puts back where.
type RestoreOptions struct {
	// Path is the file or directory of the snapshot to restore; "" the
	// whole bucket.
	Path string
	// To is where it goes in the live bucket; "" is Path itself.
	To string
	// Delete removes the live files under To that the snapshot does not
	// hold under Path (they go to the trash when the bucket keeps one).
	Delete bool
}

// SnapshotRestore puts a snapshot's file or tree back into the live
// bucket as namespace changes only: each file is an OpPutFile that names
// the snapshot's blobs (no byte is copied), in batches of ordered
// proposals. A live file that differs is replaced (its old version goes
// to the bucket's trash when it keeps one); one that is the same is left
// alone.
func (s *Local) SnapshotRestore(ctx context.Context, bucket, name string, opts RestoreOptions) (RestoreStats, error) {
	var st RestoreStats
	src := strings.Trim(opts.Path, "/")
	dst := strings.Trim(opts.To, "/")
	if opts.To == "" {
		dst = src
	}
	for _, p := range []string{src, dst} {
		if p != "" {
			if err := checkPath(bucket, p); err != nil {
				return st, err
			}
		}
	}
	v, err := s.OpenSnapshot(ctx, bucket, name)
	if err != nil {
		return st, err
	}
	defer v.Close()
	sr := v.l.meta
	top, err := sr.Lookup(bucket, src)
	if err != nil {
		return st, mapErr(err)
	}
	target := func(p string) string { // the live path of snapshot path p
		rel := strings.TrimPrefix(strings.TrimPrefix(p, src), "/")
		switch {
		case rel == "":
			return dst
		case dst == "":
			return rel
		}
		return dst + "/" + rel
	}
	startIndex := s.log.AppliedIndex()
	var cmds []meta.Command
	keep := map[string]bool{} // live paths the snapshot holds (for Delete)
	flush := func() error {
		if len(cmds) == 0 {
			return nil
		}
		res, perrs := s.proposeAll(ctx, cmds)
		var errs []error
		for i := range cmds {
			err := perrs[i]
			if err == nil {
				err = res[i].Err
			}
			if err != nil && !(cmds[i].Op == meta.OpMkdir && errors.Is(err, meta.ErrExists)) {
				errs = append(errs, fmt.Errorf("%s: %w", cmds[i].Path, err))
			}
		}
		cmds = cmds[:0]
		return mapErr(errors.Join(errs[:min(len(errs), 10)]...))
	}
	add := func(c meta.Command) error {
		c.TimeNs = s.cfg.Now().UnixNano()
		s.withOrigin(ctx, &c)
		cmds = append(cmds, c)
		if len(cmds) >= 512 {
			return flush()
		}
		return nil
	}
	putBack := func(p string, n *meta.Inode) error {
		to := target(p)
		keep[to] = true
		if live, err := s.meta.Lookup(bucket, to); err == nil && sameFile(live, n) {
			st.Unchanged++
			return nil
		}
		f := *n
		f.Ino, f.Nlink = 0, 0
		f.Mode |= meta.ModeExplicit
		f.Extents, f.Xattrs = slices.Clone(n.Extents), n.Xattrs
		if f.Xattrs == nil {
			f.Xattrs = map[string][]byte{} // the snapshot's (none) replace the live file's
		}
		st.Restored++
		return add(meta.Command{Op: meta.OpPutFile, BucketName: bucket, Path: to, File: &f, StartIndex: startIndex})
	}
	var walk func(dir meta.Ino, p string) error
	walk = func(dir meta.Ino, p string) error {
		after := ""
		for {
			ents, err := sr.ReadDir(dir, after, 1000)
			if err != nil {
				return mapErr(err)
			}
			for _, e := range ents {
				cp := e.Name
				if p != "" {
					cp = p + "/" + e.Name
				}
				n, err := sr.Inode(e.Ino)
				if err != nil {
					return mapErr(err)
				}
				if e.Type == meta.TypeDir {
					keep[target(cp)] = true
					if _, err := s.meta.Lookup(bucket, target(cp)); err != nil {
						st.Dirs++
						if err := add(meta.Command{Op: meta.OpMkdir, BucketName: bucket, Path: target(cp),
							File: &meta.Inode{Type: meta.TypeDir, Mode: n.Mode | meta.ModeExplicit, UID: n.UID, GID: n.GID}}); err != nil {
							return err
						}
					}
					if err := walk(e.Ino, cp); err != nil {
						return err
					}
					continue
				}
				if err := putBack(cp, n); err != nil {
					return err
				}
			}
			if len(ents) < 1000 {
				return nil
			}
			after = meta.DirentKeyName(ents[len(ents)-1])
		}
	}
	if top.Type == meta.TypeDir {
		if dst != "" {
			keep[dst] = true
		}
		err = walk(top.Ino, src)
	} else {
		err = putBack(src, top)
	}
	if err == nil {
		err = flush()
	}
	if err != nil || !opts.Delete || top.Type != meta.TypeDir {
		return st, err
	}
	// Delete: the live files under dst the snapshot does not hold, then
	// the directories it does not hold, deepest first.
	var files, dirs []string
	res, lerr := s.List(WithConsistent(ctx), bucket, ListOptions{Prefix: prefixOf(dst), Limit: 1 << 30})
	if lerr != nil {
		return st, lerr
	}
	for _, o := range res.Entries {
		if keep[o.Path] {
			continue
		}
		if o.IsDir {
			dirs = append(dirs, o.Path)
		} else {
			files = append(files, o.Path)
		}
	}
	for _, f := range files {
		st.Deleted++
		if err := add(meta.Command{Op: meta.OpDelete, BucketName: bucket, Path: f}); err != nil {
			return st, err
		}
	}
	if err := flush(); err != nil {
		return st, err
	}
	slices.SortFunc(dirs, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
	for _, d := range dirs {
		if err := add(meta.Command{Op: meta.OpDelete, BucketName: bucket, Path: d}); err != nil {
			return st, err
		}
	}
	return st, flush()
}

func prefixOf(dir string) string {
	if dir == "" {
		return ""
	}
	return dir + "/"
}

// sameFile reports whether live is already the snapshot's n: same content
// and attributes.
func sameFile(live, n *meta.Inode) bool {
	return live.Type == n.Type && live.Size == n.Size && live.SHA256 == n.SHA256 && live.Target == n.Target &&
		live.Mode == n.Mode && live.UID == n.UID && live.GID == n.GID && slices.Equal(live.Extents, n.Extents)
}
