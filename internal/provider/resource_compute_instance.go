package provider

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/listdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/mapdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/catalog"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/client"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/validation"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/provider/validators"
)

var (
	_ resource.Resource                = (*computeInstanceResource)(nil)
	_ resource.ResourceWithConfigure   = (*computeInstanceResource)(nil)
	_ resource.ResourceWithModifyPlan  = (*computeInstanceResource)(nil)
	_ resource.ResourceWithImportState = (*computeInstanceResource)(nil)
)

// Default timeouts of the engine calls. Create waits until the instance runs, setup
// scripts included (each may take up to its own timeout, PT5M by default); an update that
// resizes a running instance waits for it to start again, startup script included; delete
// waits until the node is released.
const (
	defaultInstanceCreateTimeout = 30 * time.Minute
	defaultInstanceUpdateTimeout = 30 * time.Minute
	defaultInstanceDeleteTimeout = 20 * time.Minute
)

// NewComputeInstanceResource returns the mlcompute_compute_instance resource.
func NewComputeInstanceResource() resource.Resource {
	return &computeInstanceResource{}
}

// computeInstanceResource manages a compute instance: one node that a person uses, which
// the engine stops when it is idle or when a schedule says so, and which runs setup scripts
// when it is created and whenever it starts.
type computeInstanceResource struct {
	client *client.Client
}

func (r *computeInstanceResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_compute_instance"
}

