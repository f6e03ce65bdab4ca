package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"
)

// Grant is what an access key may do on a bucket ("" every bucket) and,
// when Prefix is set, only on the paths that start with it. Allow holds
// action names: read, list, write, delete, admin.
type Grant struct {
	Bucket string   `json:"bucket,omitempty"`
	Prefix string   `json:"prefix,omitempty"`
	Allow  []string `json:"allow"`
}

// KeyInfo describes an access key. Secret is set only in CreateKey's
// answer: the cluster never shows it again.
type KeyInfo struct {
	ID      string    `json:"id"`
	Name    string    `json:"name"`
	Secret  string    `json:"secret,omitempty"`
	Grants  []Grant   `json:"grants"`
	Created time.Time `json:"created"`
	Expires time.Time `json:"expires,omitzero"`
}

// KeyRequest asks for a new access key.
type KeyRequest struct {
	Name string `json:"name"`
	// Buckets are the grants' targets: "BUCKET" or "BUCKET/PREFIX"; none
	// means every bucket (and admin then covers creating and deleting
	// buckets).
	Buckets []string `json:"buckets,omitempty"`
	// Allow is a comma-separated list of actions; "" is
	// read,list,write,delete.
	Allow string `json:"allow,omitempty"`
	// Expires is a duration from now ("720h"); 0 never.
	Expires time.Duration `json:"-"`
}

// CreateKey creates an access key (admin) and returns it with its secret.
func (c *Client) CreateKey(ctx context.Context, req KeyRequest) (KeyInfo, error) {
	body := struct {
		KeyRequest
		Expires string `json:"expires,omitempty"`
	}{KeyRequest: req}
	if req.Expires > 0 {
		body.Expires = req.Expires.String()
	}
	rq, err := jsonRequest(http.MethodPost, c.base+"/_cairn/keys", body)
	if err != nil {
		return KeyInfo{}, err
	}
	var out KeyInfo
	if err := c.doJSON(ctx, rq, &out); err != nil {
		return KeyInfo{}, fmt.Errorf("create key %s: %w", req.Name, err)
	}
	return out, nil
}

// Keys lists the access keys, without their secrets (admin).
func (c *Client) Keys(ctx context.Context) ([]KeyInfo, error) {
	var out []KeyInfo
	if err := c.doJSON(ctx, request{method: http.MethodGet, url: c.base + "/_cairn/keys"}, &out); err != nil {
		return nil, fmt.Errorf("list keys: %w", err)
	}
	return out, nil
}

// Key describes one access key, without its secret (admin). ErrNotFound
// if there is none.
func (c *Client) Key(ctx context.Context, id string) (KeyInfo, error) {
	var out KeyInfo
	if err := c.doJSON(ctx, request{method: http.MethodGet, url: c.base + "/_cairn/keys/" + url.PathEscape(id)}, &out); err != nil {
		return KeyInfo{}, fmt.Errorf("key %s: %w", id, err)
	}
	return out, nil
}

// RevokeKey deletes an access key (admin): it stops working on every
// node within the propagation bound.
func (c *Client) RevokeKey(ctx context.Context, id string) error {
	resp, err := c.do(ctx, request{method: http.MethodDelete, url: c.base + "/_cairn/keys/" + url.PathEscape(id)})
	if err != nil {
		return fmt.Errorf("revoke key %s: %w", id, err)
	}
	drain(resp.Body)
	return nil
}
