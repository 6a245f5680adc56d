package provider

import (
	"context"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/catalog"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/client"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/validation"
)

// This file is the plan-time quota check of compute clusters and online endpoints in a
// workspace that already exists. The quota is the engine's answer (POST
// .../quota:check): the planned cluster or deployments go to the engine, which checks them
// as their create or update would, from its own quota index, and answers with its usual
// error and the field at fault. The provider only moves that error to where it helps:
// before anything is changed, on the attribute to fix. A destroy never gets here
// (ModifyPlan returns first).

// quotaPlans carries the quotas a plan gives to each workspace it updates in place, for
// the terraform command one provider instance serves: the workspace's ModifyPlan records
// them, and its clusters' and endpoints' ModifyPlan (which Terraform runs after the plan of
// the workspace they reference) send them with the check, so raising a quota and a
// cluster's max_node_count in one plan passes. A nil quotaPlans keeps nothing.
type quotaPlans struct {
	planned sync.Map // workspace -> quotaPlan
}

type quotaPlan struct {
	// known is false when a planned quota is not known yet: the check is left to apply.
	known  bool
	quotas map[string]int64
}

// recordPlannedQuotas is called by the workspace's ModifyPlan: changed is whether the plan
// changes the workspace's quotas, planned the planned map.
func (q *quotaPlans) recordPlannedQuotas(ctx context.Context, workspace string, changed bool, planned types.Map) {
	if q == nil {
		return
	}
	if !changed {
		q.planned.Delete(workspace)
		return
	}
	p := quotaPlan{known: !planned.IsUnknown(), quotas: map[string]int64{}}
	if p.known && !planned.IsNull() {
		for _, v := range planned.Elements() {
			if v.IsUnknown() {
				p.known = false
			}
		}
		if p.known && planned.ElementsAs(ctx, &p.quotas, false).HasError() {
			p.known = false
		}
	}
	q.planned.Store(workspace, p)
}

// plannedQuotas returns the quotas this command's plan gives workspace, if it changes them.
func (q *quotaPlans) plannedQuotas(workspace string) (quotaPlan, bool) {
	if q == nil {
		return quotaPlan{}, false
	}
	p, ok := q.planned.Load(workspace)
	if !ok {
		return quotaPlan{}, false
	}
	return p.(quotaPlan), true
}

// checkQuota asks the engine whether check fits workspace ws's quota and adds its refusal
// as an error on the attribute the engine names (schemaType is the resource's schema). A
// workspace that does not exist yet, an engine that does not answer or any other error is
// left to apply, which reports it with the engine's own words.
func checkQuota(ctx context.Context, c *client.Client, q *quotaPlans, schemaType attr.Type, diags *diag.Diagnostics, ws string, check api.QuotaCheck) {
	if p, ok := q.plannedQuotas(ws); ok {
		if !p.known {
			return
		}
		check.Quotas = p.quotas
	}
	err := c.CheckQuota(ctx, ws, check)
	if err == nil {
		return
	}
	if !api.IsQuotaExceeded(err) {
		tflog.Debug(ctx, "quota not checked at plan time", map[string]any{"workspace": ws, "error": err.Error()})
		return
	}
	detail := sentence(engineMessage(err))
	if p, ok := fieldPath(schemaType, api.FieldOf(err)); ok {
		diags.AddAttributeError(p, summaryQuotaExceeded, detail)
		return
	}
	diags.AddError(summaryQuotaExceeded, detail)
}

// sentence writes an engine message as a diagnostic's detail: a capital first letter and
// a full stop.
func sentence(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:] + "."
}

