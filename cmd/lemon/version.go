package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"lemon/version"
)

// `lemon version` (and `lemon --version`) prints the build's CalVer from
// the version package, the one source of every version string.
func init() {
	registerCobra("version", func(stdout, _ io.Writer) *cobra.Command {
		return &cobra.Command{
			Use:   "version",
			Short: "print the version of this build",
			Long:  "Prints \"lemon VERSION\" (the build's CalVer, YYYY.MM.PATCH), as 'lemon --version' does.",
			Args:  cobra.NoArgs,
			RunE: func(*cobra.Command, []string) error {
				fmt.Fprintln(stdout, "lemon", version.Version)
				return nil
			},
		}
	})
}
