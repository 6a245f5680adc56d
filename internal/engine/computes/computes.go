package computes

import (
	"context"
	"strings"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/catalog"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/rules/quota"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/runtime"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/validation"
)

// GetCompute returns a compute with its runtime state.
func (c *Core) GetCompute(_ context.Context, workspace, name string) (*api.Compute, error) {
	var out *api.Compute
	err := c.store.View(func(tx *store.Tx) error {
		rec, err := model.GetCompute(tx, workspace, name)
		if err != nil {
			return err
		}
		if rec.Serverless {
			return model.NotFoundCompute(workspace, name)
		}
		out, err = c.describe(tx, rec)
		return err
	})
	return out, err
}

// ListComputes returns a workspace's computes, sorted by name.
func (c *Core) ListComputes(_ context.Context, workspace string) ([]api.Compute, error) {
	var out []api.Compute
	err := c.store.View(func(tx *store.Tx) error {
		if _, err := model.GetWorkspace(tx, workspace); err != nil {
			return err
		}
		recs, err := store.List[model.Compute](tx, store.Computes, workspace+"/")
		if err != nil {
			return err
		}
		for _, rec := range recs {
			if rec.Serverless {
				continue
			}
			out1, err := c.describe(tx, rec)
			if err != nil {
				return err
			}
			out = append(out, *out1)
		}
		return nil
	})
	return out, err
}

// describe folds a compute's node records into its API form.
func (c *Core) describe(tx *store.Tx, rec model.Compute) (*api.Compute, error) {
	nodes, err := store.List[model.Node](tx, store.Nodes, rec.Key()+"/")
	if err != nil {
		return nil, err
	}
	out := &api.Compute{
		ID: api.ComputeID(rec.Workspace, rec.Name), Workspace: rec.Workspace, Name: rec.Name, Type: rec.Type,
		VMSize: rec.VMSize, VMPriority: rec.VMPriority, Description: rec.Description, Tags: rec.Tags,
		CreatedOn: rec.CreatedOn, ScaleSettings: rec.ScaleSettings, Nodes: []api.Node{},
		AllocationState: api.AllocationSteady, State: "Succeeded",
	}
	if rec.Deleting {
		out.State = "Deleting"
	}
	if inst := rec.Instance; inst != nil {
		settings, op := inst.Settings, inst.LastOperation
		out.Instance, out.LastOperation, out.State, out.Error = &settings, &op, inst.State, inst.Error
		if rec.Deleting {
			out.State = api.InstanceDeleting
		}
	}
	if rec.Attached != nil {
		out.VirtualMachine, out.ScaleSettings = rec.Attached.API(), nil
	}
	if rec.Kubernetes != nil {
		out.Kubernetes, out.ScaleSettings = rec.Kubernetes.API(), nil
	}
	out.Errors = rec.Errors
	for _, n := range nodes {
		out.Nodes = append(out.Nodes, n.API())
		switch n.State {
		case api.NodeIdle:
			out.NodeStateCounts.Idle++
		case api.NodeRunning:
			out.NodeStateCounts.Running++
		case api.NodePreparing:
			out.NodeStateCounts.Preparing++
		case api.NodeLeaving:
			out.NodeStateCounts.Leaving++
		case api.NodeUnusable:
			out.NodeStateCounts.Unusable++
		case api.NodePreempted:
			out.NodeStateCounts.Preempted++
		}
		if n.State == api.NodeIdle || n.State == api.NodeRunning {
			out.CurrentNodeCount++
		}
		if n.State != api.NodeLeaving && n.State != api.NodeUnusable && n.State != api.NodePreempted {
			out.TargetNodeCount++
		}
	}
	if out.NodeStateCounts.Preparing > 0 || out.NodeStateCounts.Leaving > 0 {
		out.AllocationState = api.AllocationResizing
	}
	return out, nil
}

// checkQuota checks that the vCPUs the workspace's computes of rec's family may use
// (max_node_count times the size's vCPUs each, with rec replacing its stored version) fit
// the family's quota (rules/quota). The other computes' use comes from the quota index, so
// the check costs the same however many computes the store holds. Callers hold c.mu.
func (c *Core) checkQuota(ws *api.Workspace, rec model.Compute, field string) error {
	r, err := c.quotaRefusal(ws, rec, field)
	if r != nil {
		return api.Errorf(api.CodeQuotaExceeded, field, "%s", r.Error())
	}
	return err
}