// planQuota checks the planned cluster against its workspace's quota. It asks the engine
// only when the plan sets what the quota depends on (a create, a new size, a new
// max_node_count) and the workspace already exists; a workspace created in the same plan
// has no ID yet, and the check stays at apply (where Terraform plans the cluster again,
// once the workspace exists, so this same check reports it before the create).
func (r *computeClusterResource) planQuota(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse, plan computeClusterModel, sizeChanged bool) {
	if r.client == nil || plan.WorkspaceID.IsUnknown() || plan.WorkspaceID.IsNull() || plan.VMSize.IsUnknown() || plan.Name.IsUnknown() {
		return
	}
	maxPath := path.Root("scale_settings").AtName("max_node_count")
	var maxNodes, priorMax types.Int64
	resp.Diagnostics.Append(req.Plan.GetAttribute(ctx, maxPath, &maxNodes)...)
	if !req.State.Raw.IsNull() {
		resp.Diagnostics.Append(req.State.GetAttribute(ctx, maxPath, &priorMax)...)
	}
	if resp.Diagnostics.HasError() || maxNodes.IsUnknown() || maxNodes.IsNull() {
		return
	}
	if !req.State.Raw.IsNull() && !sizeChanged && maxNodes.Equal(priorMax) {
		return // nothing the quota depends on changes: no call
	}
	id, err := api.ParseID(plan.WorkspaceID.ValueString(), "")
	if _, known := catalog.Lookup(plan.VMSize.ValueString()); !known || err != nil {
		return // vm_size and workspace_id have their own diagnostics
	}
	checkQuota(ctx, r.client, r.quotas, req.Plan.Schema.Type(), &resp.Diagnostics, id.Workspace, api.QuotaCheck{Compute: &api.ComputeSpec{
		Name: plan.Name.ValueString(), Type: api.TypeComputeCluster, VMSize: plan.VMSize.ValueString(),
		ScaleSettings: &api.ScaleSettings{MaxNodeCount: maxNodes.ValueInt64()},
	}})
}

// plannedQuotaSpecs returns the deployments' quota inputs (instance_type, instance_count,
// scale_settings) as the engine takes them; ok is false when one of them is not known yet.
func plannedQuotaSpecs(ctx context.Context, deployments map[string]deploymentModel) (map[string]api.DeploymentSpec, bool) {
	out := make(map[string]api.DeploymentSpec, len(deployments))
	for name, d := range deployments {
		if d.InstanceType.IsUnknown() || d.InstanceCount.IsUnknown() || d.ScaleSettings.IsUnknown() {
			return nil, false
		}
		for _, v := range d.ScaleSettings.Attributes() {
			if v.IsUnknown() {
				return nil, false
			}
		}
		spec := api.DeploymentSpec{InstanceType: d.InstanceType.ValueString(), InstanceCount: d.InstanceCount.ValueInt64()}
		if !d.ScaleSettings.IsNull() {
			scale, diags := d.scaleSettings(ctx)
			if diags.HasError() {
				return nil, false
			}
			spec.ScaleSettings = scale
		}
		out[name] = spec
	}
	return out, true
}

// planQuota checks the planned deployments against the workspace's quota, where each
// holds max_instances (or, at a fixed count, instance_count) times its instance_type's
// vCPUs in the one sum the workspace's computes and other endpoints share (DESIGN 4). It
// asks the engine only when a deployment's holding is new or changed, every size is a
// catalog size, and the workspace exists.
func (r *onlineEndpointResource) planQuota(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse, deployments map[string]deploymentModel) {
	var workspaceID, name types.String
	resp.Diagnostics.Append(req.Plan.GetAttribute(ctx, path.Root("workspace_id"), &workspaceID)...)
	resp.Diagnostics.Append(req.Plan.GetAttribute(ctx, path.Root("name"), &name)...)
	if r.client == nil || resp.Diagnostics.HasError() || workspaceID.IsUnknown() || workspaceID.IsNull() || name.IsUnknown() {
		return
	}
	planned, ok := plannedQuotaSpecs(ctx, deployments)
	if !ok {
		return
	}
	var prior map[string]api.DeploymentSpec
	if !req.State.Raw.IsNull() {
		var state onlineEndpointModel
		resp.Diagnostics.Append(req.State.GetAttribute(ctx, path.Root("deployments"), &state.Deployments)...)
		stateDeployments, diags := state.deploymentModels(ctx)
		resp.Diagnostics.Append(diags...)
		if resp.Diagnostics.HasError() {
			return
		}
		prior, _ = plannedQuotaSpecs(ctx, stateDeployments)
	}
	changed := false
	for _, dn := range slices.Sorted(maps.Keys(planned)) {
		cur := planned[dn]
		if _, known := catalog.Lookup(cur.InstanceType); !known {
			return // instance_type has its own diagnostic
		}
		old, had := prior[dn]
		oc, _ := validation.DeploymentQuotaCount(old)
		cc, _ := validation.DeploymentQuotaCount(cur)
		changed = changed || !had || !strings.EqualFold(old.InstanceType, cur.InstanceType) || oc != cc
	}
	id, err := api.ParseID(workspaceID.ValueString(), "")
	if !changed || err != nil {
		return // nothing the quota depends on changes: no call
	}
	checkQuota(ctx, r.client, r.quotas, req.Plan.Schema.Type(), &resp.Diagnostics, id.Workspace,
		api.QuotaCheck{Endpoint: &api.EndpointSpec{Name: name.ValueString(), Deployments: planned}})
}
