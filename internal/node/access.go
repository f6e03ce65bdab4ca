package node

import (
	"context"
	"errors"
	"log/slog"

	"github.com/cairn-fs/cairn/internal/access"
	"github.com/cairn-fs/cairn/internal/access/rules"
	"github.com/cairn-fs/cairn/internal/frontend/webdav"
	"github.com/cairn-fs/cairn/internal/store"
	"github.com/prometheus/client_golang/prometheus"
)

// Access keys and abuse rules live in the log as records (store.Records);
// the node keeps internal/access's tables in step with them: a goroutine
// reloads them whenever an applied entry changed one (or a snapshot was
// installed), so a revoked key stops working on every node within the
// propagation bound. The admin API that changes them is the admin front
// end's (internal/frontend/admin, keys.go).

// accessLoader reloads the access tables from the store's records.
type accessLoader struct {
	auth   *access.Authorizer
	rules  *rules.Engine
	locks  *webdav.Locks // WebDAV locks, records of kind store.RecordLock
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
			_, err := recs.PutRecord(ctx, store.RecordLock, token, v, false)
			return err
		},
		func(ctx context.Context, token string) error {
			err := recs.DeleteRecord(ctx, store.RecordLock, token)
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
	gen := l.locks.Generation() // before the list: Load keeps what changed here since
	recs, err := l.recs.ListRecords(context.Background(), store.RecordLock)
	if err != nil {
		l.log.Error("WebDAV locks not reloaded", "err", err)
		return
	}
	m := make(map[string][]byte, len(recs))
	for _, r := range recs {
		m[r.Name] = r.Value
	}
	l.locks.Load(m, gen)
}

func (l *accessLoader) reloadRules() {
	recs, err := l.recs.ListRecords(context.Background(), store.RecordRule)
	if err != nil {
		l.log.Error("abuse rules not reloaded", "err", err)
		return
	}
	list := make([]rules.Rule, 0, len(recs))
	for _, r := range recs {
		rule, err := rules.DecodeRecord(r.Name, r.Value)
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

func (l *accessLoader) reloadKeys() {
	recs, err := l.recs.ListRecords(context.Background(), store.RecordKey)
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
