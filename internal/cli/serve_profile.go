package cli

import (
	"fmt"
	"os"
	"path/filepath"
	goruntime "runtime"
	"runtime/pprof"
	"runtime/trace"
)

// engineProfileEnv names a directory where serve writes profiles of the engine process,
// for finding where a command's time goes on the engine's side: a CPU profile and an
// execution trace over the engine's life, and block and mutex profiles (where goroutines
// waited, and on which locks) at its exit. Files are named <kind>-<pid>.pprof (trace-<pid>.out).
// The engine outlives the terraform commands that start it: stop it with `mlcompute
// shutdown` to complete the files.
const engineProfileEnv = "MLCOMPUTE_ENGINE_PROFILE_DIR"

// startEngineProfile starts profiling into dir, if set, and returns what stops it and
// writes the files. A profile that cannot start is reported on stderr and left out.
func startEngineProfile(dir string) (stop func()) {
	if dir == "" {
		return func() {}
	}
	pid := os.Getpid()
	name := func(kind, ext string) string { return filepath.Join(dir, fmt.Sprintf("%s-%d.%s", kind, pid, ext)) }
	warn := func(what string, err error) {
		fmt.Fprintf(os.Stderr, "%s: not writing the %s: %v\n", engineProfileEnv, what, err)
	}
	var stops []func()
	if f, err := os.Create(name("cpu", "pprof")); err != nil {
		warn("cpu profile", err)
	} else if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		warn("cpu profile", err)
	} else {
		stops = append(stops, func() { pprof.StopCPUProfile(); _ = f.Close() })
	}
	if f, err := os.Create(name("trace", "out")); err != nil {
		warn("trace", err)
	} else if err := trace.Start(f); err != nil {
		_ = f.Close()
		warn("trace", err)
	} else {
		stops = append(stops, func() { trace.Stop(); _ = f.Close() })
	}
	// Every blocking event and every contended lock is recorded: the engine is profiled to
	// find what waits, not to run fast.
	goruntime.SetBlockProfileRate(1)
	goruntime.SetMutexProfileFraction(1)
	for _, kind := range []string{"block", "mutex"} {
		stops = append(stops, func() {
			f, err := os.Create(name(kind, "pprof"))
			if err == nil {
				err = pprof.Lookup(kind).WriteTo(f, 0)
				if cerr := f.Close(); err == nil {
					err = cerr
				}
			}
			if err != nil {
				warn(kind+" profile", err)
			}
		})
	}
	return func() {
		for _, s := range stops {
			s()
		}
	}
}
