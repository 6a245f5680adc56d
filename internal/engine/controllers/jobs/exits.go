package jobs

import (
	"context"
	"fmt"
	"maps"
	"os"
	"strings"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/artifacts"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/computes"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
)

// The ends of a job's tasks: its environment's preparation on each node, then each rank.

// OwnsTask claims every task on a compute's node that no other owner claimed (the jobs
// controller is registered last, computes.RegisterTaskOwner): a job's ranks, those of its
// earlier attempts, and its environment's preparation. The keys are the jobs' own
// (model.Job.TaskKey, EnvTaskKey); one that is not a job's is ignored by TaskExited.
func (c *Controller) OwnsTask(model.Node, string) bool { return true }

// TaskExited applies the end of one of a job's tasks (computes.TaskOwner).
func (c *Controller) TaskExited(ctx context.Context, nodeID, task string, code int) {
	if rankTask, ok := strings.CutPrefix(task, model.EnvTaskPrefix); ok {
		c.envTaskExited(ctx, nodeID, task, rankTask, code)
		return
	}
	c.rankExited(ctx, nodeID, task, code)
	if c.cfg.AfterRankExit != nil {
		c.cfg.AfterRankExit()
	}
}

// envTaskExited applies the end of a rank's environment preparation: it saves the output
// (the head of the rank's log), fails the job with the output's last lines when the
// preparation failed, and starts the job's tasks once every rank's preparation succeeded.
func (c *Controller) envTaskExited(ctx context.Context, nodeID, task, rankTask string, code int) {
	jobID, attempt, rank, ok := model.ParseTaskKey(rankTask)
	if !ok {
		return
	}
	var j model.Job
	var found bool
	_ = c.core.View(func(tx *store.Tx) error {
		if n, ok := c.core.NodeByID(tx, nodeID); ok {
			j, found = model.GetJob(tx, model.WorkspaceOf(n.Compute), jobID)
		}
		return nil
	})
	if !found || attempt != j.Attempt || j.EnvDef == nil {
		return
	}
	out, _ := c.core.Tasks().TaskOutput(ctx, nodeID, task, 0)
	if j.Status == api.JobPreparing {
		if err := computes.WriteFileAtomic(c.core.EnvLogPath(jobID, rank), out); err != nil {
			c.log.Error("saving environment output failed", "job", jobID, "rank", rank, "error", err)
		}
	}
	var start, failed, ended bool
	_ = c.core.Write(func(tx *store.Tx) error {
		cur, ok := model.GetJob(tx, j.Workspace, jobID)
		if !ok || cur.Attempt != attempt {
			return nil
		}
		j = cur
		if cur.Status != api.JobPreparing {
			ended = api.Terminal(cur.Status)
			return nil
		}
		if cur.EnvAttempt != attempt || cur.EnvExits == nil {
			cur.EnvAttempt, cur.EnvExits = attempt, map[int]int{}
		}
		cur.EnvExits[rank] = code
		switch {
		case code != 0:
			cur.Preparing = ""
			cur.Finish(api.JobFailed, nil, envFailure(cur, nodeID, code, out), c.core.Clock().Now().UTC())
			failed = true
		case cur.EnvReady():
			start = true
		}
		j = cur
		return model.PutJob(tx, cur)
	})
	c.log.Info("environment preparation exited", "job", jobID, "attempt", attempt, "rank", rank, "exit_code", code)
	switch {
	case start:
		c.core.Go(func() { c.core.StartJob(ctx, j) })
	case failed:
		// The rank's log is its preparation's output: the job never ran.
		for r := range j.Nodes {
			if raw, err := os.ReadFile(c.core.EnvLogPath(jobID, r)); err == nil {
				_ = computes.WriteFileAtomic(c.core.JobLogPath(jobID, r), raw)
			} else {
				_ = computes.WriteFileAtomic(c.core.JobLogPath(jobID, r), nil)
			}
		}
		c.core.Go(func() { c.core.KillJob(ctx, j); c.core.FreeNodes(j) })
	case ended:
		c.core.FreeNodes(j)
	}
}

// envFailure is a failed preparation's error: what failed, where, and the last lines of
// its output (pip's error).
func envFailure(j model.Job, node string, code int, out []byte) string {
	what := fmt.Sprintf("building environment %q", j.EnvDef.Name)
	if j.EnvDef.Definition.UserManaged != nil {
		what = fmt.Sprintf("checking the interpreter %s of environment %q", j.EnvDef.Definition.UserManaged.InterpreterPath, j.EnvDef.Name)
	}
	msg := fmt.Sprintf("%s failed on node %s (exit status %d)", what, node, code)
	if last := computes.LastLines(out, 8); last != "" {
		msg += ":\n" + last
	}
	return msg
}

