package computes

import (
	"context"
	"fmt"
	"maps"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/catalog"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/runtime"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
)

// A compute's pass turns stored intent into running nodes. Every decision is made from the
// store (by the pass its controller registered) and committed before the driver is called;
// driver results and events are committed and trigger another pass. The loop runs one pass
// at a time; driver calls go through its Go, so a slow node never blocks another compute.

// Reconcile runs one pass for one compute (the loop's handler for runtime.Compute keys).
func (c *Core) Reconcile(ctx context.Context, key string) {
	if err := c.reconcileComputeOnce(ctx, key); err != nil && ctx.Err() == nil {
		c.Log.Error("reconcile failed", "compute", key, "error", err)
	}
}

func (c *Core) reconcileComputeOnce(ctx context.Context, key string) error {
	c.Mu.Lock()
	defer c.Mu.Unlock()
	now := c.Clock.Now().UTC()

	var (
		rec       model.Compute
		exists    bool
		acts      Actions
		adm       admission
		toPreempt []model.Node
		gone      bool
	)
	err := c.Store.Update(func(tx *store.Tx) error {
		var err error
		if exists, err = tx.Get(store.Computes, key, &rec); err != nil || !exists {
			return err
		}
		nodes, err := store.List[model.Node](tx, store.Nodes, key+"/")
		if err != nil {
			return err
		}
		jobs, err := model.ActiveJobs(tx, rec)
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
				c.Log.Error("admitting nodes failed", "error", err)
			}
			adm = a
		}()
		pass := c.passes[rec.Type]
		if pass == nil {
			return fmt.Errorf("no controller for computes of type %q", rec.Type)
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
	if err != nil || !exists {
		return err
	}
	if gone {
		c.Quota.Delete(key)
		c.Log.Info("compute deleted", "compute", key)
		c.Loop.Deleted(runtime.ComputeKey(key))
		if rec.KubeJob != nil {
			c.Kick(rec.Workspace + "/" + rec.KubeJob.Parent) // it may wait for this one to go
		}
		return nil
	}
	c.act(adm)
	for _, n := range toPreempt {
		c.preemptNode(n)
	}
	c.Apply(ctx, c.Log.With("compute", key), acts)
	return nil
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
		c.Loop.Go(func() { c.Kick(key) })
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

// Apply carries out a pass's actions after its commit. Callers hold Mu.
func (c *Core) Apply(ctx context.Context, log hclog.Logger, a Actions) {
	for _, l := range a.Logs {
		log.Log(l.Level, l.Msg, l.Args...)
	}
	for _, t := range a.Timers {
		if t.At.IsZero() {
			c.Loop.RemoveTimer(t.Timer)
		} else {
			c.Loop.SetTimer(t.Timer, t.At)
		}
	}
	for _, n := range a.Release {
		c.ReleaseNode(ctx, n)
	}
	for _, k := range a.KillTasks {
		c.Loop.Go(func() { _ = c.Driver.KillTask(ctx, k.Node, k.Task) })
	}
	for _, j := range a.KillJobs {
		c.Loop.Go(func() { c.KillJob(ctx, j) })
	}
	for _, j := range a.StartJobs {
		c.Loop.Go(func() { c.StartJob(ctx, j) })
	}
	for _, f := range a.Run {
		c.Loop.Go(func() { f(ctx) })
	}
}

// NewNode is the record of a node a pass creates: preparing until admission gives it
// capacity and the driver makes it.
func (c *Core) NewNode(rec model.Compute, now time.Time) model.Node {
	return model.Node{ID: c.NewID(rec.NodeIDPrefix()), Compute: rec.Key(), State: api.NodePreparing, CreatedOn: now}
}

// CreateBackedOff reports whether a compute's node creation is waiting after a failure,
// and sets the retry timer when it is.
func (c *Core) CreateBackedOff(key string, now time.Time) bool {
	b, ok := c.backoff[key]
	if !ok || !now.Before(b.until) {
		return false
	}
	c.Loop.SetTimer(runtime.Timer{Kind: runtime.Retry, Object: runtime.ComputeKey(key)}, b.until)
	return true
}

// NodeIdleTimer is the timer of an idle cluster node's release deadline.
func NodeIdleTimer(n model.Node) runtime.Timer {
	return runtime.Timer{Kind: runtime.NodeIdle, Object: runtime.ComputeKey(n.Compute), Sub: n.ID}
}

// createNode asks the driver for a committed node and records the outcome.
func (c *Core) createNode(ctx context.Context, n model.Node, size catalog.Size, pod *driver.PodShape) {
	info, err := c.Driver.Create(ctx, driver.NodeSpec{Key: n.ID, Owner: n.Compute, VMSize: size.Name, VCPUs: size.VCPUs, MemoryGB: size.MemoryGB, Pod: pod})
	if ctx.Err() != nil {
		return
	}
	c.Mu.Lock()
	now := c.Clock.Now().UTC()
	if err != nil {
		c.Log.Error("node failed to start", "node", n.Key(), "error", err)
		c.backoff[n.Compute] = nextBackoff(c.backoff[n.Compute], driver.IsPermanent(err), now)
	} else {
		delete(c.backoff, n.Compute)
	}
	_ = c.Store.Update(func(tx *store.Tx) error {
		var cur model.Node
		if ok, err := tx.Get(store.Nodes, n.Key(), &cur); err != nil || !ok || cur.State != api.NodePreparing {
			return err
		}
		switch {
		case err != nil:
			cur.State, cur.Error = api.NodeUnusable, err.Error()
		case info.Ready:
			cur.State, cur.IdleSince, cur.Reason = api.NodeIdle, now, ""
		default:
			// Created but not usable yet (a queued allocation): it stays preparing, with
			// the driver's reason, until a NodeReady event.
			cur.Reason = info.Reason
		}
		if err := tx.Put(store.Nodes, cur.Key(), cur); err != nil {
			return err
		}
		// The compute shows why it cannot get nodes; a node that starts clears that.
		switch {
		case err != nil:
			return c.updateCompute(tx, n.Compute, func(rec *model.Compute) {
				rec.AddError(api.ComputeError{Time: now, Code: startErrorCode(err), Message: fmt.Sprintf("node %s failed to start: %v", n.ID, err)})
			})
		case info.Ready:
			return c.clearErrors(tx, n.Compute)
		}
		return nil
	})
	c.Mu.Unlock()
	switch {
	case err == nil && info.Ready:
		c.Recorder.NodeCreated(n.Compute, now.Sub(n.CreatedOn))
		c.Log.Info("node ready", "node", n.Key())
	case err == nil:
		c.Log.Info("node created, waiting to be ready", "node", n.Key(), "reason", info.Reason)
	}
	c.Kick(n.Compute)
}

// NodeReady records that a node the driver created not ready is now usable.
func (c *Core) NodeReady(id string) {
	c.Mu.Lock()
	var compute string
	var created time.Time
	now := c.Clock.Now().UTC()
	_ = c.Store.Update(func(tx *store.Tx) error {
		n, ok := c.NodeByID(tx, id)
		if !ok || n.Released || n.State != api.NodePreparing || !n.Admitted {
			return nil
		}
		compute, created = n.Compute, n.CreatedOn
		n.State, n.IdleSince, n.Reason = api.NodeIdle, now, ""
		if err := tx.Put(store.Nodes, n.Key(), n); err != nil {
			return err
		}
		return c.clearErrors(tx, n.Compute)
	})
	c.Mu.Unlock()
	if compute != "" {
		c.Recorder.NodeCreated(compute, now.Sub(created))
		c.Log.Info("node ready", "node", id, "compute", compute)
		c.Kick(compute)
	}
}

// ReleaseNode terminates a node the store already marks released, once, and deletes its
// record when the driver confirms it is gone.
func (c *Core) ReleaseNode(ctx context.Context, n model.Node) {
	c.terminateOnce(ctx, n, "releasing", func() error {
		c.Loop.RemoveTimer(NodeIdleTimer(n))
		return c.Store.Update(func(tx *store.Tx) error { return tx.Delete(store.Nodes, n.Key()) })
	}, func() {
		if !n.ReleasedAt.IsZero() {
			c.Recorder.NodeReleased(n.Compute, c.Clock.Since(n.ReleasedAt))
		}
		c.Log.Info("node released", "node", n.Key())
		if c.Capacity > 0 {
			c.KickAll() // the freed capacity may admit nodes of other computes
		} else {
			c.Kick(n.Compute)
		}
	})
}

// terminateOnce asks the driver to terminate a node, one call at a time per node. When the
// driver confirms, gone records it (under c.Mu) and then after runs. On failure the node
// keeps its mark in the store (released or preempting): every pass terminates marked nodes
// again, and a back-off timer brings the next pass. Callers hold c.Mu.
func (c *Core) terminateOnce(ctx context.Context, n model.Node, doing string, gone func() error, after func()) {
	if c.releasing[n.Key()] {
		return
	}
	c.releasing[n.Key()] = true
	c.Loop.Go(func() {
		err := c.Driver.Terminate(ctx, n.ID)
		c.Mu.Lock()
		delete(c.releasing, n.Key())
		if err == nil {
			err = gone()
		}
		c.Mu.Unlock()
		if err != nil {
			if ctx.Err() == nil {
				c.Log.Error(doing+" node failed; will retry", "node", n.Key(), "error", err)
				c.Loop.SetTimer(runtime.Timer{Kind: runtime.Retry, Object: runtime.ComputeKey(n.Compute), Sub: n.ID}, c.Clock.Now().Add(runtime.RetryAfter))
			}
			return
		}
		after()
	})
}

// UpdateNode applies f to a stored node and commits when f reports a change. Callers hold c.Mu.
func (c *Core) UpdateNode(key string, f func(*model.Node) bool) error {
	return c.Store.Update(func(tx *store.Tx) error {
		var n model.Node
		ok, err := tx.Get(store.Nodes, key, &n)
		if err != nil || !ok || !f(&n) {
			return err
		}
		return tx.Put(store.Nodes, key, n)
	})
}

// NodeByID finds a stored node by its driver key.
func (c *Core) NodeByID(tx *store.Tx, id string) (model.Node, bool) {
	nodes, _ := store.List[model.Node](tx, store.Nodes, "")
	for _, n := range nodes {
		if n.ID == id {
			return n, true
		}
	}
	return model.Node{}, false
}

// NodeGone marks a node that died unusable (it is then released and replaced) and fails
// the job that ran on it.
func (c *Core) NodeGone(id, reason string) {
	if reason == "" {
		reason = "the node died, or its allocation ended by itself"
	}
	c.Mu.Lock()
	var compute string
	_ = c.Store.Update(func(tx *store.Tx) error {
		n, ok := c.NodeByID(tx, id)
		if !ok || n.Released {
			return nil
		}
		compute = n.Compute
		if n.JobID != "" {
			if j, ok := model.GetJob(tx, model.WorkspaceOf(n.Compute), n.JobID); ok && !api.Terminal(j.Status) {
				j.Finish(api.JobFailed, nil, fmt.Sprintf("node %s was lost while the job ran: %s", n.ID, reason), c.Clock.Now().UTC())
				if err := model.PutJob(tx, j); err != nil {
					return err
				}
				c.Loop.Go(func() { c.KillJob(c.Ctx, j) })
			}
		}
		n.State, n.Error, n.JobID, n.Task = api.NodeUnusable, reason, "", ""
		if err := tx.Put(store.Nodes, n.Key(), n); err != nil {
			return err
		}
		return c.updateCompute(tx, n.Compute, func(rec *model.Compute) {
			rec.AddError(api.ComputeError{Time: c.Clock.Now().UTC(), Code: api.ErrorNodeLost, Message: fmt.Sprintf("node %s was lost (%s); it is replaced when the compute needs it", n.ID, reason)})
		})
	})
	c.Mu.Unlock()
	if compute != "" {
		c.Log.Warn("node lost", "node", id, "compute", compute)
		c.Kick(compute)
	}
}

// Recover runs once at start: nodes the store records are adopted when alive, restarted
// when they were still being created, and marked unusable when dead; nodes the driver has
// that the store does not know are released; jobs are resumed or finished from what the
// nodes recorded. otherNodes are live driver nodes that other controllers own (endpoint
// instances), so they are not taken for orphans.
func (c *Core) Recover(ctx context.Context, otherNodes []string) error {
	var nodes []model.Node
	var computes []model.Compute
	err := c.Store.View(func(tx *store.Tx) error {
		var err error
		if nodes, err = store.List[model.Node](tx, store.Nodes, ""); err != nil {
			return err
		}
		computes, err = store.List[model.Compute](tx, store.Computes, "")
		return err
	})
	if err != nil {
		return err
	}
	known := map[string]bool{}
	for _, n := range nodes {
		known[n.ID] = true
		if !n.Admitted {
			continue // waiting for capacity: no driver node exists
		}
		if n.Preempting {
			c.Mu.Lock()
			c.preemptNode(n)
			c.Mu.Unlock()
			continue
		}
		if n.State == api.NodePreparing {
			// Committed but maybe never created, or created while the engine stopped before
			// it recorded the outcome. Create is idempotent under the key and returns a node
			// that is already live, so it runs whatever Describe would say (the ssh driver
			// describes every node the store holds, created or not).
			rec := computeOf(computes, n.Compute)
			size, _ := catalog.Lookup(rec.VMSize)
			c.Loop.Go(func() { c.createNode(ctx, n, size, PodShape(rec)) })
			continue
		}
		_, err := c.Driver.Describe(ctx, n.ID)
		switch {
		case driver.IsNotFound(err):
			c.NodeGone(n.ID, "the node was gone when the engine started again")
		case err != nil:
			return fmt.Errorf("describing node %s: %w", n.ID, err)
		case n.Task != "" && n.State == api.NodeRunning:
			// In the background: a machine that cannot be reached must not hold up the start
			// (nor the other nodes). A driver whose machines may be unreachable delivers the
			// exit itself once they answer (the ssh driver watches the tasks the store records).
			c.Loop.Go(func() {
				st, err := c.Driver.TaskStatus(ctx, n.ID, n.Task)
				switch {
				case err == nil && !st.Running:
					c.OnTaskExit(ctx, n.ID, n.Task, st.ExitCode)
				case driver.IsNotFound(err) && c.OnTaskNotStarted != nil:
					c.OnTaskNotStarted(n.ID, n.Task)
				}
			})
		}
	}
	for _, id := range otherNodes {
		known[id] = true
	}
	orphans, err := c.Driver.List(ctx, "")
	if err != nil {
		return fmt.Errorf("listing nodes: %w", err)
	}
	for _, o := range orphans {
		if !known[o.Key] {
			// Each in the background: a cluster manager may take seconds per allocation.
			c.Log.Warn("releasing orphaned node", "node", o.Key, "owner", o.Owner)
			c.Loop.Go(func() {
				if err := c.Driver.Terminate(ctx, o.Key); err != nil {
					c.Log.Error("releasing orphaned node failed", "node", o.Key, "error", err)
				}
			})
		}
	}
	// Jobs caught between assignment and start are started again; StartTask is idempotent.
	var preparing []model.Job
	_ = c.Store.View(func(tx *store.Tx) error {
		all, err := store.List[model.Job](tx, store.Jobs, "")
		for _, j := range all {
			if j.Status == api.JobPreparing {
				preparing = append(preparing, j)
			}
		}
		return err
	})
	for _, j := range preparing {
		c.Loop.Go(func() { c.StartJob(ctx, j) })
	}
	for _, rec := range computes {
		c.Kick(rec.Key())
	}
	return nil
}

func computeOf(computes []model.Compute, key string) model.Compute {
	for _, rec := range computes {
		if rec.Key() == key {
			return rec
		}
	}
	return model.Compute{}
}

// PodShape is how the pods of a job on an attached Kubernetes cluster ask for resources:
// its instance type; nil for every other compute.
func PodShape(rec model.Compute) *driver.PodShape {
	kj := rec.KubeJob
	if kj == nil {
		return nil
	}
	shape := &driver.PodShape{InstanceType: kj.InstanceType, NodeSelector: maps.Clone(kj.Shape.NodeSelector)}
	if r := kj.Shape.Resources; r != nil {
		shape.Requests, shape.Limits = maps.Clone(r.Requests), maps.Clone(r.Limits)
	}
	return shape
}

// startErrorCode classifies a driver's error at node creation for the compute's errors.
func startErrorCode(err error) string {
	switch {
	case driver.IsNoCapacity(err):
		return api.ErrorNoCapacity
	case driver.IsPermanent(err):
		return api.ErrorNodeStartFailed
	}
	return api.ErrorNodeStartRetrying
}

// updateCompute applies f to a stored compute in tx (nothing when it is gone).
func (c *Core) updateCompute(tx *store.Tx, key string, f func(*model.Compute)) error {
	var rec model.Compute
	if ok, err := tx.Get(store.Computes, key, &rec); err != nil || !ok {
		return err
	}
	f(&rec)
	return tx.Put(store.Computes, key, rec)
}

// clearErrors empties a compute's errors once it got a node again.
func (c *Core) clearErrors(tx *store.Tx, key string) error {
	var rec model.Compute
	if ok, err := tx.Get(store.Computes, key, &rec); err != nil || !ok || len(rec.Errors) == 0 {
		return err
	}
	rec.Errors = nil
	return tx.Put(store.Computes, key, rec)
}
