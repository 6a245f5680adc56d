package provider

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64default"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/mapdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/catalog"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/client"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/validation"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/provider/validators"
)

var (
	_ resource.Resource                   = (*computeClusterResource)(nil)
	_ resource.ResourceWithConfigure      = (*computeClusterResource)(nil)
	_ resource.ResourceWithValidateConfig = (*computeClusterResource)(nil)
	_ resource.ResourceWithModifyPlan     = (*computeClusterResource)(nil)
	_ resource.ResourceWithImportState    = (*computeClusterResource)(nil)
)

// Default timeouts of the engine calls. Create and update return as soon as the engine has
// recorded the change; delete waits until every node is released, which takes as long as
// the driver needs to stop them.
const (
	defaultClusterCreateTimeout = 20 * time.Minute
	defaultClusterUpdateTimeout = 20 * time.Minute
	defaultClusterDeleteTimeout = 30 * time.Minute
)

// NewComputeClusterResource returns the mlcompute_compute_cluster resource.
func NewComputeClusterResource() resource.Resource {
	return &computeClusterResource{}
}

// computeClusterResource manages a compute cluster: nodes of one VM size that the engine
// scales between min_node_count and max_node_count as jobs need them.
type computeClusterResource struct {
	client *client.Client
	// quotas is the provider's plan-time quota state (quota_plan.go).
	quotas *quotaPlans
}

func (r *computeClusterResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_compute_cluster"
}

func (r *computeClusterResource) Schema(ctx context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	emptyStringMap := types.MapValueMust(types.StringType, map[string]attr.Value{})
	maxIdle := validation.FormatDuration(validation.MaxScaleDownAfterIdle)
	resp.Schema = schema.Schema{
		MarkdownDescription: "A compute cluster is a set of nodes of one VM size in a workspace. The engine scales it " +
			"between `min_node_count` and `max_node_count`: up at once when jobs are queued for it, and down when a " +
			"node above the minimum has been idle for `scale_down_nodes_after_idle_duration`.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				MarkdownDescription: "The cluster's ID, `/workspaces/{workspace}/computes/{name}`, which " +
					"`terraform import` takes.",
				Computed:      true,
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"name": nameAttribute(validation.ComputeName, "Invalid Compute Name", "The cluster's name, unique in its workspace",
				"Jobs name their compute by it. Changing it replaces the cluster."),
			"workspace_id": workspaceIDAttribute("cluster"),
			"vm_size": schema.StringAttribute{
				MarkdownDescription: "The VM size of the cluster's nodes, for example `Standard_DS3_v2`. It must be a " +
					"size of the catalog (see the `mlcompute_vm_sizes` data source) that supports `ComputeCluster` " +
					"and is not retired; a new size is checked at plan time, and a retired one is refused with its " +
					"retirement date and a current replacement. Sizes match case-insensitively: the engine stores the " +
					"catalog's spelling, and the state keeps the configuration's spelling as long as it names the " +
					"same size, so `standard_ds3_v2` plans no change. An import records the catalog's spelling; a " +
					"configuration that spells the size in another case then plans an in-place update of the spelling " +
					"alone. Any other change replaces the cluster.",
				Required:      true,
				PlanModifiers: []planmodifier.String{requiresReplaceIfOtherSize()},
			},
			"vm_priority": schema.StringAttribute{
				MarkdownDescription: "The priority of the cluster's nodes: one of `" + strings.Join(validation.VMPriorities, "`, `") +
					"`. `" + api.PriorityLowPriority + "` nodes give way to `" + api.PriorityDedicated + "` nodes when the " +
					"engine runs out of capacity; their jobs go back to the queue. Changing it replaces the cluster " +
					"(default: `" + validation.VMPriorities[0] + "`).",
				Optional:      true,
				Computed:      true,
				Default:       stringdefault.StaticString(validation.VMPriorities[0]),
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
				Validators:    []validator.String{stringvalidator.OneOf(validation.VMPriorities...)},
			},
			"scale_settings": schema.SingleNestedAttribute{
				MarkdownDescription: "How the cluster scales, for example `{ min_node_count = 0, max_node_count = 4 }`. " +
					"Scale settings are updated in place: raising `min_node_count` starts nodes, lowering " +
					"`max_node_count` below the current count drains nodes as their jobs finish. The workspace's " +
					"quota for the size's family must hold `max_node_count` times the size's vCPUs, with the other " +
					"computes of the family.",
				Required: true,
				Attributes: map[string]schema.Attribute{
					"min_node_count": schema.Int64Attribute{
						MarkdownDescription: "The number of nodes the cluster keeps at all times, 0 or more and at most " +
							"`max_node_count`. Nodes above 0 run (and use their vCPUs) even when no job needs them, so " +
							"plan warns about them (default: `0`).",
						Optional: true,
						Computed: true,
						Default:  int64default.StaticInt64(0),
					},
					"max_node_count": schema.Int64Attribute{
						MarkdownDescription: "The most nodes the cluster scales up to, from 1 to " + strconv.Itoa(validation.MaxNodeCount) +
							" (Azure Machine Learning's limit for one cluster). This is what the workspace's quota counts.",
						Required: true,
					},
					"scale_down_nodes_after_idle_duration": schema.StringAttribute{
						MarkdownDescription: "How long a node above `min_node_count` stays after its last job ends, as an " +
							"ISO 8601 duration from `PT0S` to `" + maxIdle + "`, for example `PT120S`, `PT15M` or `PT1H` " +
							"(default: `" + api.DefaultScaleDownAfterIdle + "`).",
						Optional: true,
						Computed: true,
						Default:  stringdefault.StaticString(api.DefaultScaleDownAfterIdle),
						Validators: []validator.String{
							validators.StringFunc("Invalid Idle Duration", "the value must be an ISO 8601 duration from PT0S to "+maxIdle, checkIdleDuration),
						},
					},
				},
			},
			"description": schema.StringAttribute{
				MarkdownDescription: "A description of the cluster. It can be changed in place (default: `\"\"`).",
				Optional:            true,
				Computed:            true,
				Default:             stringdefault.StaticString(""),
			},
			"tags": schema.MapAttribute{
				MarkdownDescription: "Tags of the cluster, as a map of strings. They can be changed in place. " +
					"Leaving `tags` out and setting it to `{}` mean the same: no tags (default: `{}`).",
				ElementType: types.StringType,
				Optional:    true,
				Computed:    true,
				Default:     mapdefault.StaticValue(emptyStringMap),
			},
			"current_node_count": schema.Int64Attribute{
				MarkdownDescription: "The number of nodes that are up (idle or running a job) when Terraform last read " +
					"the cluster. Like every runtime attribute it changes as the engine scales and never causes a diff. " +
					"The `mlcompute_compute` data source reads the runtime values again at every plan, for any compute.",
				Computed: true,
			},
			"target_node_count": schema.Int64Attribute{MarkdownDescription: targetNodeCountDescription, Computed: true},
			"allocation_state":  schema.StringAttribute{MarkdownDescription: allocationStateDescription, Computed: true},
			"node_state_counts": clusterNodeStateCountsAttribute(),
			"created_on": schema.StringAttribute{
				MarkdownDescription: "When the engine created the cluster, in RFC 3339 form (UTC).",
				Computed:            true,
				PlanModifiers:       []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"timeouts": timeoutsAttribute(ctx, "cluster", defaultClusterCreateTimeout, defaultClusterUpdateTimeout, defaultClusterDeleteTimeout),
		},
	}
}

