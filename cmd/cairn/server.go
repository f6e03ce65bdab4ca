package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/cairn-fs/cairn/internal/access"
	"github.com/cairn-fs/cairn/internal/node"
	"github.com/cairn-fs/cairn/internal/sdnotify"
	"github.com/cairn-fs/cairn/internal/store"
)

// serverOptions is what the server's settings fill: the node's Config
// plus the settings of the process itself.
type serverOptions struct {
	node.Config
	LogLevel   string
	SecretFile string
	ClusterTLS string // on, off
	Role       string // data, client
}

// setting binds one server setting to a flag, an environment variable and
// a TOML key (the flag name). Precedence: flag, then environment, then the
// --config file, then the default.
type setting struct {
	name  string
	env   string
	usage string
	bind  func(fs *pflag.FlagSet, c *serverOptions)
}

func serverSettings() []setting {
	d := node.DefaultConfig()
	s := func(name, env, usage string, bind func(fs *pflag.FlagSet, c *serverOptions)) setting {
		return setting{name, env, usage, bind}
	}
	return []setting{
		s("data", "CAIRN_DATA", "data directory (volumes, namespace, admin.key)", func(fs *pflag.FlagSet, c *serverOptions) {
			fs.StringVar(&c.DataDir, "data", "", "")
		}),
		s("listen", "CAIRN_LISTEN", "HTTP listen address HOST:PORT", func(fs *pflag.FlagSet, c *serverOptions) {
			fs.StringVar(&c.Listen, "listen", d.Listen, "")
		}),
		s("access-log", "CAIRN_ACCESS_LOG", "access log file in the combined format, its directory created (mode 0755) if missing (\"-\" = stdout, empty = off)", func(fs *pflag.FlagSet, c *serverOptions) {
			fs.StringVar(&c.AccessLog, "access-log", "", "")
		}),
		s("gc-grace", "CAIRN_GC_GRACE", "how long an unreferenced blob is kept before deletion", func(fs *pflag.FlagSet, c *serverOptions) {
			fs.DurationVar(&c.GCGrace, "gc-grace", d.GCGrace, "")
		}),
		s("gc-interval", "CAIRN_GC_INTERVAL", "period of garbage collection and compaction", func(fs *pflag.FlagSet, c *serverOptions) {
			fs.DurationVar(&c.GCInterval, "gc-interval", d.GCInterval, "")
		}),
		s("max-volume-size", "CAIRN_MAX_VOLUME_SIZE", "bytes per volume file before a new one starts", func(fs *pflag.FlagSet, c *serverOptions) {
			fs.Int64Var(&c.MaxVolumeSize, "max-volume-size", d.MaxVolumeSize, "")
		}),
		s("compact-ratio", "CAIRN_COMPACT_RATIO", "garbage fraction past which a sealed volume is compacted (at the latest --compact-age after it was sealed)", func(fs *pflag.FlagSet, c *serverOptions) {
			fs.Float64Var(&c.CompactRatio, "compact-ratio", d.CompactRatio, "")
		}),
		s("compact-age", "CAIRN_COMPACT_AGE", "how long a volume just past --compact-ratio waits for its live files to die before it is compacted; more garbage waits less, none live not at all (negative: no wait)", func(fs *pflag.FlagSet, c *serverOptions) {
			fs.DurationVar(&c.CompactAge, "compact-age", d.CompactAge, "")
		}),
		s("min-free-bytes", "CAIRN_MIN_FREE_BYTES", "writes answer 507 when the disk has less free space than this", func(fs *pflag.FlagSet, c *serverOptions) {
			fs.Int64Var(&c.MinFreeBytes, "min-free-bytes", d.MinFreeBytes, "")
		}),
		s("kv-cache-bytes", "CAIRN_KV_CACHE_BYTES", "namespace (Pebble) block cache size in bytes", func(fs *pflag.FlagSet, c *serverOptions) {
			fs.Int64Var(&c.KVCacheBytes, "kv-cache-bytes", d.KVCacheBytes, "")
		}),
		s("remote-cache-bytes", "CAIRN_REMOTE_CACHE_BYTES", "cluster mode: memory for a cache of blobs this node reads from other nodes (0 = off)", func(fs *pflag.FlagSet, c *serverOptions) {
			fs.Int64Var(&c.RemoteCacheBytes, "remote-cache-bytes", d.RemoteCacheBytes, "")
		}),
		s("scrub-rate", "CAIRN_SCRUB_RATE", "bytes per second the background scrub re-reads and checks blob copies at (0 = the live bytes spread over --scrub-period, at least 1 MiB/s)", func(fs *pflag.FlagSet, c *serverOptions) {
			fs.Int64Var(&c.ScrubRate, "scrub-rate", d.ScrubRate, "")
		}),
		s("scrub-period", "CAIRN_SCRUB_PERIOD", "a scrub pass over every blob copy starts this often (negative, e.g. -1s: only on request, cairn scrub)", func(fs *pflag.FlagSet, c *serverOptions) {
			fs.DurationVar(&c.ScrubPeriod, "scrub-period", d.ScrubPeriod, "")
		}),
		s("path-cache-entries", "CAIRN_PATH_CACHE_ENTRIES", "resolved paths kept in memory", func(fs *pflag.FlagSet, c *serverOptions) {
			fs.IntVar(&c.PathCacheEntries, "path-cache-entries", d.PathCacheEntries, "")
		}),
		s("read-header-timeout", "CAIRN_READ_HEADER_TIMEOUT", "time allowed to read request headers", func(fs *pflag.FlagSet, c *serverOptions) {
			fs.DurationVar(&c.ReadHeaderTimeout, "read-header-timeout", d.ReadHeaderTimeout, "")
		}),
		s("read-timeout", "CAIRN_READ_TIMEOUT", "an upload making no progress for this long is cut off", func(fs *pflag.FlagSet, c *serverOptions) {
			fs.DurationVar(&c.ReadTimeout, "read-timeout", d.ReadTimeout, "")
		}),
		s("write-timeout", "CAIRN_WRITE_TIMEOUT", "a download making no progress for this long is cut off", func(fs *pflag.FlagSet, c *serverOptions) {
			fs.DurationVar(&c.WriteTimeout, "write-timeout", d.WriteTimeout, "")
		}),
		s("idle-timeout", "CAIRN_IDLE_TIMEOUT", "keep-alive connections idle for this long are closed", func(fs *pflag.FlagSet, c *serverOptions) {
			fs.DurationVar(&c.IdleTimeout, "idle-timeout", d.IdleTimeout, "")
		}),
		s("debug-listen", "CAIRN_DEBUG_LISTEN", "serve Go's pprof profiles on this address (keep it on loopback; empty = off)", func(fs *pflag.FlagSet, c *serverOptions) {
			fs.StringVar(&c.DebugListen, "debug-listen", "", "")
		}),
		s("disable-fast-path", "CAIRN_DISABLE_FAST_PATH", "serve GET/HEAD through net/http too, not the lean fast path (for debugging)", func(fs *pflag.FlagSet, c *serverOptions) {
			fs.BoolVar(&c.DisableFastPath, "disable-fast-path", false, "")
		}),
		s("disable-mmap", "CAIRN_DISABLE_MMAP", "read blobs with pread(2) instead of read-only memory maps of the volume files", func(fs *pflag.FlagSet, c *serverOptions) {
			fs.BoolVar(&c.DisableMmap, "disable-mmap", false, "")
		}),
		s("join", "CAIRN_JOIN", "public URL (http://HOST:PORT) of a cluster member to join; without it, a node with an empty data dir starts a new cluster (cluster mode needs a secret)", func(fs *pflag.FlagSet, c *serverOptions) {
			fs.StringVar(&c.Join, "join", "", "")
		}),
		s("secret-file", "CAIRN_SECRET_FILE", "file holding the cluster secret shared by all nodes (or set CAIRN_CLUSTER_SECRET); setting one turns on cluster mode", func(fs *pflag.FlagSet, c *serverOptions) {
			fs.StringVar(&c.SecretFile, "secret-file", "", "")
		}),
		s("advertise", "CAIRN_ADVERTISE", "public URL (http://HOST:PORT) peers and clients reach this node at, recorded in the cluster map; default: from --listen (a wildcard host such as 0.0.0.0 advertises this machine's first private address)", func(fs *pflag.FlagSet, c *serverOptions) {
			fs.StringVar(&c.Advertise, "advertise", "", "")
		}),
		s("cluster-listen", "CAIRN_CLUSTER_LISTEN", "node-to-node RPC address HOST:PORT, cluster mode only; peers reach this node there and the public listener then serves only joins under /_cairn/rpc/ (default: RPC shares --listen)", func(fs *pflag.FlagSet, c *serverOptions) {
			fs.StringVar(&c.ClusterListen, "cluster-listen", "", "")
		}),
		s("cluster-tls", "CAIRN_CLUSTER_TLS", "node-to-node TLS: on (default: encrypted and mutually authenticated with certificates of a cluster CA derived from the secret, nothing to make by hand) or off (in clear, HMAC only: trusted private links only); every node of a cluster needs the same", func(fs *pflag.FlagSet, c *serverOptions) {
			fs.StringVar(&c.ClusterTLS, "cluster-tls", "on", "")
		}),
		s("gossip-listen", "CAIRN_GOSSIP_LISTEN", "failure detector (gossip, UDP and TCP) address HOST:PORT, cluster mode only; default: the host of --cluster-listen, else of --listen, with its port + 100 (8080 gossips on 8180)", func(fs *pflag.FlagSet, c *serverOptions) {
			fs.StringVar(&c.GossipListen, "gossip-listen", "", "")
		}),
		s("repair-grace", "CAIRN_REPAIR_GRACE", "cluster mode: how long a node may be down before the copies it holds are re-made on other nodes (a restart or a short outage costs no copying)", func(fs *pflag.FlagSet, c *serverOptions) {
			fs.DurationVar(&c.RepairGrace, "repair-grace", d.RepairGrace, "")
		}),
		s("repair-rate", "CAIRN_REPAIR_RATE", "cluster mode: bytes per second that repair and rebalance move from or to this node (0 = unlimited)", func(fs *pflag.FlagSet, c *serverOptions) {
			fs.Int64Var(&c.RepairRate, "repair-rate", d.RepairRate, "")
		}),
		s("mount", "CAIRN_MOUNT", "mount BUCKET[/PREFIX] as a POSIX file system on DIR, given as BUCKET[/PREFIX]:DIR; repeatable (env: comma-separated; TOML: an array); the bucket is created when missing, DIR must be empty", func(fs *pflag.FlagSet, c *serverOptions) {
			fs.StringSliceVar(&c.Mounts, "mount", nil, "")
		}),
		s("mount-handles", "CAIRN_MOUNT_HANDLES", "mounts answer every open with a handle (the kernel then sends OPEN and RELEASE per open file, and an open file keeps the version it opened) instead of the kernel's no-open mode, where opening and closing a file costs no call but its FLUSH (docs/operations.md, \"Mounts\")", func(fs *pflag.FlagSet, c *serverOptions) {
			fs.BoolVar(&c.MountHandles, "mount-handles", false, "")
		}),
		s("lock-lease", "CAIRN_LOCK_LEASE", "file locks taken through this node's mounts are released this long after the node stops renewing them (it died or lost the quorum); the node itself gives them up 1 s earlier and answers EIO to writes of the files (docs/operations.md, \"File locks\")", func(fs *pflag.FlagSet, c *serverOptions) {
			fs.DurationVar(&c.LockLease, "lock-lease", store.DefaultLockLease, "")
		}),
		s("zone", "CAIRN_ZONE", "failure domain of this node (rack, room, site): copies of a file spread over zones", func(fs *pflag.FlagSet, c *serverOptions) {
			fs.StringVar(&c.Zone, "zone", "", "")
		}),
		s("role", "CAIRN_ROLE", "cluster mode: data (stores a share of the blobs, may vote) or client (stores no blob, never votes, never a placement or repair target: reads from the data nodes; needs --join)", func(fs *pflag.FlagSet, c *serverOptions) {
			fs.StringVar(&c.Role, "role", "data", "")
		}),
		s("cache-size", "CAIRN_CACHE_SIZE", "client node: bound in bytes of its disk cache of blobs read from the data nodes (DATA/cache: its blob store, served as local copies; least recently used out first, each blob checked against its hash when fetched)", func(fs *pflag.FlagSet, c *serverOptions) {
			fs.Int64Var(&c.CacheSize, "cache-size", d.CacheSize, "")
		}),
		s("voters", "CAIRN_VOTERS", "Raft voters the cluster keeps: 3 or 5 (others are learners)", func(fs *pflag.FlagSet, c *serverOptions) {
			fs.IntVar(&c.Voters, "voters", 3, "")
		}),
		s("s3-domain", "CAIRN_S3_DOMAIN", "S3 virtual-hosted style: a request for host BUCKET.DOMAIN addresses BUCKET (path style always works)", func(fs *pflag.FlagSet, c *serverOptions) {
			fs.StringVar(&c.S3Domain, "s3-domain", "", "")
		}),
		s("s3-region", "CAIRN_S3_REGION", "the region the S3 API reports (GetBucketLocation, x-amz-bucket-region)", func(fs *pflag.FlagSet, c *serverOptions) {
			fs.StringVar(&c.S3Region, "s3-region", d.S3Region, "")
		}),
		s("s3-upload-expiry", "CAIRN_S3_UPLOAD_EXPIRY", "unfinished S3 multipart uploads are deleted, with their parts, after this long", func(fs *pflag.FlagSet, c *serverOptions) {
			fs.DurationVar(&c.S3UploadExpiry, "s3-upload-expiry", d.S3UploadExpiry, "")
		}),
		s("tls-cert", "CAIRN_TLS_CERT", "PEM certificate (chain) file: the public listener serves HTTPS, HTTP/2 by ALPN; reloaded with --tls-key on SIGHUP", func(fs *pflag.FlagSet, c *serverOptions) {
			fs.StringVar(&c.TLSCert, "tls-cert", "", "")
		}),
		s("tls-key", "CAIRN_TLS_KEY", "PEM private key file of --tls-cert", func(fs *pflag.FlagSet, c *serverOptions) {
			fs.StringVar(&c.TLSKey, "tls-key", "", "")
		}),
		s("webdav-listen", "CAIRN_WEBDAV_LISTEN", "also serve WebDAV on this HOST:PORT, a bucket at /BUCKET/ (it is always at /_dav/BUCKET/ on --listen)", func(fs *pflag.FlagSet, c *serverOptions) {
			fs.StringVar(&c.WebDAVListen, "webdav-listen", "", "")
		}),
		s("trusted-proxy", "CAIRN_TRUSTED_PROXY", "CIDR (or IP) of a reverse proxy whose X-Forwarded-For gives the client IP for abuse rules and the access log; repeatable (env: comma-separated)", func(fs *pflag.FlagSet, c *serverOptions) {
			fs.StringSliceVar(&c.TrustedProxies, "trusted-proxy", nil, "")
		}),
		s("log-level", "CAIRN_LOG_LEVEL", "debug, info, warn or error", func(fs *pflag.FlagSet, c *serverOptions) {
			fs.StringVar(&c.LogLevel, "log-level", "info", "")
		}),
		s("max-header-bytes", "CAIRN_MAX_HEADER_BYTES", "largest request header block; larger ones get 431", func(fs *pflag.FlagSet, c *serverOptions) {
			fs.IntVar(&c.MaxHeaderBytes, "max-header-bytes", d.MaxHeaderBytes, "")
		}),
	}
}

