package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cairn-fs/cairn/internal/kv"
	"github.com/cairn-fs/cairn/internal/meta"
)

// Snapshots is the store's API for a bucket's snapshots (design 0007):
// read-only, point-in-time copies that cost one log entry to take. Local
// implements it.
type Snapshots interface {
	// SnapshotCreate takes a snapshot of bucket named name ("" names it
	// by the time, UTC: 2006-01-02T15-04-05Z). ErrExists if the name is
	// taken.
	SnapshotCreate(ctx context.Context, bucket, name string) (SnapshotInfo, error)
	// SnapshotList returns the bucket's snapshots, oldest first.
	SnapshotList(ctx context.Context, bucket string) ([]SnapshotInfo, error)
	// SnapshotDelete deletes one; its blobs that nothing else holds are
	// then reclaimed by the GC.
	SnapshotDelete(ctx context.Context, bucket, name string) error
	// OpenSnapshot returns a read-only view of a snapshot, as it is at
	// the call; Close it.
	OpenSnapshot(ctx context.Context, bucket, name string) (*SnapshotView, error)
	// SnapshotRestore puts a snapshot's file or tree back, without
	// copying bytes (snaprestore.go).
	SnapshotRestore(ctx context.Context, bucket, name string, opts RestoreOptions) (RestoreStats, error)
	// SetSnapshotSchedule and GetSnapshotSchedule manage a bucket's
	// automatic snapshots (snapschedule.go).
	SetSnapshotSchedule(ctx context.Context, bucket string, sc SnapshotSchedule) error
	GetSnapshotSchedule(ctx context.Context, bucket string) (SnapshotSchedule, error)
}

// SnapshotInfo describes a snapshot.
type SnapshotInfo struct {
	Bucket  string    `json:"bucket"`
	Name    string    `json:"name"`
	ID      uint64    `json:"id,string"`
	Created time.Time `json:"created"`
	Index   uint64    `json:"index"` // the log index that took it
}

var _ Snapshots = (*Local)(nil)

func snapshotInfo(s *meta.Snapshot) SnapshotInfo {
	return SnapshotInfo{Bucket: s.Bucket, Name: s.Name, ID: s.ID, Created: time.Unix(0, s.CreatedNs).UTC(), Index: s.Index}
}

// SnapshotCreate implements Snapshots.
func (s *Local) SnapshotCreate(ctx context.Context, bucket, name string) (SnapshotInfo, error) {
	if name == "" {
		name = s.cfg.Now().UTC().Format("2006-01-02T15-04-05Z")
	}
	if err := meta.ValidSnapshotName(name); err != nil {
		return SnapshotInfo{}, mapErr(err)
	}
	if _, err := s.propose(ctx, meta.Command{Op: meta.OpSnapshotCreate, BucketName: bucket, Snap: &meta.SnapCmd{Name: name}}); err != nil {
		return SnapshotInfo{}, err
	}
	sn, err := s.meta.Snapshot(bucket, name)
	if err != nil {
		return SnapshotInfo{}, mapErr(err)
	}
	return snapshotInfo(sn), nil
}

// SnapshotList implements Snapshots.
func (s *Local) SnapshotList(ctx context.Context, bucket string) ([]SnapshotInfo, error) {
	if _, err := s.meta.Bucket(bucket); err != nil {
		return nil, mapErr(err)
	}
	snaps, err := s.meta.Snapshots(bucket)
	if err != nil {
		return nil, mapErr(err)
	}
	out := []SnapshotInfo{}
	for _, sn := range snaps {
		if !sn.Deleting {
			out = append(out, snapshotInfo(sn))
		}
	}
	return out, nil
}

// SnapshotDelete implements Snapshots: it hides the snapshot, then hands
// its overlay down in bounded commands (the leader's GC pass finishes a
// drain that an interrupted delete left).
func (s *Local) SnapshotDelete(ctx context.Context, bucket, name string) error {
	res, err := s.propose(ctx, meta.Command{Op: meta.OpSnapshotDelete, BucketName: bucket, Snap: &meta.SnapCmd{Name: name}})
	if err != nil {
		return err
	}
	return s.drainSnapshot(ctx, bucket, uint64(res.Count))
}

