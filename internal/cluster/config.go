package cluster

import (
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/cairn-fs/cairn/internal/clock"

	"github.com/hashicorp/memberlist"
)

// MinSecretLen is the shortest cluster secret DetectorConfig.Validate
// accepts, in bytes (the same floor as the node-to-node transport).
const MinSecretLen = 16

// MaxMetaSize is the largest DetectorConfig.Meta, in bytes: memberlist's
// per-node metadata limit (512) less the one flag byte the detector adds.
const MaxMetaSize = memberlist.MetaMaxSize - 1

// gossipKeyLabel separates the gossip encryption key from every other key
// derived from the cluster secret (the transport signs requests with
// HMAC-SHA256(secret, its own label)), so that no two uses share a key.
const gossipKeyLabel = "cairn gossip aes-256-gcm key v1"

// gossipLabel is memberlist's packet label: authenticated data of every
// packet and stream, so a memberlist of another program on the same port
// (Consul, Serf, another Cairn cluster's older version) is rejected early.
const gossipLabel = "cairn/1"

// ErrBadConfig is returned (wrapped) by DetectorConfig.Validate and
// NewDetector when the configuration is unusable.
var ErrBadConfig = errors.New("cluster: bad config")

// DetectorConfig configures a failure detector (NewDetector). Zero timing
// fields take the defaults of DefaultDetectorConfig; doc.go explains the
// numbers.
type DetectorConfig struct {
	// NodeID is this node's Raft node ID (> 0). Its decimal form is the
	// memberlist node name, so two processes with the same ID conflict.
	NodeID uint64
	// BindAddr is the IP address the gossip listeners bind, UDP and TCP.
	// Default "0.0.0.0".
	BindAddr string
	// BindPort is the gossip port, the same for UDP and TCP. 0 lets the
	// kernel choose a free port (tests); Detector.Addr reports it.
	// DefaultDetectorConfig sets 7946.
	BindPort int
	// AdvertiseAddr is the IP other members use to reach this node. ""
	// means BindAddr, or when that is 0.0.0.0 the first private address of
	// the host (memberlist's rule).
	AdvertiseAddr string
	// AdvertisePort is the port other members use. 0 means BindPort.
	AdvertisePort int
	// Seeds are gossip addresses ("host:port") of other members to join.
	// Empty: this node starts alone and waits for others to join it. The
	// detector retries the seeds in the background, with exponential
	// backoff, whenever it sees no other live member.
	Seeds []string
	// Secret is the cluster secret shared by every node, at least
	// MinSecretLen bytes. Required. The gossip key is
	// HMAC-SHA256(Secret, "cairn gossip aes-256-gcm key v1"): 32 bytes,
	// AES-256-GCM; every packet and stream is encrypted and authenticated
	// with it, so a node with another secret cannot join. The slice is
	// copied.
	Secret []byte
	// Meta is small per-node metadata gossiped with the node (for example
	// its public URL), at most MaxMetaSize bytes. Fixed for the life of the
	// detector. The slice is copied.
	Meta []byte
	// Logger receives the detector's logs: Info for members joining,
	// dying and leaving, Warn for join failures and ID conflicts, and
	// memberlist's own log lines at Debug. Default slog.Default().
	Logger *slog.Logger
	// Clock runs the rejoin timers and stamps the view's changes (the
	// probes inside memberlist run on the wall clock). Default clock.Real{}.
	Clock clock.Clock

	// ProbeInterval is the time between two probes by this node of one
	// random member. Default 200 ms.
	ProbeInterval time.Duration
	// ProbeTimeout is how long a direct UDP probe waits for its ack before
	// indirect probes start; it must be below ProbeInterval. Default 100 ms.
	ProbeTimeout time.Duration
	// SuspicionMult sets the minimum suspicion time to SuspicionMult ×
	// max(1, log10 N) × ProbeInterval. Default 4 (800 ms up to 10 nodes).
	SuspicionMult int
	// SuspicionMaxTimeoutMult bounds the suspicion time when no other
	// member confirms the suspicion: SuspicionMaxTimeoutMult × the
	// minimum. Default 2.
	SuspicionMaxTimeoutMult int
	// GossipInterval is the time between gossip rounds that carry state
	// changes (suspect, dead, alive) to GossipNodes random members.
	// Default 100 ms.
	GossipInterval time.Duration
	// GossipNodes is the number of members each gossip round reaches.
	// Default 3.
	GossipNodes int
	// RetransmitMult: each state change is sent RetransmitMult ×
	// ceil(log10(N+1)) times. Default 4.
	RetransmitMult int
	// IndirectChecks is the number of members asked to probe a member
	// that missed a direct probe. Default 3.
	IndirectChecks int
	// AwarenessMaxMultiplier bounds how far a node that finds itself slow
	// (missed acks of its own probes, Lifeguard) stretches its probe
	// interval and timeout. Default 2.
	AwarenessMaxMultiplier int
	// PushPullInterval is the time between full state exchanges with one
	// random member over TCP. Default 10 s.
	PushPullInterval time.Duration
	// GossipToTheDeadTime is how long gossip still goes to a dead member,
	// so that one wrongly declared dead can refute. Default 30 s.
	GossipToTheDeadTime time.Duration
	// TCPTimeout bounds the TCP connect and exchange of a join, a push/pull
	// and a fallback TCP probe. Default 2 s.
	TCPTimeout time.Duration
	// DeadNodeReclaimTime is how long a member must have been dead before
	// its ID may come back at another address. Default 5 s.
	DeadNodeReclaimTime time.Duration

	// JoinRetryMin and JoinRetryMax bound the exponential backoff between
	// attempts to join the seeds (jittered ±20%). Defaults 200 ms and 5 s.
	JoinRetryMin, JoinRetryMax time.Duration
	// ReconnectInterval is the time between attempts to reach one random
	// dead (not left) member directly, so that two groups separated for
	// longer than GossipToTheDeadTime find each other again. Negative
	// disables. Default 10 s.
	ReconnectInterval time.Duration
	// EventBuffer is the capacity, in events, of each Subscribe channel.
	// Default 256.
	EventBuffer int
}

