//go:build unix

package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/client"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/daemon"
)

// benchEngine is the embedded engine the CLI would start for a fresh MLCOMPUTE_HOME in a
// scratch dir: the modes that drive the engine through its API (firstbyte, pipeline) use
// it, and need no terraform.
type benchEngine struct {
	cli  string // the mlcompute binary of -bin-dir
	dir  string // the scratch dir, holding home
	home string // MLCOMPUTE_HOME
	env  []string
	c    *client.Client
}

// startBenchEngine starts the engine in a new scratch dir named after prefix.
func startBenchEngine(ctx context.Context, o options, prefix string) (_ *benchEngine, err error) {
	binDir, err := filepath.Abs(o.binDir)
	if err != nil {
		return nil, err
	}
	e := &benchEngine{cli: filepath.Join(binDir, "mlcompute")}
	if _, err := os.Stat(e.cli); err != nil {
		return nil, fmt.Errorf("%w (run make build)", err)
	}
	if e.dir, err = os.MkdirTemp("", prefix); err != nil {
		return nil, err
	}
	e.home = filepath.Join(e.dir, "home")
	e.env = append(cleanEnv(), "MLCOMPUTE_HOME="+e.home)
	if e.c, err = daemon.Connect(ctx, daemon.ConnectOptions{DataDir: e.home, Command: []string{e.cli, "serve"}}); err != nil {
		_ = os.RemoveAll(e.dir)
		return nil, fmt.Errorf("starting the engine: %w", err)
	}
	return e, nil
}

// stop shuts the engine down and removes the scratch dir, unless keep.
func (e *benchEngine) stop(keep bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	shutdown := exec.CommandContext(ctx, e.cli, "shutdown")
	shutdown.Env = e.env
	var err error
	if out, serr := shutdown.CombinedOutput(); serr != nil {
		err = fmt.Errorf("shutting the engine down: %w\n%s", serr, out)
	}
	if keep {
		fmt.Fprintf(os.Stderr, "kept %s\n", e.dir)
	} else if rerr := os.RemoveAll(e.dir); rerr != nil && err == nil {
		err = rerr
	}
	return err
}
