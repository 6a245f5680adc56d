package computes

import (
	"context"
	"fmt"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/catalog"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/rules/backoff"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/runtime"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
)

// The computes' side of the node lifecycle (package lifecycle runs it): a pass commits a
// node's record before the node is created, the outcome and the driver's events (a node
// ready, a node lost, a task's end) are committed, and released nodes' records go once the
// driver confirms them gone; creation backs off after failures.

// createBackoff holds back a compute's node creation after failures (rules/backoff:
// RetryAfter after the first, doubling, and at least a minute after a permanent refusal, a
// setting to fix). A node that starts, or an update of the compute, ends it.
type createBackoff struct {
	until time.Time
	delay time.Duration
}

// nextCreateBackoff is the back-off after one more failure.
func nextCreateBackoff(prev createBackoff, permanent bool, now time.Time) createBackoff {
	floor := time.Duration(0)
	if permanent {
		floor = time.Minute
	}
	delay := backoff.Next(prev.delay, runtime.RetryAfter, floor)
	return createBackoff{until: now.Add(delay), delay: delay}
}

// NewNode is the record of a node a pass creates: preparing until admission gives it
// capacity and the driver makes it.
func (c *Core) NewNode(rec model.Compute, now time.Time) model.Node {
	return model.Node{ID: c.newID(rec.NodeIDPrefix()), Compute: rec.Key(), State: api.NodePreparing, CreatedOn: now}
}

// CreateBackedOff reports whether a compute's node creation is waiting after a failure,
// and sets the retry timer when it is.
func (c *Core) CreateBackedOff(key string, now time.Time) bool {
	b, ok := c.backoff[key]
	if !ok || !now.Before(b.until) {
		return false
	}
	c.loop.SetTimer(runtime.Timer{Kind: runtime.Retry, Object: runtime.ComputeKey(key)}, b.until)
	return true
}

// NodeIdleTimer is the timer of an idle cluster node's release deadline.
func NodeIdleTimer(n model.Node) runtime.Timer {
	return runtime.Timer{Kind: runtime.NodeIdle, Object: runtime.ComputeKey(n.Compute), Sub: n.ID}
}

// createNode asks the lifecycle for a committed node of rec; createdNode records the outcome.
func (c *Core) createNode(ctx context.Context, n model.Node, rec model.Compute) {
	size, _ := catalog.Lookup(rec.VMSize)
	spec := driver.NodeSpec{Key: n.ID, Owner: n.Compute, VMSize: size.Name, VCPUs: size.VCPUs, MemoryGB: size.MemoryGB, Pod: PodShape(rec), GPUs: n.GPUs}
	if spec.GPUs == nil && len(c.gpus) > 0 && c.onMachine(rec) {
		spec.GPUs = []string{} // a machine with GPUs: a node given none sees none
	}
	c.nodes.Create(ctx, c, spec, func(info driver.NodeInfo, err error) { c.createdNode(n, info, err) })
}

func (c *Core) createdNode(n model.Node, info driver.NodeInfo, err error) {
	if err != nil {
		c.log.Error("node failed to start", "node", n.Key(), "error", err)
	}
	var now time.Time
	_ = c.Write(func(tx *store.Tx) error {
		now = c.clock.Now().UTC()
		if err != nil {
			c.backoff[n.Compute] = nextCreateBackoff(c.backoff[n.Compute], driver.IsPermanent(err), now)
		} else {
			delete(c.backoff, n.Compute)
		}
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
			var forJob string
			if uerr := c.updateCompute(tx, n.Compute, func(rec *model.Compute) {
				rec.AddError(api.ComputeError{Time: now, Code: startErrorCode(err), Message: fmt.Sprintf("node %s failed to start: %v", n.ID, err)})
				forJob = rec.ForJob
			}); uerr != nil || forJob == "" || !driver.IsPermanent(err) {
				return uerr
			}
			return failJobOfRefusedNode(tx, model.WorkspaceOf(n.Compute), forJob, n.ID, err, now)
		case info.Ready:
			return c.clearErrors(tx, n.Compute)
		}
		return nil
	})
	switch {
	case err == nil && info.Ready:
		c.recorder.NodeCreated(n.Compute, now.Sub(n.CreatedOn))
		c.log.Info("node ready", "node", n.Key())
	case err == nil:
		c.log.Info("node created, waiting to be ready", "node", n.Key(), "reason", info.Reason)
	}
	c.Kick(n.Compute)
}

// failJobOfRefusedNode fails the queued job whose own compute (a serverless job's, a job's
// on an attached Kubernetes cluster) got a node the driver refused for good (a setting to
// fix, an image that cannot be imported): no retry of that compute can run the job, so
// the job ends now, naming the refusal, and its compute goes with it. A cluster's refused
// node is retried instead (its jobs wait, the reason on the compute's errors), since the
// user fixes the cluster and its queue stays.
func failJobOfRefusedNode(tx *store.Tx, workspace, jobID, nodeID string, refusal error, now time.Time) error {
	j, ok := model.GetJob(tx, workspace, jobID)
	if !ok || j.Status != api.JobQueued {
		return nil
	}
	j.Finish(api.JobFailed, nil, fmt.Sprintf("its node %s could not start: %v", nodeID, refusal), now)
	return model.PutJob(tx, j)
}