// DefaultDetectorConfig returns the defaults documented on DetectorConfig's
// fields. NodeID, Secret, Seeds and Meta are left empty.
func DefaultDetectorConfig() DetectorConfig {
	return DetectorConfig{
		BindAddr:                "0.0.0.0",
		BindPort:                7946,
		Logger:                  slog.Default(),
		ProbeInterval:           200 * time.Millisecond,
		ProbeTimeout:            100 * time.Millisecond,
		SuspicionMult:           4,
		SuspicionMaxTimeoutMult: 2,
		GossipInterval:          100 * time.Millisecond,
		GossipNodes:             3,
		RetransmitMult:          4,
		IndirectChecks:          3,
		AwarenessMaxMultiplier:  2,
		PushPullInterval:        10 * time.Second,
		GossipToTheDeadTime:     30 * time.Second,
		TCPTimeout:              2 * time.Second,
		DeadNodeReclaimTime:     5 * time.Second,
		JoinRetryMin:            200 * time.Millisecond,
		JoinRetryMax:            5 * time.Second,
		ReconnectInterval:       10 * time.Second,
		EventBuffer:             256,
	}
}

// withDefaults fills zero fields (but not BindPort: 0 means "any free
// port") with their defaults.
func (c DetectorConfig) withDefaults() DetectorConfig {
	d := DefaultDetectorConfig()
	setStr := func(v *string, def string) {
		if *v == "" {
			*v = def
		}
	}
	setDur := func(v *time.Duration, def time.Duration) {
		if *v == 0 {
			*v = def
		}
	}
	setInt := func(v *int, def int) {
		if *v == 0 {
			*v = def
		}
	}
	setStr(&c.BindAddr, d.BindAddr)
	if c.Logger == nil {
		c.Logger = d.Logger
	}
	c.Clock = clock.Or(c.Clock)
	setDur(&c.ProbeInterval, d.ProbeInterval)
	setDur(&c.ProbeTimeout, d.ProbeTimeout)
	setInt(&c.SuspicionMult, d.SuspicionMult)
	setInt(&c.SuspicionMaxTimeoutMult, d.SuspicionMaxTimeoutMult)
	setDur(&c.GossipInterval, d.GossipInterval)
	setInt(&c.GossipNodes, d.GossipNodes)
	setInt(&c.RetransmitMult, d.RetransmitMult)
	setInt(&c.IndirectChecks, d.IndirectChecks)
	setInt(&c.AwarenessMaxMultiplier, d.AwarenessMaxMultiplier)
	setDur(&c.PushPullInterval, d.PushPullInterval)
	setDur(&c.GossipToTheDeadTime, d.GossipToTheDeadTime)
	setDur(&c.TCPTimeout, d.TCPTimeout)
	setDur(&c.DeadNodeReclaimTime, d.DeadNodeReclaimTime)
	setDur(&c.JoinRetryMin, d.JoinRetryMin)
	setDur(&c.JoinRetryMax, d.JoinRetryMax)
	setDur(&c.ReconnectInterval, d.ReconnectInterval)
	setInt(&c.EventBuffer, d.EventBuffer)
	return c
}

