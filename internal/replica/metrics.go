package replica

import "github.com/prometheus/client_golang/prometheus"

// Collector returns the Replicator's metrics for a Prometheus registry:
// the remote-blob cache (hits, misses, fills, shared fills, evictions,
// bytes and entries held, the bound) and the write batcher (calls and the
// blobs they carried, blobs sent alone) and the outcome of writes
// (under-replicated, refused).
func (r *Replicator) Collector() prometheus.Collector { return replicaCollector{r} }

type replicaCollector struct{ r *Replicator }

type metricDesc struct {
	d     *prometheus.Desc
	t     prometheus.ValueType
	value func(CacheStats, BatchStats, WriteStats) float64
}

var replicaMetrics = []metricDesc{
	{prometheus.NewDesc("cairn_remote_cache_hits_total", "Reads of remote blobs served from the local cache.", nil, nil),
		prometheus.CounterValue, func(c CacheStats, _ BatchStats, _ WriteStats) float64 { return float64(c.Hits) }},
	{prometheus.NewDesc("cairn_remote_cache_misses_total", "Reads of remote blobs not in the local cache.", nil, nil),
		prometheus.CounterValue, func(c CacheStats, _ BatchStats, _ WriteStats) float64 { return float64(c.Misses) }},
	{prometheus.NewDesc("cairn_remote_cache_fills_total", "Remote fetches made to fill the cache.", nil, nil),
		prometheus.CounterValue, func(c CacheStats, _ BatchStats, _ WriteStats) float64 { return float64(c.Fills) }},
	{prometheus.NewDesc("cairn_remote_cache_shared_total", "Cache misses that waited for another reader's fetch of the same blob.", nil, nil),
		prometheus.CounterValue, func(c CacheStats, _ BatchStats, _ WriteStats) float64 { return float64(c.Shared) }},
	{prometheus.NewDesc("cairn_remote_cache_evictions_total", "Blobs dropped from the cache to stay within its bound.", nil, nil),
		prometheus.CounterValue, func(c CacheStats, _ BatchStats, _ WriteStats) float64 { return float64(c.Evictions) }},
	{prometheus.NewDesc("cairn_remote_cache_bytes", "Bytes held by the cache of remote blobs (in memory: blob bytes plus per-entry overhead; on disk: the size of its blob store's files).", nil, nil),
		prometheus.GaugeValue, func(c CacheStats, _ BatchStats, _ WriteStats) float64 { return float64(c.Bytes) }},
	{prometheus.NewDesc("cairn_remote_cache_entries", "Blobs held by the cache of remote blobs.", nil, nil),
		prometheus.GaugeValue, func(c CacheStats, _ BatchStats, _ WriteStats) float64 { return float64(c.Entries) }},
	{prometheus.NewDesc("cairn_remote_cache_max_bytes", "Bound of the cache of remote blobs (0: off).", nil, nil),
		prometheus.GaugeValue, func(c CacheStats, _ BatchStats, _ WriteStats) float64 { return float64(c.MaxBytes) }},
	{prometheus.NewDesc("cairn_remote_cache_corrupt_total", "Whole blobs fetched for a read whose bytes did not hash to their name: refused, never cached, another replica asked.", nil, nil),
		prometheus.CounterValue, func(c CacheStats, _ BatchStats, _ WriteStats) float64 { return float64(c.Corrupt) }},
	{prometheus.NewDesc("cairn_remote_cache_not_kept_total", "Fetched blobs a client node's disk cache served but did not keep: its files were at their bound, compaction behind the evictions (a cache smaller than what is read).", nil, nil),
		prometheus.CounterValue, func(c CacheStats, _ BatchStats, _ WriteStats) float64 { return float64(c.NotKept) }},
	{prometheus.NewDesc("cairn_remote_cache_on_disk", "1 when the cache of remote blobs is on this node's disk (a client node's --cache-size), 0 in memory.", nil, nil),
		prometheus.GaugeValue, func(c CacheStats, _ BatchStats, _ WriteStats) float64 {
			if c.OnDisk {
				return 1
			}
			return 0
		}},
	{prometheus.NewDesc("cairn_replica_put_batches_total", "Batched blob writes (PutBlobs calls) sent to other nodes.", nil, nil),
		prometheus.CounterValue, func(_ CacheStats, b BatchStats, _ WriteStats) float64 { return float64(b.Batches) }},
	{prometheus.NewDesc("cairn_replica_put_batched_blobs_total", "Blobs sent to other nodes inside batches.", nil, nil),
		prometheus.CounterValue, func(_ CacheStats, b BatchStats, _ WriteStats) float64 { return float64(b.Blobs) }},
	{prometheus.NewDesc("cairn_replica_put_single_blobs_total", "Blobs sent to other nodes alone (above the batch item size).", nil, nil),
		prometheus.CounterValue, func(_ CacheStats, b BatchStats, _ WriteStats) float64 { return float64(b.Single) }},
	{prometheus.NewDesc("cairn_replica_under_replicated_writes_total", "Blob writes acknowledged with fewer copies than wanted (R capped at the data nodes): nodes were down or failed; repair makes the missing copies.", nil, nil),
		prometheus.CounterValue, func(_ CacheStats, _ BatchStats, w WriteStats) float64 { return float64(w.Under) }},
	{prometheus.NewDesc("cairn_replica_quorum_failures_total", "Blob writes refused because they could not make the copies required (no live data node, or a strict bucket below its write quorum).", nil, nil),
		prometheus.CounterValue, func(_ CacheStats, _ BatchStats, w WriteStats) float64 { return float64(w.Failed) }},
}

func (c replicaCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range replicaMetrics {
		ch <- m.d
	}
}

func (c replicaCollector) Collect(ch chan<- prometheus.Metric) {
	cs, bs, ws := c.r.CacheStats(), c.r.BatchStats(), c.r.WriteStats()
	for _, m := range replicaMetrics {
		ch <- prometheus.MustNewConstMetric(m.d, m.t, m.value(cs, bs, ws))
	}
}
