package computes

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/rules/cluster"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/rules/jobtimeout"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/runtime"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
)

// A compute's pass turns stored intent into running nodes. Every decision is made from the
// store (by the pass its controller registered) and committed before the driver is called;
// driver results and events are committed and trigger another pass. The loop runs one pass
// at a time; driver calls go through its Go, so a slow node never blocks another compute.

// MaxNodesPerPass bounds the node records one pass creates, so no pass does unbounded work
// whatever min_node_count or a job asks for.
const MaxNodesPerPass = 64

// Pass is one kind of compute's decision at one pass, made inside the pass's transaction:
// it may change rec (and say so with Actions.SaveCompute), its nodes and jobs in tx, and
// returns what to do once the transaction is committed.
type Pass func(tx *store.Tx, rec *model.Compute, nodes []model.Node, jobs []model.Job, now time.Time) (Actions, error)

// Actions is what a pass decided to do after its commit.
type Actions struct {
	// SaveCompute: the pass changed the compute record; the core stores it.
	SaveCompute bool
	// Release are nodes the pass marked released: they are terminated, and their records go
	// once the driver confirms.
	Release []model.Node
	// KillTasks are tasks to kill (a setup script past its timeout, a job on a stopped node).
	KillTasks []TaskRef
	// KillJobs are jobs the pass finished whose tasks may still run.
	KillJobs []model.Job
	// StartJobs are jobs the pass gave nodes to.
	StartJobs []model.Job
	// Run is other work, run through the loop's Go (a setup script's start).
	Run []func(ctx context.Context)
	// Timers are deadlines to set (At non-zero) or clear (At zero) once committed.
	Timers []TimerChange
	// Logs are what the pass decided, logged once committed (never a decision that rolled back).
	Logs []LogLine
}

// TimerChange sets a timer to At, or clears it when At is zero.
type TimerChange struct {
	Timer runtime.Timer
	At    time.Time
}

// SetTimer and ClearTimer record timer changes.
func (a *Actions) SetTimer(t runtime.Timer, at time.Time) {
	a.Timers = append(a.Timers, TimerChange{t, at})
}

func (a *Actions) ClearTimer(t runtime.Timer) { a.Timers = append(a.Timers, TimerChange{Timer: t}) }

// LogLine is one log line of a pass.
type LogLine struct {
	Level hclog.Level
	Msg   string
	Args  []any
}

// Log records a log line.
func (a *Actions) Log(level hclog.Level, msg string, args ...any) {
	a.Logs = append(a.Logs, LogLine{level, msg, args})
}

// TaskRef names one task on one node.
type TaskRef struct{ Node, Task string }

// Reconcile runs one pass for one compute (the loop's handler for runtime.Compute keys).
func (c *Core) Reconcile(ctx context.Context, key string) {
	if err := c.reconcileComputeOnce(ctx, key); err != nil && ctx.Err() == nil {
		c.log.Error("reconcile failed", "compute", key, "error", err)
	}
}

