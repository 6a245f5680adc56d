package computes

import (
	"context"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
)

// Every task on a compute's node belongs to one controller, its owner: a job's ranks and
// its environment's preparation are the jobs controller's, an instance's setup scripts the
// instances controller's. The core hands a task's end (a driver event, one Recover finds,
// one a restarted start finds) to the owner that claims it from the node's record as
// stored, not from the task's key: an owner reads its own keys, no one else's.

// TaskOwner is a controller whose tasks run on computes' nodes.
type TaskOwner interface {
	// OwnsTask says whether task, which ran on node n (its record as stored when the end
	// came), is this owner's.
	OwnsTask(n model.Node, task string) bool
	// TaskExited applies the task's end.
	TaskExited(ctx context.Context, node, task string, code int)
}

// TaskRestarter is a TaskOwner that puts back a task the store records on a node but the
// node never started: the engine stopped after committing it and before starting it. An
// owner that is not one starts such tasks again by itself (a job still Preparing is
// started again by Recover).
type TaskRestarter interface {
	TaskNotStarted(node, task string)
}

// RegisterTaskOwner makes o the owner of the tasks it claims. Owners are asked in the order
// they were registered, so one that claims every task it is asked about (the jobs
// controller) goes last. Call it before Start.
func (c *Core) RegisterTaskOwner(o TaskOwner) { c.owners = append(c.owners, o) }

// taskOwner is the owner that claims a task ending on node, or nil when none does or the
// node's record is gone (a released node's tasks have ended for their owners already).
func (c *Core) taskOwner(node, task string) TaskOwner {
	var n model.Node
	var found bool
	_ = c.store.View(func(tx *store.Tx) error {
		n, found = c.NodeByID(tx, node)
		return nil
	})
	if !found {
		return nil
	}
	for _, o := range c.owners {
		if o.OwnsTask(n, task) {
			return o
		}
	}
	return nil
}

// taskExited hands a task's end to its owner.
func (c *Core) taskExited(ctx context.Context, node, task string, code int) {
	if o := c.taskOwner(node, task); o != nil {
		o.TaskExited(ctx, node, task, code)
		return
	}
	c.log.Debug("task end with no owner ignored", "node", node, "task", task, "exit_code", code)
}

// taskNotStarted hands a recorded task its node never started to its owner, when the owner
// starts such tasks again itself.
func (c *Core) taskNotStarted(node, task string) {
	if o, ok := c.taskOwner(node, task).(TaskRestarter); ok {
		o.TaskNotStarted(node, task)
	}
}
