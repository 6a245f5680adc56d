package provider

import (
	"context"
	"fmt"
	"sync"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/catalog"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/client"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/rules/quota"
)

// This file is the plan-time quota check of a compute cluster in a workspace that already
// exists. The engine checks the quota again on apply; the plan-time check only moves the
// error to where it helps: before anything is changed, on the attribute to fix.

// plannedQuotas carries, within one provider process, the quotas a plan gives to each
// workspace it updates in place: the workspace's ModifyPlan records them and its clusters'
// ModifyPlan (which Terraform runs after the plan of the workspace they reference) checks
// against them, so raising a quota and a cluster's max_node_count in one plan passes.
// Keys are per engine client (one per configured provider) and workspace name.
var plannedQuotas sync.Map // quotaPlanKey -> quotaPlan

type quotaPlanKey struct {
	client    *client.Client
	workspace string
}

type quotaPlan struct {
	// known is false when a planned quota is not known yet: the check is left to apply.
	known  bool
	quotas map[string]int64
}

// recordPlannedQuotas is called by the workspace's ModifyPlan: changed is whether the plan
// changes the workspace's quotas, planned the planned map.
func recordPlannedQuotas(ctx context.Context, c *client.Client, workspace string, changed bool, planned types.Map) {
	key := quotaPlanKey{c, workspace}
	if !changed {
		plannedQuotas.Delete(key)
		return
	}
	p := quotaPlan{known: !planned.IsUnknown()}
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
	plannedQuotas.Store(key, p)
}