func (r *computeClusterResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.client = clientFrom(req.ProviderData, &resp.Diagnostics)
	r.quotas = quotasFrom(req.ProviderData)
}

// ValidateConfig applies the engine's scale-settings rules (validation.ScaleSettings) at
// plan time and reports each on the attribute the engine names. Each count is checked on its
// own, so that every bad one is reported, and min <= max only when both are known and
// valid; the idle duration is left to its attribute's validator.
func (r *computeClusterResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var obj types.Object
	resp.Diagnostics.Append(req.Config.GetAttribute(ctx, path.Root("scale_settings"), &obj)...)
	if resp.Diagnostics.HasError() || obj.IsNull() || obj.IsUnknown() {
		return
	}
	var s scaleSettingsModel
	resp.Diagnostics.Append(obj.As(ctx, &s, basetypes.ObjectAsOptions{})...)
	if resp.Diagnostics.HasError() {
		return
	}
	for _, check := range s.checks() {
		if _, err := validation.ScaleSettings(&check); err != nil {
			if p, ok := fieldPath(req.Config.Schema.Type(), api.FieldOf(err)); ok {
				resp.Diagnostics.AddAttributeError(p, "Invalid Scale Settings", engineMessage(err))
			} else {
				resp.Diagnostics.AddError("Invalid Scale Settings", engineMessage(err))
			}
		}
	}
}

