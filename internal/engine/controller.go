package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/catalog"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/rules/cluster"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/runtime"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
)

// The controller turns stored intent into running nodes. Every decision is made from the
// store by cluster.Decide and committed before the driver is called; driver results and
// events are committed and trigger another pass. One goroutine runs the passes; driver
// calls run in their own goroutines so a slow node never blocks another compute.

// maxNodesPerPass bounds the node records one pass creates, so no pass does unbounded work
// whatever min_node_count or a job asks for.
const maxNodesPerPass = 64

// Start adopts what a previous run left (live nodes and their tasks), releases orphans,
// and then, unless the engine is manual, runs the work loop until ctx ends. A manual
// engine does nothing until Settle.
func (e *Engine) Start(ctx context.Context) error {
	if e.driver == nil {
		return errors.New("engine has no node driver")
	}
	e.ctx = ctx
	e.driver = e.withAttached(ctx, e.driver)
	e.watchDriver()
	e.endpoints.Start(ctx, e.driver)
	if err := e.recover(ctx); err != nil {
		return fmt.Errorf("recovering after restart: %w", err)
	}
	if !e.manual {
		go e.loop.Run(ctx)
	}
	return nil
}

// reconcileCompute runs one pass for one compute.
func (e *Engine) reconcileCompute(ctx context.Context, key string) {
	if err := e.reconcileComputeOnce(ctx, key); err != nil && ctx.Err() == nil {
		e.log.Error("reconcile failed", "compute", key, "error", err)
	}
}

