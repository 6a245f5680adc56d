// Command mlcompute runs the engine and submits jobs, shows nodes and invokes endpoints.
package main

import (
	"os"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/cli"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/version"
)

func main() {
	os.Exit(cli.Main(cli.Config{
		Use:     "mlcompute",
		Version: version.Version,
		Self: func() ([]string, error) {
			exe, err := os.Executable()
			return []string{exe}, err
		},
	}, os.Args[1:]))
}
