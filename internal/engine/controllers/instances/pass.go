package instances

import (
	"fmt"
	"slices"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/computes"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/rules/instance"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/runtime"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
)

// Pass decides one pass for an instance: it maps the stored records to the rule's input
// (rules/instance), decides, and commits the decision in the pass's transaction; the core
// carries out the returned actions once committed.
func (c *Controller) Pass(tx *store.Tx, rec *model.Compute, nodes []model.Node, jobs []model.Job, now time.Time) (computes.Actions, error) {
	in, node := c.input(*rec, nodes, jobs)
	d := instance.Decide(in, now)
	rec.Instance.Lifecycle = d.Lifecycle
	return c.commit(tx, *rec, node, jobs, d, now)
}

// input maps an instance's records to the rule's input; node is the live node, if any.
func (c *Controller) input(rec model.Compute, nodes []model.Node, jobs []model.Job) (in instance.Input, node *model.Node) {
	for i := range nodes {
		if !nodes[i].Released {
			node = &nodes[i]
		}
	}
	in = instance.Input{
		Lifecycle: rec.Instance.Lifecycle, Schedules: scheduleEntries(rec), IdleAfter: rec.Durations.IdleShutdownAfter,
		Nodes: len(nodes), Jobs: computes.JobViews(jobs), Sessions: c.sessions.count(rec.Key()),
	}
	in.Creation, in.Startup = scripts(rec.Instance.Settings.SetupScripts)
	if node != nil {
		in.Node = &instance.Node{ID: node.ID, State: node.State, JobID: node.JobID, IdleSince: node.IdleSince}
	}
	return in, node
}

// commit writes a decision's changes to the instance's node and jobs in tx, and returns
// what to do once committed.
func (c *Controller) commit(tx *store.Tx, rec model.Compute, node *model.Node, jobs []model.Job, d instance.Decision, now time.Time) (computes.Actions, error) {
	out := computes.Actions{SaveCompute: true}
	key := rec.Key()
	timer := func(kind runtime.TimerKind, t instance.Timer) {
		switch {
		case !t.Change:
		case t.At.IsZero():
			out.ClearTimer(instanceTimer(kind, key))
		default:
			out.SetTimer(instanceTimer(kind, key), t.At)
		}
	}
	putNode := func() error { return tx.Put(store.Nodes, node.Key(), *node) }

	if f := d.Fired; f != nil {
		out.Log(hclog.Info, "schedule fired", "compute", key, "action", f.Action, "at", f.At)
	}
	timer(runtime.Schedule, d.Schedule)
	if d.CancelJobs != "" {
		for _, j := range jobs {
			j.Finish(api.JobCanceled, nil, d.CancelJobs, now)
			if err := model.PutJob(tx, j); err != nil {
				return out, err
			}
			out.KillJobs = append(out.KillJobs, j)
		}
	}
	if d.Release && node != nil {
		if node.Task != "" {
			out.KillTasks = append(out.KillTasks, computes.TaskRef{Node: node.ID, Task: node.Task})
		}
		node.MarkReleased(now)
		if err := putNode(); err != nil {
			return out, err
		}
		out.Release = append(out.Release, *node)
	}
	if d.Create {
		n := c.core.NewNode(rec, now)
		if err := tx.Put(store.Nodes, n.Key(), n); err != nil {
			return out, err
		}
	}
	if d.KillSetup {
		out.KillTasks = append(out.KillTasks, computes.TaskRef{Node: node.ID, Task: node.Task})
	}
	if s := d.Setup; s != nil {
		node.State, node.JobID, node.Task = api.NodeRunning, instance.SetupJob, s.Task
		if err := putNode(); err != nil {
			return out, err
		}
		out.Run = append(out.Run, c.startSetup(rec, node.ID, s))
	}
	timer(runtime.SetupTimeout, d.SetupTimeout)
	for _, j := range jobs {
		switch {
		case j.ID == d.Assign:
			j.Status, j.Nodes = api.JobPreparing, []string{node.ID}
			node.State, node.JobID, node.Rank, node.Task, node.IdleSince = api.NodeRunning, j.ID, 0, j.TaskKey(0), time.Time{}
			if err := putNode(); err != nil {
				return out, err
			}
			out.StartJobs = append(out.StartJobs, j)
		case slices.Contains(d.Unplaceable, j.ID):
			j.Finish(api.JobFailed, nil, fmt.Sprintf("the job needs %d nodes but compute instance %s has one", j.Count, rec.Name), now)
		default:
			continue
		}
		if err := model.PutJob(tx, j); err != nil {
			return out, err
		}
	}
	timer(runtime.InstanceIdle, d.Idle)
	if d.IdleFor > 0 {
		out.Log(hclog.Warn, "instance stopped for idleness", "compute", key, "idle_for", d.IdleFor.String())
	}
	if d.Again {
		c.core.Kick(key)
	}
	return out, nil
}

func instanceTimer(kind runtime.TimerKind, computeKey string) runtime.Timer {
	return runtime.Timer{Kind: kind, Object: runtime.ComputeKey(computeKey)}
}
