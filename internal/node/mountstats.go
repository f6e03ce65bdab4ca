package node

// The mounts' counters (internal/frontend/fuse, stats.go) as Prometheus
// metrics (and, through admin.Local, GET /_cairn/mounts for the admin
// page):
//
//	cairn_fuse_requests_total{mount,op}             FUSE requests answered
//	cairn_fuse_request_errors_total{mount,op}       of them, answered with an error (ENOENT included)
//	cairn_fuse_request_duration_seconds{mount,op}   histogram of their latency in the node
//	cairn_fuse_writeback_queue_items{mount}         write-back queue: items queued or being published
//	cairn_fuse_writeback_queue_bytes{mount}         their bytes
//	cairn_fuse_writeback_oldest_seconds{mount}      age of the oldest
//	cairn_fuse_published_total{mount}               queued items published
//	cairn_fuse_publish_errors_total{mount}          queued items whose publish failed
//	cairn_fuse_read_zero_copy_bytes_total{mount}    bytes read spliced from a volume file, never copied
//
// mount is the mount point.
//
// And the node's directory ownership (design 0008; the mounts decide names
// in the directories their node owns), from the store's counters:
//
//	cairn_owner_dirs                   directories this node owns now
//	cairn_owner_claims_total           claims granted to this node
//	cairn_owner_recalls_total          recalls this node sent (another node owned a directory it wanted)
//	cairn_owner_handovers_total        directories this node gave up on another node's recall
//	cairn_owner_fenced_total           changes the log refused because their directory's claim had moved
//	cairn_owner_lost_dirs_total        directories lost with an expired lock session
//
// And the node's file locks (design 0006; flock, fcntl and OFD locks taken
// through its mounts), from the store's counters:
//
//	cairn_locks_commits_total          lock commands this node committed (requests, unlocks, cancels)
//	cairn_locks_grants_total           lock requests granted (at once or after a wait)
//	cairn_locks_waits_total            lock requests that waited for another owner's lock
//	cairn_locks_refused_total          lock requests refused (EAGAIN, EDEADLK)
//	cairn_locks_sessions_lost_total    times this node's lock session expired while it held locks
//	cairn_locks_inodes                 files on which this node holds or waits for locks now
//	cairn_locks_local_grants_total     grants decided here under a cached lock right, with no commit
//	cairn_locks_recalls_total          lock rights another node asked this node to give back
//	cairn_locks_returns_total          lock rights this node gave back (recalled, idle, or ahead of a POSIX wait)
//	cairn_locks_rights                 lock rights this node holds now

import (
	"github.com/cairn-fs/cairn/internal/frontend/fuse"
	"github.com/cairn-fs/cairn/internal/store"
	"github.com/prometheus/client_golang/prometheus"
)

var mountDescs = struct {
	calls, errs, dur, qItems, qBytes, qOldest, published, failed, zeroCopy *prometheus.Desc
}{
	calls:     prometheus.NewDesc("cairn_fuse_requests_total", "FUSE requests the mount answered, per opcode.", []string{"mount", "op"}, nil),
	errs:      prometheus.NewDesc("cairn_fuse_request_errors_total", "FUSE requests answered with an error (ENOENT included), per opcode.", []string{"mount", "op"}, nil),
	dur:       prometheus.NewDesc("cairn_fuse_request_duration_seconds", "Time the node took to answer a FUSE request, per opcode.", []string{"mount", "op"}, nil),
	qItems:    prometheus.NewDesc("cairn_fuse_writeback_queue_items", "Files, directories and attribute changes in the mount's write-back queue (queued or being published).", []string{"mount"}, nil),
	qBytes:    prometheus.NewDesc("cairn_fuse_writeback_queue_bytes", "Bytes of the files in the mount's write-back queue.", []string{"mount"}, nil),
	qOldest:   prometheus.NewDesc("cairn_fuse_writeback_oldest_seconds", "Age of the oldest item in the mount's write-back queue (0: empty).", []string{"mount"}, nil),
	published: prometheus.NewDesc("cairn_fuse_published_total", "Items of the write-back queue published to the cluster.", []string{"mount"}, nil),
	zeroCopy:  prometheus.NewDesc("cairn_fuse_read_zero_copy_bytes_total", "Bytes of FUSE reads spliced from a local volume file into the kernel, never copied through the node.", []string{"mount"}, nil),
	failed:    prometheus.NewDesc("cairn_fuse_publish_errors_total", "Items of the write-back queue whose publish failed (the writer gets EIO at its next fsync or close).", []string{"mount"}, nil),
}

