package node

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cairn-fs/cairn/internal/access"
	"github.com/cairn-fs/cairn/internal/access/rules"
	"github.com/cairn-fs/cairn/internal/blob"
	"github.com/cairn-fs/cairn/internal/consensus"
	"github.com/cairn-fs/cairn/internal/core"
	"github.com/cairn-fs/cairn/internal/frontend/admin"
	"github.com/cairn-fs/cairn/internal/frontend/fuse"
	"github.com/cairn-fs/cairn/internal/frontend/httpapi"
	"github.com/cairn-fs/cairn/internal/frontend/webdav"
	"github.com/cairn-fs/cairn/internal/kv"
	"github.com/cairn-fs/cairn/internal/replica"
	"github.com/cairn-fs/cairn/internal/store"
	"github.com/cairn-fs/cairn/internal/vfs"
)

// Config is every setting of a node. cmd/cairn fills it from flags,
// environment variables and a TOML file.
type Config struct {
	DataDir           string        // data directory; required
	Listen            string        // HTTP listen address; default 127.0.0.1:8080
	Advertise         string        // public URL recorded in the cluster map; "" = from Listen (advertise.go)
	AdminKey          string        // admin key; "" reads or creates DataDir/admin.key
	AccessLog         string        // access log file, its directory created (0755) if missing; "" = none, "-" = stdout
	GCGrace           time.Duration // unreferenced blobs are kept this long; default 15m
	GCInterval        time.Duration // GC and compaction period; default 1m
	MaxVolumeSize     int64         // bytes per volume file; default 1 GiB
	CompactRatio      float64       // garbage fraction past which a sealed volume is a compaction candidate; default 0.5
	CompactAge        time.Duration // a candidate just past CompactRatio is compacted this long after it was sealed, one with more garbage sooner, one with nothing live at once (blob.Compact); default 1h, negative = no wait
	MinFreeBytes      int64         // writes answer 507 below this much free disk; default 64 MiB
	KVCacheBytes      int64         // Pebble block cache; default 64 MiB
	PathCacheEntries  int           // resolved-path cache entries; default 65536
	ReadHeaderTimeout time.Duration // default 10s
	ReadTimeout       time.Duration // max time without body progress on uploads; default 30s
	WriteTimeout      time.Duration // max time without progress on downloads; default 30s
	IdleTimeout       time.Duration // keep-alive idle timeout; default 120s
	MaxHeaderBytes    int           // default 64 KiB; larger headers get 431
	DebugListen       string        // if set, net/http/pprof on this (loopback) address
	ClusterSecret     string        // cluster mode when set: shared by all nodes, ≥ 16 bytes
	Join              string        // public URL of a member to join; "" starts a new cluster
	Zone              string        // failure domain of this node
	Voters            int           // voters the cluster keeps (3 or 5); default 3
	RepairInterval    time.Duration // period of blob repair passes; default 1 min
	RepairGrace       time.Duration // a dead node's copies are re-made elsewhere only after this long; default 10 min
	RepairRate        int64         // bytes/s that repair and rebalance move from or to this node; 0 = unlimited; default 8 MiB/s (bench/BENCHMARKS.md, "Reads during a rebalance")
	GossipListen      string        // failure detector HOST:PORT; "" = the host of ClusterListen (else Listen), port + 100 (liveness.go)
	ClusterListen     string        // node-to-node RPC HOST:PORT; "" = RPC shares Listen under /_cairn/rpc/ (clusterlisten.go)
	Witness           bool          // cluster mode: a Raft voter that stores no blobs (witness.go)
	Client            bool          // cluster mode: a Raft learner that stores no blobs and serves (client.go)
	CacheSize         int64         // client node: bound of its disk cache of blobs read from the data nodes (DATA/cache); default 1 GiB
	DisableFastPath   bool          // serve every request through net/http (no GET fast path)
	DisableMmap       bool          // read blobs with pread instead of memory maps
	RemoteCacheBytes  int64         // cluster mode: in-memory cache of blobs read from other nodes; 0 = off; default 64 MiB
	Mounts            []string      // POSIX mounts, each BUCKET[/PREFIX]:DIR (mount.go)
	MountHandles      bool          // mounts answer OPEN with a handle per open file instead of the kernel's no-open mode (fuse.Config.NoOpen)
	LockLease         time.Duration // file locks of a node that stops renewing are released after this long; default 5s (store.DefaultLockLease)
	ScrubRate         int64         // bytes/s the blob scrub reads at; 0 = live bytes / ScrubPeriod, at least 1 MiB/s
	ScrubPeriod       time.Duration // a scrub pass starts this often; default 336h (2 weeks); negative = only on request
	S3Domain          string        // virtual-hosted S3: BUCKET.S3Domain addresses BUCKET; "" = path style only (s3.go)
	S3Region          string        // the region S3 answers; default us-east-1
	S3UploadExpiry    time.Duration // unfinished multipart uploads are collected after this long; default 168h (7 days)
	TrustedProxies    []string      // CIDRs whose X-Forwarded-For is believed for the client IP (abuse rules)
	WebDAVListen      string        // also serve WebDAV at /BUCKET/ on this HOST:PORT; "" = only /_dav/ on Listen
	ClusterTLSOff     bool          // --cluster-tls=off: node-to-node RPC in clear, HMAC only (clustertls.go)
	TLSCert, TLSKey   string        // PEM files: the public listener serves HTTPS (HTTP/2 by ALPN); reloaded by ReloadTLS (SIGHUP) (tls.go)
	Logger            *slog.Logger
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{Listen: "127.0.0.1:8080", GCGrace: 15 * time.Minute, GCInterval: time.Minute,
		MaxVolumeSize: 1 << 30, CompactRatio: 0.5, CompactAge: time.Hour, MinFreeBytes: 64 << 20, KVCacheBytes: 64 << 20,
		RemoteCacheBytes: 64 << 20, CacheSize: 1 << 30, ScrubPeriod: blob.DefaultScrubPeriod, RepairGrace: 10 * time.Minute, RepairRate: 8 << 20,
		PathCacheEntries: 65536, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 30 * time.Second, IdleTimeout: 120 * time.Second, MaxHeaderBytes: 64 << 10,
		S3Region: "us-east-1", S3UploadExpiry: 7 * 24 * time.Hour}
}

