package cli

import (
	"fmt"
	"os"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/profiling"
)

// engineProfileEnv names a directory where serve writes profiles of the engine process,
// for finding where a command's time goes on the engine's side: a CPU profile and an
// execution trace over the engine's life, and block and mutex profiles (where goroutines
// waited, and on which locks) at its exit. The engine outlives the terraform commands that
// start it: stop it with `mlcompute shutdown` to complete the files.
const engineProfileEnv = "MLCOMPUTE_ENGINE_PROFILE_DIR"

// startEngineProfile starts profiling into dir, if set, and returns what stops it and
// writes the files. A profile that cannot start is reported on stderr and left out.
func startEngineProfile(dir string) (stop func()) {
	return profiling.Start(profiling.Config{
		Dir: dir, Trace: true, Waits: true,
		Warn: func(what string, err error) {
			fmt.Fprintf(os.Stderr, "%s: not writing the %s: %v\n", engineProfileEnv, what, err)
		},
	})
}