func (c *Core) reconcileComputeOnce(ctx context.Context, key string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now().UTC()

	var (
		rec       model.Compute
		exists    bool
		acts      Actions
		adm       admission
		toPreempt []model.Node
		gone      bool
	)
	err := c.store.Update(func(tx *store.Tx) error {
		var err error
		if exists, err = tx.Get(store.Computes, key, &rec); err != nil || !exists {
			return err
		}
		nodes, err := store.List[model.Node](tx, store.Nodes, key+"/")
		if err != nil {
			return err
		}
		jobs, err := passJobs(tx, rec)
		if err != nil {
			return err
		}
		if rec.Serverless && len(jobs) == 0 && !rec.Deleting {
			rec.Deleting = true
			if err := tx.Put(store.Computes, key, rec); err != nil {
				return err
			}
		}
		if rec.Deleting {
			gone, err = c.deletePass(tx, rec, nodes, jobs, now, &acts)
			return err
		}
		// A node marked released or preempting whose Terminate failed (or was cut short by a
		// crash) is terminated again on every pass until the driver confirms it gone.
		for _, n := range nodes {
			switch {
			case n.Released:
				acts.Release = append(acts.Release, n)
			case n.Preempting:
				toPreempt = append(toPreempt, n)
			}
		}
		// Every pass ends by handing out capacity, also when the kind's pass fails.
		defer func() {
			a, err := c.admit(tx, key, now)
			if err != nil {
				c.log.Error("admitting nodes failed", "error", err)
			}
			adm = a
		}()
		pass := c.passes[rec.Type]
		if pass == nil {
			return fmt.Errorf("no controller for computes of type %q", rec.Type)
		}
		if jobs, err = c.expireJobs(tx, key, jobs, now, &acts); err != nil {
			return err
		}
		kind, err := pass(tx, &rec, nodes, jobs, now)
		if err != nil {
			return err
		}
		acts.merge(kind)
		if acts.SaveCompute {
			return tx.Put(store.Computes, key, rec)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if !exists {
		// Whoever waits for it to go registered before the pass it asked for (AwaitDeleted):
		// a record that an earlier pass, or the write that marked it, already removed must
		// not leave them waiting.
		c.loop.Deleted(runtime.ComputeKey(key))
		return nil
	}
	if gone {
		c.deleted(rec)
		return nil
	}
	c.act(adm)
	for _, n := range toPreempt {
		c.preemptNode(n)
	}
	c.apply(ctx, c.log.With("compute", key), acts)
	return nil
}

// passJobs reads the jobs a pass decides on. A cluster's pass (attached machines' too)
// reads only the head of its queue (model.PlacingJobs), so a pass, and every write that
// waits for it, costs the same with 1,000 jobs queued as with none (DESIGN 4). A compute
// instance's pass and a delete pass may end every job, so they read them all.
func passJobs(tx *store.Tx, rec model.Compute) ([]model.Job, error) {
	if rec.Instance != nil || rec.Deleting {
		return model.ActiveJobs(tx, rec)
	}
	return model.PlacingJobs(tx, rec, rec.MaxNodes())
}

// kubeJobComputes marks the job computes of an attached Kubernetes cluster being deleted
// as deleting too (kicking them after the commit) and returns those that remain.
func (c *Core) kubeJobComputes(tx *store.Tx, rec model.Compute) ([]string, error) {
	recs, err := store.List[model.Compute](tx, store.Computes, rec.Workspace+"/"+model.KubeJobComputePrefix)
	if err != nil {
		return nil, err
	}
	var keys []string
	for _, child := range recs {
		if child.KubeJob == nil || child.KubeJob.Parent != rec.Name {
			continue
		}
		keys = append(keys, child.Key())
		if !child.Deleting {
			child.Deleting = true
			if err := tx.Put(store.Computes, child.Key(), child); err != nil {
				return nil, err
			}
		}
		key := child.Key()
		c.loop.Go(func() { c.Kick(key) })
	}
	return keys, nil
}

// deletePass is a pass over a compute being deleted: its jobs are canceled, its nodes
// released, and its record goes once no node is left. It reports whether the record went.
func (c *Core) deletePass(tx *store.Tx, rec model.Compute, nodes []model.Node, jobs []model.Job, now time.Time, acts *Actions) (bool, error) {
	for _, j := range jobs {
		j.Finish(api.JobCanceled, nil, "compute deleted", now)
		if err := model.PutJob(tx, j); err != nil {
			return false, err
		}
		acts.KillJobs = append(acts.KillJobs, j)
	}
	for _, n := range nodes {
		if !n.Released {
			n.MarkReleased(now)
			if err := tx.Put(store.Nodes, n.Key(), n); err != nil {
				return false, err
			}
		}
		acts.Release = append(acts.Release, n)
	}
	if len(nodes) > 0 {
		return false, nil
	}
	if rec.Kubernetes != nil {
		// The jobs on an attached cluster run on computes of their own: they are cancelled
		// and their pods deleted before the cluster's record goes.
		children, err := c.kubeJobComputes(tx, rec)
		if err != nil || len(children) > 0 {
			return false, err
		}
	}
	return true, tx.Delete(store.Computes, rec.Key())
}

// deleted follows the commit that deleted a compute's record, in turn: the quota index
// lets its holding go, and whoever waits for it to go is told.
func (c *Core) deleted(rec model.Compute) {
	key := rec.Key()
	c.quota.Delete(key)
	c.log.Info("compute deleted", "compute", key)
	c.loop.Deleted(runtime.ComputeKey(key))
	if rec.KubeJob != nil {
		c.Kick(rec.Workspace + "/" + rec.KubeJob.Parent) // it may wait for this one to go
	}
}

func (a *Actions) merge(b Actions) {
	a.SaveCompute = a.SaveCompute || b.SaveCompute
	a.Release = append(a.Release, b.Release...)
	a.KillTasks = append(a.KillTasks, b.KillTasks...)
	a.KillJobs = append(a.KillJobs, b.KillJobs...)
	a.StartJobs = append(a.StartJobs, b.StartJobs...)
	a.Run = append(a.Run, b.Run...)
	a.Timers = append(a.Timers, b.Timers...)
	a.Logs = append(a.Logs, b.Logs...)
}

// apply carries out a pass's actions after its commit, in turn (under c.mu).
func (c *Core) apply(ctx context.Context, log hclog.Logger, a Actions) {
	for _, l := range a.Logs {
		log.Log(l.Level, l.Msg, l.Args...)
	}
	for _, t := range a.Timers {
		if t.At.IsZero() {
			c.loop.RemoveTimer(t.Timer)
		} else {
			c.loop.SetTimer(t.Timer, t.At)
		}
	}
	for _, n := range a.Release {
		c.releaseNode(ctx, n)
	}
	for _, k := range a.KillTasks {
		c.tasks.KillAfterCommit(k.Node, k.Task)
	}
	for _, j := range a.KillJobs {
		c.loop.Go(func() { c.KillJob(ctx, j) })
	}
	for _, j := range a.StartJobs {
		c.loop.Go(func() { c.StartJob(ctx, j) })
	}
	for _, f := range a.Run {
		c.loop.Go(func() { f(ctx) })
	}
}

// JobViews are jobs as the placement rules read them (rules/cluster, rules/instance).
func JobViews(jobs []model.Job) []cluster.Job {
	out := make([]cluster.Job, 0, len(jobs))
	for _, j := range jobs {
		out = append(out, cluster.Job{ID: j.ID, Status: j.Status, Count: j.Count, SubmittedAt: j.SubmittedAt})
	}
	return out
}

// expireJobs fails the running jobs that reached their limits.timeout (rules/jobtimeout),
// to be killed once committed, sets the timers of the others, and returns the jobs that
// remain active for the compute's own pass.
func (c *Core) expireJobs(tx *store.Tx, key string, jobs []model.Job, now time.Time, acts *Actions) ([]model.Job, error) {
	active := jobs[:0:0]
	for _, j := range jobs {
		timer := runtime.Timer{Kind: runtime.JobTimeout, Object: runtime.ComputeKey(key), Sub: j.ID}
		var started *time.Time
		if j.Status == api.JobRunning {
			started = j.StartedAt
		}
		d := jobtimeout.Decide(started, j.TimeoutSeconds, now)
		switch {
		case d.Expired:
			j.Finish(api.JobFailed, nil, d.Reason, now)
			if err := model.PutJob(tx, j); err != nil {
				return nil, err
			}
			acts.KillJobs = append(acts.KillJobs, j)
			acts.ClearTimer(timer)
			acts.Log(hclog.Warn, "job stopped at its limits.timeout", "job", j.ID, "timeout_seconds", j.TimeoutSeconds)
			continue
		case !d.Deadline.IsZero():
			acts.SetTimer(timer, d.Deadline)
		}
		active = append(active, j)
	}
	return active, nil
}
