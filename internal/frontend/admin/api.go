package admin

// What the admin front end needs from the node, declared here (a front end
// imports of Cairn only the store, access control and other front ends):
// the namespace through the store API (Store), this node's own state
// (Local), and the cluster it is a member of (Cluster). internal/node
// implements Local and Cluster over its blob store, Raft, cluster map and
// failure detector, converting their types to these.

import (
	"context"
	"net/http"
	"slices"
	"time"

	"github.com/cairn-fs/cairn/internal/frontend/fuse"
	"github.com/cairn-fs/cairn/internal/store"
)

// Store is what the admin API reads and writes of the namespace: buckets
// and their listings (GET /_cairn/usage), the records holding access keys
// and abuse rules (/_cairn/keys, /_cairn/rules), the file lock table
// (GET /_cairn/status), the directory owners the log records (their count
// per node in GET /_cairn/status), and the buckets' trash (/_cairn/trash,
// and its usage in GET /_cairn/status). store.Local implements it.
type Store interface {
	Buckets(ctx context.Context) ([]store.BucketInfo, error)
	List(ctx context.Context, bucket string, opts store.ListOptions) (store.ListResult, error)
	Locks(ctx context.Context) ([]store.LockInfo, error)
	DirOwnerCounts(ctx context.Context, limit int) ([]store.NodeDirs, error)
	store.Records
	store.Trash
}

// Local is this node's own state. Its methods are safe for concurrent use
// and do not block on the network.
type Local interface {
	// Report is this node's status report (GET /_cairn/status?local=1).
	Report() LocalStatus
	// Scrub is the blob scrub's progress (GET /_cairn/scrub).
	Scrub() Scrub
	// StartScrub starts a scrub pass now unless one runs; started reports
	// that this call started it (POST /_cairn/scrub).
	StartScrub() (st Scrub, started bool)
	// Mounts returns the counters of the node's POSIX mounts (GET
	// /_cairn/mounts).
	Mounts() []fuse.Stats
	// Owners returns this node's directory ownership counters and up to
	// limit of the directories it owns, by path (GET /_cairn/status).
	Owners(limit int) (store.OwnerStats, []store.OwnedDir)
	// LockStats returns this node's file lock counters (GET
	// /_cairn/status).
	LockStats() store.LockStats
}

// Cluster is the cluster a node is a member of, as the admin API manages
// it: the cluster map, Raft's configuration and status, and this node's
// failure detector. Its methods are safe for concurrent use. Errors carry
// the kinds ErrNoSuchNode, ErrBadMembership, ErrInvalid and ErrUnavailable
// (errors.Is) where they apply, with the text of their cause.
type Cluster interface {
	// ID is this node's ID.
	ID() uint64
	// Raft is this node's view of the Raft group.
	Raft() RaftStatus
	// Membership is Raft's configuration as this node has applied it.
	Membership() Membership
	// Members returns the cluster map: every member's record.
	Members() ([]Member, error)
	// Member returns member id's record; ErrNoSuchNode if it has none.
	Member(id uint64) (Member, error)
	// Liveness names member id's liveness in this node's failure
	// detector: alive, suspect, dead, left or joining.
	Liveness(id uint64) string
	// UnderReplicated counts the blobs recorded as written with fewer
	// copies than wanted and not yet repaired.
	UnderReplicated() (int64, error)
	// SetState commits member id's record with state s (OpSetNode); the
	// record's other fields are kept.
	SetState(ctx context.Context, id uint64, s NodeState) error
	// RemoveFromRaft takes member id out of the Raft group.
	RemoveFromRaft(ctx context.Context, id uint64) error
	// RemoveFromMap takes member id's record out of the cluster map; nil
	// when it is gone already.
	RemoveFromMap(ctx context.Context, id uint64) error
	// EnsureVoters promotes a learner if the cluster has fewer voters than
	// it keeps and this node leads; promoted is its ID, or 0.
	EnsureVoters(ctx context.Context) (promoted uint64, err error)
	// Do sends req to member id at the public URL in req, over the
	// cluster's node-to-node TLS when it has it, refusing an answer from
	// another node than id.
	Do(req *http.Request, id uint64) (*http.Response, error)
}

// NodeState is a member's state in the cluster map.
type NodeState uint8

// The states of a member.
const (
	NodeUnknown  NodeState = iota // not a state of the cluster map's
	NodeActive                    // holds data and takes new copies
	NodeDraining                  // keeps serving until its copies moved; takes no new copies
	NodeClient                    // stores no blob and never votes: serves through the others (client.go of internal/node)
)

// Member is one record of the cluster map.
type Member struct {
	ID         uint64
	Name       string
	URL        string // public URL
	ClusterURL string // node-to-node URL, as recorded ("" or URL: the same)
	Zone       string
	Weight     float64
	Witness    bool
	State      NodeState
	Joined     time.Time // zero: unknown
}

// Membership is a Raft configuration (both halves of a joint one).
type Membership struct {
	Voters, VotersOutgoing, Learners, LearnersNext []uint64
}

// role is id's role in m: voter, learner or none.
func (m Membership) role(id uint64) string {
	switch {
	case slices.Contains(m.Voters, id) || slices.Contains(m.VotersOutgoing, id):
		return "voter"
	case slices.Contains(m.Learners, id) || slices.Contains(m.LearnersNext, id):
		return "learner"
	}
	return "none"
}

// RaftStatus is a node's view of the Raft group.
type RaftStatus struct {
	Leader  uint64 // 0 when unknown
	Term    uint64
	Applied uint64 // last index applied on this node
	Commit  uint64 // last index this node knows committed
}
