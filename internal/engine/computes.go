package engine

import (
	"context"
	"fmt"
	"math"
	"strings"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/catalog"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/rules/quota"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/runtime"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/validation"
)

// CreateCompute creates a compute cluster. Idempotent under the key like CreateWorkspace.
func (e *Engine) CreateCompute(ctx context.Context, workspace string, spec api.ComputeSpec, idempotencyKey string) (*api.Compute, error) {
	if spec.Type == "" {
		spec.Type = api.TypeComputeCluster
	}
	now := e.clock.Now().UTC()
	var rec model.Compute
	switch spec.Type {
	case api.TypeComputeCluster:
		size, err := validation.ComputeCluster(spec)
		if err != nil {
			return nil, err
		}
		if spec.VMPriority == "" {
			spec.VMPriority = api.PriorityDedicated
		}
		settings := spec.ScaleSettings.WithDefaults()
		rec = model.Compute{
			Workspace: workspace, Name: spec.Name, Type: spec.Type, VMSize: size.Name, VMPriority: spec.VMPriority,
			Description: spec.Description, Tags: spec.Tags, ScaleSettings: &settings, CreatedOn: now,
		}
	case api.TypeComputeInstance:
		if err := validation.ComputeName.Check("name", spec.Name); err != nil {
			return nil, err
		}
		size, err := validation.VMSize("vm_size", spec.VMSize, catalog.ComputeInstance)
		if err != nil {
			return nil, err
		}
		if rec, err = e.newInstanceRecord(spec, size, workspace, now); err != nil {
			return nil, err
		}
	case api.TypeAttached:
		return e.createAttached(ctx, workspace, spec, idempotencyKey)
	default:
		return nil, api.Errorf(api.CodeInvalid, "type", "compute type %q is not supported by this engine; supported: %s, %s, %s", spec.Type, api.TypeComputeCluster, api.TypeComputeInstance, api.TypeAttached)
	}
	id := api.ComputeID(workspace, spec.Name)

	e.mu.Lock()
	defer e.mu.Unlock()
	err := e.store.Update(func(tx *store.Tx) error {
		ws, err := model.GetWorkspace(tx, workspace)
		if err != nil {
			return err
		}
		if done, err := model.Replayed(tx, idempotencyKey, id); done || err != nil {
			return err
		}
		var existing model.Compute
		if ok, err := tx.Get(store.Computes, rec.Key(), &existing); err != nil {
			return err
		} else if ok {
			return api.Errorf(api.CodeConflict, "name", "compute %q already exists in workspace %q; to manage it with Terraform, import it: terraform import %s.<name> %s", spec.Name, workspace, rec.ResourceType(), id)
		}
		if err := e.checkQuota(ws, rec, rec.QuotaField()); err != nil {
			return err
		}
		if err := tx.Put(store.Computes, rec.Key(), rec); err != nil {
			return err
		}
		return model.Remember(tx, idempotencyKey, id)
	})
	if err != nil {
		return nil, err
	}
	e.indexCompute(rec)
	e.log.Info("compute created", "compute", rec.Key(), "type", rec.Type, "vm_size", rec.VMSize)
	e.kick(rec.Key())
	return e.GetCompute(context.Background(), workspace, spec.Name)
}

