package admin

// Access keys and abuse rules (docs/access.md). Both are records in the
// log (store.Records): every node's access tables follow them (the node
// reloads them when a record changes), so a key revoked here stops
// working on every node within the propagation bound.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/cairn-fs/cairn/internal/access"
	"github.com/cairn-fs/cairn/internal/access/rules"
	"github.com/cairn-fs/cairn/internal/store"
)

// keyJSON is a key as the admin API shows it: never its secret, except in
// the answer to its creation.
type keyJSON struct {
	ID      string         `json:"id"`
	Name    string         `json:"name"`
	Secret  string         `json:"secret,omitempty"`
	Grants  []access.Grant `json:"grants"`
	Created time.Time      `json:"created"`
	Expires time.Time      `json:"expires,omitzero"`
}

func showKey(k access.Key) keyJSON {
	return keyJSON{ID: k.ID, Name: k.Name, Grants: k.Grants, Created: k.Created, Expires: k.Expires}
}

// keyRequest is the body of POST /_cairn/keys.
type keyRequest struct {
	Name string `json:"name"`
	// Grants: each "BUCKET", "BUCKET/PREFIX" or "" (every bucket).
	Buckets []string `json:"buckets"`
	// Allow: "read,list,write,delete,admin"; "" is read,list,write,delete.
	Allow string `json:"allow"`
	// Expires: a Go duration from now ("720h"); "" never.
	Expires string `json:"expires"`
}

// serveKeys serves the access keys (admin key only):
//
//	GET    /_cairn/keys        every key, without secrets
//	POST   /_cairn/keys        create one (keyRequest); the answer holds the secret, once
//	GET    /_cairn/keys/ID     one key
//	DELETE /_cairn/keys/ID     revoke it
func (h *Handler) serveKeys(w http.ResponseWriter, r *http.Request) {
	recs := h.store
	id := strings.TrimPrefix(strings.TrimPrefix(r.URL.Path, KeysPath), "/")
	ctx := r.Context()
	switch {
	case id == "" && (r.Method == http.MethodGet || r.Method == http.MethodHead):
		list, err := recs.ListRecords(ctx, store.RecordKey)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		out := []keyJSON{}
		for _, rec := range list {
			if k, err := access.DecodeKey(rec.Value); err == nil {
				out = append(out, showKey(k))
			}
		}
		sort.Slice(out, func(i, j int) bool {
			return out[i].Name < out[j].Name || out[i].Name == out[j].Name && out[i].ID < out[j].ID
		})
		h.writeJSON(w, r, http.StatusOK, out)
	case id == "" && r.Method == http.MethodPost:
		h.createKey(w, r)
	case id == "":
		h.notAllowed(w, r, "GET, HEAD, POST")
	case r.Method == http.MethodGet || r.Method == http.MethodHead:
		k, err := h.key(ctx, id)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		h.writeJSON(w, r, http.StatusOK, showKey(k))
	case r.Method == http.MethodDelete:
		if err := recs.DeleteRecord(ctx, store.RecordKey, id); err != nil {
			if errors.Is(err, store.ErrNotFound) {
				err = errNoSuchKey(id)
			}
			h.fail(w, r, err)
			return
		}
		h.log.Info("access key revoked", "id", id)
		w.WriteHeader(http.StatusNoContent)
	default:
		h.notAllowed(w, r, "GET, HEAD, DELETE")
	}
}

func errNoSuchKey(id string) error {
	return errStatus(http.StatusNotFound, "NoSuchKey", "no access key %q", id)
}

func (h *Handler) key(ctx context.Context, id string) (access.Key, error) {
	list, err := h.store.ListRecords(ctx, store.RecordKey)
	if err != nil {
		return access.Key{}, err
	}
	for _, rec := range list {
		if rec.Name == id {
			return access.DecodeKey(rec.Value)
		}
	}
	return access.Key{}, errNoSuchKey(id)
}

func (h *Handler) createKey(w http.ResponseWriter, r *http.Request) {
	var req keyRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 64<<10)).Decode(&req); err != nil {
		h.fail(w, r, errStatus(http.StatusBadRequest, "BadRequest", "bad key request: %v", err))
		return
	}
	k, err := buildKey(req, time.Now())
	if err != nil {
		h.fail(w, r, errStatus(http.StatusBadRequest, "BadRequest", "%v", err))
		return
	}
	v, err := access.EncodeKey(k)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if _, err := h.store.PutRecord(r.Context(), store.RecordKey, k.ID, v, true); err != nil {
		h.fail(w, r, err)
		return
	}
	// The secret is never logged.
	h.log.Info("access key created", "id", k.ID, "name", k.Name)
	out := showKey(k)
	out.Secret = k.Secret
	h.writeJSON(w, r, http.StatusCreated, out)
}