// NodeReady records that a node the driver created not ready is now usable.
func (c *Core) NodeReady(id string) {
	var compute string
	var created time.Time
	now := c.clock.Now().UTC()
	_ = c.Write(func(tx *store.Tx) error {
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
	if compute != "" {
		c.recorder.NodeCreated(compute, now.Sub(created))
		c.log.Info("node ready", "node", id, "compute", compute)
		c.Kick(compute)
	}
}

// NodeWaiting records the driver's new reason why a created node is not ready yet (a
// scheduler's message), on the node and in its compute's errors.
func (c *Core) NodeWaiting(id, reason string) {
	var compute string
	_ = c.Write(func(tx *store.Tx) error {
		n, ok := c.NodeByID(tx, id)
		if !ok || n.Released || n.State != api.NodePreparing || !n.Admitted || n.Reason == reason {
			return nil
		}
		compute = n.Compute
		return c.waitFor(tx, n, reason, c.clock.Now().UTC(), true)
	})
	if compute != "" {
		c.Kick(compute) // the job's reason follows
	}
}

// releaseNode terminates a node the store already marks released, once, and deletes its
// record when the driver confirms it is gone. When either fails, the node keeps its mark:
// every pass releases marked nodes again, and a retry timer brings the next pass.
func (c *Core) releaseNode(ctx context.Context, n model.Node) {
	c.nodes.Release(ctx, n.ID, nodeRetryTimer(n), func() error {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.loop.RemoveTimer(NodeIdleTimer(n))
		return c.store.Update(func(tx *store.Tx) error { return tx.Delete(store.Nodes, n.Key()) })
	}, func() {
		if !n.ReleasedAt.IsZero() {
			c.recorder.NodeReleased(n.Compute, c.clock.Since(n.ReleasedAt))
		}
		c.log.Info("node released", "node", n.Key())
		if c.machineWide() {
			c.kickAll() // the freed capacity, GPUs or machine may admit nodes of other computes
		} else {
			c.Kick(n.Compute)
		}
	})
}

// nodeRetryTimer brings a compute's next pass after releasing one of its nodes failed.
func nodeRetryTimer(n model.Node) runtime.Timer {
	return runtime.Timer{Kind: runtime.Retry, Object: runtime.ComputeKey(n.Compute), Sub: n.ID}
}

// HandleNodeEvent applies a driver event about a compute's node (lifecycle.Owner).
func (c *Core) HandleNodeEvent(ctx context.Context, ev driver.Event) {
	switch ev.Kind {
	case driver.TaskExited:
		c.taskExited(ctx, ev.NodeKey, ev.TaskKey, ev.ExitCode)
	case driver.NodeGone:
		c.NodeGone(ev.NodeKey, ev.Reason)
	case driver.NodeReady:
		c.NodeReady(ev.NodeKey)
	case driver.NodeWaiting:
		c.NodeWaiting(ev.NodeKey, ev.Reason)
	}
}

// NodeKeys lists the driver keys of every node the store records, for the lifecycle to
// route their events from the engine's start on.
func (c *Core) NodeKeys() ([]string, error) {
	var keys []string
	err := c.store.View(func(tx *store.Tx) error {
		nodes, err := store.List[model.Node](tx, store.Nodes, "")
		for _, n := range nodes {
			keys = append(keys, n.ID)
		}
		return err
	})
	return keys, err
}

// updateNode applies f to a stored node and commits when f reports a change. Callers hold c.mu.
func (c *Core) updateNode(key string, f func(*model.Node) bool) error {
	return c.store.Update(func(tx *store.Tx) error {
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
	var compute string
	_ = c.Write(func(tx *store.Tx) error {
		n, ok := c.NodeByID(tx, id)
		if !ok || n.Released {
			return nil
		}
		compute = n.Compute
		if n.JobID != "" {
			if j, ok := model.GetJob(tx, model.WorkspaceOf(n.Compute), n.JobID); ok && !api.Terminal(j.Status) {
				j.Finish(api.JobFailed, nil, fmt.Sprintf("node %s was lost while the job ran: %s", n.ID, reason), c.clock.Now().UTC())
				j.NodeLost = true
				if err := model.PutJob(tx, j); err != nil {
					return err
				}
				c.loop.Go(func() { c.KillJob(c.ctx, j) })
			}
		}
		n.State, n.Error, n.JobID, n.Task = api.NodeUnusable, reason, "", ""
		if err := tx.Put(store.Nodes, n.Key(), n); err != nil {
			return err
		}
		return c.updateCompute(tx, n.Compute, func(rec *model.Compute) {
			rec.AddError(api.ComputeError{Time: c.clock.Now().UTC(), Code: api.ErrorNodeLost, Message: fmt.Sprintf("node %s was lost (%s); it is replaced when the compute needs it", n.ID, reason)})
		})
	})
	if compute != "" {
		c.log.Warn("node lost", "node", id, "compute", compute)
		c.Kick(compute)
	}
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
