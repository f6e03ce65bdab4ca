package admin

// Cluster membership (docs/http-api.md, "Cluster members"):
//
//	GET    /_cairn/nodes               the cluster map joined with Raft membership and status
//	GET    /_cairn/nodes/ID            one member
//	POST   /_cairn/nodes/ID/drain      state draining: no new copies, keeps serving
//	POST   /_cairn/nodes/ID/activate   state active again
//	DELETE /_cairn/nodes/ID[?force=1]  leave Raft, then the cluster map
//
// Every call needs the admin key, as /_cairn/buckets does. A node that is
// not in cluster mode answers 501 NotACluster.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// nodeJSON is one member as GET /_cairn/nodes shows it. IDs are decimal
// strings: they use all 63 bits, beyond what a JSON number carries exactly
// in JavaScript and jq.
type nodeJSON struct {
	ID         uint64    `json:"id,string"`
	Name       string    `json:"name"`
	URL        string    `json:"url"`
	ClusterURL string    `json:"cluster_url,omitempty"`
	Zone       string    `json:"zone"`
	Weight     float64   `json:"weight"`
	Witness    bool      `json:"witness"`
	State      string    `json:"state"`    // active, draining; unknown for a Raft member missing from the cluster map
	Liveness   string    `json:"liveness"` // alive, suspect, dead, left, joining: this node's failure detector's view
	Role       string    `json:"role"`     // voter, learner, none (as of this node's applied configuration)
	Leader     bool      `json:"leader"`
	Self       bool      `json:"self"` // the node that answered
	Joined     time.Time `json:"joined,omitzero"`
}

// clusterJSON is the answer of GET /_cairn/nodes: this node's view.
type clusterJSON struct {
	Self         uint64     `json:"self,string"`   // ID of the node that answered
	Leader       uint64     `json:"leader,string"` // "0" when unknown
	Term         uint64     `json:"term"`
	AppliedIndex uint64     `json:"applied_index"` // on the node that answered
	CommitIndex  uint64     `json:"commit_index"`  // as known to the node that answered
	Nodes        []nodeJSON `json:"nodes"`         // by ID
}

// removeJSON is the answer of DELETE /_cairn/nodes/ID.
type removeJSON struct {
	Removed  uint64 `json:"removed,string"`
	Promoted uint64 `json:"promoted,string,omitempty"` // a learner this node promoted to keep the voter count
}

// serveNodes serves /_cairn/nodes (authorized by ServeHTTP).
func (h *Handler) serveNodes(w http.ResponseWriter, r *http.Request) {
	c := h.cluster
	if c == nil {
		h.fail(w, r, errNotACluster)
		return
	}
	rest := strings.TrimPrefix(strings.TrimPrefix(r.URL.Path, NodesPath), "/")
	if rest == "" {
		switch r.Method {
		case http.MethodGet, http.MethodHead:
			v, err := h.view(c)
			if err != nil {
				h.fail(w, r, err)
				return
			}
			h.writeJSON(w, r, http.StatusOK, v)
		default:
			h.notAllowed(w, r, "GET, HEAD")
		}
		return
	}
	idStr, action, _ := strings.Cut(rest, "/")
	id, err := strconv.ParseUint(idStr, 10, 64)
	if err != nil || id == 0 {
		h.fail(w, r, errStatus(http.StatusBadRequest, "BadRequest", "%q is not a node ID (a positive decimal number)", idStr))
		return
	}
	switch action {
	case "":
		switch r.Method {
		case http.MethodGet, http.MethodHead:
			h.serveOne(w, r, c, id)
		case http.MethodDelete:
			h.remove(w, r, c, id)
		default:
			h.notAllowed(w, r, "GET, HEAD, DELETE")
		}
	case "drain", "activate":
		if r.Method != http.MethodPost {
			h.notAllowed(w, r, "POST")
			return
		}
		state := NodeDraining
		if action == "activate" {
			state = NodeActive
		}
		h.setState(w, r, c, id, state)
	default:
		h.fail(w, r, errStatus(http.StatusNotFound, "NotFound", "no such node endpoint (actions: drain, activate)"))
	}
}

