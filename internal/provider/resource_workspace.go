package provider

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/mapdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/client"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/validation"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/provider/validators"
)

var (
	_ resource.Resource                = (*workspaceResource)(nil)
	_ resource.ResourceWithConfigure   = (*workspaceResource)(nil)
	_ resource.ResourceWithModifyPlan  = (*workspaceResource)(nil)
	_ resource.ResourceWithImportState = (*workspaceResource)(nil)
)

// NewWorkspaceResource returns the mlcompute_workspace resource.
func NewWorkspaceResource() resource.Resource {
	return &workspaceResource{}
}

// workspaceResource manages a workspace: the unit that holds computes and endpoints and
// carries the vCPU quotas they draw on.
type workspaceResource struct {
	client *client.Client
	// quotas is the provider's plan-time quota state (quota_plan.go).
	quotas *quotaPlans
}

func (r *workspaceResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_workspace"
}

func (r *workspaceResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	emptyStringMap := types.MapValueMust(types.StringType, map[string]attr.Value{})
	emptyInt64Map := types.MapValueMust(types.Int64Type, map[string]attr.Value{})
	resp.Schema = schema.Schema{
		MarkdownDescription: "A workspace holds compute clusters, compute instances, attached computes and online " +
			"endpoints, and sets the vCPU quotas they draw on, per VM family.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				MarkdownDescription: "The workspace's ID, `/workspaces/{name}`. Other resources refer to the " +
					"workspace by this ID (`workspace_id`), and `terraform import` takes it.",
				Computed:      true,
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"name": nameAttribute(validation.WorkspaceName, "Invalid Workspace Name", "The workspace's name",
				"Changing it replaces the workspace."),
			"location": schema.StringAttribute{
				MarkdownDescription: "The location the workspace lives in. It must be one the engine serves " +
					"(`mlcompute serve --location NAME`), which is checked at plan time. Changing it replaces the " +
					"workspace (default: `" + api.DefaultLocation + "`).",
				Optional:      true,
				Computed:      true,
				Default:       stringdefault.StaticString(api.DefaultLocation),
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
			},
			"description": schema.StringAttribute{
				MarkdownDescription: "A description of the workspace. It can be changed in place (default: `\"\"`).",
				Optional:            true,
				Computed:            true,
				Default:             stringdefault.StaticString(""),
			},
			"tags": schema.MapAttribute{
				MarkdownDescription: "Tags of the workspace, as a map of strings. They can be changed in place. " +
					"Leaving `tags` out and setting it to `{}` mean the same: no tags (default: `{}`).",
				ElementType: types.StringType,
				Optional:    true,
				Computed:    true,
				Default:     mapdefault.StaticValue(emptyStringMap),
			},
			"quotas": schema.MapAttribute{
				MarkdownDescription: "vCPU limits per VM family, overriding the catalog's defaults, for example " +
					"`{ standardNCSv3Family = 48 }`. Families are spelled exactly as Azure spells them in its VM " +
					"size list (see the `mlcompute_vm_sizes` data source); each limit is 0 or more. Families that " +
					"require approval (the current GPU families, the M-series and HBv3) and the retired ones (the older " +
					"GPU families among them) have a default limit of 0, so computes of those families need a quota here. Quotas can be changed in place. Leaving " +
					"`quotas` out and setting it to `{}` mean the same: the catalog defaults (default: `{}`).",
				ElementType: types.Int64Type,
				Optional:    true,
				Computed:    true,
				Default:     mapdefault.StaticValue(emptyInt64Map),
				Validators: []validator.Map{
					validators.Int64MapFunc("Invalid Workspace Quota", "every key must be a VM family of the catalog, spelled as Azure spells it, "+
						"and every value a vCPU count of 0 or more", validation.Quota),
				},
			},
			"force_destroy": schema.BoolAttribute{
				MarkdownDescription: "Whether destroying the workspace also deletes the computes and endpoints it " +
					"still holds. When `false`, destroying a workspace that holds any fails with an error that " +
					"lists them. This setting lives only in Terraform's state; `terraform import` sets it to " +
					"`false` (default: `false`).",
				Optional: true,
				Computed: true,
				Default:  booldefault.StaticBool(false),
			},
			"created_on": schema.StringAttribute{
				MarkdownDescription: "When the engine created the workspace, in RFC 3339 form (UTC).",
				Computed:            true,
				PlanModifiers:       []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
		},
	}
}

