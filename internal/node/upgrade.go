package node

// Rolling upgrades (docs/operations.md, "Upgrades"): every node gossips its
// binary's version and the newest log version it reads; the leader raises
// the cluster's active log version (meta/version.go) once every member of
// the cluster map is alive and reads the new one. A join by a binary older
// than the active version is refused; a node whose binary is older than
// the version its own log reached refuses to start.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cairn-fs/cairn/internal/cluster"
	"github.com/cairn-fs/cairn/internal/meta"
	"github.com/cairn-fs/cairn/internal/transport"
	"github.com/cairn-fs/cairn/internal/version"
)

// upgradeInterval is how often the leader checks whether the log version
// can move up (and how soon after it becomes leader).
const upgradeInterval = 250 * time.Millisecond

// versionMetaFormat is the first byte of the gossiped node metadata.
// Binaries from before issue 22 gossip none: they read up to
// meta.LogVersionBaseline.
const versionMetaFormat = 1

// MemberVersion is what a member says of its binary.
type MemberVersion struct {
	Release string `json:"release,omitempty"`
	Commit  string `json:"commit,omitempty"`
	// LogMax is the newest log version its binary reads.
	LogMax byte `json:"log_max"`
	// Known: the member gossiped its version. An unknown one (a binary
	// from before issue 22, or a member not heard from) counts as reading
	// the baseline only.
	Known bool `json:"known"`
}

// selfVersion is this binary's MemberVersion.
func selfVersion() MemberVersion {
	in := version.Get()
	return MemberVersion{Release: in.Release, Commit: in.Short(), LogMax: meta.LogVersionMax, Known: true}
}

// encodeVersionMeta is this node's gossiped metadata: format, log max,
// then "release commit".
func encodeVersionMeta(v MemberVersion) []byte {
	b := []byte{versionMetaFormat, v.LogMax}
	s := v.Release + " " + v.Commit
	if n := cluster.MaxMetaSize - len(b); len(s) > n {
		s = s[:n]
	}
	return append(b, s...)
}

// decodeVersionMeta parses a member's metadata; anything else (a binary
// from before issue 22 sends none) is an unknown version at the baseline.
func decodeVersionMeta(b []byte) MemberVersion {
	if len(b) < 2 || b[0] != versionMetaFormat || b[1] < meta.LogVersionBaseline {
		return MemberVersion{LogMax: meta.LogVersionBaseline}
	}
	v := MemberVersion{LogMax: b[1], Known: true}
	v.Release, v.Commit, _ = strings.Cut(string(b[2:]), " ")
	return v
}

// memberVersion returns what member id says of its binary, and whether
// the failure detector sees it alive (this node is).
func (c *clusterNode) memberVersion(id uint64) (MemberVersion, bool) {
	if id == c.id {
		return selfVersion(), true
	}
	d := c.lv.det.Load()
	if d == nil {
		return MemberVersion{LogMax: meta.LogVersionBaseline}, false
	}
	m, ok := d.Member(id)
	if !ok {
		return MemberVersion{LogMax: meta.LogVersionBaseline}, false
	}
	return decodeVersionMeta(m.Meta), m.State == cluster.StateAlive
}

// upgradePlan is the log version the cluster can move to now, the members
// that were asked, and what holds it back.
type upgradePlan struct {
	Active   byte
	Target   byte // == Active: nothing to do
	Members  []uint64
	Blockers []string
}

// planUpgrade checks every member of the cluster map (and every Raft
// member, which must be in the map) for the newest log version all of them
// read.
func (c *clusterNode) planUpgrade() (upgradePlan, error) {
	var p upgradePlan
	active, err := c.reader.LogVersion()
	if err != nil {
		return p, err
	}
	p.Active, p.Target = active, meta.LogVersionMax
	nodes, err := c.reader.Nodes()
	if err != nil {
		return p, err
	}
	for _, nd := range nodes {
		p.Members = append(p.Members, nd.ID)
		v, alive := c.memberVersion(nd.ID)
		switch {
		case !alive:
			p.Blockers = append(p.Blockers, fmt.Sprintf("node %d is not alive", nd.ID))
			p.Target = active
		case !v.Known:
			p.Blockers = append(p.Blockers, fmt.Sprintf("node %d runs a binary that does not report its version (older than 0.22)", nd.ID))
			p.Target = min(p.Target, meta.LogVersionBaseline)
		case v.LogMax < meta.LogVersionMax:
			p.Blockers = append(p.Blockers, fmt.Sprintf("node %d runs %s, which reads log version %d", nd.ID, v.Release, v.LogMax))
			p.Target = min(p.Target, v.LogMax)
		}
	}
	slices.Sort(p.Members)
	if cs := c.raft.Members(); cs != nil {
		for _, id := range append(cs.GetVoters(), cs.GetLearners()...) {
			if _, found := slices.BinarySearch(p.Members, id); !found {
				p.Blockers = append(p.Blockers, fmt.Sprintf("node %d is a Raft member without a cluster map record", id))
				p.Target = active
			}
		}
	}
	p.Target = max(p.Target, active)
	return p, nil
}

