package engine

import (
	"context"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
)

// How often FollowJobLogs looks again when it found nothing new. The node drivers report a
// task's exit but not its output, so a follower re-reads it: at once while the job waits
// for its node (a look at the store), and from followMinWait, doubling up to followMaxWait
// while a running task prints nothing, back to followMinWait after each piece of output.
// The first line of a job that has just started therefore reaches the client within
// followMinWait of being written; a task that stays silent costs a read per followMaxWait.
const (
	followMinWait = time.Millisecond
	followMaxWait = 50 * time.Millisecond
)

// FollowJobLogs sends a rank's output from offset on to emit as it appears, until the job
// has ended and its output is all sent (it returns nil and the offset after the last byte)
// or ctx ends (ctx's error). An error from emit ends the follow with that error. This is
// the engine's side of a streamed `GET .../logs?follow=true`.
func (e *Engine) FollowJobLogs(ctx context.Context, workspace, id string, rank int, offset int64, emit func([]byte) error) (int64, error) {
	wait := followMinWait
	for {
		data, next, complete, err := e.JobLogs(ctx, workspace, id, rank, offset)
		if err != nil {
			return offset, err
		}
		offset = next
		if len(data) > 0 {
			if err := emit(data); err != nil {
				return offset, err
			}
			wait = followMinWait
		} else if j, err := e.GetJob(ctx, workspace, id); err == nil && !startedOrEnded(j.Status) {
			wait = followMinWait // no node yet: nothing to read but the store
		} else {
			wait = min(2*wait, followMaxWait)
		}
		if complete {
			return offset, nil
		}
		// Real time, not the engine's clock: this paces reads of a stream (I/O), it is no
		// rule's deadline, and a fake clock in tests would never let it go on.
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return offset, ctx.Err()
		case <-t.C:
		}
	}
}

// startedOrEnded reports whether a job has reached its nodes (or will never).
func startedOrEnded(status string) bool {
	return status == api.JobRunning || api.Terminal(status)
}
