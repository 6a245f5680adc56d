// Package clusters is the compute clusters' controller: it validates a cluster's settings,
// and at every pass applies the cluster scaling rule (package rules/cluster) to the
// cluster's nodes and queued jobs: nodes to create, release and drain, jobs to place, and
// the idle deadlines for the timer queue. Attached machines are clusters of one fixed node
// and use the same pass. The node lifecycle itself is package computes'.
package clusters

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"k8s.io/utils/clock"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/computes"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/metrics"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/rules/cluster"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/validation"
)

// Core is what the controller uses of the compute core (package computes).
type Core interface {
	computes.Records
	computes.Kicker
	computes.NodeLifecycle
	Clock() clock.PassiveClock
	Logger() hclog.Logger
	Recorder() metrics.Recorder
}

// Controller runs compute clusters on the shared compute core.
type Controller struct {
	core Core
	log  hclog.Logger
}

// New builds the controller. Its Pass decides the passes of clusters and attached machines
// (the engine registers it with the core).
func New(core Core) *Controller {
	return &Controller{core: core, log: core.Logger().Named("clusters")}
}

// Create validates a cluster spec and stores the cluster.
func (c *Controller) Create(ctx context.Context, workspace string, spec api.ComputeSpec, idempotencyKey string) (*api.Compute, error) {
	size, err := validation.ComputeCluster(spec)
	if err != nil {
		return nil, err
	}
	if spec.VMPriority == "" {
		spec.VMPriority = api.PriorityDedicated
	}
	settings := spec.ScaleSettings.WithDefaults()
	rec := model.Compute{
		Workspace: workspace, Name: spec.Name, Type: api.TypeComputeCluster, VMSize: size.Name, VMPriority: spec.VMPriority,
		Description: spec.Description, Tags: spec.Tags, ScaleSettings: &settings, CreatedOn: c.core.Clock().Now().UTC(),
	}
	return c.core.Insert(ctx, rec, idempotencyKey, rec.QuotaField())
}

// Update replaces a cluster's description, tags and scale settings in place.
func (c *Controller) Update(ctx context.Context, workspace, name string, upd api.ComputeUpdate) (*api.Compute, error) {
	return c.core.Modify(ctx, workspace, name, func(_ *api.Workspace, rec *model.Compute) error {
		if upd.Instance != nil {
			return api.Errorf(api.CodeInvalid, "instance", "compute cluster %q has no instance settings", name)
		}
		if upd.VMSize != "" && !strings.EqualFold(upd.VMSize, rec.VMSize) {
			return api.Errorf(api.CodeInvalid, "vm_size", "a compute cluster's vm_size cannot change; replace the cluster")
		}
		rec.Description, rec.Tags = upd.Description, upd.Tags
		if upd.ScaleSettings != nil {
			if _, err := validation.ScaleSettings(upd.ScaleSettings); err != nil {
				return err
			}
			s := upd.ScaleSettings.WithDefaults()
			rec.ScaleSettings = &s
		}
		return nil
	})
}

// Pass applies the cluster rule to one cluster. It runs inside the pass's transaction under
// the core's lock; what it decides is carried out once committed.
func (c *Controller) Pass(tx *store.Tx, rec *model.Compute, nodes []model.Node, jobs []model.Job, now time.Time) (computes.Actions, error) {
	var acts computes.Actions
	key := rec.Key()
	plan := cluster.Decide(clusterOf(*rec), nodeViews(nodes), computes.JobViews(jobs), now)
	byID := map[string]*model.Node{}
	for i := range nodes {
		byID[nodes[i].ID] = &nodes[i]
	}
	for _, id := range plan.Unplaceable {
		for _, j := range jobs {
			if j.ID == id {
				j.Finish(api.JobFailed, nil, fmt.Sprintf("the job needs %d nodes but compute %s has max_node_count %d", j.Count, rec.Name, rec.MaxNodes()), now)
				if err := model.PutJob(tx, j); err != nil {
					return acts, err
				}
			}
		}
	}
	for _, id := range plan.Release {
		n := byID[id]
		if n == nil || n.Released {
			continue
		}
		if idleFor := rec.IdleAfter(); n.State == api.NodeIdle && !n.IdleSince.IsZero() && !now.Before(n.IdleSince.Add(idleFor)) {
			c.core.Recorder().IdleReleaseLateness(now.Sub(n.IdleSince.Add(idleFor)))
		}
		n.MarkReleased(now)
		if err := tx.Put(store.Nodes, n.Key(), n); err != nil {
			return acts, err
		}
		acts.ClearTimer(computes.NodeIdleTimer(*n))
		acts.Release = append(acts.Release, *n)
	}
	for _, id := range plan.Drain {
		if n := byID[id]; n != nil && n.State != api.NodeLeaving {
			n.State = api.NodeLeaving
			if err := tx.Put(store.Nodes, n.Key(), n); err != nil {
				return acts, err
			}
		}
	}
	if plan.Create > 0 && !c.core.CreateBackedOff(key, now) {
		// New nodes wait in preparing until admission gives them capacity. A pass creates a
		// bounded number; the next pass, right after, creates more.
		create := min(plan.Create, computes.MaxNodesPerPass)
		if create < plan.Create {
			c.core.Kick(key)
		}
		for range create {
			n := c.core.NewNode(*rec, now)
			if err := tx.Put(store.Nodes, n.Key(), n); err != nil {
				return acts, err
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
				return acts, err
			}
			acts.ClearTimer(computes.NodeIdleTimer(*n))
		}
		if err := model.PutJob(tx, j); err != nil {
			return acts, err
		}
		acts.StartJobs = append(acts.StartJobs, j)
	}
	for id, deadline := range plan.Deadlines {
		if n := byID[id]; n != nil {
			acts.SetTimer(computes.NodeIdleTimer(*n), deadline)
		}
	}
	return acts, nil
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
