package engine

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/catalog"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/rules/quota"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/runtime"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/validation"
)

// computeRecord is a compute as stored. Runtime state (nodes, counts) lives in node records
// and is folded in when the compute is read.
type computeRecord struct {
	Workspace     string             `json:"workspace"`
	Name          string             `json:"name"`
	Type          string             `json:"type"`
	VMSize        string             `json:"vm_size"`
	VMPriority    string             `json:"vm_priority,omitempty"`
	Description   string             `json:"description,omitempty"`
	Tags          map[string]string  `json:"tags,omitempty"`
	ScaleSettings *api.ScaleSettings `json:"scale_settings,omitempty"`
	CreatedOn     time.Time          `json:"created_on"`
	// Deleting is set (and committed) before any node is released, so a crash in the
	// middle of a delete resumes it instead of leaking nodes.
	Deleting bool `json:"deleting,omitempty"`
	// Serverless marks a compute made for one job alone; it goes with the job.
	Serverless bool   `json:"serverless,omitempty"`
	ForJob     string `json:"for_job,omitempty"`
	// Instance is set for compute instances.
	Instance *instanceRecord `json:"instance,omitempty"`
	// Attached is set for attached machines (attached.go).
	Attached *attachedRecord `json:"attached,omitempty"`
}

func (c computeRecord) key() string { return c.Workspace + "/" + c.Name }

// idleAfter is the cluster's scale-down delay; the spec was validated on the way in.
func (c computeRecord) idleAfter() time.Duration {
	if c.ScaleSettings == nil {
		return 0
	}
	d, _ := validation.Duration("", c.ScaleSettings.WithDefaults().ScaleDownNodesAfterIdleDuration, 0, validation.MaxScaleDownAfterIdle)
	return d
}

// CreateCompute creates a compute cluster. Idempotent under the key like CreateWorkspace.
func (e *Engine) CreateCompute(ctx context.Context, workspace string, spec api.ComputeSpec, idempotencyKey string) (*api.Compute, error) {
	if spec.Type == "" {
		spec.Type = api.TypeComputeCluster
	}
	now := e.clock.Now().UTC()
	var rec computeRecord
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
		rec = computeRecord{
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
		ws, err := getWorkspace(tx, workspace)
		if err != nil {
			return err
		}
		if done, err := replayed(tx, idempotencyKey, id); done || err != nil {
			return err
		}
		var existing computeRecord
		if ok, err := tx.Get(store.Computes, rec.key(), &existing); err != nil {
			return err
		} else if ok {
			return api.Errorf(api.CodeConflict, "name", "compute %q already exists in workspace %q; to manage it with Terraform, import it: terraform import %s.<name> %s", spec.Name, workspace, rec.resourceType(), id)
		}
		if err := e.checkQuota(ws, rec, rec.quotaField()); err != nil {
			return err
		}
		if err := tx.Put(store.Computes, rec.key(), rec); err != nil {
			return err
		}
		return remember(tx, idempotencyKey, id)
	})
	if err != nil {
		return nil, err
	}
	e.indexCompute(rec)
	e.log.Info("compute created", "compute", rec.key(), "type", rec.Type, "vm_size", rec.VMSize)
	e.kick(rec.key())
	return e.GetCompute(context.Background(), workspace, spec.Name)
}