// Node is a running node.
type Node struct {
	cfg      Config
	AdminKey string
	URL      string
	// LocalURL reaches the public listener from this machine: its address,
	// or 127.0.0.1 for a wildcard one (advertise.go). It is the URL to
	// show an operator; URL is the one recorded for peers and clients.
	LocalURL string
	// ClusterURL is the base URL peers use for node-to-node RPC: the
	// --cluster-listen address, or URL without one.
	ClusterURL string
	blobs      *blob.Store
	scrub      nodeScrub // scrub.go
	kv         kv.Store
	log        consensus.Log
	cl         *clusterNode
	core       *core.Core
	capacity   capacityCache
	store      *store.Local
	api        *httpapi.Server
	debug      *http.Server
	ln         net.Listener
	cln        net.Listener // --cluster-listen, or nil
	chs        *http.Server // serves cln
	pts        *http.Server // node-to-node TLS on the public port in clear, or nil (clustertls.go)
	alog       io.WriteCloser
	served     chan error
	fatal      chan error    // a reason to stop the node on its own (removed from the cluster)
	mounts     []*fuse.Mount // mount.go
	mountsMu   sync.Mutex    // guards mounts (read by the metrics and /_cairn/mounts)
	access     *accessLoader // access.go
	s3         nodeS3        // s3.go
	dav        *http.Server  // --webdav-listen, or nil
	tls        *certReloader // --tls-cert/--tls-key, or nil (tls.go)

	// The admin front end (admin.go) and the ring of recent warnings and
	// errors the node's logger writes through, which it shows.
	admin *admin.Handler
	logs  *admin.LogRing
}

