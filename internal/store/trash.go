package store

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cairn-fs/cairn/internal/consensus"
	"github.com/cairn-fs/cairn/internal/meta"
)

// Trash is the store's API for a bucket's trash (design 0007): the files
// a delete or an overwrite removed, kept for the bucket's retention
// (BucketInfo.TrashSeconds). Local implements it; the admin front end
// serves it (cairn trash).
type Trash interface {
	// TrashList returns a page of the entries whose path starts with
	// opts.Prefix, by path and then deletion time: at most opts.Limit,
	// from after opts.After (the Next of the page before). ErrInvalidName
	// for an After that is not a Next.
	TrashList(ctx context.Context, bucket string, opts TrashListOptions) (TrashPage, error)
	// TrashRestore puts entries back: path's newest entry deleted at or
	// before at (zero: the newest), as to (""; the same path). A path
	// ending in "/" (or "" for the whole bucket) restores every path
	// under it, each from its newest entry at or before at, under to
	// when given. It never overwrites: a path where a file exists is
	// skipped and reported in the error (ErrExists). It returns the
	// paths restored.
	TrashRestore(ctx context.Context, bucket, path string, at time.Time, to string) ([]string, error)
	// TrashEmpty drops the entries deleted before before (zero: all) and
	// returns how many.
	TrashEmpty(ctx context.Context, bucket string, before time.Time) (int, error)
	// TrashUsage returns the number of entries and their bytes.
	TrashUsage(ctx context.Context, bucket string) (entries, bytes int64, err error)
}

// TrashEntry is a file a bucket's trash keeps.
type TrashEntry struct {
	Path     string    `json:"path"`
	Deleted  time.Time `json:"deleted"`
	Replaced bool      `json:"replaced"` // overwritten, not deleted
	Size     int64     `json:"size"`
	ETag     string    `json:"etag,omitempty"`
	SHA256   string    `json:"sha256,omitempty"`
	// Origin: the node that took the change, its front end (http, s3,
	// webdav, mount) and the access key ID ("admin" for the admin key, "" for anonymous or a mount).
	Node     uint64 `json:"node,string,omitempty"`
	Frontend string `json:"frontend,omitempty"`
	Key      string `json:"key,omitempty"`
}

// TrashListOptions select a page of a trash listing.
type TrashListOptions struct {
	Prefix string
	After  string // the Next of the page before; "" from the first entry
	Limit  int    // entries at most: 0 DefaultTrashPage, at most MaxTrashPage
}

// TrashPage is one page of a trash listing. Next, when set, is where the
// next page starts (TrashListOptions.After); "" on the last page.
type TrashPage struct {
	Entries []TrashEntry
	Next    string
}

// Trash pages: the default size and the largest.
const (
	DefaultTrashPage = 1000
	MaxTrashPage     = 10000
)

var _ Trash = (*Local)(nil)

// originKey marks a context made by WithOrigin.
type originKey struct{}

type origin struct{ frontend, key string }

// WithOrigin returns ctx naming the front end and access key ID a change
// comes from, for the trash entries it makes.
func WithOrigin(ctx context.Context, frontend, key string) context.Context {
	return context.WithValue(ctx, originKey{}, origin{frontend, key})
}

// withOrigin sets cmd's origin from ctx, for the commands that can make
// trash entries.
func (s *Local) withOrigin(ctx context.Context, cmd *meta.Command) {
	switch cmd.Op {
	case meta.OpDelete, meta.OpPutFile, meta.OpRename:
	default:
		return
	}
	o, _ := ctx.Value(originKey{}).(origin)
	cmd.Origin = &meta.Origin{Node: s.cfg.NodeID, Frontend: o.frontend, Key: o.key}
}

func trashEntry(e *meta.TrashEntry) TrashEntry {
	return TrashEntry{Path: e.Path, Deleted: time.Unix(0, e.DeletedNs).UTC(), Replaced: e.Replaced,
		Size: e.Inode.Size, ETag: e.Inode.ETag, SHA256: e.Inode.SHA256,
		Node: e.Origin.Node, Frontend: e.Origin.Frontend, Key: e.Origin.Key}
}

// TrashList implements Trash. A page's Next is the position of its last
// entry in the bucket's trash (base64url): the next page starts after it,
// wherever entries came or went in between.
func (s *Local) TrashList(ctx context.Context, bucket string, opts TrashListOptions) (TrashPage, error) {
	if _, err := s.meta.Bucket(bucket); err != nil {
		return TrashPage{}, mapErr(err)
	}
	limit := opts.Limit
	switch {
	case limit <= 0:
		limit = DefaultTrashPage
	case limit > MaxTrashPage:
		limit = MaxTrashPage
	}
	var after []byte
	if opts.After != "" {
		var err error
		if after, err = base64.RawURLEncoding.DecodeString(opts.After); err != nil || len(after) == 0 {
			return TrashPage{}, fmt.Errorf("%w: trash listing position %q", ErrInvalidName, opts.After)
		}
	}
	var page TrashPage
	var last []byte
	more := false
	err := s.meta.TrashFrom(bucket, opts.Prefix, after, func(e *meta.TrashEntry, pos []byte) bool {
		if len(page.Entries) == limit {
			more = true
			return false
		}
		page.Entries = append(page.Entries, trashEntry(e))
		last = append(last[:0], pos...)
		return ctx.Err() == nil
	})
	if err == nil {
		err = ctx.Err()
	}
	if more {
		page.Next = base64.RawURLEncoding.EncodeToString(last)
	}
	return page, mapErr(err)
}

