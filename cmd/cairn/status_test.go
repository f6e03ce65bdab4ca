package main

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/cairn-fs/cairn/client"
)

func TestPrintStatus(t *testing.T) {
	st := client.Status{Cluster: true, Leader: 7, Term: 3, CommitIndex: 120, UnderReplicated: 4, Nodes: []client.NodeStatus{
		{ID: 7, URL: "http://10.0.0.1:8080", State: "active", Liveness: "alive", Role: "voter", Leader: true, Self: true,
			Report: &client.NodeReport{AppliedIndex: 120, Disk: client.DiskStatus{UsedBytes: 3 << 30, FreeBytes: 10 << 30, Blobs: 1234},
				Repair:  &client.RepairStatus{Passes: 2, Pulled: 5, PulledBytes: 5 << 20, Pending: 1},
				Scrub:   client.ScrubStatus{Running: true, BytesChecked: 1, BytesTotal: 4, CorruptCopies: 1},
				Version: client.VersionStatus{Release: "0.22.0", Commit: "abcdef012345", LogMax: 9, LogVersion: 7, Waiting: []string{"node 11 runs 0.21.0, which reads log version 8"}}}},
		{ID: 9, URL: "http://10.0.0.2:8080", State: "active", Liveness: "dead", Role: "voter", Lag: 0, Error: "unreachable: connection refused"},
		{ID: 11, URL: "http://10.0.0.3:8080", State: "draining", Liveness: "suspect", Role: "learner", Lag: 17,
			Report: &client.NodeReport{AppliedIndex: 103, Scrub: client.ScrubStatus{LastCompleted: time.Unix(1, 0)},
				Version: client.VersionStatus{Release: "0.21.0", LogMax: 8, LogVersion: 7, LogStopped: "entry 9 is newer"}}},
		{ID: 12, URL: "http://10.0.0.4:8080", State: "client", Liveness: "alive", Role: "learner",
			Report: &client.NodeReport{AppliedIndex: 120, Cache: &client.CacheStatus{OnDisk: true, Hits: 50, Misses: 7, Evictions: 3,
				NotKept: 2, Bytes: 3 << 20, Entries: 12, MaxBytes: 64 << 20}}},
	}, Locks: []client.FileLock{
		{Ino: 42, Path: "web/sessions/sess_1", Node: 7, Pid: 311, Kind: "flock", Write: true, End: math.MaxUint64},
		{Ino: 43, Path: "web/app.db", Node: 9, Pid: 12, Kind: "posix", Start: 1073741824, End: 1073741824},
		{Ino: 43, Path: "web/app.db", Node: 11, Pid: 99, Kind: "posix", Write: true, Start: 10, End: math.MaxUint64, Waiting: true},
	}, Owners: client.DirOwners{Node: 7, Owned: 102, Claims: 5, Recalls: 1, HandedOver: 2, Fenced: 3, Lost: 4,
		Dirs:   []client.OwnedDir{{Ino: 31, Path: "web/uploads", Epoch: 12}, {Ino: 32, Epoch: 12}},
		ByNode: []client.NodeOwnedDirs{{Node: 7, Dirs: 102}, {Node: 9}, {Node: 11, Dirs: 10000, More: true}},
	}, Trash: []client.TrashUsage{
		{Bucket: "old", Entries: 1, Bytes: 10},
		{Bucket: "web", RetentionSeconds: 7 * 86400, Entries: 1234, Bytes: 5 << 20},
	}}
	var b strings.Builder
	if err := printStatus(&b, st); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"node 12's blob cache (client): 3.0 MiB of 64.0 MiB, 12 blobs; 50 hits, 7 misses, 3 evictions, 2 not kept (full), 0 refused as corrupt\n",
		"cluster: 4 nodes, leader 7, term 3, commit index 120",
		"voter*", "3.0 GiB", "10.0 GiB", "1234", "running 25%, 1 corrupt found",
		"idle, 2 passes, pulled 5 (5.0 MiB), handed off 0 (0 B), pending 1",
		" dead ", "unreachable", "suspect", "draining", " 17 ", "last pass ",
		"under-replicated blobs: 4",
		"0.22.0 abcdef012345 (log 9)", "0.21.0 (log 8) LOG STOPPED",
		"log version: 7 (this binary reads 9; rises when every node does; waiting for: node 11 runs 0.21.0, which reads log version 8)",
		"node 11: log stopped: entry 9 is newer",
		"trash of old: off, still holds: 1 file, 10 B\n", "trash of web: keeps 7d: 1234 files, 5.0 MiB\n",
		"file locks: 3", "web/sessions/sess_1", "flock", "whole file", "1073741824-1073741824", "10-  ", "waiting",
		"directory owners: node 7 owns 102 directories; since start: 5 claims, 1 recall sent, 2 handed over, 3 fenced, 4 lost\n",
		"PATH         INODE  EPOCH  SINCE", "web/uploads  31     12", "\n-            32     12", "(and 100 more)\n",
		"directories owned per node (from the log): 7: 102, 9: 0, 11: 10000+\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("status output lacks %q:\n%s", want, out)
		}
	}
	b.Reset()
	if err := printStatus(&b, client.Status{Nodes: []client.NodeStatus{{URL: "http://127.0.0.1:8080", Liveness: "alive", Role: "none"}}}); err != nil {
		t.Fatal(err)
	}
	if out := b.String(); !strings.Contains(out, "single node") || strings.Contains(out, "under-replicated") || strings.Contains(out, "trash") ||
		!strings.Contains(out, "directory owners: this node owns 0 directories; since start: 0 claims, 0 recalls sent, 0 handed over, 0 fenced, 0 lost\n") ||
		strings.Contains(out, "PATH  ") || strings.Contains(out, "per node") {
		t.Errorf("lone node status:\n%s", out)
	}
}
