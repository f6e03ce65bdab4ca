package sigv4

import (
	"errors"
	"fmt"
	"time"
)

// Lookup returns the secret access key of an access key id; ok is false if
// the id is unknown. It is called once per Verify, on the caller's
// goroutine, and must be safe for concurrent use. To keep timing from
// revealing which ids exist, it should take about as long for an unknown id
// as for a known one (a map lookup does).
type Lookup func(accessKeyID string) (secret string, ok bool)

// MaxPresignExpiry is the longest validity S3 allows a presigned URL:
// 7 days (604800 s). Config.MaxPresignExpiry may not exceed it.
const MaxPresignExpiry = 7 * 24 * time.Hour

// Config configures a Verifier.
type Config struct {
	// Lookup resolves access key ids to secrets. Required; no default.
	Lookup Lookup
	// Now is the clock requests are checked against. Default time.Now.
	Now func() time.Time
	// MaxSkew is how far the time of a header-signed request may be from
	// Now, either way, and how far in the future a presigned URL's
	// X-Amz-Date may be. Default 15 minutes, as S3.
	MaxSkew time.Duration
	// MaxPresignExpiry is the largest X-Amz-Expires a presigned URL may
	// carry. Default and maximum 7 days (604800 s), as S3.
	MaxPresignExpiry time.Duration
}

// DefaultConfig returns the defaults documented on Config's fields. Lookup
// has no default and must be set.
func DefaultConfig() Config {
	return Config{
		Now:              time.Now,
		MaxSkew:          15 * time.Minute,
		MaxPresignExpiry: MaxPresignExpiry,
	}
}

// withDefaults fills zero fields with their defaults.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.Now == nil {
		c.Now = d.Now
	}
	if c.MaxSkew == 0 {
		c.MaxSkew = d.MaxSkew
	}
	if c.MaxPresignExpiry == 0 {
		c.MaxPresignExpiry = d.MaxPresignExpiry
	}
	return c
}

// Validate reports a Config that New would refuse, wrapping ErrBadConfig.
// New fills zero fields with their defaults before validating.
func (c Config) Validate() error {
	var errs []error
	if c.Lookup == nil {
		errs = append(errs, errors.New("Lookup is required"))
	}
	if c.Now == nil {
		errs = append(errs, errors.New("Now is required"))
	}
	if c.MaxSkew <= 0 {
		errs = append(errs, fmt.Errorf("MaxSkew %v is not positive", c.MaxSkew))
	}
	if c.MaxPresignExpiry < time.Second || c.MaxPresignExpiry > MaxPresignExpiry {
		errs = append(errs, fmt.Errorf("MaxPresignExpiry %v outside [1s, %v]", c.MaxPresignExpiry, MaxPresignExpiry))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w: %w", ErrBadConfig, err)
	}
	return nil
}

// Verifier checks SigV4 signatures. It is immutable after New and safe for
// concurrent use; Verify does no I/O besides calling Config.Lookup and
// Config.Now.
type Verifier struct {
	lookup    Lookup
	now       func() time.Time
	maxSkew   time.Duration
	maxExpiry time.Duration

	// afterSign, if set (by tests only), is called after every signature
	// computation with whether the access key id was known. It lets tests
	// prove that an unknown id costs a full HMAC.
	afterSign func(known bool)
}

// New returns a Verifier for cfg (zero fields at their defaults), or an
// error wrapping ErrBadConfig.
func New(cfg Config) (*Verifier, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Verifier{
		lookup:    cfg.Lookup,
		now:       cfg.Now,
		maxSkew:   cfg.MaxSkew,
		maxExpiry: cfg.MaxPresignExpiry,
	}, nil
}
