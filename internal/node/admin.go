package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-fs/cairn/internal/access"
	"github.com/cairn-fs/cairn/internal/consensus"
	"github.com/cairn-fs/cairn/internal/meta"
)

// nodesPath is the admin endpoint of cluster membership (docs/http-api.md,
// "Cluster members").
const nodesPath = "/_cairn/nodes"

// adminTimeout bounds one membership change (Raft configuration change plus
// the cluster-map command). The work is not tied to the request: a client
// that hangs up does not leave a half-done removal behind.
const adminTimeout = 30 * time.Second

// adminHandlers adds the /_cairn/nodes handler to the front end's extra
// handlers (creating the map when nil). A node that is not in cluster mode
// gets it too, and answers 501 NotACluster.
func (n *Node) adminHandlers(m map[string]http.Handler, auth *access.Authorizer) map[string]http.Handler {
	if m == nil {
		m = map[string]http.Handler{}
	}
	h := &adminHandler{n: n, auth: auth, log: n.cfg.Logger}
	m[nodesPath] = h
	m[nodesPath+"/"] = h
	m[statusPath] = h
	m[scrubPath] = h  // scrub.go
	m[mountsPath] = h // mountstats.go
	m[keysPath] = h   // access.go
	m[keysPath+"/"] = h
	m[rulesPath] = h
	m[rulesPath+"/"] = h
	return m
}

// adminHandler serves /_cairn/nodes:
//
//	GET    /_cairn/nodes               the cluster map joined with Raft membership and status
//	GET    /_cairn/nodes/ID            one member
//	POST   /_cairn/nodes/ID/drain      state draining: no new copies, keeps serving
//	POST   /_cairn/nodes/ID/activate   state active again
//	DELETE /_cairn/nodes/ID[?force=1]  leave Raft, then the cluster map
//
// Every call needs the admin key, as /_cairn/buckets does.
type adminHandler struct {
	n    *Node
	auth *access.Authorizer
	log  *slog.Logger
}

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

// apiError is an answer other than 2xx.
type apiError struct {
	status int
	code   string
	err    error
}

func (e *apiError) Error() string { return e.err.Error() }
func (e *apiError) Unwrap() error { return e.err }

func errStatus(status int, code, format string, args ...any) error {
	return &apiError{status: status, code: code, err: fmt.Errorf(format, args...)}
}

var errNotACluster = errStatus(http.StatusNotImplemented, "NotACluster",
	"not a cluster: this node runs alone (started without a cluster secret), so it has no members to manage")

func (h *adminHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p, err := h.auth.Authenticate(r.Header.Get("Authorization"))
	if err == nil {
		err = h.auth.Authorize(p, access.ActionAdmin, access.Resource{})
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if r.URL.Path == statusPath {
		h.serveStatus(w, r)
		return
	}
	if r.URL.Path == scrubPath {
		h.serveScrub(w, r)
		return
	}
	if r.URL.Path == mountsPath {
		h.serveMounts(w, r)
		return
	}
	if r.URL.Path == keysPath || strings.HasPrefix(r.URL.Path, keysPath+"/") {
		h.serveKeys(w, r)
		return
	}
	if r.URL.Path == rulesPath || strings.HasPrefix(r.URL.Path, rulesPath+"/") {
		h.serveRules(w, r)
		return
	}
	c := h.n.cl
	if c == nil {
		h.fail(w, r, errNotACluster)
		return
	}
	rest := strings.TrimPrefix(strings.TrimPrefix(r.URL.Path, nodesPath), "/")
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
		state := meta.NodeDraining
		if action == "activate" {
			state = meta.NodeActive
		}
		h.setState(w, r, c, id, state)
	default:
		h.fail(w, r, errStatus(http.StatusNotFound, "NotFound", "no such node endpoint (actions: drain, activate)"))
	}
}

