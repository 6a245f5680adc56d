package jobs

import (
	"context"
	"os"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
)

// A job's logs: each rank's output, saved once the rank ended, read from its node before.

// JobLogs returns a rank's output from offset, the next offset, and whether the output is
// complete (the job ended and the rank's output was saved). A job with an environment's
// log opens with the environment's preparation (its build, or the note that none was
// needed), then the task's output.
func (c *Controller) JobLogs(ctx context.Context, workspace, id string, rank int, offset int64) ([]byte, int64, bool, error) {
	j, err := c.GetJob(ctx, workspace, id)
	if err != nil {
		return nil, offset, false, err
	}
	if rank < 0 || int64(rank) >= j.Count {
		return nil, offset, false, api.Errorf(api.CodeInvalid, "rank", "rank must be between 0 and %d", j.Count-1)
	}
	if raw, err := os.ReadFile(c.core.JobLogPath(id, rank)); err == nil {
		if offset > int64(len(raw)) {
			offset = int64(len(raw))
		}
		return raw[offset:], int64(len(raw)), api.Terminal(j.Status), nil
	}
	var rec model.Job
	_ = c.core.View(func(tx *store.Tx) error { rec, _ = model.GetJob(tx, workspace, id); return nil })
	if rank >= len(j.Nodes) || (j.Status != api.JobRunning && j.Status != api.JobPreparing && !api.Terminal(j.Status)) {
		// Queued, or ended before its output could be saved (e.g. its node was lost).
		return nil, offset, api.Terminal(j.Status), nil
	}
	var prefix int64
	if rec.EnvDef != nil {
		envLog, err := os.ReadFile(c.core.EnvLogPath(id, rank))
		if err != nil {
			// Still preparing: the preparation's output so far.
			data, err := c.core.Tasks().TaskOutput(ctx, j.Nodes[rank], rec.EnvTaskKey(rank), offset)
			if err != nil && !driver.IsNotFound(err) {
				return nil, offset, false, err
			}
			return data, offset + int64(len(data)), false, nil
		}
		if offset < int64(len(envLog)) {
			return envLog[offset:], int64(len(envLog)), false, nil
		}
		prefix = int64(len(envLog))
	}
	data, err := c.core.Tasks().TaskOutput(ctx, j.Nodes[rank], rec.TaskKey(rank), offset-prefix)
	if err == nil {
		return data, offset + int64(len(data)), false, nil
	}
	if !driver.IsNotFound(err) {
		return nil, offset, false, err
	}
	return nil, offset, api.Terminal(j.Status), nil
}

// LogSource names the task whose output a rank's log reads from now on: the node and the
// task key of the environment's preparation while it runs, then of the job's task. ok is
// false while the rank has no node, and once its log is saved (the job ended). A follower
// of the log watches that task's output to be woken by its writes.
func (c *Controller) LogSource(workspace, id string, rank int) (node, task string, ok bool) {
	var j model.Job
	_ = c.core.View(func(tx *store.Tx) error { j, ok = model.GetJob(tx, workspace, id); return nil })
	if !ok || rank < 0 || rank >= len(j.Nodes) || (j.Status != api.JobRunning && j.Status != api.JobPreparing) {
		return "", "", false
	}
	if _, err := os.Stat(c.core.JobLogPath(id, rank)); err == nil {
		return "", "", false
	}
	if j.EnvDef != nil {
		if _, err := os.Stat(c.core.EnvLogPath(id, rank)); err != nil {
			return j.Nodes[rank], j.EnvTaskKey(rank), true
		}
	}
	return j.Nodes[rank], j.TaskKey(rank), true
}
