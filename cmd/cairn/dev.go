package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/cairn-fs/cairn/internal/node"
	"github.com/spf13/cobra"
)

func newDevCmd() *cobra.Command {
	var dataDir, host string
	var port, nodes int
	var mounts []string
	var mountHandles bool
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run Cairn on its embedded default: a local 3-node cluster with data under ./data",
		Long: `Run Cairn on its embedded default, for trying it: a cluster of --nodes nodes
(default 3) on 127.0.0.1, ports 8080, 8081, 8082, with data under
./data/node1, ./data/node2, ./data/node3. Every node serves every file and
takes writes. It prints the URLs, the admin key and curl lines to try.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			logger, err := newLogger(envOr("CAIRN_LOG_LEVEL", "warn"))
			if err != nil {
				return err
			}
			if nodes < 1 {
				return errors.New("--nodes must be at least 1")
			}
			abs, _ := filepath.Abs(dataDir)
			if err := os.MkdirAll(abs, 0o755); err != nil {
				return err
			}
			key := os.Getenv("CAIRN_ADMIN_KEY")
			if err := checkKeyLen(key, "CAIRN_ADMIN_KEY", "the admin key"); err != nil {
				return err
			}
			if key == "" {
				key, _, err = node.LoadOrCreateAdminKey(abs)
				if err != nil {
					return err
				}
			}
			secret, err := loadOrCreateSecret(filepath.Join(abs, "cluster.secret"))
			if err != nil {
				return err
			}
			var started []*node.Node
			defer func() {
				for i := len(started) - 1; i >= 0; i-- {
					started[i].Close()
				}
			}()
			var urls []string
			for i := 1; i <= nodes; i++ {
				c := node.DefaultConfig()
				c.DataDir = filepath.Join(abs, "node"+strconv.Itoa(i))
				c.Listen = net.JoinHostPort(host, strconv.Itoa(port+i-1))
				c.AdminKey, c.Logger, c.ClusterSecret = key, logger.With("node", i), secret
				if i > 1 {
					c.Join = urls[0]
				}
				c.MountHandles = mountHandles
				for _, m := range mounts { // each node's view under DATA/mnt/nodeN/BUCKET
					b, opts, _ := strings.Cut(m, ":")
					spec := b + ":" + filepath.Join(abs, "mnt", "node"+strconv.Itoa(i), strings.ReplaceAll(strings.Trim(b, "/"), "/", "_"))
					if opts != "" {
						spec += ":" + opts
					}
					c.Mounts = append(c.Mounts, spec)
				}
				n, err := node.Start(c)
				if err != nil {
					return fmt.Errorf("start node %d: %w", i, err)
				}
				started = append(started, n)
				urls = append(urls, n.URL)
			}
			last := urls[len(urls)-1]
			fmt.Printf(`Cairn dev cluster: %d nodes
  URLs:      %s
  data:      %s/node1..%d
  admin key: %s

Try it (a write through node 1, read back through node %d):
  export CAIRN_SERVER=%s CAIRN_ADMIN_KEY=%s
  bin/cairn bucket create demo --public
  curl -X PUT -H "Authorization: Bearer $CAIRN_ADMIN_KEY" --data-binary @README.md %s/demo/README.md
  curl %s/demo/README.md

`, nodes, strings.Join(urls, " "), abs, nodes, key, nodes, urls[0], key, urls[0], last)
			for _, m := range mounts {
				b, _, _ := strings.Cut(m, ":")
				name := strings.ReplaceAll(strings.Trim(b, "/"), "/", "_")
				fmt.Printf("Mounted %s on every node (a file written through node 1's mount, read through node %d's):\n"+
					"  echo hello > %s/mnt/node1/%s/hello.txt\n  cat %s/mnt/node%d/%s/hello.txt\n\n", b, nodes, abs, name, abs, nodes, name)
			}
			sig := make(chan os.Signal, 1)
			signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
			<-sig
			return nil
		},
	}
	cmd.Flags().StringVar(&dataDir, "data", "./data", "data directory (one subdirectory per node)")
	cmd.Flags().StringVar(&host, "host", "127.0.0.1", "address the nodes listen on")
	cmd.Flags().IntVar(&port, "port", 8080, "port of node 1; node i listens on port+i-1")
	cmd.Flags().IntVar(&nodes, "nodes", 3, "number of nodes")
	cmd.Flags().BoolVar(&mountHandles, "mount-handles", false, "mounts answer every open with a handle (OPEN and RELEASE per open file) instead of the kernel's no-open mode")
	cmd.Flags().StringArrayVar(&mounts, "mount", nil, "mount BUCKET[/PREFIX][:OPTIONS] on every node, under DATA/mnt/nodeN/BUCKET (repeatable; OPTIONS as cairn server --mount's, e.g. flush; needs /dev/fuse and root or fuse3)")
	return cmd
}

// loadOrCreateSecret returns the cluster secret in path, creating a random
// one (mode 0600) at first use.
func loadOrCreateSecret(path string) (string, error) {
	if b, err := os.ReadFile(path); err == nil {
		return strings.TrimSpace(string(b)), nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	var r [32]byte
	if _, err := rand.Read(r[:]); err != nil {
		return "", err
	}
	s := hex.EncodeToString(r[:])
	return s, os.WriteFile(path, []byte(s+"\n"), 0o600)
}
