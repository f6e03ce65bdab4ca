package main

import (
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/cairn-fs/cairn/internal/csi"
)

func newCSICmd() *cobra.Command {
	var endpoint, nodeID, mountRoot string
	cmd := &cobra.Command{
		Use:   "csi --endpoint unix:///csi/csi.sock --node-id NAME --mount-root DIR [--server URL] [--key KEY]",
		Short: "Run the Kubernetes CSI driver (csi.cairn-fs.io): ReadWriteMany volumes, each a directory of a bucket",
		Long: `Run Cairn's CSI driver on --endpoint (a unix socket, as the kubelet and
the external provisioner expect). Its controller service makes a volume's
directory (PREFIX/NAME in the bucket of the StorageClass's parameters
"bucket" and "prefix") through the Cairn node --server names, with the
admin key, and removes it with everything in it on deletion. Its node
service publishes a volume by bind-mounting its directory, from this
host's Cairn mount of the bucket (--mount-root/BUCKET: the host's node
runs with --mount BUCKET:--mount-root/BUCKET), onto the pod's target
path, and unmounts it on unpublish. Needs root (mounts). See
docs/kubernetes.md.`,
		Args: cobra.NoArgs,
	}
	cf := addClientFlags(cmd)
	cmd.Flags().StringVar(&endpoint, "endpoint", "unix:///csi/csi.sock", "gRPC endpoint (unix socket)")
	cmd.Flags().StringVar(&nodeID, "node-id", "", "this host's name (default: the host name)")
	cmd.Flags().StringVar(&mountRoot, "mount-root", "/var/lib/cairn/mnt", "where this host's Cairn node mounts buckets (bucket B on DIR/B)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if nodeID == "" {
			h, err := os.Hostname()
			if err != nil {
				return fmt.Errorf("--node-id: %w", err)
			}
			nodeID = h
		}
		d, err := csi.New(csi.Config{Endpoint: endpoint, NodeID: nodeID, Client: cf.client(), MountRoot: mountRoot,
			Logger: slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))})
		if err != nil {
			return err
		}
		if err := d.Listen(); err != nil {
			return err
		}
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
		go func() { <-sig; d.Stop() }()
		fmt.Fprintf(cmd.ErrOrStderr(), "cairn csi: serving %s on %s (node %s, mounts under %s)\n", csi.DriverName, endpoint, nodeID, mountRoot)
		return d.Serve()
	}
	return cmd
}
