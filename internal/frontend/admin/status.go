package admin

// Status: what `cairn status` shows (docs/http-api.md, "Status").
//
//	GET /_cairn/status          the cluster as this node sees it, with each
//	                            member's own report (fetched from it)
//	GET /_cairn/status?local=1  this node's own report only
//
// Both need the admin key. The cluster view asks every other member for
// its local report at its public URL, in parallel, forwarding the
// caller's Authorization header, each bounded by statusPeerTimeout; a
// member that does not answer is listed with its error, and its liveness
// and role still come from this node's failure detector and Raft view.

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/cairn-fs/cairn/internal/store"
)

// statusPeerTimeout bounds the fetch of one member's local report.
const statusPeerTimeout = 2 * time.Second

// statusJSON is the answer of GET /_cairn/status.
type statusJSON struct {
	Self    uint64 `json:"self,string"`
	Cluster bool   `json:"cluster"` // false: a lone node (no Raft)
	Leader  uint64 `json:"leader,string"`
	Term    uint64 `json:"term"`
	// CommitIndex is the last log index this node knows committed; each
	// node's lag is CommitIndex less its applied index.
	CommitIndex uint64 `json:"commit_index"`
	// UnderReplicated is the number of blobs recorded as written with
	// fewer copies than wanted and not yet repaired (the same on every
	// node: it is kept in the namespace).
	UnderReplicated int64            `json:"under_replicated"`
	Nodes           []nodeStatusJSON `json:"nodes"`
	// Locks are the file locks held and waited for through the mounts
	// of every node (the same on every node: the table is in the log).
	Locks []store.LockInfo `json:"locks"`
	// LockStats are this node's lock counters since it started.
	LockStats store.LockStats `json:"lock_stats"`
	// Owners is directory ownership (design 0008): this node's counters
	// and directories, and every node's count from the log.
	Owners ownersJSON `json:"owners"`
	// Trash is the trash of every bucket that has one (trash.go; the
	// same on every node: the counts are in the namespace).
	Trash []TrashUsage `json:"trash"`
	Time  time.Time    `json:"time"`
}

// Bounds of the owners section: the directories of this node listed, and
// where a node's count from the log stops (a status view reads at most
// that many index keys per node, however many directories an untar made).
const (
	ownedDirsShown  = 100
	ownerCountLimit = 10000
)

// ownersJSON is the "owners" section of GET /_cairn/status.
type ownersJSON struct {
	// Node is the answering node's ID (0: a lone node); the counters and
	// the directories are its own.
	Node uint64 `json:"node,string"`
	// owned, claims, recalls, handed_over, fenced, lost: this node's
	// counters since it started (owned: now).
	store.OwnerStats
	// Dirs are the first ownedDirsShown of this node's directories, by
	// path; Owned counts them all.
	Dirs []store.OwnedDir `json:"dirs"`
	// ByNode is how many directories each node owns according to the
	// log (the same on every node), by node: every member (0 when it owns
	// none) and any other node the log still names. A count stops at
	// ownerCountLimit, with more set.
	ByNode []store.NodeDirs `json:"by_node"`
	// Error says why ByNode is empty: the log's records could not be read.
	Error string `json:"error,omitempty"`
}

// ownersView makes the owners section; members are the cluster's IDs (nil
// for a lone node: only the log's nodes are listed).
func (h *Handler) ownersView(ctx context.Context, self uint64, members []uint64) ownersJSON {
	v := ownersJSON{Node: self, Dirs: []store.OwnedDir{}, ByNode: []store.NodeDirs{}}
	var dirs []store.OwnedDir
	v.OwnerStats, dirs = h.local.Owners(ownedDirsShown)
	if dirs != nil {
		v.Dirs = dirs
	}
	counts, err := h.store.DirOwnerCounts(ctx, ownerCountLimit)
	if err != nil {
		v.Error = "counting the directories of each node: " + err.Error()
		return v
	}
	byNode := map[uint64]store.NodeDirs{}
	for _, id := range members {
		byNode[id] = store.NodeDirs{Node: id}
	}
	for _, c := range counts {
		byNode[c.Node] = c
	}
	for _, c := range byNode {
		v.ByNode = append(v.ByNode, c)
	}
	slices.SortFunc(v.ByNode, func(a, b store.NodeDirs) int { return cmp.Compare(a.Node, b.Node) })
	return v
}