// LoadOrCreateAdminKey returns the key in dir/admin.key, creating it (mode
// 0600) when absent. created reports a new key.
func LoadOrCreateAdminKey(dir string) (key string, created bool, err error) {
	p := filepath.Join(dir, "admin.key")
	b, err := os.ReadFile(p)
	if err == nil {
		k := strings.TrimSpace(string(b))
		if k == "" {
			return "", false, fmt.Errorf("%s is empty", p)
		}
		return k, false, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return "", false, err
	}
	var r [24]byte
	if _, err := rand.Read(r[:]); err != nil {
		return "", false, err
	}
	k := hex.EncodeToString(r[:])
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", false, err
	}
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, []byte(k+"\n"), 0o600); err != nil {
		return "", false, err
	}
	if err := os.Rename(tmp, p); err != nil {
		return "", false, err
	}
	return k, true, nil
}

// Start opens the node's stores and starts serving. It returns once the
// listener is bound.
func Start(cfg Config) (_ *Node, err error) {
	d := DefaultConfig()
	if cfg.DataDir == "" {
		return nil, errors.New("node: a data directory is required (--data)")
	}
	if cfg.Listen == "" {
		cfg.Listen = d.Listen
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	if err := checkNotRemoved(cfg.DataDir); err != nil { // removed.go
		return nil, err
	}
	n := &Node{cfg: cfg, served: make(chan error, 1), fatal: make(chan error, 1)}
	n.logs = admin.NewLogRing(cfg.Logger.Handler(), admin.DefaultLogRecords) // recent warnings for /_cairn/logs
	cfg.Logger = slog.New(n.logs)
	n.cfg.Logger = cfg.Logger
	defer func() {
		if err != nil {
			if n.ln != nil {
				n.ln.Close()
			}
			if n.cln != nil {
				n.cln.Close()
			}
			n.stopS3()
			n.access.close()
			n.closeStores()
		}
	}()
	n.AdminKey = cfg.AdminKey
	if n.AdminKey == "" {
		k, created, err := LoadOrCreateAdminKey(cfg.DataDir)
		if err != nil {
			return nil, fmt.Errorf("admin key: %w", err)
		}
		if created {
			cfg.Logger.Info("generated admin key", "file", filepath.Join(cfg.DataDir, "admin.key"))
		}
		n.AdminKey = k
		if len(k) < access.MinKeyLen {
			return nil, fmt.Errorf("admin key in %s is %d bytes long: it must be at least %d", filepath.Join(cfg.DataDir, "admin.key"), len(k), access.MinKeyLen)
		}
	}

	reg := prometheus.NewRegistry()
	metrics, err := httpapi.NewMetrics(reg)
	if err != nil {
		return nil, err
	}
	if err := checkWitness(cfg); err != nil { // witness.go
		return nil, err
	}
	if err := checkClient(cfg); err != nil { // client.go
		return nil, err
	}
	n.ln, err = net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	// host stands in for a wildcard listen host (advertise.go).
	var host string
	switch {
	case cfg.Advertise != "":
		if n.URL, err = parseAdvertise(cfg.Advertise); err != nil {
			return nil, err
		}
		host = hostOf(n.URL)
	case !isWildcard(n.ln.Addr()):
		host, _, _ = net.SplitHostPort(n.ln.Addr().String())
	default:
		addrs, _ := net.InterfaceAddrs()
		host = defaultHost(addrs)
	}
	if n.URL == "" {
		n.URL = advertisedURL(n.ln.Addr(), host)
		if isWildcard(n.ln.Addr()) && cfg.ClusterSecret != "" {
			cfg.Logger.Warn("listening on every interface: advertising this node at an address picked from its interfaces; set --advertise if peers or clients reach it elsewhere", "url", n.URL)
		}
	}
	n.LocalURL = localURL(n.ln.Addr())
	if cfg.TLSCert != "" || cfg.TLSKey != "" {
		if n.tls, err = newCertReloader(cfg.TLSCert, cfg.TLSKey); err != nil {
			return nil, err
		}
		if cfg.ClusterSecret != "" && cfg.ClusterListen == "" && cfg.ClusterTLSOff {
			return nil, errors.New("node: --tls-cert with --cluster-tls=off needs --cluster-listen: node-to-node traffic in clear cannot share the HTTPS port (docs/operations.md, \"HTTPS\")")
		}
		n.URL = "https://" + strings.TrimPrefix(strings.TrimPrefix(n.URL, "http://"), "https://")
		n.LocalURL = "https://" + strings.TrimPrefix(n.LocalURL, "http://")
	} else if strings.HasPrefix(n.URL, "https://") {
		return nil, errors.New("node: --advertise https://... needs --tls-cert and --tls-key")
	}
	n.ClusterURL = n.URL
	if cfg.ClusterListen != "" {
		if cfg.ClusterSecret == "" {
			return nil, errors.New("node: --cluster-listen needs cluster mode (a cluster secret)")
		}
		n.cln, err = net.Listen("tcp", cfg.ClusterListen)
		if err != nil {
			return nil, fmt.Errorf("cluster listen on %s: %w", cfg.ClusterListen, err)
		}
		n.ClusterURL = advertisedURL(n.cln.Addr(), host)
	}
	bcfg := blob.Config{Dir: filepath.Join(cfg.DataDir, "blobs"), FS: vfs.OS(),
		MaxVolumeSize: cfg.MaxVolumeSize, CompactGarbageRatio: cfg.CompactRatio, CompactAge: cfg.CompactAge,
		MinFreeBytes: cfg.MinFreeBytes, OnFsync: metrics.ObserveFsync,
		DisableMmap: cfg.DisableMmap, OnCorrupt: n.scrub.corrupt, ScrubRate: cfg.ScrubRate, ScrubPeriod: cfg.ScrubPeriod}
	switch {
	case cfg.Witness:
		witnessBlobConfig(&bcfg) // no blob is ever stored here
	case cfg.Client:
		bcfg.Dir = filepath.Join(cfg.DataDir, "cache") // client.go: its blob store is its cache
	}
	ccfg := core.Config{FS: bcfg.FS, BlobDir: bcfg.Dir, Blob: bcfg,
		KVDir: filepath.Join(cfg.DataDir, "meta"), KV: kv.PebbleConfig{CacheSize: cfg.KVCacheBytes},
		TempDir: filepath.Join(cfg.DataDir, "tmp"),
		Logger:  cfg.Logger,
		Store: store.Config{GCGrace: cfg.GCGrace, GCInterval: cfg.GCInterval, PathCacheEntries: cfg.PathCacheEntries,
			LockLease: cfg.LockLease}}
	if cfg.ClusterSecret != "" {
		if n.cl, err = newClusterNode(n, cfg); err != nil {
			return nil, err
		}
		ccfg.Cluster = n.cl.coreConfig()
		if cfg.Client { // client.go: the blobs it reads are kept on its disk
			ccfg.Cluster.Replica.DiskCache = replica.NewDiskCache(cfg.CacheSize)
		}
	}
	if n.core, err = core.New(ccfg); err != nil {
		if n.cl != nil {
			n.cl.close()
			n.cl = nil
		}
		return nil, err
	}
	if err := checkLogVersion(n.core.Reader); err != nil { // upgrade.go
		n.core.Close()
		if n.cl != nil {
			n.cl.close()
		}
		return nil, err
	}
	n.blobs, n.kv, n.log, n.store = n.core.Blobs, n.core.KV, n.core.Log, n.core.Store
	reg.MustRegister(scrubCollector{n.blobs}) // scrub.go
	reg.MustRegister(mountCollector{n})       // mountstats.go
	reg.MustRegister(ownerCollector{n.store}) // directory ownership (mountstats.go)
	reg.MustRegister(lockCollector{n.store})  // file locks (mountstats.go)
	reg.MustRegister(trashCollector{n.store}) // each bucket's trash (trash.go)
	st := n.store
	if n.cl != nil {
		if err := n.cl.attach(n.core); err != nil {
			return nil, err
		}
		reg.MustRegister(n.cl.rep.Collector()) // remote-blob cache, write batching and outcomes
		reg.MustRegister(n.cl.mets)            // Raft, under-replicated blobs, repair (metrics.go)
		n.scrub.repair.Store(n.cl.repair)      // a corrupt copy asks for a repair pass
		if n.cl.removedLocally() {
			return nil, n.cl.markRemoved("as this node's Raft configuration shows")
		}
	}

	switch cfg.AccessLog {
	case "":
	case "-":
		n.alog = nopCloser{os.Stdout}
	default:
		// A fresh machine has no /var/log/cairn: make it, as for --data.
		if err := os.MkdirAll(filepath.Dir(cfg.AccessLog), 0o755); err != nil {
			return nil, fmt.Errorf("--access-log %s: create its directory: %w", cfg.AccessLog, err)
		}
		f, err := os.OpenFile(cfg.AccessLog, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, fmt.Errorf("--access-log %s: %w", cfg.AccessLog, err)
		}
		n.alog = f
	}
	if n.access, err = n.startAccess(st); err != nil {
		return nil, err
	}
	s3h, err := n.startS3(st, reg)
	if err != nil {
		return nil, err
	}
	dav, err := webdav.New(webdav.Config{Store: st, Auth: n.access.auth, Locks: n.access.locks, Logger: cfg.Logger})
	if err != nil {
		return nil, err
	}
	acfg := httpapi.DefaultConfig()
	acfg.Auth = n.access.auth
	if n.tls != nil {
		acfg.TLS = n.tls.config(n.clusterTLSConfig())
	}
	acfg.S3 = s3h
	acfg.DAV = dav
	acfg.Rules = n.access.rules
	if acfg.TrustedProxies, err = rules.ParsePrefixes(cfg.TrustedProxies); err != nil {
		return nil, fmt.Errorf("--trusted-proxy: %w", err)
	}
	if err := reg.Register(n.access); err != nil {
		return nil, err
	}
	acfg.Metrics = metrics
	acfg.Store = st
	acfg.AdminKey = n.AdminKey
	acfg.Logger = cfg.Logger
	if n.alog != nil {
		acfg.AccessLog = n.alog
	}
	acfg.Registry = reg
	setIf(&acfg.ReadHeaderTimeout, cfg.ReadHeaderTimeout)
	setIf(&acfg.ReadTimeout, cfg.ReadTimeout)
	setIf(&acfg.WriteTimeout, cfg.WriteTimeout)
	setIf(&acfg.IdleTimeout, cfg.IdleTimeout)
	if cfg.MaxHeaderBytes > 0 {
		acfg.MaxHeaderBytes = cfg.MaxHeaderBytes
	}
	acfg.DisableFastPath = cfg.DisableFastPath
	acfg.StatsFunc = n.stats
	if n.cl != nil {
		acfg.ExtraHandlers = n.rpcHandlers() // all RPC, or only join with --cluster-listen (clusterlisten.go)
	}
	// The admin API and page (admin.go).
	if acfg.ExtraHandlers, err = n.startAdmin(acfg.ExtraHandlers, st, n.access.auth, metrics); err != nil {
		return nil, err
	}
	acfg.HealthFunc = n.health
	acfg.HealthInfo = n.healthInfo // upgrade.go
	n.api, err = httpapi.New(acfg)
	if err != nil {
		return nil, err
	}
	if cfg.WebDAVListen != "" {
		root, err := webdav.New(webdav.Config{Store: st, Auth: n.access.auth, Locks: n.access.locks, Logger: cfg.Logger, Prefix: "/"})
		if err != nil {
			return nil, err
		}
		dln, err := net.Listen("tcp", cfg.WebDAVListen)
		if err != nil {
			return nil, fmt.Errorf("--webdav-listen %s: %w", cfg.WebDAVListen, err)
		}
		n.dav = &http.Server{Handler: root, ReadHeaderTimeout: acfg.ReadHeaderTimeout, IdleTimeout: acfg.IdleTimeout}
		go n.dav.Serve(dln)
	}
	pub := n.publicListener(acfg.ReadHeaderTimeout, acfg.IdleTimeout) // clustertls.go
	go func() { n.served <- n.api.Serve(pub) }()
	n.serveCluster(acfg.IdleTimeout)
	if n.cl != nil {
		n.cl.start()
	}
	if err := n.startMounts(); err != nil {
		n.closeMounts()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		n.api.Shutdown(ctx)
		cancel()
		return nil, err
	}
	if cfg.DebugListen != "" {
		dln, err := net.Listen("tcp", cfg.DebugListen)
		if err != nil {
			return nil, fmt.Errorf("debug listen on %s: %w", cfg.DebugListen, err)
		}
		mux := http.NewServeMux()
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		n.debug = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go n.debug.Serve(dln)
		cfg.Logger.Info("pprof serving", "addr", dln.Addr().String())
	}
	cfg.Logger.Info("cairn node serving", "url", n.URL, "cluster_url", n.ClusterURL, "data", cfg.DataDir)
	return n, nil
}

func setIf(dst *time.Duration, v time.Duration) {
	if v > 0 {
		*dst = v
	}
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

// Store returns the node's store.
func (n *Node) Store() *store.Local { return n.store }

// Blobs returns the node's blob store.
func (n *Node) Blobs() *blob.Store { return n.blobs }

func (n *Node) stats() httpapi.NodeStats {
	bs := n.blobs.Stats()
	ns := httpapi.NodeStats{Blobs: bs.Blobs, Volumes: int64(bs.Volumes),
		LiveBytes: bs.LiveBytes, Fsyncs: uint64(bs.Fsyncs), IndexBytes: bs.IndexBytes}
	if free, total, err := vfs.OS().Statfs(n.cfg.DataDir); err == nil {
		ns.DiskFreeBytes = free
		ns.DiskUsedBytes = total - free
	}
	return ns
}

func (n *Node) health() error {
	if n.blobs.Stats().ReadOnly {
		return errors.New("blob store is read-only after a disk error")
	}
	if n.cl != nil {
		if st := n.cl.raft.Status(); st.Err != nil {
			return fmt.Errorf("the log stopped at applied index %d: %w", st.Applied, st.Err)
		}
	}
	return n.corruptHealth() // scrub.go
}

// Wait blocks until the HTTP server stops, or until the node finds a
// reason to stop on its own (it was removed from the cluster: the error
// wraps ErrRemoved); the caller then calls Close.
func (n *Node) Wait() error {
	select {
	case err := <-n.served:
		return err
	case err := <-n.fatal:
		return err
	}
}

// stopWith makes Wait return err (the first reason wins).
func (n *Node) stopWith(err error) {
	select {
	case n.fatal <- err:
	default:
	}
}

// Close stops serving (draining requests for up to 10 s) and closes the stores.
func (n *Node) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	errs := []error{n.closeMounts()}
	if n.debug != nil {
		n.debug.Close()
	}
	if n.dav != nil {
		errs = append(errs, n.dav.Shutdown(ctx))
	}
	if n.pts != nil { // before n.api: they share the split listener (sniff.go)
		errs = append(errs, n.pts.Shutdown(ctx))
	}
	if n.api != nil {
		errs = append(errs, n.api.Shutdown(ctx))
	}
	if n.chs != nil {
		errs = append(errs, n.chs.Shutdown(ctx))
	}
	n.stopS3()
	n.access.close()
	errs = append(errs, n.closeStores())
	return errors.Join(errs...)
}

func (n *Node) closeStores() error {
	n.admin.Close()
	var errs []error
	if n.cl != nil {
		errs = append(errs, n.cl.close())
	}
	if n.core != nil {
		errs = append(errs, n.core.Close())
	}
	if n.alog != nil {
		errs = append(errs, n.alog.Close())
	}
	return errors.Join(errs...)
}
