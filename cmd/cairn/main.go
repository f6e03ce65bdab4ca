// Command cairn is the single Cairn binary: the server, the local dev
// cluster and the command-line client.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

func main() {
	if err := newRootCmd().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "cairn:", err)
		os.Exit(1)
	}
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "cairn",
		Short:         "Cairn: a replicated file store for web clusters",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	// Server side (server.go, witness.go, recover.go, dev.go).
	root.AddCommand(newServerCmd(), newWitnessCmd(), newRecoverCmd(), newDevCmd())
	// Client side (client_cmds.go, sync.go, bucket.go).
	root.AddCommand(newBucketCmd(), newPutCmd(), newGetCmd(), newLsCmd(), newStatCmd(), newRmCmd(), newSyncCmd())
	root.AddCommand(newNodeCmd()) // cluster members (node.go)
	return root
}