// buildKey makes a new key from a creation request.
func buildKey(req keyRequest, now time.Time) (access.Key, error) {
	allow := access.DefaultActions
	if req.Allow != "" {
		var err error
		if allow, err = access.ParseActions(req.Allow); err != nil {
			return access.Key{}, err
		}
	}
	targets := req.Buckets
	if len(targets) == 0 {
		targets = []string{""}
	}
	var grants []access.Grant
	for _, t := range targets {
		g, err := access.ParseGrant(t, allow)
		if err != nil {
			return access.Key{}, err
		}
		if g.Bucket != "" {
			if err := store.ValidBucketName(g.Bucket); err != nil {
				return access.Key{}, fmt.Errorf("grant %q: %w", t, err)
			}
		}
		grants = append(grants, g)
	}
	var expires time.Time
	if req.Expires != "" {
		d, err := time.ParseDuration(req.Expires)
		if err != nil || d <= 0 {
			return access.Key{}, fmt.Errorf("expires %q: want a positive duration such as 24h or 90m", req.Expires)
		}
		expires = now.Add(d).UTC()
	}
	return access.NewKey(req.Name, grants, now, expires)
}

// serveRules serves the abuse rules (admin key only):
//
//	GET    /_cairn/rules        every rule, in decision order
//	POST   /_cairn/rules        add one (a rules.Rule without ID); answers it with its ID
//	DELETE /_cairn/rules/ID     remove one ("r7" or "7")
func (h *Handler) serveRules(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	id := strings.TrimPrefix(strings.TrimPrefix(r.URL.Path, RulesPath), "/")
	switch {
	case id == "" && (r.Method == http.MethodGet || r.Method == http.MethodHead):
		recs, err := h.store.ListRecords(ctx, store.RecordRule)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		out := []rules.Rule{}
		for _, rec := range recs {
			if rule, err := rules.DecodeRecord(rec.Name, rec.Value); err == nil {
				out = append(out, rule)
			}
		}
		sort.SliceStable(out, func(i, j int) bool {
			if (out[i].Bucket == "") != (out[j].Bucket == "") {
				return out[i].Bucket == ""
			}
			if out[i].Bucket != out[j].Bucket {
				return out[i].Bucket < out[j].Bucket
			}
			return len(out[i].ID) < len(out[j].ID) || len(out[i].ID) == len(out[j].ID) && out[i].ID < out[j].ID
		})
		h.writeJSON(w, r, http.StatusOK, out)
	case id == "" && r.Method == http.MethodPost:
		h.addRule(w, r)
	case id == "":
		h.notAllowed(w, r, "GET, HEAD, POST")
	case r.Method == http.MethodDelete:
		name := strings.TrimPrefix(id, "r")
		if err := h.store.DeleteRecord(ctx, store.RecordRule, name); err != nil {
			if errors.Is(err, store.ErrNotFound) {
				err = errStatus(http.StatusNotFound, "NoSuchRule", "no rule %q", id)
			}
			h.fail(w, r, err)
			return
		}
		h.log.Info("abuse rule removed", "id", "r"+name)
		w.WriteHeader(http.StatusNoContent)
	default:
		h.notAllowed(w, r, "DELETE")
	}
}

// addRule answers POST /_cairn/rules.
func (h *Handler) addRule(w http.ResponseWriter, r *http.Request) {
	var rule rules.Rule
	dec := json.NewDecoder(io.LimitReader(r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rule); err != nil {
		h.fail(w, r, errStatus(http.StatusBadRequest, "BadRule", "bad rule: %v", err))
		return
	}
	rule.ID = ""
	if err := rule.Validate(); err != nil {
		h.fail(w, r, errStatus(http.StatusBadRequest, "BadRule", "%v", err))
		return
	}
	if rule.Bucket != "" {
		if err := store.ValidBucketName(rule.Bucket); err != nil {
			h.fail(w, r, errStatus(http.StatusBadRequest, "BadRule", "rules: %v", err))
			return
		}
	}
	v, err := json.Marshal(rule)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	name, err := h.store.PutRecord(r.Context(), store.RecordRule, "", v, true)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	rule.ID = "r" + name
	h.log.Info("abuse rule added", "rule", rule.String())
	h.writeJSON(w, r, http.StatusCreated, rule)
}