// rankExited saves a rank's output, frees its node and finishes the job when it is done.
// Exits of an earlier attempt (the job was preempted and requeued) only free their node.
func (c *Controller) rankExited(ctx context.Context, nodeID, task string, code int) {
	jobID, attempt, rank, ok := model.ParseTaskKey(task)
	if !ok {
		return
	}
	var j model.Job
	var found bool
	_ = c.core.View(func(tx *store.Tx) error {
		n, ok := c.core.NodeByID(tx, nodeID)
		if ok {
			j, found = model.GetJob(tx, model.WorkspaceOf(n.Compute), jobID)
		}
		return nil
	})
	if !found {
		return
	}
	current := attempt == j.Attempt
	if current {
		if out, err := c.core.Tasks().TaskOutput(ctx, nodeID, task, 0); err == nil {
			if envLog, err := os.ReadFile(c.core.EnvLogPath(jobID, rank)); err == nil && j.EnvDef != nil {
				out = append(envLog, out...)
			}
			if err := computes.WriteFileAtomic(c.core.JobLogPath(jobID, rank), out); err != nil {
				c.log.Error("saving job output failed", "job", jobID, "rank", rank, "error", err)
			}
		}
	}
	// Rank 0's outputs are taken in before the write that records its exit; the
	// collection waits until that write committed and the intakes are released.
	var taken map[string]api.JobOutput
	var intakeErr error
	if _, seen := j.RankExits[rank]; current && rank == 0 && code == 0 && !seen && len(j.Outputs) > 0 && !api.Terminal(j.Status) {
		c.collect.RLock()
		defer c.collect.RUnlock()
		var intakes []*artifacts.Intake
		taken, intakes, intakeErr = c.takeOutputs(ctx, j, nodeID)
		defer func() {
			for _, in := range intakes {
				in.Release()
			}
		}()
		if ctx.Err() != nil {
			return // the engine stops: its next start finds the exit again
		}
	}
	var kill bool
	now := c.core.Clock().Now().UTC()
	_ = c.core.Write(func(tx *store.Tx) error {
		cur, ok := model.GetJob(tx, j.Workspace, jobID)
		if !ok {
			return nil
		}
		if current && cur.Attempt == attempt {
			if cur.RankExits == nil {
				cur.RankExits = map[int]int{}
			}
			if _, seen := cur.RankExits[rank]; !seen {
				cur.RankExits[rank] = code
				if !api.Terminal(cur.Status) {
					switch {
					case code != 0:
						exit := code
						cur.Finish(api.JobFailed, &exit, fmt.Sprintf("rank %d exited with status %d", rank, code), now)
						kill = true
					case intakeErr != nil:
						cur.Finish(api.JobFailed, nil, fmt.Sprintf("taking the job's outputs from rank %d: %v", rank, intakeErr), now)
						kill = true
					case int64(len(cur.RankExits)) == cur.Count:
						cur.PendingOutputs = mergeOutputs(cur.PendingOutputs, taken)
						exit := 0
						cur.Finish(api.JobCompleted, &exit, "", now)
					default:
						cur.PendingOutputs = mergeOutputs(cur.PendingOutputs, taken)
					}
				}
				if err := model.PutJob(tx, cur); err != nil {
					return err
				}
			}
		}
		j = cur
		var n model.Node
		if ok, err := tx.Get(store.Nodes, cur.ComputeKey+"/"+nodeID, &n); err != nil || !ok || n.Task != task {
			return err
		}
		n.JobID, n.Task = "", ""
		if n.State == api.NodeRunning {
			n.State, n.IdleSince = api.NodeIdle, now
		}
		return tx.Put(store.Nodes, n.Key(), n)
	})
	if kill {
		c.core.Go(func() { c.core.KillJob(ctx, j) })
	}
	if intakeErr != nil || code != 0 && len(j.Outputs) > 0 {
		// What the refused intake, or rank 0's outputs the failure dropped, wrote goes now.
		c.core.Go(func() {
			if _, _, err := c.CollectArtifacts(); err != nil {
				c.log.Error("collecting artifacts failed", "error", err)
			}
		})
	}
	c.log.Info("task exited", "job", jobID, "attempt", attempt, "rank", rank, "exit_code", code, "status", j.Status)
	c.core.Kick(j.ComputeKey)
}

// mergeOutputs adds the outputs just taken in to the pending ones.
func mergeOutputs(pending, taken map[string]api.JobOutput) map[string]api.JobOutput {
	if len(taken) == 0 {
		return pending
	}
	out := maps.Clone(pending)
	if out == nil {
		out = map[string]api.JobOutput{}
	}
	maps.Copy(out, taken)
	return out
}
