// Command cairn is the single Cairn binary: the server, the local dev
// cluster and the command-line client.
package main

import (
	"fmt"
	"os"
	"runtime/pprof"

	"github.com/spf13/cobra"
)

func main() {
	// CAIRN_CPUPROFILE=FILE: a CPU profile of the whole command (for the
	// client commands; servers have --debug-listen).
	if path := os.Getenv("CAIRN_CPUPROFILE"); path != "" {
		if f, err := os.Create(path); err == nil && pprof.StartCPUProfile(f) == nil {
			defer func() { pprof.StopCPUProfile(); f.Close() }()
		} else {
			fmt.Fprintln(os.Stderr, "cairn: CAIRN_CPUPROFILE: cannot profile to", path)
		}
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "cairn:", err)
		os.Exit(1)
	}
}

func run() error { return newRootCmd().Execute() }

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
	root.AddCommand(newNodeCmd())     // cluster members (node.go)
	root.AddCommand(newStatusCmd())   // status.go
	root.AddCommand(newScrubCmd())    // scrub.go
	root.AddCommand(newTrashCmd())    // the buckets' trash (trash.go)
	root.AddCommand(newSnapshotCmd()) // snapshot.go
	root.AddCommand(backupCmds()...)  // backup, restore (backup.go)
	root.AddCommand(newKeyCmd())      // access keys (accesskeys.go)
	root.AddCommand(newRuleCmd())     // abuse rules (rules.go)
	root.AddCommand(newURLCmd())      // signed URLs (urlsign.go)
	root.AddCommand(newCSICmd())      // the Kubernetes CSI driver (csi.go)
	root.AddCommand(newVersionCmd())  // version.go
	root.AddCommand(newGenManCmd())   // hidden: man pages for the packages (genman.go)
	strictGroups(root)                // an unknown subcommand is an error (usage.go)
	return root
}
