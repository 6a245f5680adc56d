// Package profiling writes a process's profiles into a directory named by an environment
// variable, for finding where a command's time goes: the provider's processes write a CPU
// profile (MLCOMPUTE_PROVIDER_CPUPROFILE_DIR), the engine also an execution trace and
// where it waited (MLCOMPUTE_ENGINE_PROFILE_DIR). Files are named <kind>-<pid>.pprof
// (trace-<pid>.out), since terraform starts several provider processes per command.
package profiling

import (
	"fmt"
	"os"
	"path/filepath"
	goruntime "runtime"
	"runtime/pprof"
	"runtime/trace"
)

// Config says what to write, and where.
type Config struct {
	// Dir is the directory; empty writes nothing.
	Dir string
	// Trace adds an execution trace over the process's life.
	Trace bool
	// Waits adds, at stop, the block and mutex profiles: every blocking event and every
	// contended lock is recorded, which slows the process. It is profiled to find what
	// waits, not to run fast.
	Waits bool
	// Warn reports a profile that cannot be written; it is left out and the rest go on.
	Warn func(what string, err error)
}

// Start starts what c asks for and returns what stops it and completes the files. A CPU
// profile is always written when Dir is set.
func Start(c Config) (stop func()) {
	if c.Dir == "" {
		return func() {}
	}
	pid := os.Getpid()
	name := func(kind, ext string) string { return filepath.Join(c.Dir, fmt.Sprintf("%s-%d.%s", kind, pid, ext)) }
	var stops []func()
	if f, err := os.Create(name("cpu", "pprof")); err != nil {
		c.Warn("cpu profile", err)
	} else if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		c.Warn("cpu profile", err)
	} else {
		stops = append(stops, func() { pprof.StopCPUProfile(); _ = f.Close() })
	}
	if c.Trace {
		if f, err := os.Create(name("trace", "out")); err != nil {
			c.Warn("trace", err)
		} else if err := trace.Start(f); err != nil {
			_ = f.Close()
			c.Warn("trace", err)
		} else {
			stops = append(stops, func() { trace.Stop(); _ = f.Close() })
		}
	}
	if c.Waits {
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
					c.Warn(kind+" profile", err)
				}
			})
		}
	}
	return func() {
		for _, s := range stops {
			s()
		}
	}
}
