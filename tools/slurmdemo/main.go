//go:build unix

// Command slurmdemo runs a command (make demo-slurm runs scripts/demo.sh) next to a real
// Slurm cluster: it starts munged, slurmctld and three slurmd on loopback (package
// slurmtest; root, and Debian's Slurm packages, installed when missing), runs the command
// with SLURM_CONF pointing at the cluster and DEMO_SERVE_FLAGS asking for
// `mlcompute serve --nodes slurm`, then stops the cluster, also when the command fails.
//
//	go run ./tools/slurmdemo scripts/demo.sh
package main

import (
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/slurm/slurmtest"
)

// run is a slurmtest.TB for a program: cleanups run in reverse order when it ends, and a
// fatal error ends it after them.
type run struct {
	cleanups []func()
	failed   bool
}

func (r *run) Helper()                      {}
func (r *run) Logf(f string, args ...any)   { fmt.Fprintf(os.Stderr, "slurmdemo: "+f+"\n", args...) }
func (r *run) Cleanup(f func())             { r.cleanups = append(r.cleanups, f) }
func (r *run) Setenv(key, value string)     { _ = os.Setenv(key, value) }
func (r *run) Failed() bool                 { return r.failed }
func (r *run) Fatalf(f string, args ...any) { r.failed = true; r.Logf(f, args...); r.end(); os.Exit(1) }

func (r *run) end() {
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
	r.cleanups = nil
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: slurmdemo COMMAND [ARG...]")
		os.Exit(2)
	}
	r := &run{}
	c := slurmtest.Start(r)
	workdir, err := os.MkdirTemp("", "mlc-slurmdemo-")
	if err != nil {
		r.Fatalf("%v", err)
	}
	r.Cleanup(func() { _ = os.RemoveAll(workdir) })
	fmt.Printf("A Slurm cluster of 3 nodes on loopback is up in %s (SLURM_CONF=%s)\n", c.StartedIn.Round(1e6), c.Conf)
	cmd := exec.Command(os.Args[1], os.Args[2:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), "DEMO_SERVE_FLAGS=--nodes slurm --slurm-resources gpus --slurm-workdir "+workdir)
	// An interrupt reaches the command (same process group); the cluster stops after it.
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM)
	err = cmd.Run()
	r.end()
	if err != nil {
		fmt.Fprintf(os.Stderr, "slurmdemo: %v\n", err)
		os.Exit(1)
	}
}