// planQuota checks that the planned cluster fits its workspace's quota for the size's
// family, as the engine will on apply (rules/quota): max_node_count times the size's vCPUs,
// plus what the workspace's other computes of the family may hold. It asks the engine only
// when the plan sets what the quota depends on (a create, a new size, a new max_node_count)
// and the workspace already exists; a workspace created in the same plan has no ID yet, and
// the check stays at apply (where Terraform plans the cluster again, once the workspace
// exists, so this same check reports it before the create). The error is on vm_size when not even one node of the size fits,
// else on scale_settings.max_node_count.
func (r *computeClusterResource) planQuota(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse, plan computeClusterModel, sizeChanged bool) {
	if r.client == nil || plan.WorkspaceID.IsUnknown() || plan.WorkspaceID.IsNull() || plan.VMSize.IsUnknown() {
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
	size, ok := catalog.Lookup(plan.VMSize.ValueString())
	id, err := api.ParseID(plan.WorkspaceID.ValueString(), "")
	if !ok || err != nil {
		return // vm_size and workspace_id have their own diagnostics
	}
	ws := id.Workspace
	limits := map[string]int64(nil)
	if p, ok := plannedQuotas.Load(quotaPlanKey{r.client, ws}); ok {
		if !p.(quotaPlan).known {
			return
		}
		limits = p.(quotaPlan).quotas
	}
	workspace, err := r.client.GetWorkspace(ctx, ws)
	if err != nil {
		// A workspace that does not exist, or an engine that does not answer, is reported
		// by apply with the engine's own words.
		tflog.Debug(ctx, "quota not checked at plan time", map[string]any{"workspace": ws, "error": err.Error()})
		return
	}
	if limits != nil {
		workspace.Quotas = limits
	}
	computes, err := quotaComputes(ctx, r.client, ws)
	if err != nil {
		tflog.Debug(ctx, "quota not checked at plan time", map[string]any{"workspace": ws, "error": err.Error()})
		return
	}
	var used int64
	for _, c := range computes {
		other, ok := catalog.Lookup(c.VMSize)
		if c.Name == plan.Name.ValueString() || c.Type == api.TypeAttached || !ok || other.Family != size.Family {
			continue
		}
		nodes := int64(1)
		if c.ScaleSettings != nil {
			nodes = c.ScaleSettings.MaxNodeCount
		}
		held, _ := quota.Demand(nodes, other.VCPUs)
		if used, ok = quota.Add(used, held); !ok {
			return // an engine record beyond any quota: leave it to apply
		}
	}
	want, ok := quota.Demand(maxNodes.ValueInt64(), size.VCPUs)
	if !ok {
		return // validation bounds max_node_count
	}
	limit := model.EffectiveQuota(workspace, size.Family)
	d := quota.Check(used, want, limit)
	if d.Fits {
		return
	}
	raise := fmt.Sprintf("quotas = { %s = %d }", size.Family, d.Need)
	fits := d.Left / max(size.VCPUs, 1)
	if fits == 0 {
		why := ""
		if f, _ := catalog.LookupFamily(size.Family); f.RequiresApproval && workspace.Quotas[size.Family] == 0 {
			why = fmt.Sprintf(" Family %s requires approval and has no quota until one is set.", size.Family)
		}
		resp.Diagnostics.AddAttributeError(path.Root("vm_size"), "Workspace Quota Exceeded",
			fmt.Sprintf("Workspace %q has %d of its %d vCPUs of %s left, less than one node of %s (%d vCPUs), so "+
				"compute cluster %q cannot get any node.%s\n\nRaise the family's quota on the workspace with %s, or "+
				"choose a vm_size of another family.",
				ws, d.Left, limit, size.Family, size.Name, size.VCPUs, plan.Name.ValueString(), why, raise))
		return
	}
	resp.Diagnostics.AddAttributeError(maxPath, "Workspace Quota Exceeded",
		fmt.Sprintf("Compute cluster %q needs %d vCPUs of %s (%d nodes x %d vCPUs of %s) but workspace %q has %d of "+
			"its %d left.\n\nLower scale_settings.max_node_count to %d, or raise the family's quota on the workspace "+
			"with %s.",
			plan.Name.ValueString(), want, size.Family, maxNodes.ValueInt64(), size.VCPUs, size.Name, ws, d.Left, limit,
			fits, raise))
}

// workspaceComputes holds, per engine client and workspace, the computes the plan-time
// quota check counts. Listing them for every cluster's plan made an apply that creates n
// clusters (which terraform plans again once their workspace exists) list up to n computes
// n times, in the engine and in the provider. The list is fetched once per engine client,
// that is per provider process and terraform command, and this process's own creates,
// updates and deletes are written into it (noteCompute, forgetCompute). A compute another
// client changes during the command is seen by the next one; the engine checks the quota on
// apply in any case.
var workspaceComputes sync.Map // quotaPlanKey -> *computeList

// computeList is one workspace's computes, by name. Its mutex is held while it is fetched,
// so that a change noted meanwhile is applied after the fetch, not lost under it.
type computeList struct {
	mu       sync.Mutex
	loaded   bool
	computes map[string]api.Compute
}

// quotaComputes returns the computes of workspace ws, fetching them on first use.
func quotaComputes(ctx context.Context, c *client.Client, ws string) ([]api.Compute, error) {
	key := quotaPlanKey{c, ws}
	v, _ := workspaceComputes.LoadOrStore(key, &computeList{})
	l := v.(*computeList)
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.loaded {
		computes, err := c.ListComputes(ctx, ws)
		if err != nil {
			return nil, err // the next plan asks again
		}
		l.computes = make(map[string]api.Compute, len(computes))
		for _, comp := range computes {
			l.computes[comp.Name] = comp
		}
		l.loaded = true
	}
	out := make([]api.Compute, 0, len(l.computes))
	for _, comp := range l.computes {
		out = append(out, comp)
	}
	return out, nil
}

// noteCompute records a compute this process created or updated.
func noteCompute(c *client.Client, comp *api.Compute) {
	if comp == nil {
		return
	}
	if l := loadedComputeList(c, comp.Workspace); l != nil {
		l.computes[comp.Name] = *comp
		l.mu.Unlock()
	}
}

// forgetCompute records a compute this process deleted.
func forgetCompute(c *client.Client, id api.ID) {
	if l := loadedComputeList(c, id.Workspace); l != nil {
		delete(l.computes, id.Name)
		l.mu.Unlock()
	}
}

// dropComputeList forgets the workspace's list after a change whose outcome is not known
// (an engine error or timeout): the next check fetches it again rather than count a compute
// that may or may not be there.
func dropComputeList(c *client.Client, ws string) {
	workspaceComputes.Delete(quotaPlanKey{c, ws})
}

// loadedComputeList returns the workspace's list locked, or nil when none is loaded.
func loadedComputeList(c *client.Client, ws string) *computeList {
	v, ok := workspaceComputes.Load(quotaPlanKey{c, ws})
	if !ok {
		return nil
	}
	l := v.(*computeList)
	l.mu.Lock()
	if !l.loaded {
		l.mu.Unlock()
		return nil
	}
	return l
}
