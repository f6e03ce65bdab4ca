package main

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cairn-fs/cairn/internal/meta"
	"github.com/cairn-fs/cairn/internal/version"
)

// versionReport is what `cairn version --json` prints.
type versionReport struct {
	version.Info
	Encodings []meta.Encoding `json:"log_encodings"`
}

func newVersionCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print this binary's version, git commit and the log encodings it reads",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r := versionReport{Info: version.Get(), Encodings: meta.Encodings()}
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(r)
			}
			fmt.Fprintf(out, "cairn %s\n", r.Release)
			commit := r.Short()
			if r.Time != "" {
				commit += " (" + r.Time + ")"
			}
			fmt.Fprintf(out, "commit %s\n", commit)
			fmt.Fprintf(out, "go %s\n", r.Go)
			var encs []string
			for _, e := range r.Encodings {
				if e.Min == e.Max {
					encs = append(encs, fmt.Sprintf("%s %d", e.Name, e.Max))
				} else {
					encs = append(encs, fmt.Sprintf("%s %d-%d", e.Name, e.Min, e.Max))
				}
			}
			fmt.Fprintf(out, "log encodings: %s\n", strings.Join(encs, ", "))
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
