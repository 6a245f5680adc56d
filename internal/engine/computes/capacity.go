package computes

import (
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/catalog"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/rules/capacity"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
)

// Capacity (DESIGN 4, decided by rules/capacity): admission of waiting nodes and the
// preemption of LowPriority nodes for Dedicated ones, applied to the store.

// admission is what one admission pass decided; the caller acts on it after the commit.
type admission struct {
	create  []admitted
	preempt []model.Node
	kills   []TaskRef
}

type admitted struct {
	node model.Node
	size catalog.Size
	pod  *driver.PodShape
}

// admit hands capacity to waiting nodes (rules/capacity), preempting LowPriority nodes
// for Dedicated ones. With unlimited capacity a pass admits its own compute's nodes only,
// so it costs what that compute holds; with a capacity it weighs every node. Callers are
// in turn (under c.mu) and pass the transaction of their reconcile pass.
func (c *Core) admit(tx *store.Tx, computeKey string, now time.Time) (admission, error) {
	var out admission
	prefix := ""
	if c.capacity == 0 {
		prefix = computeKey + "/"
	}
	nodes, err := store.List[model.Node](tx, store.Nodes, prefix)
	if err != nil {
		return out, err
	}
	computes := map[string]model.Compute{}
	var views []capacity.Node
	byID := map[string]model.Node{}
	for _, n := range nodes {
		rec, ok := computes[n.Compute]
		if !ok {
			if _, err := tx.Get(store.Computes, n.Compute, &rec); err != nil {
				return out, err
			}
			computes[n.Compute] = rec
		}
		size, _ := catalog.Lookup(rec.VMSize)
		byID[n.ID] = n
		views = append(views, capacity.Node{
			ID: n.ID, VCPUs: size.VCPUs, Dedicated: rec.VMPriority != api.PriorityLowPriority,
			Admitted: n.Admitted, Terminating: n.Admitted && (n.Preempting || n.Released),
			Waiting:     !n.Admitted && !n.Released && (n.State == api.NodePreparing || n.State == api.NodePreempted),
			Preemptible: n.Admitted && !n.Preempting && !n.Released && rec.VMPriority == api.PriorityLowPriority && n.State != api.NodeUnusable && n.State != api.NodeLeaving,
			Idle:        n.State == api.NodeIdle, CreatedOn: n.CreatedOn,
		})
	}
	d := capacity.Admit(c.capacity, views)
	for _, id := range d.Admit {
		w := byID[id]
		w.Admitted, w.State = true, api.NodePreparing
		if err := tx.Put(store.Nodes, w.Key(), w); err != nil {
			return out, err
		}
		size, _ := catalog.Lookup(computes[w.Compute].VMSize)
		out.create = append(out.create, admitted{node: w, size: size, pod: PodShape(computes[w.Compute])})
	}
	for _, id := range d.Preempt {
		if err := c.preemptLocked(tx, byID[id], now, &out); err != nil {
			return out, err
		}
	}
	return out, nil
}

// preemptLocked marks a node preempted and sends its job back to the queue with a new
// attempt; the node's other ranks are freed and their tasks killed after the commit.
func (c *Core) preemptLocked(tx *store.Tx, v model.Node, now time.Time, out *admission) error {
	if v.JobID != "" {
		j, ok := model.GetJob(tx, model.WorkspaceOf(v.Compute), v.JobID)
		if ok && !api.Terminal(j.Status) {
			for rank, id := range j.Nodes {
				if id == v.ID {
					continue
				}
				out.kills = append(out.kills, TaskRef{Node: id, Task: j.TaskKey(rank)})
				var n model.Node
				if found, err := tx.Get(store.Nodes, j.ComputeKey+"/"+id, &n); err != nil {
					return err
				} else if found && n.JobID == j.ID {
					n.JobID, n.Task = "", ""
					if n.State == api.NodeRunning {
						n.State, n.IdleSince = api.NodeIdle, now
					}
					if err := tx.Put(store.Nodes, n.Key(), n); err != nil {
						return err
					}
				}
			}
			j.Status, j.Nodes, j.RankExits, j.StartedAt, j.MasterPort = api.JobQueued, []string{}, nil, nil, 0
			j.Attempt++
			if err := model.PutJob(tx, j); err != nil {
				return err
			}
			c.log.Warn("job requeued: its node was preempted", "job", j.ID, "node", v.ID, "attempt", j.Attempt)
		}
	}
	v.State, v.Preempting, v.JobID, v.Task, v.IdleSince = api.NodePreempted, true, "", "", time.Time{}
	if err := tx.Put(store.Nodes, v.Key(), v); err != nil {
		return err
	}
	out.preempt = append(out.preempt, v)
	return nil
}

// act carries out an admission after its commit.
func (c *Core) act(a admission) {
	for _, w := range a.create {
		c.createNode(c.ctx, w.node, w.size, w.pod)
	}
	for _, k := range a.kills {
		c.loop.Go(func() { _ = c.drv.KillTask(c.ctx, k.Node, k.Task) })
	}
	for _, v := range a.preempt {
		c.preemptNode(v)
	}
}

// preemptNode terminates a preempted node once; when the driver confirms, the node stops
// holding capacity and waits for it again.
func (c *Core) preemptNode(n model.Node) {
	c.nodes.Release(c.ctx, n.ID, nodeRetryTimer(n), func() error {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.updateNode(n.Key(), func(cur *model.Node) bool {
			cur.Admitted, cur.Preempting = false, false
			return true
		})
	}, func() {
		c.log.Warn("node preempted for a Dedicated node", "node", n.Key())
		c.kickAll()
	})
}

// kickAll marks every compute for a pass: freed capacity may admit nodes anywhere.
func (c *Core) kickAll() {
	var keys []string
	_ = c.store.View(func(tx *store.Tx) error {
		keys = tx.Keys(store.Computes, "")
		return nil
	})
	for _, k := range keys {
		c.Kick(k)
	}
}