// view joins the cluster map with this node's Raft configuration and status.
func (h *Handler) view(c Cluster) (clusterJSON, error) {
	nodes, err := c.Members()
	if err != nil {
		return clusterJSON{}, fmt.Errorf("read cluster map: %w", err)
	}
	cs := c.Membership()
	st := c.Raft()
	self := c.ID()
	v := clusterJSON{Self: self, Leader: st.Leader, Term: st.Term, AppliedIndex: st.Applied,
		CommitIndex: st.Commit, Nodes: []nodeJSON{}}
	seen := map[uint64]bool{}
	for _, nd := range nodes {
		seen[nd.ID] = true
		v.Nodes = append(v.Nodes, nodeView(c, self, nd, cs.role(nd.ID), st.Leader))
	}
	// Raft members without a record (a join that failed half-way, or a
	// removal interrupted between its two steps) are shown so they can be
	// removed.
	for _, ids := range [][]uint64{cs.Voters, cs.VotersOutgoing, cs.Learners, cs.LearnersNext} {
		for _, id := range ids {
			if !seen[id] {
				seen[id] = true
				v.Nodes = append(v.Nodes, nodeJSON{ID: id, State: "unknown", Role: cs.role(id),
					Leader: id == st.Leader, Self: id == self})
			}
		}
	}
	slices.SortFunc(v.Nodes, func(a, b nodeJSON) int {
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
	return v, nil
}

func nodeView(c Cluster, self uint64, nd Member, role string, leader uint64) nodeJSON {
	v := nodeJSON{ID: nd.ID, Name: nd.Name, URL: nd.URL, ClusterURL: nd.ClusterURL, Zone: nd.Zone,
		Weight: nd.Weight, Witness: nd.Witness, State: stateName(nd.State), Role: role,
		Leader: nd.ID == leader, Self: nd.ID == self, Liveness: c.Liveness(nd.ID), Joined: nd.Joined}
	if nd.ClusterURL == nd.URL {
		v.ClusterURL = ""
	}
	return v
}

func stateName(s NodeState) string {
	switch s {
	case NodeActive:
		return "active"
	case NodeDraining:
		return "draining"
	case NodeClient:
		return "client"
	}
	return "unknown"
}

func (h *Handler) serveOne(w http.ResponseWriter, r *http.Request, c Cluster, id uint64) {
	v, err := h.view(c)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	for _, nd := range v.Nodes {
		if nd.ID == id {
			h.writeJSON(w, r, http.StatusOK, nd)
			return
		}
	}
	h.fail(w, r, errNoSuchNode(id))
}

func errNoSuchNode(id uint64) error {
	return errStatus(http.StatusNotFound, "NoSuchNode", "node %d is not a member (neither in the cluster map nor in Raft)", id)
}

func forced(r *http.Request) bool {
	switch strings.ToLower(r.URL.Query().Get("force")) {
	case "1", "true", "yes":
		return true
	}
	return false
}

// setState drains or re-activates a member. Draining the last active data
// node would leave writes nowhere to go: refused unless force.
func (h *Handler) setState(w http.ResponseWriter, r *http.Request, c Cluster, id uint64, state NodeState) {
	rec, err := c.Member(id)
	if errors.Is(err, ErrNoSuchNode) {
		h.fail(w, r, errStatus(http.StatusNotFound, "NoSuchNode", "node %d is not in the cluster map", id))
		return
	} else if err != nil {
		h.fail(w, r, fmt.Errorf("read cluster map: %w", err))
		return
	}
	if rec.State == NodeClient {
		h.fail(w, r, errStatus(http.StatusConflict, "ClientNode",
			"node %d is a client node: it holds no data, so it has nothing to drain nor to activate (restart it without --role client to make it a data node)", id))
		return
	}
	if rec.State != state {
		if state == NodeDraining && !rec.Witness && !forced(r) {
			nodes, err := c.Members()
			if err != nil {
				h.fail(w, r, fmt.Errorf("read cluster map: %w", err))
				return
			}
			others := 0
			for _, nd := range nodes {
				if nd.ID != id && !nd.Witness && nd.State == NodeActive {
					others++
				}
			}
			if others == 0 {
				h.fail(w, r, errStatus(http.StatusConflict, "LastDataNode",
					"node %d is the last active data node: draining it leaves new copies nowhere to go (force=1 to drain anyway)", id))
				return
			}
		}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), adminTimeout)
		defer cancel()
		if err := c.SetState(ctx, id, state); err != nil {
			h.fail(w, r, fmt.Errorf("set node %d %s: %w", id, stateName(state), err))
			return
		}
		h.log.Info("node state changed", "node", id, "state", stateName(state))
	}
	h.serveOne(w, r, c, id)
}