// UpdateCompute replaces a compute's description, tags and scale settings in place.
func (e *Engine) UpdateCompute(ctx context.Context, workspace, name string, upd api.ComputeUpdate) (*api.Compute, error) {
	if handled, c, err := e.updateAttached(ctx, workspace, name, upd); handled {
		return c, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	var updated model.Compute
	err := e.store.Update(func(tx *store.Tx) error {
		ws, err := model.GetWorkspace(tx, workspace)
		if err != nil {
			return err
		}
		rec, err := model.GetCompute(tx, workspace, name)
		if err != nil {
			return err
		}
		if rec.Deleting {
			return api.Errorf(api.CodeConflict, "", "compute %q is being deleted", name)
		}
		rec.Description, rec.Tags = upd.Description, upd.Tags
		if rec.Instance != nil {
			if upd.ScaleSettings != nil {
				return api.Errorf(api.CodeInvalid, "scale_settings", "compute instance %q has no scale settings", name)
			}
			if err := e.updateInstance(&rec, upd, e.clock.Now().UTC()); err != nil {
				return err
			}
			if err := e.checkQuota(ws, rec, rec.QuotaField()); err != nil {
				return err
			}
			updated = rec
			return tx.Put(store.Computes, rec.Key(), rec)
		}
		if upd.VMSize != "" && !strings.EqualFold(upd.VMSize, rec.VMSize) {
			return api.Errorf(api.CodeInvalid, "vm_size", "a compute cluster's vm_size cannot change; replace the cluster")
		}
		if upd.ScaleSettings != nil {
			if _, err := validation.ScaleSettings(upd.ScaleSettings); err != nil {
				return err
			}
			s := upd.ScaleSettings.WithDefaults()
			rec.ScaleSettings = &s
			if err := e.checkQuota(ws, rec, rec.QuotaField()); err != nil {
				return err
			}
		}
		updated = rec
		return tx.Put(store.Computes, rec.Key(), rec)
	})
	if err != nil {
		return nil, err
	}
	e.indexCompute(updated)
	e.log.Info("compute updated", "compute", workspace+"/"+name)
	e.kick(workspace + "/" + name)
	return e.GetCompute(context.Background(), workspace, name)
}

// GetCompute returns a compute with its runtime state.
func (e *Engine) GetCompute(_ context.Context, workspace, name string) (*api.Compute, error) {
	var out *api.Compute
	err := e.store.View(func(tx *store.Tx) error {
		rec, err := model.GetCompute(tx, workspace, name)
		if err != nil {
			return err
		}
		if rec.Serverless {
			return model.NotFoundCompute(workspace, name)
		}
		out, err = e.describe(tx, rec)
		return err
	})
	return out, err
}

// ListComputes returns a workspace's computes, sorted by name.
func (e *Engine) ListComputes(_ context.Context, workspace string) ([]api.Compute, error) {
	var out []api.Compute
	err := e.store.View(func(tx *store.Tx) error {
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
			c, err := e.describe(tx, rec)
			if err != nil {
				return err
			}
			out = append(out, *c)
		}
		return nil
	})
	return out, err
}

// describe folds a compute's node records into its API form.
func (e *Engine) describe(tx *store.Tx, rec model.Compute) (*api.Compute, error) {
	nodes, err := store.List[model.Node](tx, store.Nodes, rec.Key()+"/")
	if err != nil {
		return nil, err
	}
	c := &api.Compute{
		ID: api.ComputeID(rec.Workspace, rec.Name), Workspace: rec.Workspace, Name: rec.Name, Type: rec.Type,
		VMSize: rec.VMSize, VMPriority: rec.VMPriority, Description: rec.Description, Tags: rec.Tags,
		CreatedOn: rec.CreatedOn, ScaleSettings: rec.ScaleSettings, Nodes: []api.Node{},
		AllocationState: api.AllocationSteady, State: "Succeeded",
	}
	if rec.Deleting {
		c.State = "Deleting"
	}
	if inst := rec.Instance; inst != nil {
		settings, op := inst.Settings, inst.LastOperation
		c.Instance, c.LastOperation, c.State, c.Error = &settings, &op, inst.State, inst.Error
		if rec.Deleting {
			c.State = api.InstanceDeleting
		}
	}
	if rec.Attached != nil {
		c.VirtualMachine, c.ScaleSettings = rec.Attached.API(), nil
	}
	for _, n := range nodes {
		c.Nodes = append(c.Nodes, n.API())
		switch n.State {
		case api.NodeIdle:
			c.NodeStateCounts.Idle++
		case api.NodeRunning:
			c.NodeStateCounts.Running++
		case api.NodePreparing:
			c.NodeStateCounts.Preparing++
		case api.NodeLeaving:
			c.NodeStateCounts.Leaving++
		case api.NodeUnusable:
			c.NodeStateCounts.Unusable++
		case api.NodePreempted:
			c.NodeStateCounts.Preempted++
		}
		if n.State == api.NodeIdle || n.State == api.NodeRunning {
			c.CurrentNodeCount++
		}
		if n.State != api.NodeLeaving && n.State != api.NodeUnusable && n.State != api.NodePreempted {
			c.TargetNodeCount++
		}
	}
	if c.NodeStateCounts.Preparing > 0 || c.NodeStateCounts.Leaving > 0 {
		c.AllocationState = api.AllocationResizing
	}
	return c, nil
}