// UpdateCompute replaces a compute's description, tags and scale settings in place.
func (e *Engine) UpdateCompute(ctx context.Context, workspace, name string, upd api.ComputeUpdate) (*api.Compute, error) {
	if handled, c, err := e.updateAttached(ctx, workspace, name, upd); handled {
		return c, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	var updated computeRecord
	err := e.store.Update(func(tx *store.Tx) error {
		ws, err := getWorkspace(tx, workspace)
		if err != nil {
			return err
		}
		rec, err := getCompute(tx, workspace, name)
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
			if err := e.checkQuota(ws, rec, rec.quotaField()); err != nil {
				return err
			}
			updated = rec
			return tx.Put(store.Computes, rec.key(), rec)
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
			if err := e.checkQuota(ws, rec, rec.quotaField()); err != nil {
				return err
			}
		}
		updated = rec
		return tx.Put(store.Computes, rec.key(), rec)
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
		rec, err := getCompute(tx, workspace, name)
		if err != nil {
			return err
		}
		if rec.Serverless {
			return notFoundCompute(workspace, name)
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
		if _, err := getWorkspace(tx, workspace); err != nil {
			return err
		}
		recs, err := store.List[computeRecord](tx, store.Computes, workspace+"/")
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
func (e *Engine) describe(tx *store.Tx, rec computeRecord) (*api.Compute, error) {
	nodes, err := store.List[nodeRecord](tx, store.Nodes, rec.key()+"/")
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
		c.VirtualMachine, c.ScaleSettings = rec.Attached.api(), nil
	}
	for _, n := range nodes {
		c.Nodes = append(c.Nodes, n.api())
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
func (e *Engine) checkQuota(ws *api.Workspace, rec computeRecord, field string) error {
	size, ok := catalog.Lookup(rec.VMSize)
	if !ok {
		return api.Errorf(api.CodeInvalid, "vm_size", "unknown VM size %q", rec.VMSize)
	}
	used := e.quota.Used(ws.Name, size.Family, rec.key())
	want, wantOK := quota.Demand(rec.maxNodes(), size.VCPUs)
	limit := EffectiveQuota(ws, size.Family)
	if !wantOK {
		// Validation bounds max_node_count, so only a record from an older engine gets here.
		return api.Errorf(api.CodeQuotaExceeded, field, "%s asks for %d nodes x %d vCPUs of %s, more vCPUs than any quota can hold; lower max_node_count",
			rec.Name, rec.maxNodes(), size.VCPUs, size.Name)
	}
	d := quota.Check(used, want, limit)
	if d.Fits {
		return nil
	}
	detail := ""
	if holders := e.quota.Holders(ws.Name, size.Family, rec.key()); len(holders) > 0 {
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
		rec.Name, want, size.Family, rec.maxNodes(), size.VCPUs, size.Name, ws.Name, d.Left, limit, detail, hint)
}

// holding is what rec holds of its workspace's quota, for the quota index; ok is false for a
// compute without a catalog size (an attached machine).
func holding(rec computeRecord) (model.Holding, bool) {
	size, ok := catalog.Lookup(rec.VMSize)
	if !ok || rec.Attached != nil {
		return model.Holding{}, false
	}
	vcpus, ok := quota.Demand(rec.maxNodes(), size.VCPUs)
	if !ok {
		vcpus = math.MaxInt64
	}
	return model.Holding{Workspace: rec.Workspace, Name: rec.Name, Family: size.Family, VCPUs: vcpus}, true
}

// indexCompute brings the quota index up to date with a committed compute record.
// Callers hold e.mu.
func (e *Engine) indexCompute(rec computeRecord) {
	if h, ok := holding(rec); ok {
		e.quota.Set(rec.key(), h)
	}
}

// loadQuotaIndex fills the quota index from the store, once, when the engine is built.
func (e *Engine) loadQuotaIndex() error {
	return e.store.View(func(tx *store.Tx) error {
		recs, err := store.List[computeRecord](tx, store.Computes, "")
		for _, rec := range recs {
			e.indexCompute(rec)
		}
		return err
	})
}

// resourceType is the Terraform resource that manages this kind of compute.
func (c computeRecord) resourceType() string {
	if c.Instance != nil {
		return "mlcompute_compute_instance"
	}
	if c.Attached != nil {
		return "mlcompute_attached_compute"
	}
	return "mlcompute_compute_cluster"
}

// quotaField is the input that sets how many vCPUs the compute may use: a cluster's
// max_node_count, an instance's size.
func (c computeRecord) quotaField() string {
	if c.Instance != nil {
		return "vm_size"
	}
	return "scale_settings.max_node_count"
}

func (c computeRecord) maxNodes() int64 {
	if c.ScaleSettings == nil {
		return 1
	}
	return c.ScaleSettings.MaxNodeCount
}

func getWorkspace(tx *store.Tx, name string) (*api.Workspace, error) {
	var ws api.Workspace
	ok, err := tx.Get(store.Workspaces, name, &ws)
	if err == nil && !ok {
		return nil, notFoundWorkspace(name)
	}
	return &ws, err
}

func getCompute(tx *store.Tx, workspace, name string) (computeRecord, error) {
	var rec computeRecord
	ok, err := tx.Get(store.Computes, workspace+"/"+name, &rec)
	if err == nil && !ok {
		return rec, notFoundCompute(workspace, name)
	}
	return rec, err
}

func notFoundCompute(workspace, name string) error {
	return api.Errorf(api.CodeNotFound, "", "compute %q not found in workspace %q", name, workspace)
}

// replayed reports whether a create with this idempotency key already happened (for id).
func replayed(tx *store.Tx, key, id string) (bool, error) {
	if key == "" {
		return false, nil
	}
	var rec idempotencyRecord
	ok, err := tx.Get(store.Idempotency, key, &rec)
	if err != nil || !ok {
		return false, err
	}
	if rec.ID != id {
		return false, api.Errorf(api.CodeConflict, "", "idempotency key %q was used for %s", key, rec.ID)
	}
	return true, nil
}

// remember records that the create with this key made id.
func remember(tx *store.Tx, key, id string) error {
	if key == "" {
		return nil
	}
	return tx.Put(store.Idempotency, key, idempotencyRecord{ID: id})
}

// DeleteCompute cancels a compute's jobs, releases its nodes and deletes it. It returns
// once every node is confirmed released, or with an unavailable error when ctx ends first
// (the delete goes on and resumes after an engine restart).
func (e *Engine) DeleteCompute(ctx context.Context, workspace, name string) error {
	key := workspace + "/" + name
	e.mu.Lock()
	err := e.store.Update(func(tx *store.Tx) error {
		rec, err := getCompute(tx, workspace, name)
		if err != nil || rec.Serverless {
			return notFoundCompute(workspace, name)
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
	chans := make([]chan struct{}, len(keys))
	e.waitMu.Lock()
	for i, k := range keys {
		chans[i] = make(chan struct{})
		e.waiters[runtime.ComputeKey(k)] = append(e.waiters[runtime.ComputeKey(k)], chans[i])
	}
	e.waitMu.Unlock()
	for _, k := range keys {
		e.kick(k)
	}
	e.settleManual(ctx)
	for i, ch := range chans {
		if gone(ch) {
			continue
		}
		select {
		case <-ch:
		case <-e.waitDone(ctx):
			return api.Errorf(api.CodeUnavailable, "", "compute %s is still releasing its nodes; the delete goes on in the background, try again to wait for it", keys[i])
		}
	}
	return nil
}

// notifyGone wakes the callers waiting for a compute's or an endpoint's deletion.
func (e *Engine) notifyGone(key runtime.Key) {
	e.waitMu.Lock()
	for _, ch := range e.waiters[key] {
		close(ch)
	}
	delete(e.waiters, key)
	e.waitMu.Unlock()
}