func (e *Engine) reconcileComputeOnce(ctx context.Context, key string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.clock.Now().UTC()

	var (
		rec       model.Compute
		exists    bool
		nodes     []model.Node
		jobs      []model.Job
		toStop    []model.Node
		toStart   []model.Job
		toKill    []model.Job
		adm       admission
		inst      instanceActions
		toPreempt []model.Node
		gone      bool
	)
	err := e.store.Update(func(tx *store.Tx) error {
		var err error
		if exists, err = tx.Get(store.Computes, key, &rec); err != nil || !exists {
			return err
		}
		if nodes, err = store.List[model.Node](tx, store.Nodes, key+"/"); err != nil {
			return err
		}
		if jobs, err = model.ActiveJobs(tx, rec); err != nil {
			return err
		}
		if rec.Serverless && len(jobs) == 0 && !rec.Deleting {
			rec.Deleting = true
			if err := tx.Put(store.Computes, key, rec); err != nil {
				return err
			}
		}
		if rec.Deleting {
			for _, j := range jobs {
				j.Finish(api.JobCanceled, nil, "compute deleted", now)
				if err := tx.Put(store.Jobs, j.Key(), j); err != nil {
					return err
				}
				toKill = append(toKill, j)
			}
			for _, n := range nodes {
				if !n.Released {
					n.Released, n.State = true, api.NodeLeaving
					if err := tx.Put(store.Nodes, n.Key(), n); err != nil {
						return err
					}
				}
				toStop = append(toStop, n)
			}
			if len(nodes) == 0 {
				gone = true
				return tx.Delete(store.Computes, key)
			}
			return nil
		}
		// A node marked released or preempting whose Terminate failed (or was cut short by a
		// crash) is terminated again on every pass until the driver confirms it gone.
		for _, n := range nodes {
			switch {
			case n.Released:
				toStop = append(toStop, n)
			case n.Preempting:
				toPreempt = append(toPreempt, n)
			}
		}
		// Every pass ends by handing out capacity, also on the early returns below.
		defer func() {
			a, err := e.admit(tx, now)
			if err != nil {
				e.log.Error("admitting nodes failed", "error", err)
			}
			adm = a
		}()

		if rec.Instance != nil {
			if inst, err = e.reconcileInstance(tx, &rec, nodes, jobs, now); err != nil {
				return err
			}
			return tx.Put(store.Computes, key, rec)
		}

		plan := cluster.Decide(clusterOf(rec), nodeViews(nodes), jobViews(jobs), now)
		byID := map[string]*model.Node{}
		for i := range nodes {
			byID[nodes[i].ID] = &nodes[i]
		}
		for _, id := range plan.Unplaceable {
			for _, j := range jobs {
				if j.ID == id {
					j.Finish(api.JobFailed, nil, fmt.Sprintf("the job needs %d nodes but compute %s has max_node_count %d", j.Count, rec.Name, rec.MaxNodes()), now)
					if err := tx.Put(store.Jobs, j.Key(), j); err != nil {
						return err
					}
				}
			}
		}
		for _, id := range plan.Release {
			n := byID[id]
			if n == nil || n.Released {
				continue
			}
			n.Released, n.State = true, api.NodeLeaving
			if err := tx.Put(store.Nodes, n.Key(), n); err != nil {
				return err
			}
			e.loop.RemoveTimer(nodeIdleTimer(*n))
			toStop = append(toStop, *n)
		}
		for _, id := range plan.Drain {
			if n := byID[id]; n != nil && n.State != api.NodeLeaving {
				n.State = api.NodeLeaving
				if err := tx.Put(store.Nodes, n.Key(), n); err != nil {
					return err
				}
			}
		}
		if plan.Create > 0 {
			if until, ok := e.backoff[key]; ok && now.Before(until) {
				e.loop.SetTimer(runtime.Timer{Kind: runtime.Retry, Object: runtime.ComputeKey(key)}, until)
			} else {
				// New nodes wait in preparing until admission gives them capacity. A pass
				// creates a bounded number; the next pass, right after, creates more.
				create := min(plan.Create, maxNodesPerPass)
				if create < plan.Create {
					e.kick(key)
				}
				for range create {
					n := model.Node{ID: e.newID(rec.NodeIDPrefix()), Compute: key, State: api.NodePreparing, CreatedOn: now}
					if err := tx.Put(store.Nodes, n.Key(), n); err != nil {
						return err
					}
				}
			}
		}
		for _, j := range jobs {
			ids, ok := plan.Assign[j.ID]
			if !ok {
				continue
			}
			j.Status, j.Nodes = api.JobPreparing, ids
			for rank, id := range ids {
				n := byID[id]
				n.State, n.JobID, n.Rank, n.Task, n.IdleSince = api.NodeRunning, j.ID, rank, j.TaskKey(rank), time.Time{}
				if err := tx.Put(store.Nodes, n.Key(), n); err != nil {
					return err
				}
				e.loop.RemoveTimer(nodeIdleTimer(*n))
			}
			if err := tx.Put(store.Jobs, j.Key(), j); err != nil {
				return err
			}
			toStart = append(toStart, j)
		}
		for id, deadline := range plan.Deadlines {
			if n := byID[id]; n != nil {
				e.loop.SetTimer(nodeIdleTimer(*n), deadline)
			}
		}
		return nil
	})
	if err != nil || !exists {
		return err
	}
	if gone {
		e.quota.Delete(key)
		e.log.Info("compute deleted", "compute", key)
		e.loop.Deleted(runtime.ComputeKey(key))
		return nil
	}
	e.act(adm)
	for _, n := range toPreempt {
		e.preemptNode(n)
	}
	e.actInstance(ctx, inst)
	for _, n := range toStop {
		e.releaseNode(ctx, n)
	}
	for _, j := range toKill {
		e.loop.Go(func() { e.killJob(ctx, j) })
	}
	for _, j := range toStart {
		e.loop.Go(func() { e.startJob(ctx, j) })
	}
	return nil
}

func clusterOf(rec model.Compute) cluster.Cluster {
	c := cluster.Cluster{Max: rec.MaxNodes(), IdleAfter: rec.IdleAfter()}
	if rec.ScaleSettings != nil {
		c.Min = rec.ScaleSettings.MinNodeCount
	}
	return c
}