func (r *computeInstanceResource) Schema(ctx context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	emptyStringMap := types.MapValueMust(types.StringType, map[string]attr.Value{})
	noSchedules := types.ListValueMust(types.ObjectType{AttrTypes: scheduleAttrTypes}, []attr.Value{})
	maxIdle := validation.FormatDuration(validation.MaxIdleTimeBeforeShutdown)
	policyMin := validation.FormatDuration(validation.DefaultMinIdleTimeBeforeShutdown)
	resp.Schema = schema.Schema{
		MarkdownDescription: "A compute instance is a single node of one VM size in a workspace, for one person's " +
			"interactive work and jobs. The engine stops it after `idle_time_before_shutdown` without activity and " +
			"starts or stops it on `schedules`; a later apply never starts an instance that was stopped. Every " +
			"argument but `name` and `workspace_id` changes in place, `vm_size` included.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				MarkdownDescription: "The instance's ID, `/workspaces/{workspace}/computes/{name}`, which " +
					"`terraform import` takes.",
				Computed:      true,
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"name": nameAttribute(validation.ComputeName, "Invalid Compute Name", "The instance's name, unique among the computes of its workspace",
				"Jobs name their compute by it. Changing it replaces the instance."),
			"workspace_id": workspaceIDAttribute("instance"),
			"vm_size": schema.StringAttribute{
				MarkdownDescription: "The VM size of the instance's node, for example `Standard_DS3_v2`. It must be a " +
					"size of the catalog (see the `mlcompute_vm_sizes` data source) that supports `ComputeInstance` " +
					"and is not retired; a new size is checked at plan time. Changing it resizes the instance in " +
					"place: the engine stops it, changes the size and starts it again if it was running (its startup " +
					"script runs again). Sizes match case-insensitively: the state keeps the configuration's spelling " +
					"as long as it names the size the engine holds, and an import records the catalog's spelling.",
				Required: true,
			},
			"idle_time_before_shutdown": schema.StringAttribute{
				MarkdownDescription: "How long the instance may be idle before the engine stops it, as an ISO 8601 " +
					"duration of at most `" + maxIdle + "`, for example `PT30M` or `PT2H`. Running jobs, open sessions " +
					"(`mlcompute compute exec`) and activity reported by applications on the node keep " +
					"it awake. The engine's policy sets the minimum: `" + policyMin + "` unless its operator lowered " +
					"it with `mlcompute serve --min-idle-shutdown`; a shorter value fails at plan time. Shortening it " +
					"below the time the instance has already been idle restarts the idle clock. Leave it unset " +
					"(null) to never stop for idleness. It can be changed in place.",
				Optional: true,
				Validators: []validator.String{
					validators.StringFunc("Invalid Idle Time Before Shutdown",
						"the value must be an ISO 8601 duration of at most "+maxIdle, checkIdleTimeBeforeShutdown),
				},
			},
			"schedules": schema.ListNestedAttribute{
				MarkdownDescription: fmt.Sprintf("Times at which the engine starts or stops the instance, at most %d, "+
					"for example `[{ action = \"Stop\", cron = \"0 19 * * 1-5\" }]`. A firing missed while the engine "+
					"was down is applied once when it comes back. They can be changed in place (default: `[]`).",
					validation.MaxSchedules),
				Optional: true,
				Computed: true,
				Default:  listdefault.StaticValue(noSchedules),
				Validators: []validator.List{
					listvalidator.SizeAtMost(validation.MaxSchedules),
				},
				NestedObject: schema.NestedAttributeObject{
					Attributes: map[string]schema.Attribute{
						"action": schema.StringAttribute{
							MarkdownDescription: "What the schedule does: one of `" + strings.Join(validation.ScheduleActions, "`, `") + "`.",
							Required:            true,
							Validators:          []validator.String{stringvalidator.OneOf(validation.ScheduleActions...)},
						},
						"cron": schema.StringAttribute{
							MarkdownDescription: "When the schedule fires, as a standard five-field cron expression " +
								"(minute hour day-of-month month day-of-week), for example `" + validation.CronExample +
								"` (18:00 on weekdays).",
							Required:   true,
							Validators: []validator.String{scheduleFieldValidator{field: "cron", summary: "Invalid Schedule Cron Expression"}},
						},
						"time_zone": schema.StringAttribute{
							MarkdownDescription: "The IANA time zone the cron expression is read in, for example " +
								"`Europe/Berlin`; daylight saving changes are followed (default: `" + api.DefaultScheduleTimeZone + "`).",
							Optional:   true,
							Computed:   true,
							Default:    stringdefault.StaticString(api.DefaultScheduleTimeZone),
							Validators: []validator.String{scheduleFieldValidator{field: "time_zone", summary: "Invalid Schedule Time Zone"}},
						},
						"enabled": schema.BoolAttribute{
							MarkdownDescription: "Whether the schedule fires (default: `true`).",
							Optional:            true,
							Computed:            true,
							Default:             booldefault.StaticBool(true),
						},
					},
				},
			},
			"setup_scripts": schema.SingleNestedAttribute{
				MarkdownDescription: "Shell scripts the engine runs on the instance's node: `creation_script` once, " +
					"when the instance is created, and `startup_script` every time it starts (after the creation " +
					"script on the first start). A script that fails or runs past its timeout puts the instance in " +
					"`SetupFailed`, with the script's output in its log, and fails the apply. They can be changed " +
					"in place and take effect at the next start.",
				Optional: true,
				Attributes: map[string]schema.Attribute{
					"creation_script": setupScriptAttribute("The script run once, when the instance is created."),
					"startup_script":  setupScriptAttribute("The script run every time the instance starts."),
				},
			},
			"description": schema.StringAttribute{
				MarkdownDescription: "A description of the instance. It can be changed in place (default: `\"\"`).",
				Optional:            true,
				Computed:            true,
				Default:             stringdefault.StaticString(""),
			},
			"tags": schema.MapAttribute{
				MarkdownDescription: "Tags of the instance, as a map of strings. They can be changed in place. " +
					"Leaving `tags` out and setting it to `{}` mean the same: no tags (default: `{}`).",
				ElementType: types.StringType,
				Optional:    true,
				Computed:    true,
				Default:     mapdefault.StaticValue(emptyStringMap),
			},
			"state": schema.StringAttribute{
				MarkdownDescription: "The instance's state when Terraform last read it: one of `" +
					strings.Join(instanceStates, "`, `") + "`. Like every runtime attribute it changes without " +
					"Terraform (idle shutdown, schedules, the CLI) and never causes a diff; whether the instance runs " +
					"is not an argument, so apply neither starts nor stops it.",
				Computed: true,
			},
			"last_operation": schema.SingleNestedAttribute{
				MarkdownDescription: "The last operation on the instance and what triggered it. It never causes a diff.",
				Computed:            true,
				Attributes: map[string]schema.Attribute{
					"name": schema.StringAttribute{
						MarkdownDescription: "The operation: `Create`, `Start`, `Stop`, `Restart` or `Resize`.",
						Computed:            true,
					},
					"status": schema.StringAttribute{
						MarkdownDescription: "`InProgress`, `Succeeded` or `Failed`.",
						Computed:            true,
					},
					"trigger": schema.StringAttribute{
						MarkdownDescription: "What started it: `" + api.TriggerUser + "` (Terraform, the CLI or the API), `" +
							api.TriggerSchedule + "` or `" + api.TriggerIdleShutdown + "`.",
						Computed: true,
					},
					"time": schema.StringAttribute{
						MarkdownDescription: "When it started or last changed status, in RFC 3339 form (UTC).",
						Computed:            true,
					},
				},
			},
			"created_on": schema.StringAttribute{
				MarkdownDescription: "When the engine created the instance, in RFC 3339 form (UTC).",
				Computed:            true,
				PlanModifiers:       []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"timeouts": timeoutsAttribute(ctx, "instance", defaultInstanceCreateTimeout, defaultInstanceUpdateTimeout, defaultInstanceDeleteTimeout),
		},
	}
}