// TrashRestore implements Trash.
func (s *Local) TrashRestore(ctx context.Context, bucket, path string, at time.Time, to string) ([]string, error) {
	var atNs int64
	if !at.IsZero() {
		atNs = at.UnixNano()
	}
	if path != "" && !strings.HasSuffix(path, "/") {
		_, err := s.propose(ctx, meta.Command{Op: meta.OpTrashRestore, BucketName: bucket, Path: path, DstPath: to,
			Trash: &meta.TrashCmd{At: atNs}})
		if err != nil {
			return nil, err
		}
		return []string{orPath(to, path)}, nil
	}
	// A tree: every path under it, from its newest entry at or before at.
	var paths []string
	if _, err := s.meta.Bucket(bucket); err != nil {
		return nil, mapErr(err)
	}
	err := s.meta.Trash(bucket, path, func(e *meta.TrashEntry) bool {
		if (atNs == 0 || e.DeletedNs <= atNs) && (len(paths) == 0 || paths[len(paths)-1] != e.Path) {
			paths = append(paths, e.Path)
		}
		return true
	})
	if err != nil {
		return nil, mapErr(err)
	}
	if len(paths) == 0 {
		return nil, ErrNotFound
	}
	cmds := make([]meta.Command, len(paths))
	for i, p := range paths {
		dst := ""
		if to != "" {
			dst = strings.TrimSuffix(to, "/") + "/" + strings.TrimPrefix(p, path)
		}
		cmds[i] = meta.Command{Op: meta.OpTrashRestore, BucketName: bucket, Path: p, DstPath: dst,
			Trash: &meta.TrashCmd{At: atNs}, TimeNs: s.cfg.Now().UnixNano()}
	}
	var restored []string
	var errs []error
	const batch = 512
	for len(cmds) > 0 {
		n := min(batch, len(cmds))
		res, perr := s.proposeAll(ctx, cmds[:n])
		for i := range n {
			err := perr[i]
			if err == nil {
				err = res[i].Err
			}
			if err != nil {
				if len(errs) < 10 {
					errs = append(errs, err)
				}
				continue
			}
			restored = append(restored, orPath(cmds[i].DstPath, cmds[i].Path))
		}
		cmds = cmds[n:]
	}
	return restored, mapErr(errors.Join(errs...))
}

// proposeAll proposes cmds in order: in one ProposeMany when the log
// takes ordered proposals, else one by one. A command refused because a
// node owns a directory it changes goes again alone, with this node's
// claim or after a recall (proposeOwned).
func (s *Local) proposeAll(ctx context.Context, cmds []meta.Command) ([]meta.Result, []error) {
	if op, ok := s.log.(consensus.OrderedProposer); ok && s.owners.count() == 0 {
		res, errs := op.ProposeMany(ctx, cmds)
		for i := range cmds {
			if errs[i] == nil && errors.Is(res[i].Err, meta.ErrOwned) {
				res[i], errs[i] = s.proposeOwned(ctx, cmds[i])
			}
		}
		return res, errs
	}
	res, errs := make([]meta.Result, len(cmds)), make([]error, len(cmds))
	for i := range cmds {
		res[i], errs[i] = s.proposeOwned(ctx, cmds[i])
	}
	return res, errs
}

func orPath(to, path string) string {
	if to != "" {
		return to
	}
	return path
}

// TrashEmpty implements Trash.
func (s *Local) TrashEmpty(ctx context.Context, bucket string, before time.Time) (int, error) {
	b := int64(1<<63 - 1)
	if !before.IsZero() {
		b = before.UnixNano()
	}
	total := 0
	for {
		res, err := s.propose(ctx, meta.Command{Op: meta.OpTrashPurge, BucketName: bucket,
			Trash: &meta.TrashCmd{Before: b, Limit: meta.MaxTrashPurge}})
		if err != nil {
			return total, err
		}
		total += res.Count
		if res.Count < meta.MaxTrashPurge {
			return total, nil
		}
	}
}

// TrashUsage implements Trash.
func (s *Local) TrashUsage(ctx context.Context, bucket string) (int64, int64, error) {
	n, b, err := s.meta.TrashUsage(bucket)
	return n, b, mapErr(err)
}

// expireTrash drops, on the leader, the entries of every bucket older
// than its retention: one decision in the log, applied by every node.
func (s *Local) expireTrash(ctx context.Context) error {
	if s.cfg.IsLeader != nil && !s.cfg.IsLeader() {
		return nil
	}
	bs, err := s.meta.Buckets()
	if err != nil {
		return mapErr(err)
	}
	now := s.cfg.Now()
	var errs []error
	for _, b := range bs {
		if b.TrashNs <= 0 || meta.Versioned(b) { // a versioned bucket's entries never expire
			continue
		}
		if n, _, err := s.meta.TrashUsage(b.Name); err != nil || n == 0 {
			continue
		}
		if _, err := s.TrashEmpty(ctx, b.Name, now.Add(-time.Duration(b.TrashNs))); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
