package instances

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/computes"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/rules/instance"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/validation"
)

// Setup scripts run as the node's task (key instance.SetupTask) on the fresh node of every
// start; rules/instance decides which runs when, this file starts them and applies their end.

// scripts are an instance's setup scripts as the rule reads them.
func scripts(ss *api.SetupScripts) (creation, startup *instance.Script) {
	if ss == nil {
		return nil, nil
	}
	return script(ss.CreationScript), script(ss.StartupScript)
}

func script(s *api.SetupScript) *instance.Script {
	if s == nil {
		return nil
	}
	timeout, _ := validation.Duration("timeout", s.Timeout, time.Second, 24*time.Hour)
	return &instance.Script{Command: s.Inline, Timeout: timeout}
}

// startSetup is the work that starts a setup script on its node, once the pass committed.
func (c *Controller) startSetup(rec model.Compute, nodeID string, s *instance.Setup) func(ctx context.Context) {
	spec := driver.TaskSpec{Key: s.Task, Command: []string{"sh", "-c", s.Command}, Env: c.nodeEnv(rec)}
	return func(ctx context.Context) {
		if err := c.core.Tasks().StartTask(ctx, nodeID, spec); err != nil {
			if ctx.Err() != nil || errors.Is(err, context.Canceled) {
				return // the engine is stopping; its next start runs the script (TaskNotStarted)
			}
			c.log.Error("starting setup script failed", "node", nodeID, "error", err)
			c.TaskExited(ctx, nodeID, spec.Key, 127)
		}
	}
}

// updateSetup applies change to the node running a setup task and to its instance, when
// the instance is still at that task's start and stage, and commits both unless change
// declines (returns false). It returns the instance's key ("" when no node runs the task),
// the task's stage, and whether it committed.
func (c *Controller) updateSetup(nodeID, task string, change func(n *model.Node, rec *model.Compute, now time.Time) bool) (key, stage string, changed bool) {
	_, stage, ok := instance.ParseSetupTask(task)
	if !ok {
		return "", "", false
	}
	now := c.core.Clock().Now().UTC()
	_ = c.core.Write(func(tx *store.Tx) error {
		n, ok := c.core.NodeByID(tx, nodeID)
		if !ok || n.Task != task {
			return nil
		}
		var rec model.Compute
		key = n.Compute
		if ok, err := tx.Get(store.Computes, key, &rec); err != nil || !ok || rec.Instance == nil {
			return err
		}
		if !rec.Instance.Current(task) || !change(&n, &rec, now) {
			return nil
		}
		// The node is free again: its script ended, or never started.
		n.State, n.JobID, n.Task, n.IdleSince = api.NodeIdle, "", "", now
		if err := tx.Put(store.Nodes, n.Key(), n); err != nil {
			return err
		}
		changed = true
		return tx.Put(store.Computes, key, rec)
	})
	return key, stage, changed
}

// OwnsTask claims the setup script a node's record says it runs (computes.TaskOwner): the
// node holds instance.SetupJob and the task is its current one. A script's end that comes
// after its node moved on is no one's: the instance started its next stage already.
func (c *Controller) OwnsTask(n model.Node, task string) bool {
	return n.JobID == instance.SetupJob && n.Task == task
}

// TaskNotStarted puts back a setup script the store records as running but its node never
// started, because the engine stopped between the two: the next pass starts the same stage
// again under the same task key (computes.TaskRestarter).
func (c *Controller) TaskNotStarted(nodeID, task string) {
	key, stage, changed := c.updateSetup(nodeID, task, func(_ *model.Node, rec *model.Compute, _ time.Time) bool {
		return rec.Instance.SetupNotStarted()
	})
	if changed {
		c.log.Warn("setup script was not started before the engine stopped; starting it again", "compute", key, "stage", stage)
		c.core.Kick(key)
	}
}

// TaskExited records the end of a setup script (computes.TaskOwner).
func (c *Controller) TaskExited(ctx context.Context, nodeID, task string, code int) {
	if _, _, ok := instance.ParseSetupTask(task); !ok {
		return
	}
	output, _ := c.core.Tasks().TaskOutput(ctx, nodeID, task, 0)
	key, stage, _ := c.updateSetup(nodeID, task, func(_ *model.Node, rec *model.Compute, now time.Time) bool {
		logPath := filepath.Join(c.dataDir, "instances", rec.Workspace, rec.Name, fmt.Sprintf("%s.log", task))
		if err := computes.WriteFileAtomic(logPath, output); err != nil {
			c.log.Error("saving setup script output failed", "compute", rec.Key(), "error", err)
		}
		rec.Instance.SetupExited(code, logPath, computes.LastLines(output, 10), now)
		return true
	})
	if key != "" {
		c.log.Info("setup script exited", "compute", key, "stage", stage, "exit_code", code)
		c.core.Kick(key)
	}
}
