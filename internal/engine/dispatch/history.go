package dispatch

import (
	"context"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/history"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
)

// The status page's history (package history): what a sample reads, and the API's read.

// History returns the last hour's samples of a workspace's computes and deployments.
func (a *API) History(ctx context.Context, workspace string) (*api.History, error) {
	if _, err := a.GetWorkspace(ctx, workspace); err != nil {
		return nil, err
	}
	return a.c.History.Workspace(workspace, a.c.Clock.Now()), nil
}

// SampleHistory takes one sample now. A running engine samples every history.Interval by
// itself; a manual one (tests) samples only when told.
func (a *API) SampleHistory(ctx context.Context) error {
	now := a.c.Clock.Now()
	s, err := a.HistorySample(ctx)
	if err != nil {
		return err
	}
	a.c.History.Record(now, s)
	return nil
}

// HistorySample reads one sample (the running engine samples with it): each compute's nodes, its unfinished jobs from the
// active-jobs index (so its cost follows the live jobs, not every job ever run), and each
// online deployment's ready instances and the router's request count.
func (a *API) HistorySample(ctx context.Context) (history.Snapshot, error) {
	s := history.Snapshot{Computes: map[string]history.ComputeCounts{}, Deployments: map[history.DeploymentKey]history.DeploymentCounts{}}
	workspaces, err := a.ListWorkspaces(ctx)
	if err != nil {
		return s, err
	}
	for _, ws := range workspaces {
		computes, err := a.ListComputes(ctx, ws.Name)
		if err != nil {
			return s, err
		}
		for _, c := range computes {
			s.Computes[ws.Name+"/"+c.Name] = history.ComputeCounts{Nodes: int64(len(c.Nodes))}
		}
		err = a.c.Store.View(func(tx *store.Tx) error {
			for _, k := range tx.Keys(store.ActiveJobs, ws.Name+"/") {
				var key string
				var j model.Job
				if ok, err := tx.Get(store.ActiveJobs, k, &key); err != nil || !ok {
					return err
				}
				if ok, err := tx.Get(store.Jobs, key, &j); err != nil || !ok {
					return err
				}
				c, ok := s.Computes[ws.Name+"/"+j.Compute]
				if !ok {
					continue // a serverless job, or a compute deleted meanwhile
				}
				switch j.Status {
				case api.JobQueued:
					c.Queued++
				case api.JobPreparing, api.JobRunning:
					c.Running++
				}
				s.Computes[ws.Name+"/"+j.Compute] = c
			}
			return nil
		})
		if err != nil {
			return s, err
		}
		endpoints, err := a.ListEndpoints(ctx, ws.Name)
		if err != nil {
			return s, err
		}
		for _, ep := range endpoints {
			stats := a.ScoringStats(ep.Name)
			for name, d := range ep.Deployments {
				s.Deployments[history.DeploymentKey{Workspace: ws.Name, Endpoint: ep.Name, Deployment: name}] = history.DeploymentCounts{
					Instances: d.ReadyInstances, Requests: stats[name].Requests,
				}
			}
		}
	}
	return s, nil
}
