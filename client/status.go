package client

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

// Status is the cluster as one node sees it, with each member's own report
// (GET /_cairn/status, admin). It mirrors the server's JSON.
type Status struct {
	// Self is the ID of the node that answered (0 for a lone node).
	Self uint64 `json:"self,string"`
	// Cluster is false for a lone node (no Raft, no members).
	Cluster bool `json:"cluster"`
	// Leader is the Raft leader's ID, 0 when unknown.
	Leader uint64 `json:"leader,string"`
	// Term is the answering node's Raft term.
	Term uint64 `json:"term"`
	// CommitIndex is the last log index the answering node knows committed.
	CommitIndex uint64 `json:"commit_index"`
	// UnderReplicated counts the blobs written with fewer copies than
	// wanted (nodes were down) that repair has not completed yet.
	UnderReplicated int64 `json:"under_replicated"`
	// Nodes are the members, by ID.
	Nodes []NodeStatus `json:"nodes"`
	// Locks are the file locks held, and waited for, through every
	// node's mounts (flock, fcntl and OFD locks: docs/operations.md,
	// "File locks").
	Locks []FileLock `json:"locks"`
	// Owners is directory ownership (docs/design/0008): the answering
	// node's counters and directories, and each node's count from the log.
	Owners DirOwners `json:"owners"`
	// Trash is the trash of every bucket that has one (a retention, or
	// entries left), by bucket: the same on every node.
	Trash []TrashUsage `json:"trash"`
	// Time is when the answering node made the view.
	Time time.Time `json:"time"`
}

// FileLock is one held lock or waiter in Status.
type FileLock struct {
	Ino     uint64    `json:"ino"`
	Path    string    `json:"path"`        // bucket/path as the locker knew it
	Node    uint64    `json:"node,string"` // the node whose mount holds it
	Owner   uint64    `json:"owner,string"`
	Pid     uint32    `json:"pid"`  // the process, on that node
	Kind    string    `json:"kind"` // "posix" (fcntl and OFD) or "flock"
	Write   bool      `json:"write"`
	Start   uint64    `json:"start,string"`
	End     uint64    `json:"end,string"` // 18446744073709551615: to the end of the file
	Since   time.Time `json:"since"`
	Waiting bool      `json:"waiting"`
}

// DirOwners is directory ownership in Status: a mount decides the names
// of a directory its node owns locally; another node's change there
// recalls it first (docs/operations.md, "Directory ownership").
type DirOwners struct {
	// Node is the answering node (0: a lone node); the counters and Dirs
	// are its own, since it started.
	Node       uint64 `json:"node,string"`
	Owned      int    `json:"owned"`       // directories it owns now
	Claims     uint64 `json:"claims"`      // claims granted to it
	Recalls    uint64 `json:"recalls"`     // recalls it sent (another node owned a directory it wanted)
	HandedOver uint64 `json:"handed_over"` // directories it gave up on another node's recall
	Fenced     uint64 `json:"fenced"`      // its changes the log refused because the claim had moved
	Lost       uint64 `json:"lost"`        // directories lost with an expired lock session
	// Dirs are up to 100 of its directories, by path.
	Dirs []OwnedDir `json:"dirs"`
	// ByNode is how many directories each node owns according to the log,
	// by node: every member, and any other node the log names.
	ByNode []NodeOwnedDirs `json:"by_node"`
	// Error says why ByNode is empty.
	Error string `json:"error,omitempty"`
}

// OwnedDir is a directory the answering node owns.
type OwnedDir struct {
	Ino   uint64    `json:"ino,string"`
	Path  string    `json:"path"` // bucket/path ("" unknown)
	Epoch uint64    `json:"epoch,string"`
	Since time.Time `json:"since"`
}

// NodeOwnedDirs is how many directories a node owns according to the log.
type NodeOwnedDirs struct {
	Node uint64 `json:"node,string"`
	Dirs int    `json:"dirs"`
	More bool   `json:"more,omitempty"` // the count stopped at its limit (10,000): Dirs or more
}

