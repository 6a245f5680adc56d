package computes

import (
	"cmp"
	"slices"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/catalog"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
)

// Capacity (DESIGN 4): an engine may be given a number of vCPUs to hand out
// (mlcompute serve --capacity-vcpus). A node holds its size's vCPUs from the moment it is
// admitted until the driver confirms it gone. A node that does not fit waits in preparing;
// a node of a Dedicated cluster that does not fit preempts nodes of LowPriority clusters:
// they show as preempted, their jobs go back to the queue, and they wait for capacity like
// any other node. Waiting nodes are admitted Dedicated first, then oldest first.

// admission is what one admission pass decided; the caller acts on it after the commit.
type admission struct {
	create  []admitted
	preempt []model.Node
	kills   []taskRef
}

type admitted struct {
	node model.Node
	size catalog.Size
}

type taskRef struct{ node, task string }

// admit hands capacity to waiting nodes, preempting LowPriority nodes for Dedicated ones.
// Callers hold c.Mu and pass the transaction of their reconcile pass.
func (c *Core) admit(tx *store.Tx, now time.Time) (admission, error) {
	var out admission
	nodes, err := store.List[model.Node](tx, store.Nodes, "")
	if err != nil {
		return out, err
	}
	recs, err := store.List[model.Compute](tx, store.Computes, "")
	if err != nil {
		return out, err
	}
	computes := map[string]model.Compute{}
	for _, rec := range recs {
		computes[rec.Key()] = rec
	}
	size := func(n model.Node) catalog.Size {
		s, _ := catalog.Lookup(computes[n.Compute].VMSize)
		return s
	}
	dedicated := func(n model.Node) bool { return computes[n.Compute].VMPriority != api.PriorityLowPriority }

	var used, terminating int64
	var waiting, victims []model.Node
	for _, n := range nodes {
		switch {
		case n.Admitted:
			used += size(n).VCPUs
			if n.Preempting || n.Released {
				terminating += size(n).VCPUs
			} else if !dedicated(n) && n.State != api.NodeUnusable && n.State != api.NodeLeaving {
				victims = append(victims, n)
			}
		case !n.Released && (n.State == api.NodePreparing || n.State == api.NodePreempted):
			waiting = append(waiting, n)
		}
	}
	slices.SortFunc(waiting, func(a, b model.Node) int {
		if da, db := dedicated(a), dedicated(b); da != db {
			if da {
				return -1
			}
			return 1
		}
		return cmp.Or(a.CreatedOn.Compare(b.CreatedOn), cmp.Compare(a.ID, b.ID))
	})
	// Idle victims first, then the newest: the least work is lost.
	slices.SortFunc(victims, func(a, b model.Node) int {
		if ia, ib := a.State == api.NodeIdle, b.State == api.NodeIdle; ia != ib {
			if ia {
				return -1
			}
			return 1
		}
		return cmp.Or(b.CreatedOn.Compare(a.CreatedOn), cmp.Compare(b.ID, a.ID))
	})

	// projected is what will be in use once the terminations in flight complete; capacity
	// they free is promised to the waiting nodes in order, so nothing is preempted twice.
	projected := used - terminating
	for _, w := range waiting {
		need := size(w).VCPUs
		if c.Capacity == 0 || used+need <= c.Capacity {
			w.Admitted, w.State = true, api.NodePreparing
			if err := tx.Put(store.Nodes, w.Key(), w); err != nil {
				return out, err
			}
			out.create = append(out.create, admitted{node: w, size: size(w)})
			used += need
			projected += need
			continue
		}
		if !dedicated(w) {
			continue
		}
		if projected+need <= c.Capacity {
			projected += need // it fits once the nodes being terminated are gone
			continue
		}
		var picked []model.Node
		free := int64(0)
		for _, v := range victims {
			if projected-free+need <= c.Capacity {
				break
			}
			picked = append(picked, v)
			free += size(v).VCPUs
		}
		if projected-free+need > c.Capacity {
			continue // even preempting every LowPriority node would not make room
		}
		victims = victims[len(picked):]
		for _, v := range picked {
			if err := c.preemptLocked(tx, v, now, &out); err != nil {
				return out, err
			}
		}
		projected += need - free
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
				out.kills = append(out.kills, taskRef{node: id, task: j.TaskKey(rank)})
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
			if err := tx.Put(store.Jobs, j.Key(), j); err != nil {
				return err
			}
			c.Log.Warn("job requeued: its node was preempted", "job", j.ID, "node", v.ID, "attempt", j.Attempt)
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
		c.Loop.Go(func() { c.createNode(c.Ctx, w.node, w.size) })
	}
	for _, k := range a.kills {
		c.Loop.Go(func() { _ = c.Driver.KillTask(c.Ctx, k.node, k.task) })
	}
	for _, v := range a.preempt {
		c.preemptNode(v)
	}
}

// preemptNode terminates a preempted node once; when the driver confirms, the node stops
// holding capacity and waits for it again.
func (c *Core) preemptNode(n model.Node) {
	c.terminateOnce(c.Ctx, n, "preempting", func() error {
		return c.UpdateNode(n.Key(), func(cur *model.Node) bool {
			cur.Admitted, cur.Preempting = false, false
			return true
		})
	}, func() {
		c.Log.Warn("node preempted for a Dedicated node", "node", n.Key())
		c.KickAll()
	})
}

// kickAll marks every compute for a pass: freed capacity may admit nodes anywhere.
func (c *Core) KickAll() {
	var keys []string
	_ = c.Store.View(func(tx *store.Tx) error {
		keys = tx.Keys(store.Computes, "")
		return nil
	})
	for _, k := range keys {
		c.Kick(k)
	}
}
