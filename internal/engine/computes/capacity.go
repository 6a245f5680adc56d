package computes

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/catalog"
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
	rec  model.Compute
}

// admit hands capacity to waiting nodes (rules/capacity), preempting LowPriority nodes
// for Dedicated ones, and gives local nodes their GPUs and isolated sizes their machine.
// With unlimited capacity and nodes that are not local a pass admits its own compute's
// nodes only, so it costs what that compute holds; with a capacity, or local nodes (which
// share one machine, so few), it weighs every node. Callers are in turn (under c.mu) and
// pass the transaction of their reconcile pass.
func (c *Core) admit(tx *store.Tx, computeKey string, now time.Time) (admission, error) {
	var out admission
	prefix := ""
	if !c.machineWide() {
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
			Size: size.Name, Local: c.onMachine(rec), GPUs: size.GPUs, Devices: n.GPUs, Isolated: size.Isolated,
		})
	}
	d := capacity.Admit(capacity.Limits{VCPUs: c.capacity, GPUs: c.gpus}, views)
	for _, id := range slices.Sorted(maps.Keys(d.Waits)) { // in order: a seed replays exactly
		// Reported when the node first waits, not at every change of a count.
		if err := c.waitFor(tx, byID[id], d.Waits[id], now, byID[id].Reason == ""); err != nil {
			return out, err
		}
	}
	for _, id := range d.Admit {
		w := byID[id]
		w.Admitted, w.State, w.GPUs, w.Reason = true, api.NodePreparing, d.Devices[id], ""
		if err := tx.Put(store.Nodes, w.Key(), w); err != nil {
			return out, err
		}
		out.create = append(out.create, admitted{node: w, rec: computes[w.Compute]})
	}
	for _, id := range d.Preempt {
		if err := c.preemptLocked(tx, byID[id], now, &out); err != nil {
			return out, err
		}
	}
	return out, nil
}

// machineWide reports whether admission weighs every node: with a vCPU capacity, and
// with local nodes, which share the machine's GPUs and isolated sizes' machine.
func (c *Core) machineWide() bool { return c.capacity > 0 || c.local }

// onMachine reports whether rec's nodes run on this machine (GPUs, isolated sizes): local
// nodes, not an attached compute's.
func (c *Core) onMachine(rec model.Compute) bool {
	return c.local && rec.Attached == nil && rec.KubeJob == nil
}

// GPUs lists the machine's GPUs that local nodes get, each with the node holding it.
func (c *Core) GPUs() ([]api.GPU, error) {
	if len(c.gpus) == 0 || !c.local {
		return nil, nil
	}
	held := map[string]model.Node{}
	err := c.store.View(func(tx *store.Tx) error {
		nodes, err := store.List[model.Node](tx, store.Nodes, "")
		for _, n := range nodes {
			for _, g := range n.GPUs {
				held[g] = n
			}
		}
		return err
	})
	out := make([]api.GPU, 0, len(c.gpus))
	for _, g := range c.gpus {
		n := held[g]
		out = append(out, api.GPU{ID: g, Node: n.ID, Compute: n.Compute})
	}
	return out, err
}

// checkGPUs refuses a compute of local nodes whose size has more GPUs than this machine:
// its nodes would wait for ever. The error is on the size's attribute (instance_type for a
// serverless job's cluster, whose quota field it is).
func (c *Core) checkGPUs(rec model.Compute, quotaField string) error {
	if len(c.gpus) == 0 || !c.onMachine(rec) {
		return nil
	}
	size, ok := catalog.Lookup(rec.VMSize)
	if !ok || size.GPUs <= int64(len(c.gpus)) {
		return nil
	}
	field := "vm_size"
	if quotaField == "instance_type" {
		field = quotaField
	}
	return api.Errorf(api.CodeInvalid, field, "VM size %q has %d GPUs and this engine's machine has only %d (see 'mlcompute status'); choose a size with at most %d GPUs",
		size.Name, size.GPUs, len(c.gpus), len(c.gpus))
}

// waitFor records why a node waits (the node's and its job's reason follow it); report
// says the compute's errors say so too.
func (c *Core) waitFor(tx *store.Tx, n model.Node, why string, now time.Time, report bool) error {
	if n.Reason == why {
		return nil
	}
	n.Reason = why
	if err := tx.Put(store.Nodes, n.Key(), n); err != nil {
		return err
	}
	if !report {
		return nil
	}
	c.log.Warn("node waits for capacity", "node", n.Key(), "reason", why)
	return c.updateCompute(tx, n.Compute, func(rec *model.Compute) {
		rec.AddError(api.ComputeError{Time: now, Code: api.ErrorNoCapacity, Message: fmt.Sprintf("node %s waits: %s", n.ID, why)})
	})
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
		c.createNode(c.ctx, w.node, w.rec)
	}
	for _, k := range a.kills {
		c.tasks.KillAfterCommit(k.Node, k.Task)
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
			cur.Admitted, cur.Preempting, cur.GPUs = false, false, nil
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