func (r *workspaceResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.client = clientFrom(req.ProviderData, &resp.Diagnostics)
	r.quotas = quotasFrom(req.ProviderData)
}

// ModifyPlan checks at plan time that the engine serves the planned location, with the
// engine's own rule (validation.Location). It checks only a location that is new (a
// create or a replacement), so an existing workspace whose location the operator has since
// stopped serving can still be planned and destroyed.
func (r *workspaceResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	reportObjectKeys(ctx, "mlcompute_workspace", req, &resp.Diagnostics)
	if req.Plan.Raw.IsNull() || r.client == nil {
		return // a destroy, or the provider is not configured yet (terraform validate)
	}
	// An in-place change of quotas is what this plan's clusters are checked against
	// (quota_plan.go).
	if !req.State.Raw.IsNull() {
		var name types.String
		var quotas, priorQuotas types.Map
		resp.Diagnostics.Append(req.Plan.GetAttribute(ctx, path.Root("name"), &name)...)
		resp.Diagnostics.Append(req.Plan.GetAttribute(ctx, path.Root("quotas"), &quotas)...)
		resp.Diagnostics.Append(req.State.GetAttribute(ctx, path.Root("quotas"), &priorQuotas)...)
		if !name.IsUnknown() {
			r.quotas.recordPlannedQuotas(ctx, name.ValueString(), !quotas.Equal(priorQuotas), quotas)
		}
	}
	var planned, prior types.String
	resp.Diagnostics.Append(req.Plan.GetAttribute(ctx, path.Root("location"), &planned)...)
	if !req.State.Raw.IsNull() {
		resp.Diagnostics.Append(req.State.GetAttribute(ctx, path.Root("location"), &prior)...)
	}
	if resp.Diagnostics.HasError() || planned.IsUnknown() || planned.IsNull() || planned.Equal(prior) {
		return
	}

	st, err := r.client.Status(ctx)
	if err != nil {
		resp.Diagnostics.AddAttributeWarning(path.Root("location"), "Location Not Checked",
			engineErrorDetail("list the locations it serves", err)+"\n\nThe engine checks the location again on apply.")
		return
	}
	if err := validation.Location(planned.ValueString(), st.Locations); err != nil {
		resp.Diagnostics.AddAttributeError(path.Root("location"), summaryLocation,
			fmt.Sprintf("The engine does not serve the location %q.\n\nSet location to one of: %s.\n\nOriginal error: %s",
				planned.ValueString(), strings.Join(st.Locations, ", "), err))
	}
}