// instanceStates lists the states an instance reports, for the docs.
var instanceStates = []string{
	api.InstanceCreating, api.InstanceRunning, api.InstanceStopping, api.InstanceStopped, api.InstanceStarting,
	api.InstanceResizing, api.InstanceJobRunning, api.InstanceSetupFailed, api.InstanceDeleting,
}

func (r *computeInstanceResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.client = clientFrom(req.ProviderData, &resp.Diagnostics)
}

// ModifyPlan checks a new VM size (on create, or a change other than the size's letter
// case) with the engine's own rule, against the catalog built into the provider: the size
// must exist, support compute instances and not be retired. An unchanged size is not
// checked again, so an instance whose size a later catalog retires can still be planned
// and destroyed. It also warns when nothing would ever stop the instance (DESIGN: cost
// hygiene).
func (r *computeInstanceResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	reportObjectKeys(ctx, "mlcompute_compute_instance", req, &resp.Diagnostics)
	if req.Plan.Raw.IsNull() {
		return // a destroy
	}
	// Only the attributes the checks need are read, not the whole plan and state.
	var size, priorSize, idle, priorIdle types.String // the prior values stay null on create
	var schedules types.List
	resp.Diagnostics.Append(req.Plan.GetAttribute(ctx, path.Root("vm_size"), &size)...)
	resp.Diagnostics.Append(req.Plan.GetAttribute(ctx, path.Root("idle_time_before_shutdown"), &idle)...)
	resp.Diagnostics.Append(req.Plan.GetAttribute(ctx, path.Root("schedules"), &schedules)...)
	if !req.State.Raw.IsNull() {
		resp.Diagnostics.Append(req.State.GetAttribute(ctx, path.Root("vm_size"), &priorSize)...)
		resp.Diagnostics.Append(req.State.GetAttribute(ctx, path.Root("idle_time_before_shutdown"), &priorIdle)...)
	}
	if resp.Diagnostics.HasError() {
		return
	}

	if !size.IsUnknown() && !size.IsNull() && !strings.EqualFold(size.ValueString(), priorSize.ValueString()) {
		if _, err := validation.VMSize("vm_size", size.ValueString(), catalog.ComputeInstance); err != nil {
			resp.Diagnostics.AddAttributeError(path.Root("vm_size"), summaryVMSize, err.Error())
		}
	}
	if !idle.IsUnknown() && !idle.IsNull() && !idle.Equal(priorIdle) {
		r.planIdleMinimum(ctx, idle.ValueString(), &resp.Diagnostics)
	}
	if d := neverStopsWarning(ctx, idle, schedules); d != nil {
		resp.Diagnostics.Append(d)
	}
}

