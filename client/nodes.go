package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// NodeInfo is one cluster member as the answering node sees it. It mirrors
// the server's node JSON (GET /_cairn/nodes).
type NodeInfo struct {
	// ID is the member's Raft ID (sent as a decimal string).
	ID uint64 `json:"id,string"`
	// Name is the operator-facing name; often empty.
	Name string `json:"name"`
	// URL is the member's public address.
	URL string `json:"url"`
	// ClusterURL is its node-to-node address when it differs from URL.
	ClusterURL string `json:"cluster_url,omitempty"`
	// Zone is its failure domain.
	Zone string `json:"zone"`
	// Weight is its capacity weight for placement.
	Weight float64 `json:"weight"`
	// Witness members vote but store no data.
	Witness bool `json:"witness"`
	// State is NodeActive or NodeDraining ("unknown" for a Raft member
	// missing from the cluster map).
	State string `json:"state"`
	// Role is NodeVoter, NodeLearner or NodeNone: the member's place in the
	// Raft group as of the answering node's applied configuration.
	Role string `json:"role"`
	// Leader is true for the Raft leader the answering node knows of.
	Leader bool `json:"leader"`
	// Self is true for the node that answered.
	Self bool `json:"self"`
	// Liveness is the answering node's failure detector's view: alive,
	// suspect (missed probes), dead, left, or joining (not seen yet).
	Liveness string `json:"liveness"`
	// Joined is when the member was first recorded.
	Joined time.Time `json:"joined,omitzero"`
}

// Node states and roles in NodeInfo.
const (
	NodeActive   = "active"
	NodeDraining = "draining"
	NodeVoter    = "voter"
	NodeLearner  = "learner"
	NodeNone     = "none"
)

// ClusterInfo is the answer of Nodes: the cluster map joined with the Raft
// membership, from the answering node's point of view.
type ClusterInfo struct {
	// Self is the ID of the node that answered.
	Self uint64 `json:"self,string"`
	// Leader is the leader's ID, 0 when the answering node knows none.
	Leader uint64 `json:"leader,string"`
	// Term is the answering node's Raft term.
	Term uint64 `json:"term"`
	// AppliedIndex is the last log index the answering node applied.
	AppliedIndex uint64 `json:"applied_index"`
	// CommitIndex is the last log index it knows committed.
	CommitIndex uint64 `json:"commit_index"`
	// Nodes are the members, by ID.
	Nodes []NodeInfo `json:"nodes"`
}

// NodeRemoval is the answer of RemoveNode.
type NodeRemoval struct {
	// Removed is the ID of the removed member.
	Removed uint64 `json:"removed,string"`
	// Promoted is a learner promoted to voter to keep the voter count, or 0
	// (the leader also promotes on its own, shortly after).
	Promoted uint64 `json:"promoted,string,omitempty"`
}

func (c *Client) nodesURL(id uint64, action string) string {
	u := c.base + "/_cairn/nodes"
	if id != 0 {
		u += "/" + strconv.FormatUint(id, 10)
	}
	if action != "" {
		u += "/" + action
	}
	return u
}

// Nodes lists the cluster's members (admin). A node that is not in cluster
// mode answers 501 (ErrServer, code NotACluster).
func (c *Client) Nodes(ctx context.Context) (ClusterInfo, error) {
	var out ClusterInfo
	if err := c.doJSON(ctx, request{method: http.MethodGet, url: c.nodesURL(0, "")}, &out); err != nil {
		return ClusterInfo{}, fmt.Errorf("list nodes: %w", err)
	}
	return out, nil
}

// Node returns one member. ErrNotFound if it is not one.
func (c *Client) Node(ctx context.Context, id uint64) (NodeInfo, error) {
	if id == 0 {
		return NodeInfo{}, fmt.Errorf("node: %w: ID 0", ErrInvalidArgument)
	}
	var out NodeInfo
	if err := c.doJSON(ctx, request{method: http.MethodGet, url: c.nodesURL(id, "")}, &out); err != nil {
		return NodeInfo{}, fmt.Errorf("node %d: %w", id, err)
	}
	return out, nil
}

// DrainNode sets a member's state to draining: it keeps serving, and
// placement gives it no new copies. ErrConflict when it is the last active
// data node (unless force).
func (c *Client) DrainNode(ctx context.Context, id uint64, force bool) (NodeInfo, error) {
	return c.nodeAction(ctx, "drain", id, force)
}

// ActivateNode undoes DrainNode.
func (c *Client) ActivateNode(ctx context.Context, id uint64) (NodeInfo, error) {
	return c.nodeAction(ctx, "activate", id, false)
}

func (c *Client) nodeAction(ctx context.Context, action string, id uint64, force bool) (NodeInfo, error) {
	if id == 0 {
		return NodeInfo{}, fmt.Errorf("%s node: %w: ID 0", action, ErrInvalidArgument)
	}
	rq := request{method: http.MethodPost, url: c.nodesURL(id, action)}
	if force {
		rq.query = url.Values{"force": {"1"}}
	}
	var out NodeInfo
	if err := c.doJSON(ctx, rq, &out); err != nil {
		return NodeInfo{}, fmt.Errorf("%s node %d: %w", action, id, err)
	}
	return out, nil
}

// RemoveNode takes a member out of the Raft group and the cluster map. It
// moves no data: drain the node first. ErrConflict for the last voter, or
// for the node the client talks to unless force (which has that node ask
// another member to remove it). ErrNotFound if it is not a member.
func (c *Client) RemoveNode(ctx context.Context, id uint64, force bool) (NodeRemoval, error) {
	if id == 0 {
		return NodeRemoval{}, fmt.Errorf("remove node: %w: ID 0", ErrInvalidArgument)
	}
	rq := request{method: http.MethodDelete, url: c.nodesURL(id, "")}
	if force {
		rq.query = url.Values{"force": {"1"}}
	}
	var out NodeRemoval
	if err := c.doJSON(ctx, rq, &out); err != nil {
		return NodeRemoval{}, fmt.Errorf("remove node %d: %w", id, err)
	}
	return out, nil
}
