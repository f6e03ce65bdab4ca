package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/cairn-fs/cairn/internal/node"
	"github.com/spf13/cobra"
)

func newDevCmd() *cobra.Command {
	var dataDir, listen string
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run Cairn on its embedded default: a local node with data under ./data",
		Long: `Run Cairn on its embedded default, for trying it: a node on
127.0.0.1:8080 with its data under ./data. It prints the URL, the admin key
and a curl line to try.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			logger, err := newLogger(envOr("CAIRN_LOG_LEVEL", "warn"))
			if err != nil {
				return err
			}
			abs, _ := filepath.Abs(dataDir)
			key := os.Getenv("CAIRN_ADMIN_KEY")
			if key == "" {
				key, _, err = node.LoadOrCreateAdminKey(abs)
				if err != nil {
					return err
				}
			}
			c := node.DefaultConfig()
			c.DataDir, c.Listen, c.AdminKey, c.Logger = abs, listen, key, logger
			fmt.Printf(`Cairn dev node
  URL:       http://%[1]s
  data:      %[2]s
  admin key: %[3]s

Try it:
  export CAIRN_SERVER=http://%[1]s CAIRN_ADMIN_KEY=%[3]s
  bin/cairn bucket create demo --public
  curl -X PUT -H "Authorization: Bearer $CAIRN_ADMIN_KEY" --data-binary @README.md http://%[1]s/demo/README.md
  curl http://%[1]s/demo/README.md

`, listen, abs, key)
			return runNode(c, false)
		},
	}
	cmd.Flags().StringVar(&dataDir, "data", "./data", "data directory")
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:8080", "listen address")
	return cmd
}
