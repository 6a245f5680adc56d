package provider

import (
	"context"
	"strings"
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

// quotaCache is one provider instance's plan-time quota state, for the terraform command
// it serves (a provider process serves one). Resources get it from the provider's data
// (providerData); a nil cache keeps nothing and asks the engine each time.
//
// planned carries the quotas a plan gives to each workspace it updates in place: the
// workspace's ModifyPlan records them and its clusters' ModifyPlan (which Terraform runs
// after the plan of the workspace they reference) checks against them, so raising a quota
// and a cluster's max_node_count in one plan passes.
//
// computes holds each workspace's computes, which the check counts. Listing them for every
// cluster's plan made an apply that creates n clusters (which terraform plans again once
// their workspace exists) list up to n computes n times, in the engine and in the
// provider. The list is fetched once per command, and this provider's own creates, updates
// and deletes are written into it (noteCompute, forgetCompute). A compute another client
// changes during the command is seen by the next one; the engine checks the quota on apply
// in any case.
type quotaCache struct {
	planned  sync.Map // workspace -> quotaPlan
	computes sync.Map // workspace -> *computeList
}

type quotaPlan struct {
	// known is false when a planned quota is not known yet: the check is left to apply.
	known  bool
	quotas map[string]int64
}

// recordPlannedQuotas is called by the workspace's ModifyPlan: changed is whether the plan
// changes the workspace's quotas, planned the planned map.
func (q *quotaCache) recordPlannedQuotas(ctx context.Context, workspace string, changed bool, planned types.Map) {
	if q == nil {
		return
	}
	if !changed {
		q.planned.Delete(workspace)
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
	q.planned.Store(workspace, p)
}

// plannedQuotas returns the quotas this command's plan gives workspace, if it changes them.
func (q *quotaCache) plannedQuotas(workspace string) (quotaPlan, bool) {
	if q == nil {
		return quotaPlan{}, false
	}
	p, ok := q.planned.Load(workspace)
	if !ok {
		return quotaPlan{}, false
	}
	return p.(quotaPlan), true
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
	if p, ok := r.quotas.plannedQuotas(ws); ok {
		if !p.known {
			return
		}
		limits = p.quotas
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
	computes, err := r.quotas.workspaceComputes(ctx, r.client, ws)
	if err != nil {
		tflog.Debug(ctx, "quota not checked at plan time", map[string]any{"workspace": ws, "error": err.Error()})
		return
	}
	// What the workspace's other computes and its endpoints' deployments of the family hold,
	// counted as the engine's quota index counts them (rules/quota).
	holders := computeHolders(computes, size.Family, plan.Name.ValueString())
	endpoints, err := endpointHolders(ctx, r.client, ws, size.Family, "")
	if err != nil {
		tflog.Debug(ctx, "quota not checked at plan time", map[string]any{"workspace": ws, "error": err.Error()})
		return
	}
	holders = append(holders, endpoints...)
	used := make([]int64, len(holders))
	for i, h := range holders {
		used[i] = h.VCPUs
	}
	claim := quota.Claim{
		Compute: plan.Name.ValueString(), Workspace: ws, Family: size.Family, Size: size.Name, SizeVCPUs: size.VCPUs,
		Nodes: maxNodes.ValueInt64(), Limit: model.EffectiveQuota(workspace, size.Family),
		CountName: "scale_settings.max_node_count",
	}
	if f, _ := catalog.LookupFamily(size.Family); f.RequiresApproval && workspace.Quotas[size.Family] == 0 {
		claim.ApprovalPending = true
	}
	refusal := quota.Evaluate(claim, quota.Used(used...), func() []quota.Holder { return holders })
	if refusal == nil || refusal.Overflow {
		return // validation bounds max_node_count
	}
	at := maxPath
	if refusal.FittingNodes() == 0 {
		at = path.Root("vm_size")
	}
	resp.Diagnostics.AddAttributeError(at, "Workspace Quota Exceeded", upperFirst(refusal.Error())+".")
}

// upperFirst starts a message with a capital letter, as a diagnostic's detail does.
func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// computeList is one workspace's computes, by name. Its mutex is held while it is fetched,
// so that a change noted meanwhile is applied after the fetch, not lost under it.
type computeList struct {
	mu       sync.Mutex
	loaded   bool
	computes map[string]api.Compute
}

// workspaceComputes returns the computes of workspace ws, fetching them on first use.
func (q *quotaCache) workspaceComputes(ctx context.Context, c *client.Client, ws string) ([]api.Compute, error) {
	if q == nil {
		return c.ListComputes(ctx, ws)
	}
	v, _ := q.computes.LoadOrStore(ws, &computeList{})
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

// noteCompute records a compute this provider created or updated.
func (q *quotaCache) noteCompute(comp *api.Compute) {
	if comp == nil {
		return
	}
	if l := q.loadedComputeList(comp.Workspace); l != nil {
		l.computes[comp.Name] = *comp
		l.mu.Unlock()
	}
}

// forgetCompute records a compute this provider deleted.
func (q *quotaCache) forgetCompute(id api.ID) {
	if l := q.loadedComputeList(id.Workspace); l != nil {
		delete(l.computes, id.Name)
		l.mu.Unlock()
	}
}

// dropComputeList forgets the workspace's list after a change whose outcome is not known
// (an engine error or timeout): the next check fetches it again rather than count a compute
// that may or may not be there.
func (q *quotaCache) dropComputeList(ws string) {
	if q != nil {
		q.computes.Delete(ws)
	}
}

// loadedComputeList returns the workspace's list locked, or nil when none is loaded.
func (q *quotaCache) loadedComputeList(ws string) *computeList {
	if q == nil {
		return nil
	}
	v, ok := q.computes.Load(ws)
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
