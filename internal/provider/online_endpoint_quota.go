package provider

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/catalog"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/client"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/rules/quota"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/validation"
)

// This file is the plan-time quota check of an online endpoint's deployments, the
// counterpart of compute_cluster_quota.go: each deployment holds max_instances (or, at a
// fixed count, instance_count) times its instance_type's vCPUs of the workspace's quota, in
// the one sum the workspace's computes and other endpoints share (DESIGN 4). The engine
// checks again on apply; the plan only moves the error onto the attribute to lower. A
// destroy never gets here (ModifyPlan returns first), and destroy.go turns plan errors into
// warnings in any case.

// endpointHolders returns what the endpoints of workspace ws other than except hold of
// family, as the engine's quota index counts it.
func endpointHolders(ctx context.Context, c *client.Client, ws, family, except string) ([]quota.Holder, error) {
	eps, err := c.ListEndpoints(ctx, ws)
	if err != nil {
		return nil, err
	}
	var out []quota.Holder
	for _, ep := range eps {
		if ep.Name == except {
			continue
		}
		for _, dn := range slices.Sorted(maps.Keys(ep.Deployments)) {
			d := ep.Deployments[dn]
			size, ok := catalog.Lookup(d.InstanceType)
			if !ok || size.Family != family {
				continue
			}
			count, _ := validation.DeploymentQuotaCount(d.DeploymentSpec)
			out = append(out, quota.Holder{Name: "endpoint " + ep.Name + " deployment " + dn, VCPUs: quota.Holds(count, size.VCPUs)})
		}
	}
	return out, nil
}

// computeHolders returns what the computes of workspace ws other than except hold of family.
func computeHolders(computes []api.Compute, family, except string) []quota.Holder {
	var out []quota.Holder
	for _, c := range computes {
		other, ok := catalog.Lookup(c.VMSize)
		if c.Name == except || c.Type == api.TypeAttached || !ok || other.Family != family {
			continue
		}
		nodes := int64(1)
		if c.ScaleSettings != nil {
			nodes = c.ScaleSettings.MaxNodeCount
		}
		out = append(out, quota.Holder{Name: c.Name, VCPUs: quota.Holds(nodes, other.VCPUs)})
	}
	slices.SortFunc(out, func(a, b quota.Holder) int { return strings.Compare(a.Name, b.Name) })
	return out
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

// planQuota checks the planned deployments against the workspace's quota. It asks the
// engine only when a deployment's holding is new or changed, and the workspace exists.
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
	changed := func(dn string) bool {
		old, ok := prior[dn]
		if !ok {
			return true
		}
		cur := planned[dn]
		oc, _ := validation.DeploymentQuotaCount(old)
		cc, _ := validation.DeploymentQuotaCount(cur)
		return old.InstanceType != cur.InstanceType || oc != cc
	}
	var todo []string
	for _, dn := range slices.Sorted(maps.Keys(planned)) {
		if _, known := catalog.Lookup(planned[dn].InstanceType); known && changed(dn) {
			todo = append(todo, dn)
		}
	}
	id, err := api.ParseID(workspaceID.ValueString(), "")
	if len(todo) == 0 || err != nil {
		return // nothing the quota depends on changes: no call
	}
	ws := id.Workspace
	limits := map[string]int64(nil)
	if p, ok := r.quotas.plannedQuotas(ws); ok {
		if !p.known {
			return
		}
		limits = p.quotas
	}
	workspace, err := r.client.GetWorkspace(ctx, ws)
	if err == nil && limits != nil {
		workspace.Quotas = limits
	}
	var computes []api.Compute
	if err == nil {
		computes, err = r.quotas.workspaceComputes(ctx, r.client, ws)
	}
	if err != nil {
		// A workspace that does not exist, or an engine that does not answer, is reported
		// by apply with the engine's own words.
		tflog.Debug(ctx, "quota not checked at plan time", map[string]any{"workspace": ws, "error": err.Error()})
		return
	}
	endpoints := map[string][]quota.Holder{} // by family
	for _, dn := range todo {
		spec := planned[dn]
		size, _ := catalog.Lookup(spec.InstanceType)
		others, seen := endpoints[size.Family]
		if !seen {
			if others, err = endpointHolders(ctx, r.client, ws, size.Family, name.ValueString()); err != nil {
				tflog.Debug(ctx, "quota not checked at plan time", map[string]any{"workspace": ws, "error": err.Error()})
				return
			}
			endpoints[size.Family] = others
		}
		holders := append(computeHolders(computes, size.Family, ""), others...)
		for _, sib := range slices.Sorted(maps.Keys(planned)) {
			s, ok := catalog.Lookup(planned[sib].InstanceType)
			if sib == dn || !ok || s.Family != size.Family {
				continue
			}
			count, _ := validation.DeploymentQuotaCount(planned[sib])
			holders = append(holders, quota.Holder{Name: "endpoint " + name.ValueString() + " deployment " + sib, VCPUs: quota.Holds(count, s.VCPUs)})
		}
		used := make([]int64, len(holders))
		for i, h := range holders {
			used[i] = h.VCPUs
		}
		err := validation.DeploymentQuota("", spec, size, quota.Used(used...), model.EffectiveQuota(workspace, size.Family), holders)
		if err == nil {
			continue
		}
		_, attr := validation.DeploymentQuotaCount(spec)
		at := path.Root("deployments").AtMapKey(dn)
		for _, step := range strings.Split(attr, ".") {
			at = at.AtName(step)
		}
		resp.Diagnostics.AddAttributeError(at, "Workspace Quota Exceeded", fmt.Sprintf("Deployment %q: %s.", dn,
			strings.Replace(err.Error(), "the workspace has", "workspace \""+ws+"\" has", 1)))
	}
}
