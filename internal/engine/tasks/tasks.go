// Package tasks is the one way the engine's controllers reach the tasks on their nodes, as
// package lifecycle is for the nodes themselves: jobs' ranks, environment builds, setup
// scripts and serving processes are started, killed, asked for a port and read through
// Tasks, and no controller holds the node driver. A task's end comes back as the driver's
// event, which lifecycle routes to the node's owner (on a compute's node, to the owner
// that claims the task: computes.TaskOwner).
//
// Tasks is the driver's task half (driver.TaskRunner) with the engine's policies on top:
// a kill of a task that is gone already did what it was for, a kill decided in a write
// runs once that write committed, and a failed kill is logged, in one place.
package tasks

import (
	"context"
	"fmt"

	"github.com/hashicorp/go-hclog"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/runtime"
)

// Tasks runs tasks on the engine's nodes. Its driver.TaskRunner is the engine's node driver
// once Start gave it; its methods are safe for concurrent use.
type Tasks struct {
	driver.TaskRunner
	watcher driver.OutputWatcher // nil when the driver cannot watch output
	ctx     context.Context
	loop    *runtime.Loop
	log     hclog.Logger
}

// New returns the tasks of an engine whose slow work runs on loop; call Start before any
// task is started.
func New(loop *runtime.Loop, log hclog.Logger) *Tasks {
	return &Tasks{loop: loop, log: log.Named("tasks"), ctx: context.Background()}
}

// Start gives Tasks the engine's node driver and its lifetime, which bounds the kills that
// run after a commit.
func (t *Tasks) Start(ctx context.Context, drv driver.Driver) {
	t.ctx, t.TaskRunner = ctx, drv
	t.watcher, _ = drv.(driver.OutputWatcher)
}

// KillTask kills a task's process group; a task or node that is gone already is no error,
// since that is what the kill is for.
func (t *Tasks) KillTask(ctx context.Context, node, task string) error {
	if err := t.TaskRunner.KillTask(ctx, node, task); err != nil && !driver.IsNotFound(err) {
		return fmt.Errorf("killing task %s on node %s: %w", task, node, err)
	}
	return nil
}

// KillAfterCommit kills a task that a committed write decided to stop (a failed instance's
// process, a setup script past its timeout, a job's rank on a node taken back), on the
// work loop so the write's caller does not wait for the node. A failed kill is logged: the
// task's end, when it comes, is handled as any other.
func (t *Tasks) KillAfterCommit(node, task string) {
	t.loop.Go(func() {
		if err := t.KillTask(t.ctx, node, task); err != nil && t.ctx.Err() == nil {
			t.log.Warn("kill failed", "node", node, "task", task, "error", err)
		}
	})
}

// WatchOutput arms a watch of a task's output (driver.OutputWatcher); ErrPermanent when
// the driver cannot watch, so the caller reads again after a short wait instead.
func (t *Tasks) WatchOutput(ctx context.Context, node, task string) (<-chan struct{}, error) {
	if t.watcher == nil {
		return nil, driver.Permanent(fmt.Errorf("watching task %s on node %s: this driver does not watch output", task, node))
	}
	return t.watcher.WatchOutput(ctx, node, task)
}
