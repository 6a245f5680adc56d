// Package sim is a deterministic simulation of the engine: it drives the real engine (a fake
// clock, the fake node driver and a real bbolt store) through long random sequences of what
// users and machines do, and checks every rule of DESIGN section 4 after every step. A run
// is a function of its seed alone, so a failure prints the seed and replays exactly:
//
//	go test ./internal/engine/sim -run TestSimulation -sim.seed=N
//
// `make test` runs a bounded number of seeds; `make test-sim DURATION=10m` runs seeds until
// the duration is up.
package sim

import (
	"flag"
	"os"
	"testing"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/fake"
)

var (
	flagSeed     = flag.Uint64("sim.seed", 0, "run only this seed (replays a failure)")
	flagSeeds    = flag.Int("sim.seeds", 6, "number of seeds to run (from sim.first) when sim.seed and sim.duration are unset")
	flagFirst    = flag.Uint64("sim.first", 1, "first seed of a run of several")
	flagSteps    = flag.Int("sim.steps", 300, "operations per seed")
	flagDuration = flag.Duration("sim.duration", 0, "run seeds (from sim.first) until this much wall time has passed")
	flagVerbose  = flag.Bool("sim.verbose", false, "log every operation")
)

// TestSimulation runs the simulation for the seeds the flags select.
func TestSimulation(t *testing.T) {
	var (
		start                = time.Now()
		seeds, steps, checks int64
		deadline             time.Time
		next                 = *flagFirst
		last                 = *flagFirst + uint64(*flagSeeds)
		onlyOne              = *flagSeed != 0
		durationMode         = *flagDuration > 0
	)
	if onlyOne {
		next, last = *flagSeed, *flagSeed+1
	}
	if durationMode && !onlyOne {
		deadline = start.Add(*flagDuration)
		last = ^uint64(0)
	}
	for seed := next; seed < last; seed++ {
		if durationMode && !onlyOne && time.Now().After(deadline) {
			break
		}
		dir, err := os.MkdirTemp("", "sim-")
		if err != nil {
			t.Fatal(err)
		}
		w, err := newWorld(seed, dir, fake.Options{})
		if err != nil {
			os.RemoveAll(dir)
			t.Fatalf("seed %d: setting up: %v", seed, err)
		}
		if *flagVerbose {
			w.trace = func(s string) { t.Log(s) }
		}
		runErr := w.run(*flagSteps)
		w.close()
		os.RemoveAll(dir)
		seeds++
		steps += int64(w.step)
		checks += w.checks
		if runErr != nil {
			t.Fatalf("%v\nreplay: go test ./internal/engine/sim -run TestSimulation -sim.seed=%d -sim.steps=%d", runErr, seed, *flagSteps)
		}
	}
	elapsed := time.Since(start)
	t.Logf("simulation: %d seeds, %d steps in %s (%.0f steps/s), %d invariant checks",
		seeds, steps, elapsed.Round(time.Millisecond), float64(steps)/elapsed.Seconds(), checks)
}