// Validate reports whether c is usable as given (NewDetector fills zero
// fields with defaults first). The error wraps ErrBadConfig.
func (c DetectorConfig) Validate() error {
	var errs []error
	if c.NodeID == 0 {
		errs = append(errs, errors.New("NodeID is required (> 0)"))
	}
	if len(c.Secret) < MinSecretLen {
		errs = append(errs, fmt.Errorf("Secret has %d bytes, want at least %d", len(c.Secret), MinSecretLen))
	}
	if len(c.Meta) > MaxMetaSize {
		errs = append(errs, fmt.Errorf("Meta has %d bytes, limit %d", len(c.Meta), MaxMetaSize))
	}
	if c.BindPort < 0 || c.BindPort > 65535 || c.AdvertisePort < 0 || c.AdvertisePort > 65535 {
		errs = append(errs, fmt.Errorf("ports %d/%d outside [0, 65535]", c.BindPort, c.AdvertisePort))
	}
	if c.Logger == nil {
		errs = append(errs, errors.New("Logger is required"))
	}
	if c.ProbeInterval <= 0 || c.ProbeTimeout <= 0 || c.ProbeTimeout >= c.ProbeInterval {
		errs = append(errs, fmt.Errorf("want 0 < ProbeTimeout (%v) < ProbeInterval (%v)", c.ProbeTimeout, c.ProbeInterval))
	}
	if c.SuspicionMult < 1 || c.SuspicionMaxTimeoutMult < 1 {
		errs = append(errs, fmt.Errorf("SuspicionMult %d and SuspicionMaxTimeoutMult %d must be >= 1", c.SuspicionMult, c.SuspicionMaxTimeoutMult))
	}
	if c.GossipInterval <= 0 || c.GossipNodes < 1 || c.RetransmitMult < 1 || c.IndirectChecks < 0 || c.AwarenessMaxMultiplier < 1 {
		errs = append(errs, errors.New("GossipInterval, GossipNodes, RetransmitMult, AwarenessMaxMultiplier must be > 0, IndirectChecks >= 0"))
	}
	if c.PushPullInterval <= 0 || c.GossipToTheDeadTime <= 0 || c.TCPTimeout <= 0 || c.DeadNodeReclaimTime <= 0 {
		errs = append(errs, errors.New("PushPullInterval, GossipToTheDeadTime, TCPTimeout, DeadNodeReclaimTime must be > 0"))
	}
	if c.JoinRetryMin <= 0 || c.JoinRetryMax < c.JoinRetryMin {
		errs = append(errs, fmt.Errorf("want 0 < JoinRetryMin (%v) <= JoinRetryMax (%v)", c.JoinRetryMin, c.JoinRetryMax))
	}
	if c.EventBuffer < 1 {
		errs = append(errs, fmt.Errorf("EventBuffer %d must be >= 1", c.EventBuffer))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w: %w", ErrBadConfig, err)
	}
	return nil
}

// gossipKey derives the 32-byte AES-256 gossip key from the cluster secret.
// The secret is never used as a key directly: a raw 16/24/32-byte secret
// would otherwise become the AES key while the transport uses the same bytes
// as an HMAC key.
func gossipKey(secret []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(gossipKeyLabel))
	return m.Sum(nil)
}

// memberlistConfig translates c (defaults applied, validated) into
// memberlist's configuration. Delegates and the logger are set by the caller.
func (c DetectorConfig) memberlistConfig() *memberlist.Config {
	mc := memberlist.DefaultLANConfig()
	mc.Name = nodeName(c.NodeID)
	mc.BindAddr = c.BindAddr
	mc.BindPort = c.BindPort
	mc.AdvertiseAddr = c.AdvertiseAddr
	mc.AdvertisePort = c.AdvertisePort
	if mc.AdvertisePort == 0 {
		mc.AdvertisePort = c.BindPort
	}
	mc.Label = gossipLabel
	mc.SecretKey = gossipKey(c.Secret)
	mc.GossipVerifyIncoming = true
	mc.GossipVerifyOutgoing = true

	mc.ProbeInterval = c.ProbeInterval
	mc.ProbeTimeout = c.ProbeTimeout
	mc.SuspicionMult = c.SuspicionMult
	mc.SuspicionMaxTimeoutMult = c.SuspicionMaxTimeoutMult
	mc.GossipInterval = c.GossipInterval
	mc.GossipNodes = c.GossipNodes
	mc.RetransmitMult = c.RetransmitMult
	mc.IndirectChecks = c.IndirectChecks
	mc.AwarenessMaxMultiplier = c.AwarenessMaxMultiplier
	mc.PushPullInterval = c.PushPullInterval
	mc.GossipToTheDeadTime = c.GossipToTheDeadTime
	mc.TCPTimeout = c.TCPTimeout
	mc.DeadNodeReclaimTime = c.DeadNodeReclaimTime
	// RequireNodeNames stays false: seeds are plain host:port addresses
	// whose node name the joiner does not know yet.
	return mc
}