// checkQuota checks that the vCPUs the workspace's computes of rec's family may use
// (max_node_count times the size's vCPUs each, with rec replacing its stored version) fit
// the family's quota (rules/quota). The other computes' use comes from the quota index, so
// the check costs the same however many computes the store holds. Callers hold e.mu.
func (e *Engine) checkQuota(ws *api.Workspace, rec model.Compute, field string) error {
	size, ok := catalog.Lookup(rec.VMSize)
	if !ok {
		return api.Errorf(api.CodeInvalid, "vm_size", "unknown VM size %q", rec.VMSize)
	}
	used := e.quota.Used(ws.Name, size.Family, rec.Key())
	want, wantOK := quota.Demand(rec.MaxNodes(), size.VCPUs)
	limit := EffectiveQuota(ws, size.Family)
	if !wantOK {
		// Validation bounds max_node_count, so only a record from an older engine gets here.
		return api.Errorf(api.CodeQuotaExceeded, field, "%s asks for %d nodes x %d vCPUs of %s, more vCPUs than any quota can hold; lower max_node_count",
			rec.Name, rec.MaxNodes(), size.VCPUs, size.Name)
	}
	d := quota.Check(used, want, limit)
	if d.Fits {
		return nil
	}
	detail := ""
	if holders := e.quota.Holders(ws.Name, size.Family, rec.Key()); len(holders) > 0 {
		names := make([]string, 0, len(holders))
		for _, h := range holders {
			names = append(names, fmt.Sprintf("%s (%d vCPUs)", h.Name, h.VCPUs))
		}
		detail = fmt.Sprintf(" (already used by %s)", strings.Join(names, ", "))
	}
	hint := fmt.Sprintf("raise it with quotas = { %s = %d } on the workspace", size.Family, d.Need)
	if f, _ := catalog.LookupFamily(size.Family); f.RequiresApproval && ws.Quotas[size.Family] == 0 {
		hint = fmt.Sprintf("family %s requires approval and has no quota until one is set: add quotas = { %s = %d } to the workspace", size.Family, size.Family, d.Need)
	}
	return api.Errorf(api.CodeQuotaExceeded, field,
		"%s needs %d vCPUs of %s (%d nodes x %d vCPUs of %s) but workspace %q has %d of %d left%s; %s",
		rec.Name, want, size.Family, rec.MaxNodes(), size.VCPUs, size.Name, ws.Name, d.Left, limit, detail, hint)
}

// holding is what rec holds of its workspace's quota, for the quota index; ok is false for a
// compute without a catalog size (an attached machine).
func holding(rec model.Compute) (model.Holding, bool) {
	size, ok := catalog.Lookup(rec.VMSize)
	if !ok || rec.Attached != nil {
		return model.Holding{}, false
	}
	vcpus, ok := quota.Demand(rec.MaxNodes(), size.VCPUs)
	if !ok {
		vcpus = math.MaxInt64
	}
	return model.Holding{Workspace: rec.Workspace, Name: rec.Name, Family: size.Family, VCPUs: vcpus}, true
}

// indexCompute brings the quota index up to date with a committed compute record.
// Callers hold e.mu.
func (e *Engine) indexCompute(rec model.Compute) {
	if h, ok := holding(rec); ok {
		e.quota.Set(rec.Key(), h)
	}
}

// loadQuotaIndex fills the quota index from the store, once, when the engine is built.
func (e *Engine) loadQuotaIndex() error {
	return e.store.View(func(tx *store.Tx) error {
		recs, err := store.List[model.Compute](tx, store.Computes, "")
		for _, rec := range recs {
			e.indexCompute(rec)
		}
		return err
	})
}

// DeleteCompute cancels a compute's jobs, releases its nodes and deletes it. It returns
// once every node is confirmed released, or with an unavailable error when ctx ends first
// (the delete goes on and resumes after an engine restart).
func (e *Engine) DeleteCompute(ctx context.Context, workspace, name string) error {
	key := workspace + "/" + name
	e.mu.Lock()
	err := e.store.Update(func(tx *store.Tx) error {
		rec, err := model.GetCompute(tx, workspace, name)
		if err != nil || rec.Serverless {
			return model.NotFoundCompute(workspace, name)
		}
		if rec.Deleting {
			return nil
		}
		rec.Deleting = true
		return tx.Put(store.Computes, key, rec)
	})
	e.mu.Unlock()
	if err != nil {
		return err
	}
	e.log.Info("compute deleting", "compute", key)
	return e.waitDeleted(ctx, []string{key})
}

// waitDeleted kicks the computes and waits until their records are gone.
func (e *Engine) waitDeleted(ctx context.Context, keys []string) error {
	objs := make([]runtime.Key, len(keys))
	for i, k := range keys {
		objs[i] = runtime.ComputeKey(k)
	}
	if k, ok := e.loop.AwaitDeleted(ctx, objs); !ok {
		return api.Errorf(api.CodeUnavailable, "", "compute %s is still releasing its nodes; the delete goes on in the background, try again to wait for it", k.Name)
	}
	return nil
}
