package node

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/cairn-fs/cairn/internal/frontend/s3"
	"github.com/cairn-fs/cairn/internal/store"
	"github.com/prometheus/client_golang/prometheus"
)

// nodeS3 is the node's S3 front end and its multipart collector.
type nodeS3 struct {
	h    *s3.Handler
	stop chan struct{}
	done chan struct{}
}

// uploadSweepEvery is how often a node collects expired multipart
// uploads (with jitter, so that nodes do not all sweep at once).
const uploadSweepEvery = time.Hour

// startS3 builds the S3 handler served on the public listener and starts
// the collector of expired multipart uploads.
func (n *Node) startS3(st store.Store, reg prometheus.Registerer) (*s3.Handler, error) {
	cfg := s3.DefaultConfig()
	cfg.Store = st
	cfg.Auth = n.access.auth
	cfg.Domain = n.cfg.S3Domain
	if n.cfg.S3Region != "" {
		cfg.Region = n.cfg.S3Region
	}
	if n.cfg.S3UploadExpiry > 0 {
		cfg.UploadExpiry = n.cfg.S3UploadExpiry
	}
	cfg.Logger = n.cfg.Logger
	cfg.Registry = reg
	h, err := s3.New(cfg)
	if err != nil {
		return nil, err
	}
	n.s3 = nodeS3{h: h, stop: make(chan struct{}), done: make(chan struct{})}
	go n.s3.sweep(n)
	return h, nil
}

func (s *nodeS3) sweep(n *Node) {
	defer close(s.done)
	for {
		d := uploadSweepEvery/2 + rand.N(uploadSweepEvery)
		select {
		case <-s.stop:
			return
		case <-time.After(d):
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		if k := s.h.CollectUploads(ctx); k > 0 {
			n.cfg.Logger.Info("expired multipart uploads collected", "count", k)
		}
		cancel()
	}
}

func (n *Node) stopS3() {
	if n.s3.stop == nil {
		return
	}
	close(n.s3.stop)
	<-n.s3.done
	n.s3.stop = nil
}