func (s *Local) drainSnapshot(ctx context.Context, bucket string, id uint64) error {
	for {
		res, err := s.propose(ctx, meta.Command{Op: meta.OpSnapshotDrain, BucketName: bucket,
			Snap: &meta.SnapCmd{ID: id, Limit: meta.MaxSnapshotDrain}})
		if err != nil {
			return err
		}
		if res.Count < meta.MaxSnapshotDrain {
			return nil
		}
	}
}

// drainSnapshots finishes, on the leader, the drains of deleted snapshots.
func (s *Local) drainSnapshots(ctx context.Context) error {
	if s.cfg.IsLeader != nil && !s.cfg.IsLeader() {
		return nil
	}
	bs, err := s.meta.Buckets()
	if err != nil {
		return mapErr(err)
	}
	var errs []error
	for _, b := range bs {
		snaps, err := s.meta.Snapshots(b.Name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, sn := range snaps {
			if sn.Deleting {
				errs = append(errs, s.drainSnapshot(ctx, b.Name, sn.ID))
			}
		}
	}
	return errors.Join(errs...)
}

// SnapshotView is a read-only view of a snapshot: the read methods of
// Store over the snapshot's namespace, at one point of the log.
type SnapshotView struct {
	Info SnapshotInfo
	l    *Local
	base kv.Snapshot
}

// OpenSnapshot implements Snapshots.
func (s *Local) OpenSnapshot(ctx context.Context, bucket, name string) (*SnapshotView, error) {
	base := s.kv.Snapshot()
	r := meta.NewReader(base)
	sn, err := r.Snapshot(bucket, name)
	if err != nil {
		base.Close()
		return nil, mapErr(err)
	}
	skv, err := r.SnapshotKV(sn)
	if err != nil {
		base.Close()
		return nil, mapErr(err)
	}
	frozen := frozenKV{skv}
	l := &Local{cfg: s.cfg, blobs: s.blobs, kv: frozen, meta: meta.NewReader(skv), cache: newPathCache(1024)}
	l.bufs.New = s.bufs.New
	return &SnapshotView{Info: snapshotInfo(sn), l: l, base: base}, nil
}

// Close releases the view. Objects opened through it stay readable.
func (v *SnapshotView) Close() error { return v.base.Close() }

// Stat is Store.Stat in the snapshot.
func (v *SnapshotView) Stat(ctx context.Context, path string) (ObjectInfo, error) {
	return v.l.Stat(ctx, v.Info.Bucket, path)
}

// Open is Store.Open in the snapshot.
func (v *SnapshotView) Open(ctx context.Context, path string) (Object, error) {
	return v.l.Open(ctx, v.Info.Bucket, path)
}

// List is Store.List in the snapshot.
func (v *SnapshotView) List(ctx context.Context, opts ListOptions) (ListResult, error) {
	return v.l.List(ctx, v.Info.Bucket, opts)
}

// frozenKV is the read-only kv.Store of a snapshot view: its Snapshot is
// itself (the view is already one point in time).
type frozenKV struct{ kv.Reader }

func (f frozenKV) NewBatch() kv.Batch { panic("store: a snapshot view is read-only") }
func (f frozenKV) NewIngest() (kv.Ingest, error) {
	return nil, errors.New("store: a snapshot view is read-only")
}
func (f frozenKV) Snapshot() kv.Snapshot { return nopSnapshot{f.Reader} }
func (f frozenKV) Sync() error           { return nil }
func (f frozenKV) Close() error          { return nil }

type nopSnapshot struct{ kv.Reader }

func (nopSnapshot) Close() error { return nil }

// errSnapshotReadOnly answers a write into a snapshot.
var errSnapshotReadOnly = fmt.Errorf("%w: snapshots are read-only", ErrReadOnly)