// ModifyPlan checks a new VM size or priority (on create, or a change other than the size's
// letter case) with the engine's own rules, against the catalog built into the provider:
// the size must exist, support clusters, not be retired, and run at the planned priority.
// An unchanged size is not checked again, so a cluster whose size a later catalog retires
// can still be planned and destroyed. It also warns when the cluster keeps nodes while idle
// (DESIGN: cost hygiene).
func (r *computeClusterResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	reportObjectKeys(ctx, "mlcompute_compute_cluster", req, &resp.Diagnostics)
	if req.Plan.Raw.IsNull() {
		return // a destroy
	}
	// Only the attributes the checks need are read: loading the whole plan and state into
	// the model would convert every attribute, runtime ones included, on every plan.
	minPath := path.Root("scale_settings").AtName("min_node_count")
	var name, size, priority, priorSize, priorPriority types.String
	var minNodes, priorMin types.Int64
	resp.Diagnostics.Append(req.Plan.GetAttribute(ctx, path.Root("name"), &name)...)
	resp.Diagnostics.Append(req.Plan.GetAttribute(ctx, path.Root("vm_size"), &size)...)
	resp.Diagnostics.Append(req.Plan.GetAttribute(ctx, path.Root("vm_priority"), &priority)...)
	resp.Diagnostics.Append(req.Plan.GetAttribute(ctx, minPath, &minNodes)...)
	if !req.State.Raw.IsNull() { // the prior values stay null on create
		resp.Diagnostics.Append(req.State.GetAttribute(ctx, path.Root("vm_size"), &priorSize)...)
		resp.Diagnostics.Append(req.State.GetAttribute(ctx, path.Root("vm_priority"), &priorPriority)...)
		resp.Diagnostics.Append(req.State.GetAttribute(ctx, minPath, &priorMin)...)
	}
	if resp.Diagnostics.HasError() {
		return
	}

	isNew := !strings.EqualFold(size.ValueString(), priorSize.ValueString()) || !priority.Equal(priorPriority)
	if !size.IsUnknown() && !size.IsNull() && isNew {
		if _, err := validation.VMSize("vm_size", size.ValueString(), catalog.ComputeCluster); err != nil {
			resp.Diagnostics.AddAttributeError(path.Root("vm_size"), summaryVMSize, err.Error())
		} else if !priority.IsUnknown() {
			// validation.ComputeCluster holds the rule on which sizes run at LowPriority; the
			// other inputs it checks have their own validators.
			_, err := validation.ComputeCluster(api.ComputeSpec{
				Name: name.ValueString(), VMSize: size.ValueString(), VMPriority: priority.ValueString(),
				ScaleSettings: &api.ScaleSettings{MaxNodeCount: 1},
			})
			if api.FieldOf(err) == "vm_priority" {
				resp.Diagnostics.AddAttributeError(path.Root("vm_priority"), summaryVMPriority, err.Error())
			}
		}
	}

	var workspaceID types.String
	resp.Diagnostics.Append(req.Plan.GetAttribute(ctx, path.Root("workspace_id"), &workspaceID)...)
	r.planQuota(ctx, req, resp, computeClusterModel{Name: name, VMSize: size, WorkspaceID: workspaceID}, isNew)

	// The cost warning speaks of a plan that sets the kept nodes (a create, a new minimum
	// or size), not of every later plan that leaves them as they are.
	if !isNew && minNodes.Equal(priorMin) {
		return
	}
	if d := idleNodesWarning(minNodes, size); d != nil {
		resp.Diagnostics.Append(d)
	}
}

