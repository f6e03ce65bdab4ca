package node

// The admin front end's wiring (internal/frontend/admin): the node makes
// it with its store, its own state (nodeLocal) and, in cluster mode, its
// cluster (clusterAdmin), and mounts its routes on the public listener.
// This file converts the node's types (blob, Raft, cluster map, failure
// detector) to the ones the front end declares.

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/cairn-fs/cairn/internal/access"
	"github.com/cairn-fs/cairn/internal/cluster"
	"github.com/cairn-fs/cairn/internal/consensus"
	"github.com/cairn-fs/cairn/internal/frontend/admin"
	"github.com/cairn-fs/cairn/internal/frontend/fuse"
	"github.com/cairn-fs/cairn/internal/frontend/httpapi"
	"github.com/cairn-fs/cairn/internal/meta"
	"github.com/cairn-fs/cairn/internal/placement"
	"github.com/cairn-fs/cairn/internal/replica"
	"github.com/cairn-fs/cairn/internal/store"
	"github.com/cairn-fs/cairn/internal/vfs"
	"github.com/prometheus/client_golang/prometheus"
)

// startAdmin makes the admin front end and adds its routes to hs; it
// samples the request metrics of m for the history until n.admin.Close.
func (n *Node) startAdmin(hs map[string]http.Handler, st *store.Local, auth *access.Authorizer, m *httpapi.Metrics) (map[string]http.Handler, error) {
	reg := prometheus.NewRegistry()
	for _, c := range m.RequestCollectors() {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	cfg := admin.DefaultConfig()
	cfg.Auth, cfg.Store, cfg.Local, cfg.URL = auth, st, nodeLocal{n}, n.URL
	cfg.Logs, cfg.Requests, cfg.Logger = n.logs, reg, n.cfg.Logger
	if n.cl != nil {
		cfg.Cluster = clusterAdmin{n.cl}
	}
	a, err := admin.New(cfg)
	if err != nil {
		return nil, err
	}
	n.admin = a
	if hs == nil {
		hs = map[string]http.Handler{}
	}
	for p, h := range a.Routes() {
		hs[p] = h
	}
	return hs, nil
}

// nodeLocal is admin.Local over the node.
type nodeLocal struct{ n *Node }

// Report implements admin.Local: this node's own status report.
func (l nodeLocal) Report() admin.LocalStatus {
	n := l.n
	bs := n.blobs.Stats()
	v := admin.LocalStatus{AppliedIndex: n.log.AppliedIndex(), Disk: admin.Disk{UsedBytes: bs.Bytes,
		LiveBytes: bs.LiveBytes, Blobs: bs.Blobs, Volumes: bs.Volumes, ReadOnly: bs.ReadOnly}}
	v.CommitIndex = v.AppliedIndex
	if free, total, err := vfs.OS().Statfs(n.cfg.DataDir); err == nil {
		v.Disk.FreeBytes, v.Disk.TotalBytes = int64(free), int64(total)
	}
	if c := n.cl; c != nil {
		v.ID = c.id
		v.CommitIndex = c.raft.Status().Commit
		v.Repair = repairView(c.repair.Progress())
		if cs := c.rep.CacheStats(); cs.MaxBytes > 0 {
			v.Cache = &admin.Cache{OnDisk: cs.OnDisk, Hits: cs.Hits, Misses: cs.Misses, Evictions: cs.Evictions, NotKept: cs.NotKept, Corrupt: cs.Corrupt,
				Bytes: cs.Bytes, Entries: cs.Entries, MaxBytes: cs.MaxBytes}
		}
	}
	v.Scrub = l.Scrub()
	vv := n.versions() // upgrade.go
	v.Version = admin.Version{Release: vv.Self.Release, Commit: vv.Self.Commit, LogMax: int(vv.Self.LogMax),
		LogVersion: int(vv.LogVersion), LogStopped: vv.LogStopped, Waiting: vv.Waiting}
	return v
}

// Scrub implements admin.Local.
func (l nodeLocal) Scrub() admin.Scrub {
	return scrubView(l.n.blobs.ScrubStatus(), l.n.blobs.Stats().CorruptCopies)
}

// StartScrub implements admin.Local.
func (l nodeLocal) StartScrub() (admin.Scrub, bool) {
	st, started := l.n.blobs.StartScrub()
	return scrubView(st, l.n.blobs.Stats().CorruptCopies), started
}

// Mounts implements admin.Local.
func (l nodeLocal) Mounts() []fuse.Stats { return l.n.mountStats() }

// LockStats implements admin.Local: the store's lock counters.
func (l nodeLocal) LockStats() store.LockStats { return l.n.store.LockStats() }

// Owners implements admin.Local: the store's directory ownership table.
func (l nodeLocal) Owners(limit int) (store.OwnerStats, []store.OwnedDir) {
	return l.n.store.OwnerStats(), l.n.store.OwnedDirs(limit)
}

func repairView(p replica.Progress) *admin.Repair {
	return &admin.Repair{Active: p.Active, Passes: p.Passes, LastChecked: p.Last.Checked,
		LastDuration: p.Last.Duration, Pending: repairPending(p),
		Pulled: p.Total.Pulled, PulledBytes: p.Total.PulledBytes, Pushed: p.Total.Pushed,
		PushedBytes: p.Total.PushedBytes, Dropped: p.Total.Dropped, Cleared: p.Total.UnderCleared}
}

// repairPending is the repair queue as the last passes left it.
func repairPending(p replica.Progress) int64 {
	return p.Last.PullFailed + p.Last.Kept + p.LastUnder.PullFailed + p.LastUnder.UnderPending
}

// clusterAdmin is admin.Cluster over the cluster half of the node.
type clusterAdmin struct{ c *clusterNode }

func (a clusterAdmin) ID() uint64 { return a.c.id }

func (a clusterAdmin) Raft() admin.RaftStatus {
	st := a.c.raft.Status()
	return admin.RaftStatus{Leader: st.Leader, Term: st.Term, Applied: st.Applied, Commit: st.Commit}
}

func (a clusterAdmin) Membership() admin.Membership {
	cs := a.c.raft.Members()
	return admin.Membership{Voters: cs.GetVoters(), VotersOutgoing: cs.GetVotersOutgoing(),
		Learners: cs.GetLearners(), LearnersNext: cs.GetLearnersNext()}
}

func (a clusterAdmin) Members() ([]admin.Member, error) {
	nodes, err := a.c.reader.Nodes()
	if err != nil {
		return nil, adminErr(err)
	}
	out := make([]admin.Member, len(nodes))
	for i, nd := range nodes {
		out[i] = member(nd)
	}
	return out, nil
}

func (a clusterAdmin) Member(id uint64) (admin.Member, error) {
	nd, err := a.c.reader.Node(id)
	if err != nil {
		return admin.Member{}, adminErr(err)
	}
	return member(nd), nil
}

func member(nd *meta.Node) admin.Member {
	m := admin.Member{ID: nd.ID, Name: nd.Name, URL: nd.URL, ClusterURL: nd.ClusterURL, Zone: nd.Zone,
		Weight: nd.Weight, Witness: nd.Witness}
	switch nd.State {
	case meta.NodeActive:
		m.State = admin.NodeActive
	case meta.NodeDraining:
		m.State = admin.NodeDraining
	case meta.NodeClient:
		m.State = admin.NodeClient
	}
	if nd.JoinedNs != 0 {
		m.Joined = time.Unix(0, nd.JoinedNs).UTC()
	}
	return m
}

func (a clusterAdmin) Liveness(id uint64) string { return a.c.lv.livenessOf(id) }

func (a clusterAdmin) UnderReplicated() (int64, error) {
	n, err := a.c.reader.UnderReplicatedCount()
	return n, adminErr(err)
}

func (a clusterAdmin) SetState(ctx context.Context, id uint64, s admin.NodeState) error {
	rec, err := a.c.reader.Node(id)
	if err != nil {
		return adminErr(err)
	}
	upd := *rec
	upd.State = meta.NodeActive
	if s == admin.NodeDraining {
		upd.State = meta.NodeDraining
	}
	res, err := a.c.raft.Propose(ctx, meta.Command{Op: meta.OpSetNode, TimeNs: time.Now().UnixNano(), Node: &upd})
	if err == nil {
		err = res.Err
	}
	return adminErr(err)
}

func (a clusterAdmin) RemoveFromRaft(ctx context.Context, id uint64) error {
	return adminErr(a.c.raft.Remove(ctx, id))
}

func (a clusterAdmin) RemoveFromMap(ctx context.Context, id uint64) error {
	res, err := a.c.raft.Propose(ctx, meta.Command{Op: meta.OpRemoveNode, TimeNs: time.Now().UnixNano(), Node: &meta.Node{ID: id}})
	if err == nil && !errors.Is(res.Err, meta.ErrNotFound) { // gone already: a concurrent removal
		err = res.Err
	}
	return adminErr(err)
}

func (a clusterAdmin) EnsureVoters(ctx context.Context) (uint64, error) {
	target := a.c.cfg.Voters
	if target <= 0 {
		target = consensus.DefaultRaftConfig().Voters
	}
	promoted, err := a.c.raft.EnsureVoters(ctx, target)
	return promoted, adminErr(err)
}

func (a clusterAdmin) Do(req *http.Request, id uint64) (*http.Response, error) {
	return a.c.n.peerDo(req, id)
}

// adminErr gives err the admin front end's kind (admin.ErrNoSuchNode, ...)
// for errors.Is, keeping its text and its own chain.
func adminErr(err error) error {
	if err == nil {
		return nil
	}
	for _, k := range []struct{ from, to error }{
		{consensus.ErrBadMembership, admin.ErrBadMembership},
		{meta.ErrNotFound, admin.ErrNoSuchNode},
		{meta.ErrInvalid, admin.ErrInvalid},
		{consensus.ErrUnavailable, admin.ErrUnavailable},
		{consensus.ErrStopped, admin.ErrUnavailable},
	} {
		if errors.Is(err, k.from) {
			return kindError{err, k.to}
		}
	}
	return err
}

// kindError is err with one more kind.
type kindError struct{ err, kind error }

func (e kindError) Error() string   { return e.err.Error() }
func (e kindError) Unwrap() []error { return []error{e.err, e.kind} }

// livenessOf names member id's liveness in this node's failure detector:
// alive, suspect (missed probes, not yet declared dead), dead, left, or
// joining (never seen yet, within the grace after it entered the map).
func (l *liveness) livenessOf(id uint64) string {
	if id == l.self {
		return "alive"
	}
	d := l.det.Load()
	if d == nil {
		return "unknown"
	}
	if m, ok := d.Member(id); ok {
		switch m.State {
		case cluster.StateAlive:
			if d.Suspect(id) {
				return "suspect"
			}
			return "alive"
		case cluster.StateLeft:
			return "left"
		}
		return "dead"
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stateLocked(id, time.Now()) == placement.Dead {
		return "dead"
	}
	return "joining"
}
