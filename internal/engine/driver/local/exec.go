package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"syscall"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/nodeagent/proc"
)

// Exec runs an interactive command in the node's home directory (<node dir>/home), in its
// own process group, with the node's minimal environment plus spec.Env. The engine is its
// parent: a session lasts as long as the connection that opened it.
func (d *Driver) Exec(ctx context.Context, nodeKey string, spec driver.ExecSpec) (int, error) {
	if len(spec.Command) == 0 {
		return 0, errors.New("exec needs a command")
	}
	dir, err := d.nodeDir(nodeKey)
	if err != nil {
		return 0, err
	}
	if _, err := d.Describe(ctx, nodeKey); err != nil {
		return 0, err
	}
	home := filepath.Join(dir, "home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		return 0, fmt.Errorf("creating node home: %w", err)
	}
	cmd := exec.Command(spec.Command[0], spec.Command[1:]...)
	cmd.Dir = home
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "LANG=C.UTF-8"}
	keys := make([]string, 0, len(spec.Env))
	for k := range spec.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		env = append(env, k+"="+spec.Env[k])
	}
	cmd.Env = env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = spec.Stdin, spec.Output, spec.Output
	cmd.SysProcAttr = proc.GroupAttr()
	// A session's stdin is a connection that may stay open after the command exits; without
	// a delay Wait would block on copying it until the user hangs up.
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		return 127, nil // as a shell reports a command it cannot run
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	select {
	case err = <-waited:
	case <-ctx.Done():
		_ = proc.KillGroup(cmd.Process.Pid, syscall.SIGKILL)
		<-waited
		return 0, ctx.Err()
	}
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		if ws, ok := exitErr.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal()), nil
		}
		return exitErr.ExitCode(), nil
	}
	if err != nil {
		return 0, fmt.Errorf("running session command: %w", err)
	}
	return 0, nil
}