// planIdleMinimum checks a new idle_time_before_shutdown against the engine's policy
// minimum ('mlcompute serve --min-idle-shutdown'), which the engine's status gives, with
// the engine's own rule. An engine that does not answer leaves the check to apply; a value
// the attribute's validator refuses is reported there.
func (r *computeInstanceResource) planIdleMinimum(ctx context.Context, idle string, diags *diag.Diagnostics) {
	if r.client == nil {
		return // not configured yet (terraform validate)
	}
	if _, err := validation.IdleTimeBeforeShutdown(idle, 0); err != nil {
		return
	}
	st, err := r.client.Status(ctx)
	if err != nil || st.MinIdleTimeBeforeShutdown == "" {
		tflog.Debug(ctx, "idle minimum not checked at plan time", map[string]any{"error": fmt.Sprint(err)})
		return
	}
	policyMin, err := validation.Duration("min_idle_time_before_shutdown", st.MinIdleTimeBeforeShutdown, 0, math.MaxInt64)
	if err != nil {
		tflog.Debug(ctx, "idle minimum not checked at plan time", map[string]any{"error": err.Error()})
		return
	}
	if _, err := validation.IdleTimeBeforeShutdown(idle, policyMin); err != nil {
		diags.AddAttributeError(path.Root("idle_time_before_shutdown"), summaryIdleMinimum,
			fmt.Sprintf("The engine stops compute instances after at least %s idle, its operator's policy.\n\n"+
				"Set idle_time_before_shutdown to %s or longer, leave it unset (null) to never stop for idleness, or "+
				"ask the engine's operator to lower the minimum with 'mlcompute serve --min-idle-shutdown'.\n\n"+
				"Original error: %s", st.MinIdleTimeBeforeShutdown, st.MinIdleTimeBeforeShutdown, err))
	}
}

func (r *computeInstanceResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan computeInstanceModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	timeout, diags := plan.Timeouts.Create(ctx, defaultInstanceCreateTimeout)
	resp.Diagnostics.Append(diags...)
	ws, wsErr := api.ParseID(plan.WorkspaceID.ValueString(), "")
	spec := api.ComputeSpec{
		Name:        plan.Name.ValueString(),
		Type:        api.TypeComputeInstance,
		VMSize:      plan.VMSize.ValueString(),
		Description: plan.Description.ValueString(),
	}
	resp.Diagnostics.Append(plan.Tags.ElementsAs(ctx, &spec.Tags, false)...)
	spec.Instance, diags = plan.instanceSettings(ctx)
	resp.Diagnostics.Append(diags...)
	if wsErr != nil {
		resp.Diagnostics.AddAttributeError(path.Root("workspace_id"), "Invalid Workspace ID", wsErr.Error())
	}
	if resp.Diagnostics.HasError() {
		return
	}

	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	action := fmt.Sprintf("create compute instance %q in workspace %q", spec.Name, ws.Workspace)
	c, err := r.client.CreateCompute(ctx, ws.Workspace, spec)
	if err != nil {
		if mayHaveCreated(ctx, err) {
			trackPossiblyCreated(ctx, &resp.State, &resp.Diagnostics, ws.Workspace, spec.Name, plan.WorkspaceID, plan.Timeouts)
		}
		if !addTimeoutError(ctx, &resp.Diagnostics, "Compute Instance Create Timed Out", "create", action, timeout, err) {
			addEngineError(&resp.Diagnostics, req.Plan.Schema.Type(), "Cannot Create Compute Instance", action, instanceFieldError(err))
		}
		return
	}
	tflog.Info(ctx, "created compute instance; waiting for it to run", map[string]any{"compute": c.ID, "vm_size": c.VMSize})

	// The instance exists from here on: whatever the wait ends with, state records it, so an
	// error leaves it tracked (and tainted, so the next apply replaces it), never leaked.
	c, err = r.waitForInstance(ctx, ws.Workspace, spec.Name, c)
	resp.Diagnostics.Append(plan.fromAPI(ctx, c)...)
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
	switch {
	case err != nil:
		action := fmt.Sprintf("wait for compute instance %q in workspace %q to start", spec.Name, ws.Workspace)
		if !addTimeoutError(ctx, &resp.Diagnostics, "Compute Instance Create Timed Out", "create", action, timeout, err) {
			addEngineError(&resp.Diagnostics, req.Plan.Schema.Type(), "Cannot Create Compute Instance", action, err)
		}
	case c.State == api.InstanceSetupFailed:
		addSetupFailedError(&resp.Diagnostics, c, "The engine created the compute instance, but a setup script failed, "+
			"so the instance is in state SetupFailed.", "Correct the script in setup_scripts and apply again: the "+
			"instance is marked tainted, so Terraform replaces it and the scripts run on a new node.")
	default:
		tflog.Info(ctx, "compute instance running", map[string]any{"compute": c.ID, "state": c.State})
	}
}

