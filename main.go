// Command terraform-provider-mlcompute is the mlcompute Terraform provider. The same binary
// carries the engine: "terraform-provider-mlcompute engine serve" is how the provider starts
// the embedded engine from its own binary, and "engine" accepts every mlcompute CLI command.
package main

import (
	"context"
	"flag"
	"log"
	"os"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/cli"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/provider"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/version"
)

func main() {
	// The hidden engine subcommand runs before flag parsing: its flags are the CLI's.
	if len(os.Args) > 1 && os.Args[1] == "engine" {
		os.Exit(cli.Main(cli.Config{
			Use:     "terraform-provider-mlcompute engine",
			Version: version.Version,
			Self: func() ([]string, error) {
				exe, err := os.Executable()
				return []string{exe, "engine"}, err
			},
		}, os.Args[2:]))
	}

	var debug bool
	flag.BoolVar(&debug, "debug", false, "start the provider with support for debuggers like delve")
	flag.Parse()

	// The SDK logs every call at trace level, which terraform discards unless the user
	// asked for logs: say nothing unless they did.
	if err := provider.QuietLogsUnlessAsked(os.Environ(), os.Setenv); err != nil {
		log.Fatal(err.Error())
	}
	err := providerserver.Serve(context.Background(), provider.New(version.Version), providerserver.ServeOpts{
		Address:         "registry.terraform.io/mlcompute/mlcompute",
		Debug:           debug,
		ProtocolVersion: 6,
	})
	if err != nil {
		log.Fatal(err.Error())
	}
}