// mountCollector exports every mount's counters at scrape time.
type mountCollector struct{ n *Node }

// Describe implements prometheus.Collector.
func (c mountCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{mountDescs.calls, mountDescs.errs, mountDescs.dur, mountDescs.qItems,
		mountDescs.qBytes, mountDescs.qOldest, mountDescs.published, mountDescs.failed, mountDescs.zeroCopy} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c mountCollector) Collect(ch chan<- prometheus.Metric) {
	g, ctr := prometheus.GaugeValue, prometheus.CounterValue
	for _, st := range c.n.mountStats() {
		for _, o := range st.Ops {
			op := o.Op.String()
			ch <- prometheus.MustNewConstMetric(mountDescs.calls, ctr, float64(o.Calls), st.Dir, op)
			ch <- prometheus.MustNewConstMetric(mountDescs.errs, ctr, float64(o.Errors), st.Dir, op)
			buckets := make(map[float64]uint64, len(o.Buckets))
			for i, b := range fuse.LatencyBounds {
				buckets[b] = o.Buckets[i]
			}
			ch <- prometheus.MustNewConstHistogram(mountDescs.dur, o.Calls, o.Seconds, buckets, st.Dir, op)
		}
		ch <- prometheus.MustNewConstMetric(mountDescs.qItems, g, float64(st.QueueItems), st.Dir)
		ch <- prometheus.MustNewConstMetric(mountDescs.qBytes, g, float64(st.QueueBytes), st.Dir)
		ch <- prometheus.MustNewConstMetric(mountDescs.qOldest, g, st.QueueOldest.Seconds(), st.Dir)
		ch <- prometheus.MustNewConstMetric(mountDescs.published, ctr, float64(st.Published), st.Dir)
		ch <- prometheus.MustNewConstMetric(mountDescs.failed, ctr, float64(st.PublishErrors), st.Dir)
		ch <- prometheus.MustNewConstMetric(mountDescs.zeroCopy, ctr, float64(st.ZeroCopyBytes), st.Dir)
	}
}

// mountStats returns the counters of every mount of the node.
func (n *Node) mountStats() []fuse.Stats {
	n.mountsMu.Lock()
	ms := append([]*fuse.Mount(nil), n.mounts...)
	n.mountsMu.Unlock()
	out := make([]fuse.Stats, len(ms))
	for i, m := range ms {
		out[i] = m.Stats()
	}
	return out
}

var ownerDescs = struct {
	dirs, claims, recalls, handovers, fenced, lost *prometheus.Desc
}{
	dirs:      prometheus.NewDesc("cairn_owner_dirs", "Directories this node owns: its mounts decide the names in them locally.", nil, nil),
	claims:    prometheus.NewDesc("cairn_owner_claims_total", "Directory claims granted to this node.", nil, nil),
	recalls:   prometheus.NewDesc("cairn_owner_recalls_total", "Recalls this node sent: another node owned a directory it wanted to change.", nil, nil),
	handovers: prometheus.NewDesc("cairn_owner_handovers_total", "Directories this node gave up on another node's recall (after publishing what it decided there).", nil, nil),
	fenced:    prometheus.NewDesc("cairn_owner_fenced_total", "Changes of this node the log refused because their directory's claim had moved (the writer got EIO).", nil, nil),
	lost:      prometheus.NewDesc("cairn_owner_lost_dirs_total", "Directories this node lost with an expired lock session (it could not renew it).", nil, nil),
}