func (r *computeInstanceResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state computeInstanceModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	id, ok := stateComputeID(state.ID, &resp.Diagnostics)
	if !ok {
		return
	}

	c, err := r.client.GetCompute(ctx, id.Workspace, id.Name)
	if !readFound(ctx, req, resp, err, "Compute Instance", fmt.Sprintf("compute instance %q in workspace %q", id.Name, id.Workspace)) {
		return
	}
	if c.Type != api.TypeComputeInstance {
		resp.Diagnostics.AddError("Not A Compute Instance",
			fmt.Sprintf("The compute %s is a %s, not a %s.\n\nManage it with the resource of its type, or import "+
				"the ID of a compute instance.", id, c.Type, api.TypeComputeInstance))
		return
	}

	resp.Diagnostics.Append(state.fromAPI(ctx, c)...)
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

func (r *computeInstanceResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan computeInstanceModel
	var priorSize types.String
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.GetAttribute(ctx, path.Root("vm_size"), &priorSize)...)
	if resp.Diagnostics.HasError() {
		return
	}
	timeout, diags := plan.Timeouts.Update(ctx, defaultInstanceUpdateTimeout)
	resp.Diagnostics.Append(diags...)
	id, _ := stateComputeID(plan.ID, &resp.Diagnostics)
	upd := api.ComputeUpdate{Description: plan.Description.ValueString(), VMSize: plan.VMSize.ValueString()}
	resp.Diagnostics.Append(plan.Tags.ElementsAs(ctx, &upd.Tags, false)...)
	upd.Instance, diags = plan.instanceSettings(ctx)
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}

	// The engine replaces every argument at once and keeps whether the instance runs: the
	// update carries no running state, so an instance that idle shutdown, a schedule or a
	// person stopped stays stopped. A new size stops the instance, resizes it and starts it
	// again if it was running; only then is there something to wait for.
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c := updateCompute(ctx, r.client, &resp.Diagnostics, req.Plan.Schema.Type(), instanceKind, id, upd, timeout)
	if c == nil {
		return
	}

	resized := !strings.EqualFold(priorSize.ValueString(), upd.VMSize)
	var err error
	if resized {
		c, err = r.waitForInstance(ctx, id.Workspace, id.Name, c)
	}
	resp.Diagnostics.Append(plan.fromAPI(ctx, c)...)
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
	switch {
	case err != nil:
		action := fmt.Sprintf("wait for compute instance %q in workspace %q to finish resizing", id.Name, id.Workspace)
		if !addTimeoutError(ctx, &resp.Diagnostics, "Compute Instance Update Timed Out", "update", action, timeout, err) {
			addEngineError(&resp.Diagnostics, req.Plan.Schema.Type(), "Cannot Update Compute Instance", action, err)
		}
	case resized && c.State == api.InstanceSetupFailed:
		addSetupFailedError(&resp.Diagnostics, c, "The engine resized the compute instance, but a setup script failed "+
			"when it started again, so the instance is in state SetupFailed.", "Correct the script in setup_scripts "+
			"and apply, then start the instance again with 'mlcompute compute start', which runs the scripts on a "+
			"new node; or replace the instance with 'terraform apply -replace'.")
	}
}

func (r *computeInstanceResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state computeInstanceModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	timeout, diags := state.Timeouts.Delete(ctx, defaultInstanceDeleteTimeout)
	resp.Diagnostics.Append(diags...)
	id, _ := stateComputeID(state.ID, &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}

	deleteCompute(ctx, r.client, &resp.Diagnostics, req.State.Schema.Type(), instanceKind, id, timeout)
}

// ImportState takes a compute ID, /workspaces/{workspace}/computes/{name}; Read fills in
// everything else from the engine, vm_size in the catalog's spelling, and refuses a
// compute of another type. timeouts stays null.
func (r *computeInstanceResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	importComputeID(ctx, req, resp, instanceKind)
}