// remove takes a member out of the cluster: out of Raft first (so it stops
// counting for quorum), then out of the cluster map (so placement and the
// peer addresses forget it). Each step is skipped when already done, so a
// removal interrupted half-way is finished by calling it again. Then the
// voter count is restored by promoting a learner if this node leads (the
// leader also does it on its own).
func (h *Handler) remove(w http.ResponseWriter, r *http.Request, c Cluster, id uint64) {
	force := forced(r)
	_, err := c.Member(id)
	inMap := err == nil
	if err != nil && !errors.Is(err, ErrNoSuchNode) {
		h.fail(w, r, fmt.Errorf("read cluster map: %w", err))
		return
	}
	cs := c.Membership()
	role := cs.role(id)
	if !inMap && role == "none" {
		h.fail(w, r, errNoSuchNode(id))
		return
	}
	if role == "voter" && len(cs.Voters) == 1 {
		h.fail(w, r, errStatus(http.StatusConflict, "LastVoter",
			"node %d is the last voter: Raft cannot remove it (add nodes first; a lone survivor is recovered with force-new-cluster, not remove)", id))
		return
	}
	if id == c.ID() {
		if !force {
			h.fail(w, r, errStatus(http.StatusConflict, "RemovingSelf",
				"node %d is the node answering this request: send the removal to another member, or add force=1 to have this node ask one", id))
			return
		}
		h.forwardRemoval(w, r, c, id)
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), adminTimeout)
	defer cancel()
	if role != "none" {
		if err := c.RemoveFromRaft(ctx, id); err != nil {
			h.fail(w, r, fmt.Errorf("remove node %d from raft: %w", id, err))
			return
		}
	}
	if inMap {
		if err := c.RemoveFromMap(ctx, id); err != nil {
			h.fail(w, r, fmt.Errorf("remove node %d from the cluster map (it is out of raft; call again to finish): %w", id, err))
			return
		}
	}
	out := removeJSON{Removed: id}
	if role == "voter" {
		promoted, err := c.EnsureVoters(ctx)
		if err != nil {
			// The leader's own promotion policy retries; not the caller's problem.
			h.log.Warn("promote a learner after removing a voter", "removed", id, "err", err)
		}
		out.Promoted = promoted
	}
	h.log.Info("node removed from the cluster", "node", id, "role", role, "promoted", out.Promoted)
	h.writeJSON(w, r, http.StatusOK, out)
}

// forwardRemoval asks another member to remove this node. This node cannot
// do it itself: once out of the Raft group it no longer hears whether its
// removal and the cluster-map command committed. The request goes to the
// other member's admin API with the caller's credentials (so it works when
// the members share the admin key).
func (h *Handler) forwardRemoval(w http.ResponseWriter, r *http.Request, c Cluster, id uint64) {
	nodes, err := c.Members()
	if err != nil {
		h.fail(w, r, fmt.Errorf("read cluster map: %w", err))
		return
	}
	voters := c.Membership().Voters
	// Voters first: they are the likeliest to be up to date and reachable.
	slices.SortStableFunc(nodes, func(a, b Member) int {
		va, vb := slices.Contains(voters, a.ID), slices.Contains(voters, b.ID)
		switch {
		case va && !vb:
			return -1
		case vb && !va:
			return 1
		}
		return 0
	})
	var errs []error
	for _, nd := range nodes {
		if nd.ID == id || nd.URL == "" {
			continue
		}
		u := strings.TrimRight(nd.URL, "/") + NodesPath + "/" + strconv.FormatUint(id, 10) + "?force=1"
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), adminTimeout+5*time.Second)
		req, err := http.NewRequestWithContext(ctx, http.MethodDelete, u, nil)
		if err != nil {
			cancel()
			errs = append(errs, err)
			continue
		}
		req.Header.Set("Authorization", r.Header.Get("Authorization"))
		req.Header.Set("User-Agent", "cairn-node")
		resp, err := c.Do(req, nd.ID)
		if err != nil {
			cancel()
			errs = append(errs, fmt.Errorf("node %d at %s: %w", nd.ID, nd.URL, err))
			continue
		}
		body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		cancel()
		if err != nil {
			errs = append(errs, fmt.Errorf("node %d at %s: %w", nd.ID, nd.URL, err))
			continue
		}
		if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
			h.fail(w, r, errStatus(http.StatusConflict, "ForwardRefused",
				"asked node %d at %s to remove this node; it refused the admin key (%d): run the removal against that node with its key", nd.ID, nd.URL, resp.StatusCode))
			return
		}
		if resp.StatusCode >= 500 {
			errs = append(errs, fmt.Errorf("node %d at %s: status %d", nd.ID, nd.URL, resp.StatusCode))
			continue
		}
		h.log.Info("asked another member to remove this node", "via", nd.ID, "status", resp.StatusCode)
		hdr := w.Header()
		hdr.Set("Content-Type", resp.Header.Get("Content-Type"))
		hdr.Set("X-Content-Type-Options", "nosniff")
		w.WriteHeader(resp.StatusCode)
		if r.Method != http.MethodHead {
			_, _ = w.Write(body)
		}
		return
	}
	if len(errs) == 0 {
		h.fail(w, r, errStatus(http.StatusConflict, "NoOtherMember", "no other member with an address to ask to remove node %d", id))
		return
	}
	h.fail(w, r, &apiError{status: http.StatusServiceUnavailable, code: "Unavailable",
		err: fmt.Errorf("no other member could remove node %d: %w", id, errors.Join(errs...))})
}