// bindSettings registers the settings' flags on cmd and returns a function
// that applies environment variables and the config file to flags that
// were not given.
func bindSettings(cmd *cobra.Command, c *serverOptions) func() error {
	settings := serverSettings()
	fs := cmd.Flags()
	for _, st := range settings {
		st.bind(fs, c)
		f := fs.Lookup(st.name)
		f.Usage = fmt.Sprintf("%s (env %s)", st.usage, st.env)
	}
	var cfgFile string
	fs.StringVar(&cfgFile, "config", os.Getenv("CAIRN_CONFIG"), "TOML file with settings named as the flags, e.g. listen = \"0.0.0.0:8080\" (env CAIRN_CONFIG)")
	return func() error {
		fileVals := map[string]any{}
		if cfgFile != "" {
			if _, err := toml.DecodeFile(cfgFile, &fileVals); err != nil {
				return fmt.Errorf("read config %s: %w", cfgFile, err)
			}
			known := map[string]bool{}
			for _, st := range settings {
				known[st.name] = true
			}
			for k := range fileVals {
				if !known[k] {
					return fmt.Errorf("config %s: unknown setting %q", cfgFile, k)
				}
			}
		}
		for _, st := range settings {
			f := fs.Lookup(st.name)
			if f.Changed {
				continue
			}
			if v, ok := os.LookupEnv(st.env); ok && v != "" {
				if err := f.Value.Set(v); err != nil {
					return fmt.Errorf("%s=%q: %w", st.env, v, err)
				}
				continue
			}
			if v, ok := fileVals[st.name]; ok {
				if list, ok := v.([]any); ok { // a TOML array: one Set per element (repeatable flags)
					for _, e := range list {
						if err := f.Value.Set(fmt.Sprint(e)); err != nil {
							return fmt.Errorf("config %s: %s = %v: %w", cfgFile, st.name, v, err)
						}
					}
					continue
				}
				if err := f.Value.Set(fmt.Sprint(v)); err != nil {
					return fmt.Errorf("config %s: %s = %v: %w", cfgFile, st.name, v, err)
				}
			}
		}
		return nil
	}
}

