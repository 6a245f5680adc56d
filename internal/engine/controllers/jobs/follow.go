package jobs

import (
	"context"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
)

// How long FollowJobLogs waits before it reads a task's output again when nothing wakes
// it: only for a driver that cannot watch output (driver.OutputWatcher; the slurm and ssh
// drivers read remote files), or for the moment between a job getting its node and its
// task's directory existing. It starts at followMinWait and doubles up to followMaxWait
// while the task prints nothing, back to followMinWait after each piece of output.
const (
	followMinWait = time.Millisecond
	followMaxWait = 50 * time.Millisecond
)

// FollowJobLogs sends a rank's output from offset on to emit as it appears, until the job
// has ended and its output is all sent (it returns nil and the offset after the last byte)
// or ctx ends (ctx's error). An error from emit ends the follow with that error. This is
// the engine's side of a streamed `GET .../logs?follow=true`.
//
// Nothing is read on an interval when the driver watches output (the local driver does,
// with inotify): the follower sleeps until the job's record changes in the store (it got
// its nodes, it ended) or its task writes, reads what is new, sends it at once and reads
// again with no pause until nothing is left. Each watch is armed before the read it
// guards, so no write falls between the read and the sleep.
func (c *Controller) FollowJobLogs(ctx context.Context, workspace, id string, rank int, offset int64, emit func([]byte) error) (int64, error) {
	w := outputWatch{}
	defer w.stop()
	wait := followMinWait
	for {
		jobChanged := c.core.Changed(store.Jobs)
		source, hasSource := w.arm(ctx, c.core.Tasks(), c.LogSource, workspace, id, rank)
		data, next, complete, err := c.JobLogs(ctx, workspace, id, rank, offset)
		if err != nil {
			return offset, err
		}
		offset = next
		if len(data) > 0 {
			if err := emit(data); err != nil {
				return offset, err
			}
		}
		if complete {
			return offset, nil
		}
		if len(data) > 0 {
			wait = followMinWait
			continue // more may be there already: read again before sleeping
		}
		// Paced by a timer only when output could come and nothing would announce it.
		// Real time, not the engine's clock: this paces reads of a stream (I/O), it is no
		// rule's deadline, and a fake clock in tests would never let it go on.
		var timer *time.Timer
		var fired <-chan time.Time
		if hasSource && source == nil {
			timer = time.NewTimer(wait)
			fired = timer.C
			wait = min(2*wait, followMaxWait)
		}
		select {
		case <-ctx.Done():
			return offset, ctx.Err()
		case <-jobChanged:
		case _, open := <-source:
			if !open {
				w.stop() // the task's output is gone; the job's record says what became of it
			}
		case <-fired:
		}
		if timer != nil {
			timer.Stop()
		}
	}
}

// outputWatch is the watch of the task a follower reads, re-armed when the log moves on to
// another task (from the environment's preparation to the job's task).
type outputWatch struct {
	node, task string
	ch         <-chan struct{}
	cancel     context.CancelFunc
}

// arm makes sure the task the rank's log reads now is watched, and returns its channel
// (nil when it cannot be watched) and whether there is such a task at all.
func (w *outputWatch) arm(ctx context.Context, watcher driver.OutputWatcher, source func(ws, id string, rank int) (string, string, bool),
	workspace, id string, rank int) (<-chan struct{}, bool) {
	node, task, ok := source(workspace, id, rank)
	if !ok {
		w.stop()
		return nil, false
	}
	if w.ch != nil && node == w.node && task == w.task {
		return w.ch, true
	}
	w.stop()
	wctx, cancel := context.WithCancel(ctx)
	ch, err := watcher.WatchOutput(wctx, node, task)
	if err != nil {
		// Not started yet (its node is still starting it), or a node whose driver does not
		// watch: the caller reads again after a short wait.
		cancel()
		return nil, true
	}
	w.node, w.task, w.ch, w.cancel = node, task, ch, cancel
	return ch, true
}

func (w *outputWatch) stop() {
	if w.cancel != nil {
		w.cancel()
	}
	*w = outputWatch{}
}