// quotaRefusal is the quota rule's answer for rec, nil when it fits. field names the
// input that sets the count (it chooses the count's name in the message).
func (c *Core) quotaRefusal(ws *api.Workspace, rec model.Compute, field string) (*quota.Refusal, error) {
	size, ok := catalog.Lookup(rec.VMSize)
	if !ok {
		return nil, api.Errorf(api.CodeInvalid, "vm_size", "unknown VM size %q", rec.VMSize)
	}
	claim := quota.Claim{
		Compute: rec.Name, Workspace: ws.Name, Family: size.Family, Size: size.Name, SizeVCPUs: size.VCPUs,
		Nodes: rec.MaxNodes(), Limit: model.EffectiveQuota(ws, size.Family), CountName: "scale_settings.max_node_count",
	}
	switch {
	case rec.Instance != nil:
		claim.CountName = ""
	case field == "instance_type": // a serverless job's cluster
		claim.CountName = "instance_count"
	}
	if f, _ := catalog.LookupFamily(size.Family); f.RequiresApproval && ws.Quotas[size.Family] == 0 {
		claim.ApprovalPending = true
	}
	holders := func() []quota.Holder {
		var out []quota.Holder
		for _, h := range c.quota.Holders(ws.Name, size.Family, rec.Key()) {
			out = append(out, quota.Holder{Name: h.Name, VCPUs: h.VCPUs})
		}
		return out
	}
	return quota.Evaluate(claim, c.quota.Used(ws.Name, size.Family, rec.Key()), holders), nil
}

// CheckQuota answers a planned compute cluster's quota check (POST .../quota:check) as its
// create or update would, changing nothing: nil when it fits, else the quota error on
// vm_size when not one node of the size fits and on scale_settings.max_node_count
// otherwise. quotas, when not nil, stands in for the workspace's stored quotas.
func (c *Core) CheckQuota(_ context.Context, workspace string, quotas map[string]int64, spec api.ComputeSpec) error {
	size, err := validation.ComputeCluster(spec)
	if err != nil {
		return err
	}
	settings := spec.ScaleSettings.WithDefaults()
	rec := model.Compute{Workspace: workspace, Name: spec.Name, Type: api.TypeComputeCluster, VMSize: size.Name, ScaleSettings: &settings}
	var ws *api.Workspace
	if err := c.store.View(func(tx *store.Tx) error {
		ws, err = model.GetWorkspace(tx, workspace)
		return err
	}); err != nil {
		return err
	}
	if quotas != nil {
		ws.Quotas = quotas
	}
	field := rec.QuotaField()
	r, err := c.quotaRefusal(ws, rec, field)
	if r == nil {
		return err
	}
	if r.FittingNodes() == 0 {
		field = "vm_size"
	}
	return api.Errorf(api.CodeQuotaExceeded, field, "%s", r.Error())
}

// holding is what rec holds of its workspace's quota, for the quota index; ok is false for a
// compute without a catalog size (an attached machine).
func holding(rec model.Compute) (model.Holding, bool) {
	size, ok := catalog.Lookup(rec.VMSize)
	if !ok || rec.Attached != nil {
		return model.Holding{}, false
	}
	return model.Holding{Workspace: rec.Workspace, Name: rec.Name, Family: size.Family, VCPUs: quota.Holds(rec.MaxNodes(), size.VCPUs)}, true
}

// indexCompute brings the quota index up to date with a compute record being stored.
// Callers hold c.mu.
func (c *Core) indexCompute(rec model.Compute) {
	if h, ok := holding(rec); ok {
		c.quota.Set(rec.Key(), h)
	}
}

// loadQuotaIndex fills the quota index from the store, once, when the engine is built.
func (c *Core) loadQuotaIndex() error {
	if err := c.store.Update(model.IndexActiveJobs); err != nil {
		return err
	}
	return c.store.Update(func(tx *store.Tx) error {
		recs, err := store.List[model.Compute](tx, store.Computes, "")
		for _, rec := range recs {
			c.indexCompute(rec)
			// Records from an engine that stored no parsed durations get them now.
			before := rec.Durations
			rec.ParseDurations()
			if rec.Durations != before {
				if err := tx.Put(store.Computes, rec.Key(), rec); err != nil {
					return err
				}
			}
		}
		return err
	})
}