// computeInstanceModel is the mlcompute_compute_instance schema as Go values.
type computeInstanceModel struct {
	ID                     types.String   `tfsdk:"id"`
	Name                   types.String   `tfsdk:"name"`
	WorkspaceID            types.String   `tfsdk:"workspace_id"`
	VMSize                 types.String   `tfsdk:"vm_size"`
	IdleTimeBeforeShutdown types.String   `tfsdk:"idle_time_before_shutdown"`
	Schedules              types.List     `tfsdk:"schedules"`
	SetupScripts           types.Object   `tfsdk:"setup_scripts"`
	Description            types.String   `tfsdk:"description"`
	Tags                   types.Map      `tfsdk:"tags"`
	State                  types.String   `tfsdk:"state"`
	LastOperation          types.Object   `tfsdk:"last_operation"`
	CreatedOn              types.String   `tfsdk:"created_on"`
	Timeouts               timeouts.Value `tfsdk:"timeouts"`
}

// lastOperationModel is last_operation.
type lastOperationModel struct {
	Name    string `tfsdk:"name"`
	Status  string `tfsdk:"status"`
	Trigger string `tfsdk:"trigger"`
	Time    string `tfsdk:"time"`
}

var lastOperationAttrTypes = map[string]attr.Type{
	"name": types.StringType, "status": types.StringType, "trigger": types.StringType, "time": types.StringType,
}

// fromAPI sets every attribute the engine holds to the engine's value, so that state is
// exactly what the engine has (drift shows in the next plan), except that vm_size keeps
// the configured spelling of the same size and an idle time of "" stays "" rather than
// null (both mean never). No tags is an empty map and no schedules an empty list, never
// null, matching the schema's defaults. timeouts is Terraform's alone and left as it is.
func (m *computeInstanceModel) fromAPI(ctx context.Context, c *api.Compute) diag.Diagnostics {
	var diags, d diag.Diagnostics
	m.ID = types.StringValue(c.ID)
	m.Name = types.StringValue(c.Name)
	m.WorkspaceID = types.StringValue(api.WorkspaceID(c.Workspace))
	m.VMSize = keepSpelling(m.VMSize, c.VMSize)
	m.Description = types.StringValue(c.Description)
	m.Tags, d = types.MapValueFrom(ctx, types.StringType, nonNilMap(c.Tags))
	diags.Append(d...)

	var settings api.InstanceSettings
	if c.Instance != nil {
		settings = *c.Instance
	}
	switch {
	case settings.IdleTimeBeforeShutdown != "":
		m.IdleTimeBeforeShutdown = types.StringValue(settings.IdleTimeBeforeShutdown)
	case m.IdleTimeBeforeShutdown.IsUnknown() || m.IdleTimeBeforeShutdown.ValueString() != "":
		m.IdleTimeBeforeShutdown = types.StringNull()
	}
	schedules := make([]scheduleModel, 0, len(settings.Schedules))
	for _, s := range settings.Schedules {
		s = s.WithDefaults()
		schedules = append(schedules, scheduleModel{
			Action: types.StringValue(s.Action), Cron: types.StringValue(s.Cron),
			TimeZone: types.StringValue(s.TimeZone), Enabled: types.BoolValue(*s.Enabled),
		})
	}
	m.Schedules, d = types.ListValueFrom(ctx, types.ObjectType{AttrTypes: scheduleAttrTypes}, schedules)
	diags.Append(d...)
	m.SetupScripts = types.ObjectNull(setupScriptsAttrTypes)
	if ss := settings.SetupScripts; ss != nil {
		m.SetupScripts, d = types.ObjectValueFrom(ctx, setupScriptsAttrTypes, setupScriptsModel{
			CreationScript: setupScriptObject(ss.CreationScript),
			StartupScript:  setupScriptObject(ss.StartupScript),
		})
		diags.Append(d...)
	}

	m.State = types.StringValue(c.State)
	m.LastOperation = types.ObjectNull(lastOperationAttrTypes)
	if op := c.LastOperation; op != nil {
		m.LastOperation, d = types.ObjectValueFrom(ctx, lastOperationAttrTypes, lastOperationModel{
			Name: op.Name, Status: op.Status, Trigger: op.Trigger, Time: op.Time.UTC().Format(time.RFC3339),
		})
		diags.Append(d...)
	}
	m.CreatedOn = types.StringValue(c.CreatedOn.UTC().Format(time.RFC3339))
	return diags
}