var lockDescs = struct {
	commits, grants, waits, refused, lost, inodes, local, recalls, returns, rights *prometheus.Desc
}{
	commits: prometheus.NewDesc("cairn_locks_commits_total", "Lock commands this node committed to the cluster's log (requests, unlocks, cancels).", nil, nil),
	grants:  prometheus.NewDesc("cairn_locks_grants_total", "Lock requests of this node's mounts granted, at once or after a wait.", nil, nil),
	waits:   prometheus.NewDesc("cairn_locks_waits_total", "Lock requests of this node's mounts that waited for another owner's lock.", nil, nil),
	refused: prometheus.NewDesc("cairn_locks_refused_total", "Lock requests refused: another owner held a conflicting lock (EAGAIN), or the wait would deadlock (EDEADLK).", nil, nil),
	lost:    prometheus.NewDesc("cairn_locks_sessions_lost_total", "Times this node's lock session expired while it held locks (its locks were released; writes under them answer EIO).", nil, nil),
	inodes:  prometheus.NewDesc("cairn_locks_inodes", "Files on which this node holds or waits for locks now.", nil, nil),
	local:   prometheus.NewDesc("cairn_locks_local_grants_total", "Lock requests granted by this node under its cached lock right of the file, with no commit (part of cairn_locks_grants_total).", nil, nil),
	recalls: prometheus.NewDesc("cairn_locks_recalls_total", "Cached lock rights another node asked this node to give back.", nil, nil),
	returns: prometheus.NewDesc("cairn_locks_returns_total", "Cached lock rights this node gave back (recalled, idle, or ahead of a POSIX wait, which the log checks for deadlocks).", nil, nil),
	rights:  prometheus.NewDesc("cairn_locks_rights", "Files whose lock right this node holds now (it grants and releases their locks itself).", nil, nil),
}

// lockCollector exports the node's lock counters at scrape time.
type lockCollector struct {
	st interface{ LockStats() store.LockStats }
}

// Describe implements prometheus.Collector.
func (c lockCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{lockDescs.commits, lockDescs.grants, lockDescs.waits, lockDescs.refused, lockDescs.lost, lockDescs.inodes,
		lockDescs.local, lockDescs.recalls, lockDescs.returns, lockDescs.rights} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c lockCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.st.LockStats()
	ctr := prometheus.CounterValue
	ch <- prometheus.MustNewConstMetric(lockDescs.commits, ctr, float64(s.Commits))
	ch <- prometheus.MustNewConstMetric(lockDescs.grants, ctr, float64(s.Grants))
	ch <- prometheus.MustNewConstMetric(lockDescs.waits, ctr, float64(s.Waits))
	ch <- prometheus.MustNewConstMetric(lockDescs.refused, ctr, float64(s.Refused))
	ch <- prometheus.MustNewConstMetric(lockDescs.lost, ctr, float64(s.Lost))
	ch <- prometheus.MustNewConstMetric(lockDescs.inodes, prometheus.GaugeValue, float64(s.Held))
	ch <- prometheus.MustNewConstMetric(lockDescs.local, ctr, float64(s.LocalGrants))
	ch <- prometheus.MustNewConstMetric(lockDescs.recalls, ctr, float64(s.Recalled))
	ch <- prometheus.MustNewConstMetric(lockDescs.returns, ctr, float64(s.Returned))
	ch <- prometheus.MustNewConstMetric(lockDescs.rights, prometheus.GaugeValue, float64(s.Rights))
}

// ownerCollector exports the node's directory ownership counters at
// scrape time.
type ownerCollector struct {
	st interface{ OwnerStats() store.OwnerStats }
}

// Describe implements prometheus.Collector.
func (c ownerCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{ownerDescs.dirs, ownerDescs.claims, ownerDescs.recalls, ownerDescs.handovers,
		ownerDescs.fenced, ownerDescs.lost} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c ownerCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.st.OwnerStats()
	ctr := prometheus.CounterValue
	ch <- prometheus.MustNewConstMetric(ownerDescs.dirs, prometheus.GaugeValue, float64(s.Owned))
	ch <- prometheus.MustNewConstMetric(ownerDescs.claims, ctr, float64(s.Claims))
	ch <- prometheus.MustNewConstMetric(ownerDescs.recalls, ctr, float64(s.Recalls))
	ch <- prometheus.MustNewConstMetric(ownerDescs.handovers, ctr, float64(s.HandedOver))
	ch <- prometheus.MustNewConstMetric(ownerDescs.fenced, ctr, float64(s.Fenced))
	ch <- prometheus.MustNewConstMetric(ownerDescs.lost, ctr, float64(s.Lost))
}