func newServerCmd() *cobra.Command {
	var c serverOptions
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Run a Cairn node",
		Long: `Run a Cairn node: it stores files under --data and serves the native HTTP
API on --listen. Every setting can be given as a flag, as the environment
variable named in its description, or in a TOML file passed with --config
(keys named as the flags); flags win over the environment, which wins over
the file. The admin key comes from CAIRN_ADMIN_KEY; without it, one is
generated at first start into DATA/admin.key (mode 0600) and printed.`,
		Args: cobra.NoArgs,
	}
	apply := bindSettings(cmd, &c)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := apply(); err != nil {
			return err
		}
		return runServer(&c)
	}
	return cmd
}

// runServer completes the options (logger, admin key, cluster secret) and
// runs the node until a signal.
func runServer(c *serverOptions) error {
	logger, err := newLogger(c.LogLevel)
	if err != nil {
		return err
	}
	c.Logger = logger
	c.AdminKey = os.Getenv("CAIRN_ADMIN_KEY")
	if err := checkKeyLen(c.AdminKey, "CAIRN_ADMIN_KEY", "the admin key"); err != nil {
		return err
	}
	c.ClusterSecret = os.Getenv("CAIRN_CLUSTER_SECRET")
	secretFrom := "CAIRN_CLUSTER_SECRET"
	if c.SecretFile != "" {
		b, err := os.ReadFile(c.SecretFile)
		if err != nil {
			return fmt.Errorf("read cluster secret: %w", err)
		}
		c.ClusterSecret = strings.TrimSpace(string(b))
		secretFrom = "--secret-file " + c.SecretFile
		if c.ClusterSecret == "" {
			return fmt.Errorf("%s is empty", secretFrom)
		}
	}
	if err := checkKeyLen(c.ClusterSecret, secretFrom, "the cluster secret"); err != nil {
		return err
	}
	if c.Join != "" && c.ClusterSecret == "" {
		return fmt.Errorf("--join needs the cluster secret (CAIRN_CLUSTER_SECRET or --secret-file)")
	}
	if c.ClusterListen != "" && c.ClusterSecret == "" {
		return fmt.Errorf("--cluster-listen needs the cluster secret (CAIRN_CLUSTER_SECRET or --secret-file)")
	}
	switch strings.ToLower(c.ClusterTLS) {
	case "on", "true", "":
	case "off", "false":
		c.ClusterTLSOff = true
	default:
		return fmt.Errorf("--cluster-tls %q: want on or off", c.ClusterTLS)
	}
	switch strings.ToLower(c.Role) {
	case "data", "":
	case "client":
		if c.Join == "" {
			return fmt.Errorf("--role client joins an existing cluster: give --join URL (a data node's public URL) and the cluster secret")
		}
		c.Client = true
	default:
		return fmt.Errorf("--role %q: want data or client", c.Role)
	}
	return runNode(c.Config, true)
}

