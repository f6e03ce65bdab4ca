package blob

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/cairn-fs/cairn/internal/clock"
	"github.com/cairn-fs/cairn/internal/vfs"
	"github.com/cairn-fs/cairn/internal/volume"
)

// minVolumeSize is the smallest MaxVolumeSize accepted (small volumes are
// for tests; a blob larger than a volume gets an otherwise empty volume).
const minVolumeSize = 4 << 10

// DefaultConfig returns the defaults documented on Config's fields. Dir is
// left empty and must be set.
func DefaultConfig() Config {
	return Config{
		FS:                  vfs.OS(),
		MaxVolumeSize:       1 << 30,
		CompactGarbageRatio: 0.5,
		CompactAge:          time.Hour,
		MinFreeBytes:        64 << 20,
		Logger:              slog.Default(),
		CheckpointInterval:  64 << 20,
		Now:                 time.Now,
		ScrubPeriod:         DefaultScrubPeriod,
		Clock:               clock.Real{},
	}
}

// withDefaults fills zero fields with their defaults.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.FS == nil {
		c.FS = d.FS
	}
	if c.MaxVolumeSize == 0 {
		c.MaxVolumeSize = d.MaxVolumeSize
	}
	if c.CompactGarbageRatio == 0 {
		c.CompactGarbageRatio = d.CompactGarbageRatio
	}
	if c.CompactAge == 0 {
		c.CompactAge = d.CompactAge
	}
	if c.MinFreeBytes == 0 {
		c.MinFreeBytes = d.MinFreeBytes
	}
	if c.Logger == nil {
		c.Logger = d.Logger
	}
	if c.CheckpointInterval == 0 {
		c.CheckpointInterval = d.CheckpointInterval
	}
	if c.Now == nil {
		c.Now = d.Now
	}
	if c.ScrubPeriod == 0 {
		c.ScrubPeriod = d.ScrubPeriod
	}
	if c.Clock == nil {
		c.Clock = d.Clock
	}
	return c
}

// Validate reports whether c is usable as given. Open fills zero fields with
// their defaults before validating; a negative MinFreeBytes disables the
// free-space check (ENOSPC from the disk is still reported as ErrNoSpace),
// a negative CheckpointInterval the background checkpoints, a negative
// ScrubPeriod the background scrub passes.
func (c Config) Validate() error {
	var errs []error
	if c.Dir == "" {
		errs = append(errs, errors.New("Dir is required"))
	}
	if c.FS == nil {
		errs = append(errs, errors.New("FS is required"))
	}
	if c.MaxVolumeSize < minVolumeSize || c.MaxVolumeSize > volume.MaxVolumeSize {
		errs = append(errs, fmt.Errorf("MaxVolumeSize %d outside [%d, %d]", c.MaxVolumeSize, minVolumeSize, int64(volume.MaxVolumeSize)))
	}
	if !(c.CompactGarbageRatio > 0 && c.CompactGarbageRatio < 1) {
		errs = append(errs, fmt.Errorf("CompactGarbageRatio %v outside (0, 1)", c.CompactGarbageRatio))
	}
	if c.Logger == nil {
		errs = append(errs, errors.New("Logger is required"))
	}
	if c.OnFsync != nil && c.Now == nil {
		errs = append(errs, errors.New("Now is required with OnFsync"))
	}
	if c.ScrubRate < 0 {
		errs = append(errs, fmt.Errorf("ScrubRate %d is negative", c.ScrubRate))
	}
	if c.ScrubPeriod == 0 {
		errs = append(errs, errors.New("ScrubPeriod is required (negative: no background scrub)"))
	}
	if c.Clock == nil {
		errs = append(errs, errors.New("Clock is required"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("blob: invalid config: %w", err)
	}
	return nil
}