// NodeStatus is one member in Status.
type NodeStatus struct {
	ID      uint64 `json:"id,string"`
	URL     string `json:"url"`
	Zone    string `json:"zone"`
	Witness bool   `json:"witness"`
	// State is NodeActive or NodeDraining.
	State string `json:"state"`
	// Liveness is alive, suspect, dead, left or joining, as the answering
	// node's failure detector sees the member.
	Liveness string `json:"liveness"`
	// Role is NodeVoter, NodeLearner or NodeNone.
	Role   string `json:"role"`
	Leader bool   `json:"leader"`
	Self   bool   `json:"self"`
	// Lag is how many committed log entries the member has not applied.
	Lag uint64 `json:"lag"`
	// Report is the member's own report; nil when it did not answer, and
	// Error then says why.
	Report *NodeReport `json:"report,omitempty"`
	Error  string      `json:"error,omitempty"`
}

// NodeReport is what a node reports of itself.
type NodeReport struct {
	AppliedIndex uint64     `json:"applied_index"`
	CommitIndex  uint64     `json:"commit_index"`
	Disk         DiskStatus `json:"disk"`
	// Repair is nil for a lone node.
	Repair *RepairStatus `json:"repair,omitempty"`
	// Scrub is the node's scrub progress and the corrupt copies it found.
	Scrub ScrubStatus `json:"scrub"`
	// Version is the node's binary and the log versions it reads and runs.
	Version VersionStatus `json:"version"`
	// Cache is the node's cache of blobs read from other nodes (nil
	// without one); on disk for a client node.
	Cache *CacheStatus `json:"cache,omitempty"`
}

// CacheStatus is a node's cache of blobs read from other nodes.
type CacheStatus struct {
	OnDisk    bool  `json:"on_disk"`
	Hits      int64 `json:"hits"`
	Misses    int64 `json:"misses"`
	Evictions int64 `json:"evictions"`
	NotKept   int64 `json:"not_kept"` // fetched, served and not kept: the files were at the bound
	Corrupt   int64 `json:"corrupt"`
	Bytes     int64 `json:"bytes"`
	Entries   int   `json:"entries"`
	MaxBytes  int64 `json:"max_bytes"`
}

// VersionStatus is a node's binary and log version (docs/operations.md,
// "Upgrades").
type VersionStatus struct {
	Release string `json:"release"`
	Commit  string `json:"commit"`
	// LogMax is the newest log version the node's binary reads;
	// LogVersion is the cluster's active log version as applied there.
	LogMax     int `json:"log_max"`
	LogVersion int `json:"log_version"`
	// LogStopped says why the node's log stopped applying, if it did.
	LogStopped string `json:"log_stopped,omitempty"`
	// Waiting says what keeps the cluster's log version below LogMax.
	Waiting []string `json:"upgrade_waiting_for,omitempty"`
}

// DiskStatus is a node's storage.
type DiskStatus struct {
	UsedBytes  int64 `json:"used_bytes"`
	LiveBytes  int64 `json:"live_bytes"`
	FreeBytes  int64 `json:"free_bytes"`
	TotalBytes int64 `json:"total_bytes"`
	Blobs      int64 `json:"blobs"`
	Volumes    int   `json:"volumes"`
	ReadOnly   bool  `json:"read_only"`
}

// RepairStatus is a node's repair (pulls of copies it should hold) and
// rebalance (hand-offs of copies that belong elsewhere) progress since it
// started.
type RepairStatus struct {
	Active       bool          `json:"active"`
	Passes       int64         `json:"passes"`
	LastChecked  int64         `json:"last_pass_checked"`
	LastDuration time.Duration `json:"last_pass_ns"`
	// Pending is what the last passes could not do yet.
	Pending     int64 `json:"pending"`
	Pulled      int64 `json:"pulled"`
	PulledBytes int64 `json:"pulled_bytes"`
	Pushed      int64 `json:"pushed"`
	PushedBytes int64 `json:"pushed_bytes"`
	Dropped     int64 `json:"dropped"`
	Cleared     int64 `json:"under_replicated_cleared"`
}

// Status returns the cluster's status as the node the client talks to
// sees it (admin).
func (c *Client) Status(ctx context.Context) (Status, error) {
	var out Status
	if err := c.doJSON(ctx, request{method: http.MethodGet, url: c.base + "/_cairn/status"}, &out); err != nil {
		return Status{}, fmt.Errorf("status: %w", err)
	}
	return out, nil
}
