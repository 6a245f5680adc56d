package computes

import (
	"context"
	"fmt"
	"maps"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
)

// Recover runs once at start, after the lifecycle registered the nodes the store records
// (NodeKeys): they are adopted when alive, created again when they were still being
// created, and marked unusable when dead; jobs are resumed or finished from what the nodes
// recorded. The engine then has the lifecycle release the nodes no controller records.
func (c *Core) Recover(ctx context.Context) error {
	var nodes []model.Node
	var computes []model.Compute
	err := c.store.View(func(tx *store.Tx) error {
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
	for _, n := range nodes {
		if !n.Admitted {
			continue // waiting for capacity: no driver node exists
		}
		if n.Preempting {
			c.mu.Lock()
			c.preemptNode(n)
			c.mu.Unlock()
			continue
		}
		if n.State == api.NodePreparing {
			// Committed but maybe never created, or created while the engine stopped before
			// it recorded the outcome. Create is idempotent under the key and returns a node
			// that is already live, so it runs whatever Describe would say (the ssh driver
			// describes every node the store holds, created or not).
			rec := computeOf(computes, n.Compute)
			c.createNode(ctx, n, rec)
			continue
		}
		gone, err := c.nodes.Adopt(ctx, n.ID)
		switch {
		case gone:
			c.NodeGone(n.ID, "the node was gone when the engine started again")
		case err != nil:
			return fmt.Errorf("describing node %s: %w", n.ID, err)
		case n.Task != "" && n.State == api.NodeRunning:
			// In the background: a machine that cannot be reached must not hold up the start
			// (nor the other nodes). A driver whose machines may be unreachable delivers the
			// exit itself once they answer (the ssh driver watches the tasks the store records).
			c.loop.Go(func() {
				st, err := c.nodes.Task(ctx, n.ID, n.Task)
				switch {
				case err != nil, st.Running:
				case st.NeverStarted:
					c.taskNotStarted(n.ID, n.Task)
				default:
					c.taskExited(ctx, n.ID, n.Task, st.ExitCode)
				}
			})
		}
	}
	// Jobs caught between assignment and start are started again; StartTask is idempotent.
	var preparing []model.Job
	_ = c.store.View(func(tx *store.Tx) error {
		all, err := store.List[model.Job](tx, store.Jobs, "")
		for _, j := range all {
			if j.Status == api.JobPreparing {
				preparing = append(preparing, j)
			}
		}
		return err
	})
	for _, j := range preparing {
		c.loop.Go(func() { c.StartJob(ctx, j) })
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
