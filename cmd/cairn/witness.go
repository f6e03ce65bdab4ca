package main

import (
	"github.com/cairn-fs/cairn/internal/node"
	"github.com/spf13/cobra"
)

// witnessKVCache is a witness's default namespace cache: it serves no
// reads of its own worth caching for.
const witnessKVCache = 8 << 20

func newWitnessCmd() *cobra.Command {
	var c serverOptions
	cmd := &cobra.Command{
		Use:   "witness",
		Short: "Run a Raft voter that stores no file content",
		Long: `Run a witness: a cluster member that votes in Raft but holds no file
content, so that two data nodes plus a witness (for example on the load
balancer) keep a majority when either data node dies. It needs the cluster
secret and --join URL (a member's public URL); it keeps the Raft log and the
namespace under --data (a few MB to a few hundred MB), never blob files.
Placement never gives it a copy. Its HTTP API on --listen works, by proxy:
reads fetch content from the data nodes, writes send it to them.

It takes the settings of "cairn server" (flags, environment, --config);
those about volumes and the disk are unused.`,
		Args: cobra.NoArgs,
	}
	apply := bindSettings(cmd, &c)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := apply(); err != nil {
			return err
		}
		c.Witness = true
		if c.KVCacheBytes == node.DefaultConfig().KVCacheBytes {
			c.KVCacheBytes = witnessKVCache
		}
		return runServer(&c)
	}
	return cmd
}