func nodeViews(nodes []model.Node) []cluster.Node {
	out := make([]cluster.Node, 0, len(nodes))
	for _, n := range nodes {
		out = append(out, cluster.Node{ID: n.ID, State: n.State, JobID: n.JobID, IdleSince: n.IdleSince})
	}
	return out
}

func jobViews(jobs []model.Job) []cluster.Job {
	out := make([]cluster.Job, 0, len(jobs))
	for _, j := range jobs {
		out = append(out, cluster.Job{ID: j.ID, Status: j.Status, Count: j.Count, SubmittedAt: j.SubmittedAt})
	}
	return out
}

// createNode asks the driver for a committed node and records the outcome.
func (e *Engine) createNode(ctx context.Context, n model.Node, size catalog.Size) {
	info, err := e.driver.Create(ctx, driver.NodeSpec{Key: n.ID, Owner: n.Compute, VMSize: size.Name, VCPUs: size.VCPUs, MemoryGB: size.MemoryGB})
	if ctx.Err() != nil {
		return
	}
	e.mu.Lock()
	now := e.clock.Now().UTC()
	if err != nil {
		e.log.Error("node failed to start", "node", n.Key(), "error", err)
		e.backoff[n.Compute] = now.Add(runtime.RetryAfter)
	} else {
		delete(e.backoff, n.Compute)
	}
	_ = e.updateNode(n.Key(), func(cur *model.Node) bool {
		if cur.State != api.NodePreparing {
			return false
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
		return true
	})
	e.mu.Unlock()
	switch {
	case err == nil && info.Ready:
		e.log.Info("node ready", "node", n.Key())
	case err == nil:
		e.log.Info("node created, waiting to be ready", "node", n.Key(), "reason", info.Reason)
	}
	e.kick(n.Compute)
}

// nodeReady records that a node the driver created not ready is now usable.
func (e *Engine) nodeReady(id string) {
	e.mu.Lock()
	var compute string
	now := e.clock.Now().UTC()
	_ = e.store.Update(func(tx *store.Tx) error {
		n, ok := e.nodeByID(tx, id)
		if !ok || n.Released || n.State != api.NodePreparing || !n.Admitted {
			return nil
		}
		compute = n.Compute
		n.State, n.IdleSince, n.Reason = api.NodeIdle, now, ""
		return tx.Put(store.Nodes, n.Key(), n)
	})
	e.mu.Unlock()
	if compute != "" {
		e.log.Info("node ready", "node", id, "compute", compute)
		e.kick(compute)
	}
}

// releaseNode terminates a node the store already marks released, once, and deletes its
// record when the driver confirms it is gone.
func (e *Engine) releaseNode(ctx context.Context, n model.Node) {
	e.terminateOnce(ctx, n, "releasing", func() error {
		e.loop.RemoveTimer(nodeIdleTimer(n))
		return e.store.Update(func(tx *store.Tx) error { return tx.Delete(store.Nodes, n.Key()) })
	}, func() {
		e.log.Info("node released", "node", n.Key())
		if e.capacity > 0 {
			e.kickAll() // the freed capacity may admit nodes of other computes
		} else {
			e.kick(n.Compute)
		}
	})
}

// terminateOnce asks the driver to terminate a node, one call at a time per node. When the
// driver confirms, gone records it (under e.mu) and then after runs. On failure the node
// keeps its mark in the store (released or preempting): every pass terminates marked nodes
// again, and a back-off timer brings the next pass. Callers hold e.mu.
func (e *Engine) terminateOnce(ctx context.Context, n model.Node, doing string, gone func() error, after func()) {
	if e.releasing[n.Key()] {
		return
	}
	e.releasing[n.Key()] = true
	e.loop.Go(func() {
		err := e.driver.Terminate(ctx, n.ID)
		e.mu.Lock()
		delete(e.releasing, n.Key())
		if err == nil {
			err = gone()
		}
		e.mu.Unlock()
		if err != nil {
			if ctx.Err() == nil {
				e.log.Error(doing+" node failed; will retry", "node", n.Key(), "error", err)
				e.loop.SetTimer(runtime.Timer{Kind: runtime.Retry, Object: runtime.ComputeKey(n.Compute), Sub: n.ID}, e.clock.Now().Add(runtime.RetryAfter))
			}
			return
		}
		after()
	})
}

// updateNode applies f to a stored node and commits when f reports a change. Callers hold e.mu.
func (e *Engine) updateNode(key string, f func(*model.Node) bool) error {
	return e.store.Update(func(tx *store.Tx) error {
		var n model.Node
		ok, err := tx.Get(store.Nodes, key, &n)
		if err != nil || !ok || !f(&n) {
			return err
		}
		return tx.Put(store.Nodes, key, n)
	})
}

// onEvent applies one driver event.
func (e *Engine) onEvent(ctx context.Context, ev driver.Event) {
	if e.endpoints.HandleEvent(ctx, ev) {
		return
	}
	switch ev.Kind {
	case driver.TaskExited:
		e.onTaskExit(ctx, ev.NodeKey, ev.TaskKey, ev.ExitCode)
	case driver.NodeGone:
		e.nodeGone(ev.NodeKey)
	case driver.NodeReady:
		e.nodeReady(ev.NodeKey)
	}
}

// onTaskExit routes a task's end to the setup or the job logic.
func (e *Engine) onTaskExit(ctx context.Context, node, task string, code int) {
	if strings.HasPrefix(task, "setup-") {
		e.setupExited(ctx, node, task, code)
		return
	}
	e.taskExited(ctx, node, task, code)
}

// actInstance carries out an instance pass after its commit.
func (e *Engine) actInstance(ctx context.Context, a instanceActions) {
	for _, n := range a.stop {
		e.releaseNode(ctx, n)
	}
	for _, k := range a.kill {
		e.loop.Go(func() { _ = e.driver.KillTask(ctx, k.node, k.task) })
	}
	for _, j := range a.cancel {
		e.loop.Go(func() { e.killJob(ctx, j) })
	}
	for _, j := range a.startJob {
		e.loop.Go(func() { e.startJob(ctx, j) })
	}
	if a.setup != nil {
		spec, node := *a.setup, a.setupOn
		e.loop.Go(func() {
			if err := e.driver.StartTask(ctx, node, spec); err != nil {
				e.log.Error("starting setup script failed", "node", node, "error", err)
				e.setupExited(ctx, node, spec.Key, 127)
			}
		})
	}
}

// nodeByID finds a stored node by its driver key.
func (e *Engine) nodeByID(tx *store.Tx, id string) (model.Node, bool) {
	nodes, _ := store.List[model.Node](tx, store.Nodes, "")
	for _, n := range nodes {
		if n.ID == id {
			return n, true
		}
	}
	return model.Node{}, false
}

// nodeGone marks a node that died unusable (it is then released and replaced) and fails
// the job that ran on it.
func (e *Engine) nodeGone(id string) {
	e.mu.Lock()
	var compute string
	_ = e.store.Update(func(tx *store.Tx) error {
		n, ok := e.nodeByID(tx, id)
		if !ok || n.Released {
			return nil
		}
		compute = n.Compute
		if n.JobID != "" {
			if j, ok := model.GetJob(tx, model.WorkspaceOf(n.Compute), n.JobID); ok && !api.Terminal(j.Status) {
				j.Finish(api.JobFailed, nil, fmt.Sprintf("node %s was lost while the job ran", n.ID), e.clock.Now().UTC())
				if err := tx.Put(store.Jobs, j.Key(), j); err != nil {
					return err
				}
				e.loop.Go(func() { e.killJob(e.ctx, j) })
			}
		}
		n.State, n.Error, n.JobID, n.Task = api.NodeUnusable, "node process exited", "", ""
		return tx.Put(store.Nodes, n.Key(), n)
	})
	e.mu.Unlock()
	if compute != "" {
		e.log.Warn("node lost", "node", id, "compute", compute)
		e.kick(compute)
	}
}

// randomID is the default ID source: 10 hex digits from crypto/rand.
func randomID(prefix string) string {
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	return prefix + "-" + hex.EncodeToString(b)
}

// recover runs once at start: nodes the store records are adopted when alive, restarted
// when they were still being created, and marked unusable when dead; nodes the driver has
// that the store does not know are released; jobs are resumed or finished from what the
// nodes recorded.
func (e *Engine) recover(ctx context.Context) error {
	var nodes []model.Node
	var computes []model.Compute
	err := e.store.View(func(tx *store.Tx) error {
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
			e.mu.Lock()
			e.preemptNode(n)
			e.mu.Unlock()
			continue
		}
		if n.State == api.NodePreparing {
			// Committed but maybe never created, or created while the engine stopped before
			// it recorded the outcome. Create is idempotent under the key and returns a node
			// that is already live, so it runs whatever Describe would say (the ssh driver
			// describes every node the store holds, created or not).
			size, _ := catalog.Lookup(e.vmSizeOf(computes, n.Compute))
			e.loop.Go(func() { e.createNode(ctx, n, size) })
			continue
		}
		_, err := e.driver.Describe(ctx, n.ID)
		switch {
		case driver.IsNotFound(err):
			e.nodeGone(n.ID)
		case err != nil:
			return fmt.Errorf("describing node %s: %w", n.ID, err)
		case n.Task != "" && n.State == api.NodeRunning:
			// In the background: a machine that cannot be reached must not hold up the start
			// (nor the other nodes). A driver whose machines may be unreachable delivers the
			// exit itself once they answer (the ssh driver watches the tasks the store records).
			e.loop.Go(func() {
				st, err := e.driver.TaskStatus(ctx, n.ID, n.Task)
				if err == nil && !st.Running {
					e.onTaskExit(ctx, n.ID, n.Task, st.ExitCode)
				}
			})
		}
	}
	for _, id := range e.endpoints.NodeIDs() {
		known[id] = true
	}
	orphans, err := e.driver.List(ctx, "")
	if err != nil {
		return fmt.Errorf("listing nodes: %w", err)
	}
	for _, o := range orphans {
		if !known[o.Key] {
			e.log.Warn("releasing orphaned node", "node", o.Key, "owner", o.Owner)
			if err := e.driver.Terminate(ctx, o.Key); err != nil {
				e.log.Error("releasing orphaned node failed", "node", o.Key, "error", err)
			}
		}
	}
	// Jobs caught between assignment and start are started again; StartTask is idempotent.
	var preparing []model.Job
	_ = e.store.View(func(tx *store.Tx) error {
		all, err := store.List[model.Job](tx, store.Jobs, "")
		for _, j := range all {
			if j.Status == api.JobPreparing {
				preparing = append(preparing, j)
			}
		}
		return err
	})
	for _, j := range preparing {
		e.loop.Go(func() { e.startJob(ctx, j) })
	}
	for _, c := range computes {
		e.kick(c.Key())
	}
	e.endpoints.Recover(ctx)
	return nil
}

func (e *Engine) vmSizeOf(computes []model.Compute, key string) string {
	for _, c := range computes {
		if c.Key() == key {
			return c.VMSize
		}
	}
	return ""
}

// jobLogPath is where a rank's output is kept once its task ended.
func (e *Engine) jobLogPath(jobID string, rank int) string {
	return filepath.Join(e.dataDir, "jobs", jobID, fmt.Sprintf("rank-%d.log", rank))
}

func writeFileAtomic(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
