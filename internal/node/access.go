package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/cairn-fs/cairn/internal/access"
	"github.com/cairn-fs/cairn/internal/access/rules"
	"github.com/cairn-fs/cairn/internal/frontend/webdav"
	"github.com/cairn-fs/cairn/internal/meta"
	"github.com/cairn-fs/cairn/internal/store"
	"github.com/prometheus/client_golang/prometheus"
)

// Access keys and abuse rules live in the log as records (store.Records);
// the node keeps internal/access's tables in step with them: a goroutine
// reloads them whenever an applied entry changed one (or a snapshot was
// installed), so a revoked key stops working on every node within the
// propagation bound.

const (
	keysPath  = "/_cairn/keys"
	rulesPath = "/_cairn/rules"
)

// accessLoader reloads the access tables from the store's records.
type accessLoader struct {
	auth   *access.Authorizer
	rules  *rules.Engine
	locks  *webdav.Locks // WebDAV locks, records of kind meta.RecordLock
	recs   store.Records
	log    *slog.Logger
	kick   chan struct{}
	stop   chan struct{}
	done   chan struct{}
	cancel func()
}

// startAccess makes the node's Authorizer, loads the keys, and starts
// following changes.
func (n *Node) startAccess(recs store.Records) (*accessLoader, error) {
	auth, err := access.New(access.Config{AdminKey: n.AdminKey})
	if err != nil {
		return nil, err
	}
	eng, err := rules.New(rules.DefaultConfig())
	if err != nil {
		return nil, err
	}
	locks := webdav.NewLocks(
		func(ctx context.Context, token string, v []byte) error {
			_, err := recs.PutRecord(ctx, meta.RecordLock, token, v, false)
			return err
		},
		func(ctx context.Context, token string) error {
			err := recs.DeleteRecord(ctx, meta.RecordLock, token)
			if errors.Is(err, store.ErrNotFound) {
				return webdav.ErrNoRecord
			}
			return err
		})
	l := &accessLoader{auth: auth, rules: eng, locks: locks, recs: recs, log: n.cfg.Logger,
		kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	l.cancel = recs.WatchRecords(func() {
		select {
		case l.kick <- struct{}{}:
		default:
		}
	})
	l.reload()
	go l.run()
	return l, nil
}

func (l *accessLoader) run() {
	defer close(l.done)
	for {
		select {
		case <-l.stop:
			return
		case <-l.kick:
			l.reload()
		}
	}
}

// reload reads every key record into the Authorizer and every rule into
// the rules engine. A record that does not decode is skipped with an
// error log (the others keep working).
func (l *accessLoader) reload() {
	l.reloadKeys()
	l.reloadRules()
	l.reloadLocks()
}

func (l *accessLoader) reloadLocks() {
	recs, err := l.recs.ListRecords(context.Background(), meta.RecordLock)
	if err != nil {
		l.log.Error("WebDAV locks not reloaded", "err", err)
		return
	}
	m := make(map[string][]byte, len(recs))
	for _, r := range recs {
		m[r.Name] = r.Value
	}
	l.locks.Load(m)
}

func (l *accessLoader) reloadRules() {
	recs, err := l.recs.ListRecords(context.Background(), meta.RecordRule)
	if err != nil {
		l.log.Error("abuse rules not reloaded", "err", err)
		return
	}
	list := make([]rules.Rule, 0, len(recs))
	for _, r := range recs {
		rule, err := decodeRule(r)
		if err != nil {
			l.log.Error("abuse rule record skipped", "id", r.Name, "err", err)
			continue
		}
		list = append(list, rule)
	}
	if err := l.rules.Load(list); err != nil {
		l.log.Error("abuse rules not reloaded", "err", err)
	}
}

// decodeRule decodes a rule record; its ID is "r" + the record's name.
func decodeRule(r meta.Record) (rules.Rule, error) {
	var rule rules.Rule
	if err := json.Unmarshal(r.Value, &rule); err != nil {
		return rule, err
	}
	rule.ID = "r" + r.Name
	return rule, rule.Validate()
}

func (l *accessLoader) reloadKeys() {
	recs, err := l.recs.ListRecords(context.Background(), meta.RecordKey)
	if err != nil {
		l.log.Error("access keys not reloaded", "err", err)
		return
	}
	keys := make([]access.Key, 0, len(recs))
	for _, r := range recs {
		k, err := access.DecodeKey(r.Value)
		if err != nil {
			l.log.Error("access key record skipped", "id", r.Name, "err", err)
			continue
		}
		keys = append(keys, k)
	}
	l.auth.SetKeys(keys)
}

func (l *accessLoader) close() {
	if l == nil {
		return
	}
	l.cancel()
	close(l.stop)
	<-l.done
}

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
func (h *adminHandler) serveKeys(w http.ResponseWriter, r *http.Request) {
	recs := h.n.store
	id := strings.TrimPrefix(strings.TrimPrefix(r.URL.Path, keysPath), "/")
	ctx := r.Context()
	switch {
	case id == "" && (r.Method == http.MethodGet || r.Method == http.MethodHead):
		list, err := recs.ListRecords(ctx, meta.RecordKey)
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
		if err := recs.DeleteRecord(ctx, meta.RecordKey, id); err != nil {
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

func (h *adminHandler) key(ctx context.Context, id string) (access.Key, error) {
	list, err := h.n.store.ListRecords(ctx, meta.RecordKey)
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

func (h *adminHandler) createKey(w http.ResponseWriter, r *http.Request) {
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
	if _, err := h.n.store.PutRecord(r.Context(), meta.RecordKey, k.ID, v, true); err != nil {
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
			if err := meta.ValidBucketName(g.Bucket); err != nil {
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
func (h *adminHandler) serveRules(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	id := strings.TrimPrefix(strings.TrimPrefix(r.URL.Path, rulesPath), "/")
	switch {
	case id == "" && (r.Method == http.MethodGet || r.Method == http.MethodHead):
		recs, err := h.n.store.ListRecords(ctx, meta.RecordRule)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		out := []rules.Rule{}
		for _, rec := range recs {
			if rule, err := decodeRule(rec); err == nil {
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
			if err := meta.ValidBucketName(rule.Bucket); err != nil {
				h.fail(w, r, errStatus(http.StatusBadRequest, "BadRule", "rules: %v", err))
				return
			}
		}
		v, err := json.Marshal(rule)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		name, err := h.n.store.PutRecord(ctx, meta.RecordRule, "", v, true)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		rule.ID = "r" + name
		h.log.Info("abuse rule added", "rule", rule.String())
		h.writeJSON(w, r, http.StatusCreated, rule)
	case id == "":
		h.notAllowed(w, r, "GET, HEAD, POST")
	case r.Method == http.MethodDelete:
		name := strings.TrimPrefix(id, "r")
		if err := h.n.store.DeleteRecord(ctx, meta.RecordRule, name); err != nil {
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

// The loader is a Prometheus collector of the access metrics: failed
// authentications by reason and decisions per abuse rule.
var (
	authFailuresDesc = prometheus.NewDesc("cairn_auth_failures_total",
		"Requests refused for their credentials, by reason (scheme, bad_key, expired, anonymous, denied).", []string{"reason"}, nil)
	ruleHitsDesc = prometheus.NewDesc("cairn_rule_hits_total",
		"Requests an abuse rule answered (denied, responded to or throttled), by rule.", []string{"rule"}, nil)
)

// Describe implements prometheus.Collector.
func (l *accessLoader) Describe(ch chan<- *prometheus.Desc) {
	ch <- authFailuresDesc
	ch <- ruleHitsDesc
}

// Collect implements prometheus.Collector.
func (l *accessLoader) Collect(ch chan<- prometheus.Metric) {
	for i, n := range l.auth.Failures() {
		ch <- prometheus.MustNewConstMetric(authFailuresDesc, prometheus.CounterValue, float64(n), access.FailureReasons[i])
	}
	for _, h := range l.rules.Hits() {
		ch <- prometheus.MustNewConstMetric(ruleHitsDesc, prometheus.CounterValue, float64(h.Hits), h.ID)
	}
}