// view joins the cluster map with this node's Raft configuration and status.
func (h *adminHandler) view(c *clusterNode) (clusterJSON, error) {
	nodes, err := c.reader.Nodes()
	if err != nil {
		return clusterJSON{}, fmt.Errorf("read cluster map: %w", err)
	}
	cs := c.raft.Members()
	st := c.raft.Status()
	v := clusterJSON{Self: c.id, Leader: st.Leader, Term: st.Term, AppliedIndex: st.Applied,
		CommitIndex: st.Commit, Nodes: []nodeJSON{}}
	seen := map[uint64]bool{}
	for _, nd := range nodes {
		seen[nd.ID] = true
		v.Nodes = append(v.Nodes, h.nodeView(c, nd, roleOf(cs.GetVoters(), cs.GetVotersOutgoing(), cs.GetLearners(), cs.GetLearnersNext(), nd.ID), st.Leader))
	}
	// Raft members without a record (a join that failed half-way, or a
	// removal interrupted between its two steps) are shown so they can be
	// removed.
	for _, ids := range [][]uint64{cs.GetVoters(), cs.GetVotersOutgoing(), cs.GetLearners(), cs.GetLearnersNext()} {
		for _, id := range ids {
			if !seen[id] {
				seen[id] = true
				v.Nodes = append(v.Nodes, nodeJSON{ID: id, State: "unknown",
					Role:   roleOf(cs.GetVoters(), cs.GetVotersOutgoing(), cs.GetLearners(), cs.GetLearnersNext(), id),
					Leader: id == st.Leader, Self: id == c.id})
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

func (h *adminHandler) nodeView(c *clusterNode, nd *meta.Node, role string, leader uint64) nodeJSON {
	v := nodeJSON{ID: nd.ID, Name: nd.Name, URL: nd.URL, ClusterURL: nd.ClusterURL, Zone: nd.Zone,
		Weight: nd.Weight, Witness: nd.Witness, State: stateName(nd.State), Role: role,
		Leader: nd.ID == leader, Self: nd.ID == c.id, Liveness: c.lv.livenessOf(nd.ID)}
	if nd.ClusterURL == nd.URL {
		v.ClusterURL = ""
	}
	if nd.JoinedNs != 0 {
		v.Joined = time.Unix(0, nd.JoinedNs).UTC()
	}
	return v
}

func roleOf(voters, votersOut, learners, learnersNext []uint64, id uint64) string {
	switch {
	case slices.Contains(voters, id) || slices.Contains(votersOut, id):
		return "voter"
	case slices.Contains(learners, id) || slices.Contains(learnersNext, id):
		return "learner"
	}
	return "none"
}

func stateName(s meta.NodeState) string {
	switch s {
	case meta.NodeActive:
		return "active"
	case meta.NodeDraining:
		return "draining"
	}
	return "unknown"
}

func (h *adminHandler) serveOne(w http.ResponseWriter, r *http.Request, c *clusterNode, id uint64) {
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

// setState drains or re-activates a member: OpSetNode with the member's
// record and the new state. Draining the last active data node would leave
// writes nowhere to go: refused unless force.
func (h *adminHandler) setState(w http.ResponseWriter, r *http.Request, c *clusterNode, id uint64, state meta.NodeState) {
	rec, err := c.reader.Node(id)
	if errors.Is(err, meta.ErrNotFound) {
		h.fail(w, r, errStatus(http.StatusNotFound, "NoSuchNode", "node %d is not in the cluster map", id))
		return
	} else if err != nil {
		h.fail(w, r, fmt.Errorf("read cluster map: %w", err))
		return
	}
	if rec.State != state {
		if state == meta.NodeDraining && !rec.Witness && !forced(r) {
			nodes, err := c.reader.Nodes()
			if err != nil {
				h.fail(w, r, fmt.Errorf("read cluster map: %w", err))
				return
			}
			others := 0
			for _, nd := range nodes {
				if nd.ID != id && !nd.Witness && nd.State != meta.NodeDraining {
					others++
				}
			}
			if others == 0 {
				h.fail(w, r, errStatus(http.StatusConflict, "LastDataNode",
					"node %d is the last active data node: draining it leaves new copies nowhere to go (force=1 to drain anyway)", id))
				return
			}
		}
		upd := *rec
		upd.State = state
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), adminTimeout)
		defer cancel()
		res, err := c.raft.Propose(ctx, meta.Command{Op: meta.OpSetNode, TimeNs: time.Now().UnixNano(), Node: &upd})
		if err == nil {
			err = res.Err
		}
		if err != nil {
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
func (h *adminHandler) remove(w http.ResponseWriter, r *http.Request, c *clusterNode, id uint64) {
	force := forced(r)
	rec, err := c.reader.Node(id)
	if errors.Is(err, meta.ErrNotFound) {
		rec = nil
	} else if err != nil {
		h.fail(w, r, fmt.Errorf("read cluster map: %w", err))
		return
	}
	cs := c.raft.Members()
	role := roleOf(cs.GetVoters(), cs.GetVotersOutgoing(), cs.GetLearners(), cs.GetLearnersNext(), id)
	if rec == nil && role == "none" {
		h.fail(w, r, errNoSuchNode(id))
		return
	}
	if role == "voter" && len(cs.GetVoters()) == 1 {
		h.fail(w, r, errStatus(http.StatusConflict, "LastVoter",
			"node %d is the last voter: Raft cannot remove it (add nodes first; a lone survivor is recovered with force-new-cluster, not remove)", id))
		return
	}
	if id == c.id {
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
		if err := c.raft.Remove(ctx, id); err != nil {
			h.fail(w, r, fmt.Errorf("remove node %d from raft: %w", id, err))
			return
		}
	}
	if rec != nil {
		res, err := c.raft.Propose(ctx, meta.Command{Op: meta.OpRemoveNode, TimeNs: time.Now().UnixNano(), Node: &meta.Node{ID: id}})
		if err == nil && !errors.Is(res.Err, meta.ErrNotFound) { // gone already: a concurrent removal
			err = res.Err
		}
		if err != nil {
			h.fail(w, r, fmt.Errorf("remove node %d from the cluster map (it is out of raft; call again to finish): %w", id, err))
			return
		}
	}
	out := removeJSON{Removed: id}
	target := c.cfg.Voters
	if target <= 0 {
		target = consensus.DefaultRaftConfig().Voters
	}
	if role == "voter" {
		promoted, err := c.raft.EnsureVoters(ctx, target)
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
func (h *adminHandler) forwardRemoval(w http.ResponseWriter, r *http.Request, c *clusterNode, id uint64) {
	nodes, err := c.reader.Nodes()
	if err != nil {
		h.fail(w, r, fmt.Errorf("read cluster map: %w", err))
		return
	}
	cs := c.raft.Members()
	// Voters first: they are the likeliest to be up to date and reachable.
	slices.SortStableFunc(nodes, func(a, b *meta.Node) int {
		va, vb := slices.Contains(cs.GetVoters(), a.ID), slices.Contains(cs.GetVoters(), b.ID)
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
		u := strings.TrimRight(nd.URL, "/") + nodesPath + "/" + strconv.FormatUint(id, 10) + "?force=1"
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), adminTimeout+5*time.Second)
		req, err := http.NewRequestWithContext(ctx, http.MethodDelete, u, nil)
		if err != nil {
			cancel()
			errs = append(errs, err)
			continue
		}
		req.Header.Set("Authorization", r.Header.Get("Authorization"))
		req.Header.Set("User-Agent", "cairn-node")
		resp, err := h.n.peerDo(req, nd.ID)
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

// ---------------------------------------------------------------------------
// Answers, in the API's JSON error format ({"error","code"}, as httpapi).

func (h *adminHandler) writeJSON(w http.ResponseWriter, r *http.Request, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	body = append(body, '\n')
	hdr := w.Header()
	hdr.Set("Content-Type", "application/json")
	hdr.Set("Cache-Control", "no-store")
	hdr.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		_, _ = w.Write(body)
	}
}

func (h *adminHandler) notAllowed(w http.ResponseWriter, r *http.Request, allow string) {
	w.Header().Set("Allow", allow)
	h.fail(w, r, errStatus(http.StatusMethodNotAllowed, "MethodNotAllowed", "method %s not allowed (allowed: %s)", r.Method, allow))
}

// classifyAdmin maps an error to a status and code. 5xx messages are
// generic; the error is logged.
func classifyAdmin(err error) (int, string) {
	var ae *apiError
	switch {
	case errors.As(err, &ae):
		return ae.status, ae.code
	case errors.Is(err, access.ErrUnauthenticated):
		return http.StatusUnauthorized, "Unauthorized"
	case errors.Is(err, access.ErrForbidden):
		return http.StatusForbidden, "AccessDenied"
	case errors.Is(err, consensus.ErrBadMembership):
		return http.StatusConflict, "BadMembership"
	case errors.Is(err, meta.ErrNotFound):
		return http.StatusNotFound, "NoSuchNode"
	case errors.Is(err, meta.ErrInvalid):
		return http.StatusBadRequest, "BadRequest"
	case errors.Is(err, consensus.ErrUnavailable), errors.Is(err, consensus.ErrStopped),
		errors.Is(err, context.DeadlineExceeded):
		return http.StatusServiceUnavailable, "Unavailable"
	}
	return http.StatusInternalServerError, "InternalError"
}

func (h *adminHandler) fail(w http.ResponseWriter, r *http.Request, err error) {
	status, code := classifyAdmin(err)
	msg := err.Error()
	if status >= 500 && status != http.StatusNotImplemented {
		lvl := slog.LevelError
		if status == http.StatusServiceUnavailable {
			lvl = slog.LevelWarn
			msg = "cluster unavailable (no leader or no quorum); try again"
		} else {
			msg = http.StatusText(status)
		}
		h.log.Log(r.Context(), lvl, "request failed", "method", r.Method, "path", r.URL.Path, "status", status, "err", err)
	}
	body, _ := json.Marshal(struct {
		Error string `json:"error"`
		Code  string `json:"code"`
	}{msg, code})
	body = append(body, '\n')
	hdr := w.Header()
	if status == http.StatusUnauthorized {
		hdr.Set("WWW-Authenticate", `Bearer realm="cairn"`)
	}
	hdr.Set("Content-Type", "application/json")
	hdr.Set("X-Content-Type-Options", "nosniff")
	hdr.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		_, _ = w.Write(body)
	}
}
