package node

import (
	"errors"
	"time"

	"github.com/cairn-fs/cairn/internal/frontend/admin"
	"github.com/cairn-fs/cairn/internal/meta"
	"github.com/prometheus/client_golang/prometheus"
)

// clusterMetrics are a cluster node's metrics beyond the front end's and
// the replicator's: Raft (term, indices, leader changes, proposal
// latency), the namespace's apply lag, under-replicated blobs, and repair
// and rebalance progress. Gauges and counters are read from their owners
// at scrape time; the proposal latency is observed by consensus.Raft
// (RaftConfig.OnProposed).
type clusterMetrics struct {
	c         *clusterNode
	proposals *prometheus.HistogramVec
}

func newClusterMetrics(c *clusterNode) *clusterMetrics {
	return &clusterMetrics{c: c, proposals: prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "cairn_raft_proposal_seconds",
		Help:    "Time from proposing a namespace command to its commit and local apply, by outcome.",
		Buckets: []float64{.0005, .001, .002, .005, .01, .02, .05, .1, .2, .5, 1, 2, 5, 10},
	}, []string{"outcome"})}
}

// observeProposal is RaftConfig.OnProposed.
func (m *clusterMetrics) observeProposal(d time.Duration, failed bool) {
	outcome := "ok"
	if failed {
		outcome = "error"
	}
	m.proposals.WithLabelValues(outcome).Observe(d.Seconds())
}

type gaugeDesc struct {
	d     *prometheus.Desc
	t     prometheus.ValueType
	value func(s clusterSample) float64
}

// clusterSample is what one scrape reads.
type clusterSample struct {
	term, commit, applied, leaderChanges uint64
	leader, stopped, unsupported         bool
	logVersion                           byte
	under                                int64
	repair                               admin.Repair
}

var clusterDescs = []gaugeDesc{
	{prometheus.NewDesc("cairn_raft_term", "Current Raft term as this node knows it.", nil, nil),
		prometheus.GaugeValue, func(s clusterSample) float64 { return float64(s.term) }},
	{prometheus.NewDesc("cairn_raft_commit_index", "Last log index this node knows committed.", nil, nil),
		prometheus.GaugeValue, func(s clusterSample) float64 { return float64(s.commit) }},
	{prometheus.NewDesc("cairn_raft_applied_index", "Last log index applied to this node's namespace.", nil, nil),
		prometheus.GaugeValue, func(s clusterSample) float64 { return float64(s.applied) }},
	{prometheus.NewDesc("cairn_raft_apply_lag_entries", "Committed log entries this node has not applied yet (its namespace replication lag).", nil, nil),
		prometheus.GaugeValue, func(s clusterSample) float64 {
			if s.commit > s.applied {
				return float64(s.commit - s.applied)
			}
			return 0
		}},
	{prometheus.NewDesc("cairn_raft_leader_changes_total", "Changes of Raft leader this node saw since it started.", nil, nil),
		prometheus.CounterValue, func(s clusterSample) float64 { return float64(s.leaderChanges) }},
	{prometheus.NewDesc("cairn_raft_is_leader", "1 if this node is the Raft leader.", nil, nil),
		prometheus.GaugeValue, func(s clusterSample) float64 { return b2f(s.leader) }},
	{prometheus.NewDesc("cairn_log_version", "The cluster's active log version as applied here (docs/operations.md, Upgrades).", nil, nil),
		prometheus.GaugeValue, func(s clusterSample) float64 { return float64(s.logVersion) }},
	{prometheus.NewDesc("cairn_log_version_supported", "The newest log version this node's binary reads.", nil, nil),
		prometheus.GaugeValue, func(clusterSample) float64 { return float64(meta.LogVersionMax) }},
	{prometheus.NewDesc("cairn_log_stopped", "1 if this node's log stopped applying (a storage failure or an entry its binary cannot decode).", nil, nil),
		prometheus.GaugeValue, func(s clusterSample) float64 { return b2f(s.stopped) }},
	{prometheus.NewDesc("cairn_log_stopped_undecodable", "1 if this node's log stopped at an entry written by a newer Cairn: upgrade its binary.", nil, nil),
		prometheus.GaugeValue, func(s clusterSample) float64 { return b2f(s.unsupported) }},
	{prometheus.NewDesc("cairn_under_replicated_blobs", "Blobs written with fewer copies than wanted and not yet repaired (cluster-wide, from the namespace).", nil, nil),
		prometheus.GaugeValue, func(s clusterSample) float64 { return float64(s.under) }},
	{prometheus.NewDesc("cairn_repair_active", "1 while a repair pass runs on this node.", nil, nil),
		prometheus.GaugeValue, func(s clusterSample) float64 { return b2f(s.repair.Active) }},
	{prometheus.NewDesc("cairn_repair_passes_total", "Full repair and rebalance passes this node finished.", nil, nil),
		prometheus.CounterValue, func(s clusterSample) float64 { return float64(s.repair.Passes) }},
	{prometheus.NewDesc("cairn_repair_queue_blobs", "Copies the last passes could not make or move yet (the repair queue of this node).", nil, nil),
		prometheus.GaugeValue, func(s clusterSample) float64 { return float64(s.repair.Pending) }},
	{prometheus.NewDesc("cairn_repair_pulled_blobs_total", "Blobs this node fetched because it should hold them (repair).", nil, nil),
		prometheus.CounterValue, func(s clusterSample) float64 { return float64(s.repair.Pulled) }},
	{prometheus.NewDesc("cairn_repair_pulled_bytes_total", "Bytes of the blobs this node fetched by repair.", nil, nil),
		prometheus.CounterValue, func(s clusterSample) float64 { return float64(s.repair.PulledBytes) }},
	{prometheus.NewDesc("cairn_repair_pushed_blobs_total", "Copies this node sent to the nodes where they belong (rebalance hand-offs).", nil, nil),
		prometheus.CounterValue, func(s clusterSample) float64 { return float64(s.repair.Pushed) }},
	{prometheus.NewDesc("cairn_repair_pushed_bytes_total", "Bytes of the copies this node handed off.", nil, nil),
		prometheus.CounterValue, func(s clusterSample) float64 { return float64(s.repair.PushedBytes) }},
	{prometheus.NewDesc("cairn_repair_dropped_blobs_total", "Local copies dropped once their new homes confirmed them.", nil, nil),
		prometheus.CounterValue, func(s clusterSample) float64 { return float64(s.repair.Dropped) }},
	{prometheus.NewDesc("cairn_repair_under_replicated_cleared_total", "Under-replicated records this node confirmed fully copied.", nil, nil),
		prometheus.CounterValue, func(s clusterSample) float64 { return float64(s.repair.Cleared) }},
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func (m *clusterMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range clusterDescs {
		ch <- d.d
	}
	m.proposals.Describe(ch)
}

func (m *clusterMetrics) Collect(ch chan<- prometheus.Metric) {
	c := m.c
	st := c.raft.Status()
	s := clusterSample{term: st.Term, commit: st.Commit, applied: st.Applied, leaderChanges: st.LeaderChanges,
		leader: st.Leader == c.id, repair: *repairView(c.repair.Progress()),
		logVersion: st.LogVersion, stopped: st.Err != nil, unsupported: errors.Is(st.Err, meta.ErrUnsupported)}
	if n, err := c.reader.UnderReplicatedCount(); err == nil {
		s.under = n
	}
	for _, d := range clusterDescs {
		ch <- prometheus.MustNewConstMetric(d.d, d.t, d.value(s))
	}
	m.proposals.Collect(ch)
}