func (r *computeClusterResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan computeClusterModel
	resp.Diagnostics.Append(clusterFromRaw(ctx, req.Plan.Schema.Type(), req.Plan.Raw, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	timeout, diags := plan.Timeouts.Create(ctx, defaultClusterCreateTimeout)
	resp.Diagnostics.Append(diags...)
	ws, wsErr := api.ParseID(plan.WorkspaceID.ValueString(), "")
	spec := api.ComputeSpec{
		Name:        plan.Name.ValueString(),
		Type:        api.TypeComputeCluster,
		VMSize:      plan.VMSize.ValueString(),
		VMPriority:  plan.VMPriority.ValueString(),
		Description: plan.Description.ValueString(),
	}
	resp.Diagnostics.Append(plan.Tags.ElementsAs(ctx, &spec.Tags, false)...)
	spec.ScaleSettings, diags = plan.scaleSettings(ctx)
	resp.Diagnostics.Append(diags...)
	if wsErr != nil {
		resp.Diagnostics.AddAttributeError(path.Root("workspace_id"), "Invalid Workspace ID", wsErr.Error())
	}
	if resp.Diagnostics.HasError() {
		return
	}

	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	action := fmt.Sprintf("create compute cluster %q in workspace %q", spec.Name, ws.Workspace)
	c, err := r.client.CreateCompute(ctx, ws.Workspace, spec)
	if err != nil {
		if mayHaveCreated(ctx, err) {
			trackPossiblyCreated(ctx, &resp.State, &resp.Diagnostics, ws.Workspace, spec.Name, plan.WorkspaceID, plan.Timeouts)
		}
		if !addTimeoutError(ctx, &resp.Diagnostics, "Compute Cluster Create Timed Out", "create", action, timeout, err) {
			addEngineError(&resp.Diagnostics, req.Plan.Schema.Type(), "Cannot Create Compute Cluster", action, err)
		}
		return
	}
	tflog.Info(ctx, "created compute cluster", map[string]any{"compute": c.ID, "vm_size": c.VMSize})

	resp.Diagnostics.Append(setClusterState(ctx, resp.State.Schema.Type(), &resp.State.Raw, req.Plan.Raw, c)...)
}

func (r *computeClusterResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state computeClusterModel
	resp.Diagnostics.Append(clusterFromRaw(ctx, req.State.Schema.Type(), req.State.Raw, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	id, ok := stateComputeID(state.ID, &resp.Diagnostics)
	if !ok {
		return
	}

	c, err := getCompute(ctx, r.client, id)
	if !readFound(ctx, req, resp, err, "Compute Cluster", fmt.Sprintf("compute cluster %q in workspace %q", id.Name, id.Workspace)) {
		return
	}
	if c.Type != api.TypeComputeCluster {
		resp.Diagnostics.AddError("Not A Compute Cluster",
			fmt.Sprintf("The compute %s is a %s, not a %s.\n\nManage it with the resource of its type, or import "+
				"the ID of a compute cluster.", id, c.Type, api.TypeComputeCluster))
		return
	}

	resp.Diagnostics.Append(setClusterState(ctx, resp.State.Schema.Type(), &resp.State.Raw, req.State.Raw, c)...)
}

func (r *computeClusterResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan computeClusterModel
	resp.Diagnostics.Append(clusterFromRaw(ctx, req.Plan.Schema.Type(), req.Plan.Raw, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	timeout, diags := plan.Timeouts.Update(ctx, defaultClusterUpdateTimeout)
	resp.Diagnostics.Append(diags...)
	id, _ := stateComputeID(plan.ID, &resp.Diagnostics)
	upd := api.ComputeUpdate{Description: plan.Description.ValueString()}
	resp.Diagnostics.Append(plan.Tags.ElementsAs(ctx, &upd.Tags, false)...)
	upd.ScaleSettings, diags = plan.scaleSettings(ctx)
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}

	// The engine replaces every mutable field at once. A plan that changes only the spelling
	// of vm_size or the timeouts rewrites the same values and records the new ones in state.
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c := updateCompute(ctx, r.client, &resp.Diagnostics, req.Plan.Schema.Type(), clusterKind, id, upd, timeout)
	if c == nil {
		return
	}

	resp.Diagnostics.Append(setClusterState(ctx, resp.State.Schema.Type(), &resp.State.Raw, req.Plan.Raw, c)...)
}

func (r *computeClusterResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state computeClusterModel
	resp.Diagnostics.Append(clusterFromRaw(ctx, req.State.Schema.Type(), req.State.Raw, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	timeout, diags := state.Timeouts.Delete(ctx, defaultClusterDeleteTimeout)
	resp.Diagnostics.Append(diags...)
	id, _ := stateComputeID(state.ID, &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}

	deleteCompute(ctx, r.client, &resp.Diagnostics, req.State.Schema.Type(), clusterKind, id, timeout)
}

// ImportState takes a compute ID, /workspaces/{workspace}/computes/{name}; Read fills in
// everything else from the engine, vm_size in the catalog's spelling. timeouts stays null.
func (r *computeClusterResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	importComputeID(ctx, req, resp, clusterKind)
}

// checkIdleDuration checks scale_down_nodes_after_idle_duration with the engine's bounds.
func checkIdleDuration(s string) error {
	_, err := validation.Duration("scale_down_nodes_after_idle_duration", s, validation.MinScaleDownAfterIdle, validation.MaxScaleDownAfterIdle)
	return err
}

// idleNodesWarning returns the plan's cost warning for a cluster that keeps nodes while no
// job needs them (min_node_count > 0), or nil when it keeps none or the count is unknown.
func idleNodesWarning(minNodes types.Int64, vmSize types.String) diag.Diagnostic {
	if minNodes.IsNull() || minNodes.IsUnknown() || minNodes.ValueInt64() <= 0 {
		return nil
	}
	n, size := minNodes.ValueInt64(), "its VM size"
	if !vmSize.IsNull() && !vmSize.IsUnknown() {
		size = vmSize.ValueString()
	}
	return diag.NewAttributeWarningDiagnostic(path.Root("scale_settings").AtName("min_node_count"),
		"Compute Cluster Keeps Idle Nodes",
		fmt.Sprintf("min_node_count is %d, so the cluster keeps %d node(s) of %s running at all times, even when no "+
			"job needs them: they hold their vCPUs (and, on a cloud, cost money) while idle.\n\nSet min_node_count = 0 "+
			"to let the cluster scale to zero once its nodes have been idle for scale_down_nodes_after_idle_duration; "+
			"keep a minimum only when jobs must start without waiting for a node.", n, n, size))
}

// computeClusterModel is the mlcompute_compute_cluster schema as Go values.
type computeClusterModel struct {
	ID               types.String   `tfsdk:"id"`
	Name             types.String   `tfsdk:"name"`
	WorkspaceID      types.String   `tfsdk:"workspace_id"`
	VMSize           types.String   `tfsdk:"vm_size"`
	VMPriority       types.String   `tfsdk:"vm_priority"`
	ScaleSettings    types.Object   `tfsdk:"scale_settings"`
	Description      types.String   `tfsdk:"description"`
	Tags             types.Map      `tfsdk:"tags"`
	CurrentNodeCount types.Int64    `tfsdk:"current_node_count"`
	TargetNodeCount  types.Int64    `tfsdk:"target_node_count"`
	AllocationState  types.String   `tfsdk:"allocation_state"`
	NodeStateCounts  types.Object   `tfsdk:"node_state_counts"`
	CreatedOn        types.String   `tfsdk:"created_on"`
	Timeouts         timeouts.Value `tfsdk:"timeouts"`
}

// scaleSettingsModel is scale_settings; its values may be unknown at plan time.
type scaleSettingsModel struct {
	MinNodeCount                    types.Int64  `tfsdk:"min_node_count"`
	MaxNodeCount                    types.Int64  `tfsdk:"max_node_count"`
	ScaleDownNodesAfterIdleDuration types.String `tfsdk:"scale_down_nodes_after_idle_duration"`
}

// checks returns the scale settings to give validation.ScaleSettings, one rule each: the
// minimum alone, the maximum alone, and min <= max when both are known and valid. An
// unset minimum is its default, 0; the idle duration is left empty (its default), as its
// attribute's validator checks it.
func (s scaleSettingsModel) checks() []api.ScaleSettings {
	var out []api.ScaleSettings
	minKnown := !s.MinNodeCount.IsUnknown()
	maxKnown := !s.MaxNodeCount.IsUnknown() && !s.MaxNodeCount.IsNull()
	lo, hi := s.MinNodeCount.ValueInt64(), s.MaxNodeCount.ValueInt64()
	if minKnown {
		out = append(out, api.ScaleSettings{MinNodeCount: lo, MaxNodeCount: max(lo, 1)})
	}
	if maxKnown {
		out = append(out, api.ScaleSettings{MinNodeCount: 0, MaxNodeCount: hi})
	}
	if minKnown && maxKnown && lo >= 0 && hi >= 1 {
		out = append(out, api.ScaleSettings{MinNodeCount: lo, MaxNodeCount: hi})
	}
	return out
}

// scaleSettings returns the planned scale settings for the engine.
func (m *computeClusterModel) scaleSettings(ctx context.Context) (*api.ScaleSettings, diag.Diagnostics) {
	var s scaleSettingsModel
	diags := m.ScaleSettings.As(ctx, &s, basetypes.ObjectAsOptions{})
	return &api.ScaleSettings{
		MinNodeCount:                    s.MinNodeCount.ValueInt64(),
		MaxNodeCount:                    s.MaxNodeCount.ValueInt64(),
		ScaleDownNodesAfterIdleDuration: s.ScaleDownNodesAfterIdleDuration.ValueString(),
	}, diags
}

// clusterNodeStateCountsAttribute is node_state_counts as the cluster resource has it (the
// same counters as the mlcompute_compute data source's).
func clusterNodeStateCountsAttribute() schema.SingleNestedAttribute {
	attrs := map[string]schema.Attribute{}
	for name, d := range nodeCountDescriptions {
		attrs[name] = schema.Int64Attribute{MarkdownDescription: d, Computed: true}
	}
	return schema.SingleNestedAttribute{MarkdownDescription: "The cluster's nodes counted by state.", Computed: true, Attributes: attrs}
}