// DeleteCompute cancels a compute's jobs, releases its nodes and deletes it. It returns
// once every node is confirmed released, or with an unavailable error when ctx ends first
// (the delete goes on and resumes after an engine restart). A compute with no node and no
// job left (a cluster at zero nodes) has nothing to wait for: its record goes in the same
// write that would mark it, as its delete pass would remove it, and it is not waited for.
func (c *Core) DeleteCompute(ctx context.Context, workspace, name string) error {
	key := workspace + "/" + name
	var gone bool
	err := c.writeGrouped(func(tx *store.Tx) error {
		gone = false
		rec, err := model.GetCompute(tx, workspace, name)
		if err != nil || rec.Serverless {
			return model.NotFoundCompute(workspace, name)
		}
		if rec.Kubernetes == nil {
			nodes := tx.Keys(store.Nodes, key+"/")
			jobs, err := model.ActiveJobs(tx, rec)
			if err != nil {
				return err
			}
			if len(nodes) == 0 && len(jobs) == 0 {
				gone = true
				c.onCommit(func() { c.deleted(rec) })
				return tx.Delete(store.Computes, key)
			}
		}
		if rec.Deleting {
			return nil
		}
		rec.Deleting = true
		return tx.Put(store.Computes, key, rec)
	})
	if err != nil || gone {
		return err
	}
	c.log.Info("compute deleting", "compute", key)
	return c.awaitDeleted(ctx, []string{key})
}

// awaitDeleted kicks the computes and waits until their records are gone.
func (c *Core) awaitDeleted(ctx context.Context, keys []string) error {
	objs := make([]runtime.Key, len(keys))
	for i, k := range keys {
		objs[i] = runtime.ComputeKey(k)
	}
	if k, ok := c.loop.AwaitDeleted(ctx, objs); !ok {
		return api.Errorf(api.CodeUnavailable, "", "compute %s is still releasing its nodes; the delete goes on in the background, try again to wait for it", k.Name)
	}
	return nil
}

// DeleteWorkspace deletes every compute of a workspace that is being deleted (its
// force_destroy) and returns once their nodes are all released.
func (c *Core) DeleteWorkspace(ctx context.Context, workspace string) error {
	var keys []string
	err := c.Write(func(tx *store.Tx) error {
		recs, err := store.List[model.Compute](tx, store.Computes, workspace+"/")
		for _, rec := range recs {
			keys = append(keys, rec.Key())
			if !rec.Deleting {
				rec.Deleting = true
				if err := tx.Put(store.Computes, rec.Key(), rec); err != nil {
					return err
				}
			}
		}
		return err
	})
	if err != nil {
		return err
	}
	return c.awaitDeleted(ctx, keys)
}

// HasWork reports whether a compute needs the engine up: a node (other than an idle
// attached machine), a job running or queued, or an enabled schedule.
func (c *Core) HasWork() bool {
	var busy bool
	_ = c.store.View(func(tx *store.Tx) error {
		if busyNodes(tx) {
			busy = true
			return nil
		}
		busy = len(tx.Keys(store.ActiveJobs, "")) > 0
		// An enabled schedule must fire even while its instance is stopped.
		recs, err := store.List[model.Compute](tx, store.Computes, "")
		for _, rec := range recs {
			if rec.Instance == nil {
				continue
			}
			for _, sc := range rec.Instance.Settings.Schedules {
				busy = busy || sc.IsEnabled()
			}
		}
		return err
	})
	return busy
}

// busyNodes reports whether a node other than an idle attached machine exists: an
// attached machine waiting for jobs is a record, not work that keeps the engine up.
func busyNodes(tx *store.Tx) bool {
	nodes, _ := store.List[model.Node](tx, store.Nodes, "")
	for _, n := range nodes {
		if !strings.HasPrefix(n.ID, model.AttachedNodePrefix) || n.State != api.NodeIdle {
			return true
		}
	}
	return false
}