// upgradeLoop runs on every node; the leader moves the log version up as
// soon as every member reads a newer one.
func (c *clusterNode) upgradeLoop() {
	t := time.NewTicker(upgradeInterval)
	defer t.Stop()
	var lastBlock string
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
		}
		st := c.raft.Status()
		if st.Leader != c.id || st.Err != nil || st.LogVersion >= meta.LogVersionMax {
			continue
		}
		p, err := c.planUpgrade()
		if err != nil {
			c.cfg.Logger.Warn("log version check failed", "err", err)
			continue
		}
		if b := strings.Join(p.Blockers, "; "); b != lastBlock {
			lastBlock = b
			if b != "" {
				c.cfg.Logger.Info("cluster log version waits for every node's upgrade", "active", p.Active, "this_binary", meta.LogVersionMax, "waiting_for", b)
			}
		}
		if p.Target <= p.Active {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		res, err := c.raft.Propose(ctx, meta.Command{Op: meta.OpSetLogVersion, TimeNs: time.Now().UnixNano(),
			Upgrade: &meta.LogUpgrade{To: p.Target, Members: p.Members}})
		cancel()
		if err == nil {
			err = res.Err
		}
		if err != nil {
			c.cfg.Logger.Warn("raising the cluster log version failed; retrying", "to", p.Target, "err", err)
			continue
		}
		c.cfg.Logger.Info("cluster log version raised: every member reads it", "from", p.Active, "to", p.Target, "members", p.Members)
	}
}

// joinerLogMax is the newest log version a joiner's binary reads: 0 in its
// request (a binary from before issue 22) means the baseline.
func joinerLogMax(e joinExtra) byte {
	if e.LogVersion == 0 {
		return meta.LogVersionBaseline
	}
	return e.LogVersion
}

// errTooOld refuses a joiner (or a restart) whose binary reads only up to
// have while the cluster runs active.
func errTooOld(who string, have, active byte) error {
	return fmt.Errorf("%w: %s reads log versions up to %d, and the cluster already runs log version %d: install the cluster's Cairn release (or newer) on it and start it again",
		transport.ErrRefused, who, have, active)
}

// checkJoiner refuses a joiner older than the active log version.
func (c *clusterNode) checkJoiner(id transport.NodeID, e joinExtra) error {
	active, err := c.reader.LogVersion()
	if err != nil {
		return err
	}
	if have := joinerLogMax(e); have < active {
		return errTooOld(fmt.Sprintf("node %d's binary", id), have, active)
	}
	return nil
}

// checkLogVersion refuses to start a node whose own applied state reached
// a log version newer than its binary reads (a downgrade after the
// cluster's version moved up).
func checkLogVersion(r *meta.Reader) error {
	active, err := r.LogVersion()
	if err != nil {
		return err
	}
	if active > meta.LogVersionMax {
		return fmt.Errorf("this binary (%s) reads log versions up to %d, and this node's data already holds log version %d "+
			"(the cluster's version moved up after an upgrade, so it cannot be downgraded): install the cluster's Cairn release (or newer)",
			version.Get().Release, meta.LogVersionMax, active)
	}
	return nil
}

// VersionView is every member's version and the cluster's log version as
// this node sees them: /_cairn/health?verbose=1, the status report and
// the admin page.
type VersionView struct {
	Self MemberVersion `json:"self"`
	// LogVersion is the active log version applied here; LogStopped says
	// why this node's log stopped, if it did.
	LogVersion byte   `json:"log_version"`
	LogStopped string `json:"log_stopped,omitempty"`
	// Members are the cluster map's nodes (empty for a lone node).
	Members []MemberVersionView `json:"members,omitempty"`
	// Waiting says what keeps the log version below this binary's.
	Waiting []string `json:"upgrade_waiting_for,omitempty"`
}

// MemberVersionView is one member in a VersionView.
type MemberVersionView struct {
	ID uint64 `json:"id,string"`
	MemberVersion
	Alive bool `json:"alive"`
}

// versions returns the node's VersionView.
func (n *Node) versions() VersionView {
	v := VersionView{Self: selfVersion(), LogVersion: meta.LogVersionMax}
	c := n.cl
	if c == nil {
		return v
	}
	st := c.raft.Status()
	v.LogVersion = st.LogVersion
	if st.Err != nil {
		v.LogStopped = st.Err.Error()
	}
	if p, err := c.planUpgrade(); err == nil {
		for _, id := range p.Members {
			mv, alive := c.memberVersion(id)
			v.Members = append(v.Members, MemberVersionView{ID: id, MemberVersion: mv, Alive: alive})
		}
		if p.Active < meta.LogVersionMax {
			v.Waiting = p.Blockers
		}
	}
	return v
}

// healthInfo is the body of /_cairn/health?verbose=1.
func (n *Node) healthInfo() map[string]any {
	v := n.versions()
	out := map[string]any{"version": version.Get(), "log_version": v.LogVersion,
		"log_version_supported": meta.LogVersionMax}
	if n.cl != nil {
		out["id"] = fmt.Sprint(n.cl.id)
		out["members"] = v.Members
	}
	if v.LogStopped != "" {
		out["log_stopped"] = v.LogStopped
	}
	if len(v.Waiting) > 0 {
		out["upgrade_waiting_for"] = v.Waiting
	}
	return out
}