// nodeStatusJSON is one member in the status view.
type nodeStatusJSON struct {
	ID      uint64 `json:"id,string"`
	URL     string `json:"url"`
	Zone    string `json:"zone"`
	Witness bool   `json:"witness"`
	State   string `json:"state"`    // active, draining
	Live    string `json:"liveness"` // alive, suspect, dead, left, joining (never seen yet)
	Role    string `json:"role"`     // voter, learner, none
	Leader  bool   `json:"leader"`
	Self    bool   `json:"self"`
	// Lag is how many committed entries the member has not applied yet
	// (from its own report; 0 when it did not answer).
	Lag uint64 `json:"lag"`
	// Report is the member's own report; nil when it did not answer
	// (Error says why).
	Report *LocalStatus `json:"report,omitempty"`
	Error  string       `json:"error,omitempty"`
}

// LocalStatus is one node's report of itself: GET /_cairn/status?local=1.
type LocalStatus struct {
	ID           uint64  `json:"id,string"` // 0: a lone node
	AppliedIndex uint64  `json:"applied_index"`
	CommitIndex  uint64  `json:"commit_index"`
	Disk         Disk    `json:"disk"`
	Repair       *Repair `json:"repair,omitempty"` // cluster mode only
	Scrub        Scrub   `json:"scrub"`            // scrub.go
	Version      Version `json:"version"`
	// Cache is the node's cache of blobs read from other nodes (nil
	// without one): on disk for a client node.
	Cache *Cache `json:"cache,omitempty"`
}

