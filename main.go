// Command terraform-provider-mlcompute is the mlcompute Terraform provider. The same binary
// carries the engine: "terraform-provider-mlcompute engine serve" is how the provider starts
// the embedded engine from its own binary, and "engine" accepts every mlcompute CLI command.
package main

import (
	"flag"
	"log"
	"os"

	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6/tf6server"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/cli"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/daemon"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/profiling"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/provider"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/sdklog"
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

	var debugMode bool
	flag.BoolVar(&debugMode, "debug", false, "start the provider with support for debuggers like delve")
	flag.Parse()

	// The SDK logs every call at trace level, which terraform discards unless the user
	// asked for logs: say nothing unless they did.
	if err := sdklog.QuietUnlessAsked(os.Environ(), os.Setenv, "TF_LOG_PROVIDER_MLCOMPUTE"); err != nil {
		log.Fatal(err.Error())
	}
	// A provider process lives for one terraform command and keeps a few megabytes: the
	// garbage collector's default pace spends a sixth of a large plan's CPU on a heap that
	// is thrown away at exit. It takes the engine's pace (GOGC, when set, still decides).
	daemon.SetGCPace()
	server, err := provider.NewProtocol6Server(version.Version)()
	if err != nil {
		log.Fatal(err.Error())
	}
	var opts []tf6server.ServeOpt
	if debugMode {
		opts = append(opts, tf6server.WithManagedDebug())
	}
	stopProfile := profiling.Start(profiling.Config{
		Dir: os.Getenv(cpuProfileEnv),
		Warn: func(what string, err error) {
			log.Printf("[WARN] %s: not writing the %s: %v", cpuProfileEnv, what, err)
		},
	})
	err = tf6server.Serve("registry.terraform.io/mlcompute/mlcompute", func() tfprotov6.ProviderServer { return server }, opts...)
	stopProfile()
	if err != nil {
		log.Fatal(err.Error())
	}
}

// cpuProfileEnv names a directory where the provider writes a CPU profile of each of its
// processes (cpu-<pid>.pprof), for finding where a plan's time goes. terraform starts the
// provider several times per command, hence one file per process; a profile is complete
// when terraform shuts the provider down gracefully, as it does at the end of a command.
const cpuProfileEnv = "MLCOMPUTE_PROVIDER_CPUPROFILE_DIR"
