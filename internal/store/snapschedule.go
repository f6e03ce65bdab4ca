package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cairn-fs/cairn/internal/meta"
)

// SnapshotSchedule is how many automatic snapshots of a bucket to keep,
// per period (design 0007): every hour, day and week the leader takes
// one ("auto-hourly-TIME", ...) and deletes the oldest beyond the count.
// A zero count takes none of that period. It is a record in the log, so
// every node knows it and a new leader goes on with it.
type SnapshotSchedule struct {
	Hourly int `json:"hourly"`
	Daily  int `json:"daily"`
	Weekly int `json:"weekly"`
}

// MaxScheduledSnapshots bounds each count of a schedule.
const MaxScheduledSnapshots = 1000

// scheduleTier is one period of a schedule.
type scheduleTier struct {
	name   string
	period time.Duration
	keep   int
}

func (s SnapshotSchedule) tiers() []scheduleTier {
	return []scheduleTier{{"hourly", time.Hour, s.Hourly}, {"daily", 24 * time.Hour, s.Daily}, {"weekly", 7 * 24 * time.Hour, s.Weekly}}
}

// SetSnapshotSchedule sets bucket's schedule; all counts 0 removes it.
func (s *Local) SetSnapshotSchedule(ctx context.Context, bucket string, sc SnapshotSchedule) error {
	for _, t := range sc.tiers() {
		if t.keep < 0 || t.keep > MaxScheduledSnapshots {
			return fmt.Errorf("%w: %s=%d: keep 0 to %d", ErrInvalidName, t.name, t.keep, MaxScheduledSnapshots)
		}
	}
	if _, err := s.meta.Bucket(bucket); err != nil {
		return mapErr(err)
	}
	if sc == (SnapshotSchedule{}) {
		err := s.DeleteRecord(ctx, meta.RecordSnapSchedule, bucket)
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		return err
	}
	v, _ := json.Marshal(sc) // ints only
	_, err := s.PutRecord(ctx, meta.RecordSnapSchedule, bucket, v, false)
	return err
}

// GetSnapshotSchedule returns bucket's schedule (zero: none).
func (s *Local) GetSnapshotSchedule(ctx context.Context, bucket string) (SnapshotSchedule, error) {
	var sc SnapshotSchedule
	rec, err := s.meta.Record(meta.RecordSnapSchedule, bucket)
	if errors.Is(err, meta.ErrNotFound) {
		if _, err := s.meta.Bucket(bucket); err != nil {
			return sc, mapErr(err)
		}
		return sc, nil
	}
	if err != nil {
		return sc, mapErr(err)
	}
	if err := json.Unmarshal(rec.Value, &sc); err != nil {
		return sc, fmt.Errorf("%w: snapshot schedule of %s: %v", ErrCorrupt, bucket, err)
	}
	return sc, nil
}

// runSchedules takes and prunes the scheduled snapshots, on the leader.
func (s *Local) runSchedules(ctx context.Context) error {
	if s.cfg.IsLeader != nil && !s.cfg.IsLeader() {
		return nil
	}
	recs, err := s.meta.Records(meta.RecordSnapSchedule)
	if err != nil || len(recs) == 0 {
		return mapErr(err)
	}
	now := s.cfg.Now().UTC()
	var errs []error
	for _, rec := range recs {
		var sc SnapshotSchedule
		if err := json.Unmarshal(rec.Value, &sc); err != nil {
			errs = append(errs, fmt.Errorf("snapshot schedule of %s: %w", rec.Name, err))
			continue
		}
		list, err := s.SnapshotList(ctx, rec.Name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, t := range sc.tiers() {
			errs = append(errs, s.runTier(ctx, rec.Name, t, list, now))
		}
	}
	return errors.Join(errs...)
}

func (s *Local) runTier(ctx context.Context, bucket string, t scheduleTier, list []SnapshotInfo, now time.Time) error {
	prefix := "auto-" + t.name + "-"
	var mine []SnapshotInfo
	for _, sn := range list {
		if strings.HasPrefix(sn.Name, prefix) {
			mine = append(mine, sn)
		}
	}
	slices.SortFunc(mine, func(a, b SnapshotInfo) int { return a.Created.Compare(b.Created) })
	// One per period: a small slack so that a pass a little early still
	// takes it.
	if t.keep > 0 && (len(mine) == 0 || now.Sub(mine[len(mine)-1].Created) >= t.period-time.Minute) {
		sn, err := s.SnapshotCreate(ctx, bucket, prefix+now.Format("2006-01-02T15-04-05Z"))
		if err != nil && !errors.Is(err, ErrExists) {
			return fmt.Errorf("scheduled snapshot of %s: %w", bucket, err)
		}
		if err == nil {
			mine = append(mine, sn)
		}
	}
	var errs []error
	for len(mine) > t.keep {
		if err := s.SnapshotDelete(ctx, bucket, mine[0].Name); err != nil && !errors.Is(err, ErrNotFound) {
			errs = append(errs, err)
		}
		mine = mine[1:]
	}
	return errors.Join(errs...)
}