func (r *workspaceResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan workspaceModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	spec := api.WorkspaceSpec{
		Name:        plan.Name.ValueString(),
		Location:    plan.Location.ValueString(),
		Description: plan.Description.ValueString(),
	}
	resp.Diagnostics.Append(plan.Tags.ElementsAs(ctx, &spec.Tags, false)...)
	resp.Diagnostics.Append(plan.Quotas.ElementsAs(ctx, &spec.Quotas, false)...)
	if resp.Diagnostics.HasError() {
		return
	}

	ws, err := r.client.CreateWorkspace(ctx, spec)
	if err != nil {
		addEngineError(&resp.Diagnostics, req.Plan.Schema.Type(), "Cannot Create Workspace",
			fmt.Sprintf("create workspace %q", spec.Name), err)
		return
	}
	tflog.Info(ctx, "created workspace", map[string]any{"workspace": ws.Name, "location": ws.Location})

	resp.Diagnostics.Append(plan.fromAPI(ctx, ws)...)
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

func (r *workspaceResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state workspaceModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}

	ws, err := r.client.GetWorkspace(ctx, state.Name.ValueString())
	if !readFound(ctx, req, resp, err, "Workspace", fmt.Sprintf("workspace %q", state.Name.ValueString())) {
		return
	}

	resp.Diagnostics.Append(state.fromAPI(ctx, ws)...)
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

func (r *workspaceResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan workspaceModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	upd := api.WorkspaceUpdate{Description: plan.Description.ValueString()}
	resp.Diagnostics.Append(plan.Tags.ElementsAs(ctx, &upd.Tags, false)...)
	resp.Diagnostics.Append(plan.Quotas.ElementsAs(ctx, &upd.Quotas, false)...)
	if resp.Diagnostics.HasError() {
		return
	}

	// The engine replaces all mutable fields at once; force_destroy is Terraform's alone, so
	// a plan that changes only it rewrites the same values.
	ws, err := r.client.UpdateWorkspace(ctx, plan.Name.ValueString(), upd)
	if err != nil {
		addEngineError(&resp.Diagnostics, req.Plan.Schema.Type(), "Cannot Update Workspace",
			fmt.Sprintf("update workspace %q", plan.Name.ValueString()), err)
		return
	}
	tflog.Info(ctx, "updated workspace", map[string]any{"workspace": ws.Name})

	resp.Diagnostics.Append(plan.fromAPI(ctx, ws)...)
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

func (r *workspaceResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state workspaceModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}

	name := state.Name.ValueString()
	err := r.client.DeleteWorkspace(ctx, name, state.ForceDestroy.ValueBool())
	if api.IsNotFound(err) {
		tflog.Debug(ctx, "workspace already gone", map[string]any{"workspace": name})
		return
	}
	if err != nil {
		addEngineError(&resp.Diagnostics, req.State.Schema.Type(), "Cannot Delete Workspace",
			fmt.Sprintf("delete workspace %q", name), err)
		return
	}
	tflog.Info(ctx, "deleted workspace", map[string]any{"workspace": name, "force": state.ForceDestroy.ValueBool()})
}

// ImportState takes a workspace ID, /workspaces/{name}; Read fills in the rest. The
// provider-only force_destroy starts at its default, false.
func (r *workspaceResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	id, err := api.ParseID(req.ID, "")
	if err != nil {
		resp.Diagnostics.AddError("Invalid Workspace ID",
			fmt.Sprintf("The import ID %q is not a workspace ID.\n\nUse /workspaces/{name}, for example: "+
				"terraform import mlcompute_workspace.example /workspaces/team-a\n\nOriginal error: %s", req.ID, err))
		return
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), id.String())...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("name"), id.Workspace)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("force_destroy"), false)...)
}

// workspaceModel is the mlcompute_workspace schema as Go values.
type workspaceModel struct {
	ID           types.String `tfsdk:"id"`
	Name         types.String `tfsdk:"name"`
	Location     types.String `tfsdk:"location"`
	Description  types.String `tfsdk:"description"`
	Tags         types.Map    `tfsdk:"tags"`
	Quotas       types.Map    `tfsdk:"quotas"`
	ForceDestroy types.Bool   `tfsdk:"force_destroy"`
	CreatedOn    types.String `tfsdk:"created_on"`
}

// fromAPI sets every attribute the engine holds to the engine's value, so that state is
// exactly what the engine has (drift shows in the next plan). No tags or quotas are an
// empty map, never null, matching the schema's defaults. force_destroy is left alone.
func (m *workspaceModel) fromAPI(ctx context.Context, ws *api.Workspace) diag.Diagnostics {
	var diags, d diag.Diagnostics
	m.ID = types.StringValue(ws.ID)
	m.Name = types.StringValue(ws.Name)
	m.Location = types.StringValue(ws.Location)
	m.Description = types.StringValue(ws.Description)
	m.Tags, d = types.MapValueFrom(ctx, types.StringType, nonNilMap(ws.Tags))
	diags.Append(d...)
	m.Quotas, d = types.MapValueFrom(ctx, types.Int64Type, nonNilMap(ws.Quotas))
	diags.Append(d...)
	m.CreatedOn = types.StringValue(ws.CreatedOn.UTC().Format(time.RFC3339))
	if m.ForceDestroy.IsNull() || m.ForceDestroy.IsUnknown() {
		m.ForceDestroy = types.BoolValue(false)
	}
	return diags
}

// nonNilMap returns m, or an empty map when m is nil (the engine omits empty maps).
func nonNilMap[V any](m map[string]V) map[string]V {
	if m == nil {
		return map[string]V{}
	}
	return m
}