// checkKeyLen rejects a key or secret v (from source, an environment
// variable or a flag) shorter than access.MinKeyLen bytes; empty is
// "not set" and passes. It names the source and how to make a good one.
func checkKeyLen(v, source, what string) error {
	if v == "" || len(v) >= access.MinKeyLen {
		return nil
	}
	return fmt.Errorf("%s is %d bytes long: %s must be at least %d bytes (make one with: head -c 24 /dev/urandom | base64)",
		source, len(v), what, access.MinKeyLen)
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func newLogger(level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("bad log level %q", level)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: l})), nil
}

// runNode starts a node and serves until SIGINT/SIGTERM. Under systemd
// (Type=notify, packaging/files/cairn.service) it says READY=1 once the
// node answers, pings the watchdog while it does, and STOPPING=1 at the
// end (internal/sdnotify).
func runNode(c node.Config, printKey bool) error {
	svc, err := sdnotify.New(sdnotify.Config{Logger: c.Logger})
	if err != nil {
		return err
	}
	defer svc.Stopping("stopped")
	n, err := node.Start(c)
	if err != nil {
		return err
	}
	switch {
	case printKey && c.AdminKey == "" && svc.Enabled():
		// A service's stderr is the journal, kept and readable by more
		// than root: name the file, not the key.
		fmt.Fprintf(os.Stderr, "cairn: admin key in %s/admin.key\n", strings.TrimRight(c.DataDir, "/"))
	case printKey && c.AdminKey == "":
		fmt.Fprintf(os.Stderr, "cairn: admin key (from %s/admin.key): %s\n", strings.TrimRight(c.DataDir, "/"), n.AdminKey)
	}
	fmt.Fprintln(os.Stderr, servingLine(n.URL, n.LocalURL, c.ClusterSecret != ""))
	if err := svc.Ready(context.Background(), n.Alive, "serving "+n.URL); err != nil {
		return errors.Join(err, n.Close())
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	var stopped error // why the node stopped on its own (printed by main, exit status 1)
	stop := waitErr(n)
wait:
	for {
		select {
		case <-hup:
			// A renewed certificate: new connections get it, open ones go on.
			if err := n.ReloadTLS(); err != nil {
				c.Logger.Error("TLS certificate not reloaded; keeping the current one", "err", err)
			} else if c.TLSCert != "" {
				c.Logger.Info("TLS certificate reloaded", "cert", c.TLSCert)
			}
		case s := <-sig:
			c.Logger.Info("shutting down", "signal", s.String())
			break wait
		case stopped = <-stop:
			break wait
		}
	}
	svc.Stopping("stopping: unmounting, finishing requests, closing the stores")
	done := make(chan error, 1)
	go func() { done <- n.Close() }()
	select {
	case err := <-done:
		return errors.Join(stopped, err)
	case <-time.After(30 * time.Second):
		return fmt.Errorf("shutdown timed out")
	}
}

// servingLine is the line a started node prints: a URL to open. A lone
// node shows the one that works from this machine (127.0.0.1 for a
// wildcard --listen), then the one other machines would use; a cluster node
// the URL recorded in the cluster map, then the local one.
func servingLine(url, localURL string, cluster bool) string {
	switch {
	case url == localURL:
		return "cairn: serving " + url
	case cluster:
		return fmt.Sprintf("cairn: serving %s (as recorded in the cluster map; from this machine: %s)", url, localURL)
	default:
		return fmt.Sprintf("cairn: serving %s (from other machines: %s)", localURL, url)
	}
}

func waitErr(n *node.Node) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- n.Wait() }()
	return ch
}