// Cache is a node's cache of blobs read from other nodes.
type Cache struct {
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

// Version is a node's binary and log version (docs/operations.md,
// "Upgrades").
type Version struct {
	Release string `json:"release"`
	Commit  string `json:"commit"`
	// LogMax is the newest log version the node's binary reads;
	// LogVersion the cluster's active one as applied on the node.
	LogMax     int `json:"log_max"`
	LogVersion int `json:"log_version"`
	// LogStopped says why the node's log stopped applying, if it did.
	LogStopped string `json:"log_stopped,omitempty"`
	// Waiting says what keeps the cluster's log version below LogMax.
	Waiting []string `json:"upgrade_waiting_for,omitempty"`
}

// Disk is the node's storage.
type Disk struct {
	UsedBytes  int64 `json:"used_bytes"`  // volume files
	LiveBytes  int64 `json:"live_bytes"`  // live blobs in them
	FreeBytes  int64 `json:"free_bytes"`  // free on the data disk
	TotalBytes int64 `json:"total_bytes"` // size of the data disk
	Blobs      int64 `json:"blobs"`
	Volumes    int   `json:"volumes"`
	ReadOnly   bool  `json:"read_only"`
}

// Repair is the progress of the node's repair and rebalance: pulls are
// repair (copies this node should hold), pushes and drops are rebalance
// (hand-offs of copies that belong elsewhere).
type Repair struct {
	Active       bool          `json:"active"`
	Passes       int64         `json:"passes"`
	LastChecked  int64         `json:"last_pass_checked"`
	LastDuration time.Duration `json:"last_pass_ns"`
	// Pending is what the last passes could not do yet: copies this node
	// should hold but could not fetch, hand-offs kept, and under-replicated
	// blobs whose copies are not all confirmed.
	Pending     int64 `json:"pending"`
	Pulled      int64 `json:"pulled"`
	PulledBytes int64 `json:"pulled_bytes"`
	Pushed      int64 `json:"pushed"`
	PushedBytes int64 `json:"pushed_bytes"`
	Dropped     int64 `json:"dropped"`
	Cleared     int64 `json:"under_replicated_cleared"`
}

// serveStatus answers GET /_cairn/status (authorized by the caller).
func (h *Handler) serveStatus(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		h.notAllowed(w, r, "GET, HEAD")
		return
	}
	if r.URL.Query().Get("local") == "1" {
		h.writeJSON(w, r, http.StatusOK, h.local.Report())
		return
	}
	local := h.local.Report()
	v := statusJSON{Self: local.ID, Time: time.Now().UTC(), CommitIndex: local.CommitIndex, Locks: []store.LockInfo{}, Trash: []TrashUsage{},
		LockStats: h.local.LockStats()}
	if locks, err := h.store.Locks(r.Context()); err == nil {
		if locks != nil {
			v.Locks = locks
		}
	}
	if tu, err := trashUsage(r.Context(), h.store); err == nil {
		v.Trash = tu
	}
	c := h.cluster
	if c == nil {
		v.Owners = h.ownersView(r.Context(), local.ID, nil)
		v.Nodes = []nodeStatusJSON{{URL: h.url, State: "active", Live: "alive", Role: "none", Self: true, Report: &local}}
		h.writeJSON(w, r, http.StatusOK, v)
		return
	}
	v.Cluster = true
	if cnt, err := c.UnderReplicated(); err == nil {
		v.UnderReplicated = cnt
	}
	cv, err := h.view(c)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	v.Leader, v.Term = cv.Leader, cv.Term
	ids := make([]uint64, len(cv.Nodes))
	for i, nd := range cv.Nodes {
		ids[i] = nd.ID
	}
	v.Owners = h.ownersView(r.Context(), local.ID, ids)
	v.Nodes = make([]nodeStatusJSON, len(cv.Nodes))
	var wg sync.WaitGroup
	for i, nd := range cv.Nodes {
		ns := nodeStatusJSON{ID: nd.ID, URL: nd.URL, Zone: nd.Zone, Witness: nd.Witness, State: nd.State,
			Live: c.Liveness(nd.ID), Role: nd.Role, Leader: nd.Leader, Self: nd.Self}
		switch {
		case nd.Self:
			rep := local
			ns.Report = &rep
		case nd.URL == "":
			ns.Error = "no URL in the cluster map"
		default:
			wg.Add(1)
			go func() { // ns is this goroutine's copy; only it writes v.Nodes[i] now
				defer wg.Done()
				ctx, cancel := context.WithTimeout(r.Context(), statusPeerTimeout)
				defer cancel()
				rep, err := FetchLocalStatus(ctx, c.Do, nd.ID, nd.URL, r.Header.Get("Authorization"))
				if err != nil {
					ns.Error = err.Error()
				} else {
					ns.Report = &rep
				}
				v.Nodes[i] = ns
			}()
			continue
		}
		v.Nodes[i] = ns
	}
	wg.Wait()
	for i := range v.Nodes {
		if rep := v.Nodes[i].Report; rep != nil && v.CommitIndex > rep.AppliedIndex {
			v.Nodes[i].Lag = v.CommitIndex - rep.AppliedIndex
		}
	}
	h.writeJSON(w, r, http.StatusOK, v)
}

// FetchLocalStatus GETs the local report of member id at base (its public
// URL) with the Authorization header auth, sending the request with do
// (Cluster.Do). It blocks until the answer or ctx's end.
func FetchLocalStatus(ctx context.Context, do func(*http.Request, uint64) (*http.Response, error), id uint64, base, auth string) (LocalStatus, error) {
	var v LocalStatus
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+StatusPath+"?local=1", nil)
	if err != nil {
		return v, err
	}
	req.Header.Set("Authorization", auth)
	resp, err := do(req, id)
	if err != nil {
		return v, fmt.Errorf("unreachable: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return v, fmt.Errorf("answered %s", resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		return v, fmt.Errorf("bad report: %w", err)
	}
	return v, nil
}
