package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
)

// Rule is an abuse rule checked at the edge of every node: a scope
// (Bucket, "" for the whole cluster), at most one match (UserAgent, a
// regular expression; IP, an address or CIDR; PathPrefix) and one action
// (Deny with a status; Respond with a body; Rate, a per-client-IP
// throttle of Rate requests per second with Burst). A throttle without a
// match is the default per-client-IP limit of its scope. ID is assigned
// by the cluster.
type Rule struct {
	ID         string        `json:"id,omitempty"`
	Bucket     string        `json:"bucket,omitempty"`
	UserAgent  string        `json:"user_agent,omitempty"`
	IP         string        `json:"ip,omitempty"`
	PathPrefix string        `json:"path_prefix,omitempty"`
	Deny       int           `json:"deny,omitempty"`
	Respond    *RuleResponse `json:"respond,omitempty"`
	Rate       float64       `json:"rate,omitempty"`
	Burst      int           `json:"burst,omitempty"`
}

// RuleResponse is the answer of a respond rule.
type RuleResponse struct {
	Status      int    `json:"status"`
	ContentType string `json:"content_type"`
	Body        []byte `json:"body"`
}

// AddRule adds an abuse rule (admin) and returns it with its ID. It takes
// effect on every node within the propagation bound. A bad rule (an
// invalid regular expression or CIDR, no action) is refused with an
// *Error saying why.
func (c *Client) AddRule(ctx context.Context, r Rule) (Rule, error) {
	rq, err := jsonRequest(http.MethodPost, c.base+"/_cairn/rules", r)
	if err != nil {
		return Rule{}, err
	}
	var out Rule
	if err := c.doJSON(ctx, rq, &out); err != nil {
		return Rule{}, fmt.Errorf("add rule: %w", err)
	}
	return out, nil
}

// Rules lists the abuse rules in decision order (admin).
func (c *Client) Rules(ctx context.Context) ([]Rule, error) {
	var out []Rule
	if err := c.doJSON(ctx, request{method: http.MethodGet, url: c.base + "/_cairn/rules"}, &out); err != nil {
		return nil, fmt.Errorf("list rules: %w", err)
	}
	return out, nil
}

// RemoveRule deletes an abuse rule by ID (admin).
func (c *Client) RemoveRule(ctx context.Context, id string) error {
	resp, err := c.do(ctx, request{method: http.MethodDelete, url: c.base + "/_cairn/rules/" + url.PathEscape(id)})
	if err != nil {
		return fmt.Errorf("remove rule %s: %w", id, err)
	}
	drain(resp.Body)
	return nil
}
