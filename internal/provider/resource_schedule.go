package provider

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/client"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/jobspec"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/validation"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/jobfile"
)

var (
	_ resource.Resource                   = (*scheduleResource)(nil)
	_ resource.ResourceWithConfigure      = (*scheduleResource)(nil)
	_ resource.ResourceWithImportState    = (*scheduleResource)(nil)
	_ resource.ResourceWithModifyPlan     = (*scheduleResource)(nil)
	_ resource.ResourceWithValidateConfig = (*scheduleResource)(nil)
)

// NewScheduleResource returns the mlcompute_schedule resource.
func NewScheduleResource() resource.Resource {
	return &scheduleResource{}
}

// scheduleResource manages a schedule: a command or pipeline job submitted at each tick of
// a cron or recurrence trigger.
type scheduleResource struct {
	client *client.Client
}

func (r *scheduleResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_schedule"
}

func (r *scheduleResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	optionalString := func(desc string, vs ...validator.String) schema.StringAttribute {
		return schema.StringAttribute{MarkdownDescription: desc, Optional: true, Validators: vs}
	}
	resp.Schema = schema.Schema{
		MarkdownDescription: "A schedule submits a job at each tick of its trigger: the command or pipeline job of " +
			"`create_job`, the YAML `mlcompute job submit -f` takes, named `<schedule>-YYYYMMDDThhmmssZ` for the " +
			"tick (UTC) and recording the schedule that started it. The engine fires a tick within a second of it " +
			"and keeps running while an enabled schedule has a tick ahead. Code directories and local inputs the " +
			"YAML names are snapshotted at apply, so every run uses what was applied; an edit of one changes " +
			"`content_hash` and plans an update in place.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				MarkdownDescription: "The schedule's ID, `/workspaces/{workspace}/schedules/{name}`, which " +
					"`terraform import` takes.",
				Computed:      true,
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"name": nameAttribute(validation.ScheduleName, "Invalid Schedule Name", "The schedule's name, unique in its workspace",
				"Its jobs are named after it. Changing it replaces the schedule."),
			"workspace_id": workspaceIDAttribute("schedule"),
			"trigger": schema.SingleNestedAttribute{
				MarkdownDescription: "When the job runs: a cron expression or a recurrence, within `start_time` and " +
					"`end_time`, in `time_zone`.",
				Required: true,
				Attributes: map[string]schema.Attribute{
					"type": schema.StringAttribute{
						MarkdownDescription: "`cron` or `recurrence`.",
						Required:            true,
						Validators:          []validator.String{stringvalidator.OneOf(api.TriggerTypes...)},
					},
					"expression": optionalString("Type `cron`: five fields (minute, hour, day of month, month, day of week), " +
						"all honoured, such as `\"0 2 * * 1-5\"`. When both day fields are restricted, a day matching either fires."),
					"frequency": optionalString("Type `recurrence`: one of `"+strings.Join(api.Frequencies, "`, `")+"`.",
						stringvalidator.OneOf(api.Frequencies...)),
					"interval": schema.Int64Attribute{
						MarkdownDescription: "Type `recurrence`: how many `frequency` units between ticks, 1 to 1000.",
						Optional:            true,
					},
					"schedule": schema.SingleNestedAttribute{
						MarkdownDescription: "Type `recurrence` with frequency `day`, `week` or `month`: the hours and " +
							"minutes of the day it fires at, and for `week` the days.",
						Optional: true,
						Attributes: map[string]schema.Attribute{
							"hours":     schema.ListAttribute{MarkdownDescription: "Hours, 0 to 23.", ElementType: types.Int64Type, Optional: true},
							"minutes":   schema.ListAttribute{MarkdownDescription: "Minutes, 0 to 59.", ElementType: types.Int64Type, Optional: true},
							"week_days": schema.ListAttribute{MarkdownDescription: "Days, `monday` to `sunday`.", ElementType: types.StringType, Optional: true},
						},
					},
					"start_time": optionalString("No tick before this time (RFC 3339, such as `\"2026-01-01T00:00:00Z\"`); a " +
						"recurrence counts from it."),
					"end_time": optionalString("No tick after this time (RFC 3339); after it the schedule has no next run."),
					"time_zone": schema.StringAttribute{
						MarkdownDescription: "The time zone the trigger's wall-clock times are in: an IANA name " +
							"(`\"Europe/Berlin\"`) or a Windows name (`\"W. Europe Standard Time\"`) (default: `\"UTC\"`). " +
							"A time that does not exist on a spring-forward day is skipped that day; one that happens " +
							"twice on a fall-back day fires once, at its first occurrence.",
						Optional: true,
						Computed: true,
						Default:  stringdefault.StaticString(api.DefaultScheduleTimeZone),
					},
				},
			},
			"create_job": schema.StringAttribute{
				MarkdownDescription: "The YAML of the command job (`type: command`) or pipeline job (`type: pipeline`) " +
					"each tick submits, usually `file(\"${path.module}/pipeline.yaml\")`. It is parsed and checked at " +
					"plan; errors name the YAML path and line. A `name` in it is replaced by the tick's name.",
				Required: true,
			},
			"base_path": schema.StringAttribute{
				MarkdownDescription: "The directory the relative `code` and input paths of `create_job` are taken from, " +
					"usually `path.module` (default: the directory terraform runs in).",
				Optional:      true,
				Computed:      true,
				PlanModifiers: []planmodifier.String{basePathDefault{}},
			},
			"content_hash": schema.StringAttribute{
				MarkdownDescription: "A hash (hex SHA-256) of `create_job` and the snapshots of the code and local " +
					"inputs it names: an edit of any of them changes it, and plans an update in place.",
				Computed: true,
			},
			"enabled": schema.BoolAttribute{
				MarkdownDescription: "Whether ticks fire (default: `true`). A disabled schedule has no `next_run_time`.",
				Optional:            true,
				Computed:            true,
				Default:             booldefault.StaticBool(true),
			},
			"overlap": schema.StringAttribute{
				MarkdownDescription: "What a tick does while the last run is still active: `forbid` skips the tick " +
					"(the engine records it, with the reason), `allow` starts another run, `replace` cancels the " +
					"running one first (default: `\"forbid\"`).",
				Optional:   true,
				Computed:   true,
				Default:    stringdefault.StaticString(api.OverlapForbid),
				Validators: []validator.String{stringvalidator.OneOf(api.Overlaps...)},
			},
			"catch_up": schema.StringAttribute{
				MarkdownDescription: "What happens to ticks missed while the engine was down: `latest` fires exactly " +
					"one run, for the last missed tick, when it comes back; `none` fires none (default: `\"latest\"`).",
				Optional:   true,
				Computed:   true,
				Default:    stringdefault.StaticString(api.CatchUpLatest),
				Validators: []validator.String{stringvalidator.OneOf(api.CatchUps...)},
			},
			"next_run_time": schema.StringAttribute{
				MarkdownDescription: "The next tick, in RFC 3339 form (UTC); null when the schedule is disabled or " +
					"past its `end_time`.",
				Computed: true,
			},
			"last_run_job": schema.StringAttribute{
				MarkdownDescription: "The job the last tick started.",
				Computed:            true,
			},
			"last_run_status": schema.StringAttribute{
				MarkdownDescription: "That job's status when the schedule was last read.",
				Computed:            true,
			},
		},
	}
}

// ValidateConfig checks the trigger with the engine's own rule and parses create_job, so
// a bad cron, time zone, frequency, time range or YAML fails the plan naming it.
func (r *scheduleResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var m jobScheduleModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if !m.CreateJob.IsUnknown() && !m.CreateJob.IsNull() {
		if _, err := jobspec.Parse([]byte(m.CreateJob.ValueString())); err != nil {
			resp.Diagnostics.AddAttributeError(path.Root("create_job"), "Invalid Job YAML",
				"create_job is not a command or pipeline job's YAML as `mlcompute job submit -f` reads it.\n\n"+
					"Fix the key the error names, at its line.\n\nOriginal error: "+err.Error())
		}
	}
	t, known := m.apiTrigger(ctx, &resp.Diagnostics)
	if !known || resp.Diagnostics.HasError() {
		return
	}
	if _, err := validation.ScheduleTrigger(t); err != nil {
		field := api.FieldOf(err)
		at := path.Root("trigger")
		for _, name := range strings.Split(field, ".")[1:] {
			at = at.AtName(name)
		}
		resp.Diagnostics.AddAttributeError(at, "Invalid Schedule Trigger", engineMessage(err))
	}
}

// ModifyPlan reports unknown keys in the block's inline objects (object_keys.go), and
// plans content_hash from create_job and the files it names as they are now, so an edit
// of a code file plans an update in place.
func (r *scheduleResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	reportObjectKeys(ctx, "mlcompute_schedule", req, &resp.Diagnostics)
	if req.Plan.Raw.IsNull() {
		return // a destroy reads no file
	}
	var plan, state jobScheduleModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if !req.State.Raw.IsNull() {
		resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	}
	if resp.Diagnostics.HasError() || plan.CreateJob.IsUnknown() || plan.BasePath.IsUnknown() {
		return
	}
	sub, err := jobfile.Parse("create_job", plan.BasePath.ValueString(), plan.CreateJob.ValueString())
	var hash string
	if err == nil {
		hash, err = sub.ContentHash(ctx)
	}
	if err != nil {
		if !jobspec.IsError(err) {
			resp.Diagnostics.AddAttributeError(path.Root("create_job"), summaryJobFiles,
				fmt.Sprintf("The code or an input create_job names, relative to base_path %q, cannot be snapshotted.\n\n"+
					"Create it, or correct the path in the YAML or base_path.\n\nOriginal error: %s", plan.BasePath.ValueString(), err))
		}
		return
	}
	if hash == state.ContentHash.ValueString() {
		return
	}
	resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root("content_hash"), hash)...)
	for _, computed := range []string{"next_run_time", "last_run_job", "last_run_status"} {
		resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root(computed), types.StringUnknown())...)
	}
}

func (r *scheduleResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.client = clientFrom(req.ProviderData, &resp.Diagnostics)
}

func (r *scheduleResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan jobScheduleModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	ws, err := api.ParseID(plan.WorkspaceID.ValueString(), "")
	if err != nil {
		resp.Diagnostics.AddAttributeError(path.Root("workspace_id"), "Invalid Workspace ID", err.Error())
		return
	}
	upd := r.submission(ctx, &plan, ws.Workspace, &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	spec := api.JobScheduleSpec{
		Name: plan.Name.ValueString(), Trigger: upd.Trigger, CreateJob: upd.CreateJob, Job: upd.Job, ContentHash: upd.ContentHash,
		BasePath: upd.BasePath, Enabled: upd.Enabled, Overlap: upd.Overlap, CatchUp: upd.CatchUp,
	}

	s, err := r.client.CreateSchedule(ctx, ws.Workspace, spec)
	if err != nil {
		addEngineError(&resp.Diagnostics, req.Plan.Schema.Type(), "Cannot Create Schedule",
			fmt.Sprintf("create schedule %q in workspace %q", spec.Name, ws.Workspace), err)
		return
	}
	tflog.Info(ctx, "created schedule", map[string]any{"schedule": s.ID, "next_run_time": s.NextRunTime})

	resp.Diagnostics.Append(plan.fromAPI(s)...)
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

func (r *scheduleResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state jobScheduleModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	id, ok := stateScheduleID(state.ID, &resp.Diagnostics)
	if !ok {
		return
	}

	s, err := r.client.GetSchedule(ctx, id.Workspace, id.Name)
	if !readFound(ctx, req, resp, err, "Schedule", fmt.Sprintf("schedule %q in workspace %q", id.Name, id.Workspace)) {
		return
	}

	resp.Diagnostics.Append(state.fromAPI(s)...)
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

func (r *scheduleResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan jobScheduleModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	id, _ := stateScheduleID(plan.ID, &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	upd := r.submission(ctx, &plan, id.Workspace, &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}

	s, err := r.client.UpdateSchedule(ctx, id.Workspace, id.Name, upd)
	if err != nil {
		addEngineError(&resp.Diagnostics, req.Plan.Schema.Type(), "Cannot Update Schedule",
			fmt.Sprintf("update schedule %q in workspace %q", id.Name, id.Workspace), err)
		return
	}

	resp.Diagnostics.Append(plan.fromAPI(s)...)
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

func (r *scheduleResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state jobScheduleModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	id, ok := stateScheduleID(state.ID, &resp.Diagnostics)
	if !ok {
		return
	}

	err := r.client.DeleteSchedule(ctx, id.Workspace, id.Name)
	if err != nil && !api.IsNotFound(err) {
		addEngineError(&resp.Diagnostics, req.State.Schema.Type(), "Cannot Delete Schedule",
			fmt.Sprintf("delete schedule %q in workspace %q", id.Name, id.Workspace), err)
	}
}

func (r *scheduleResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	importWorkspaceObject(ctx, req, resp, workspaceObject{
		collection: api.CollectionSchedules, title: "Schedule", noun: "a schedule",
		example: "mlcompute_schedule.nightly", name: "nightly",
	})
}

// submission snapshots create_job's files through the engine and returns the schedule's
// settings as the engine takes them.
func (r *scheduleResource) submission(ctx context.Context, plan *jobScheduleModel, ws string, diags *diag.Diagnostics) api.JobScheduleUpdate {
	t, _ := plan.apiTrigger(ctx, diags)
	base := plan.BasePath.ValueString()
	sub, err := jobfile.Parse("create_job", base, plan.CreateJob.ValueString())
	var hash string
	if err == nil {
		hash, err = sub.Upload(ctx, r.client, ws)
	}
	if err != nil {
		diags.AddAttributeError(path.Root("create_job"), summaryJobFiles,
			fmt.Sprintf("The job's code and inputs, relative to base_path %q, could not be snapshotted.\n\n"+
				"Check the paths the YAML names, then apply again.\n\nOriginal error: %s", base, err))
		return api.JobScheduleUpdate{}
	}
	if planned := plan.ContentHash.ValueString(); !plan.ContentHash.IsUnknown() && planned != hash {
		diags.AddAttributeError(path.Root("content_hash"), "Job Files Changed Since Plan",
			"The code or inputs create_job names changed between plan and apply (content hash "+planned+" planned, "+hash+" now).\n\n"+
				"Run terraform apply again to plan with the files as they are.")
		return api.JobScheduleUpdate{}
	}
	enabled := plan.Enabled.ValueBool()
	return api.JobScheduleUpdate{
		Trigger: t, CreateJob: plan.CreateJob.ValueString(), Job: sub.Spec, ContentHash: hash, BasePath: base,
		Enabled: &enabled, Overlap: plan.Overlap.ValueString(), CatchUp: plan.CatchUp.ValueString(),
	}
}

// summaryJobFiles titles a plan's or apply's failure to snapshot the files create_job
// names; a destroy's refresh lets it stand down (destroy.go), as the files may be gone.
const summaryJobFiles = "Cannot Snapshot Job Files"

// basePathDefault plans base_path as the directory terraform runs in when the
// configuration gives none.
type basePathDefault struct{}

func (basePathDefault) Description(context.Context) string {
	return "defaults to the directory terraform runs in"
}
func (d basePathDefault) MarkdownDescription(ctx context.Context) string { return d.Description(ctx) }

func (basePathDefault) PlanModifyString(_ context.Context, req planmodifier.StringRequest, resp *planmodifier.StringResponse) {
	if !req.ConfigValue.IsNull() {
		return
	}
	dir, err := os.Getwd()
	if err != nil {
		resp.Diagnostics.AddAttributeError(req.Path, "Cannot Read Working Directory",
			"base_path defaults to the directory terraform runs in, which could not be read.\n\n"+
				"Set base_path, usually to path.module.\n\nOriginal error: "+err.Error())
		return
	}
	resp.PlanValue = types.StringValue(dir)
}

// stateScheduleID parses the ID held in state.
func stateScheduleID(v types.String, diags *diag.Diagnostics) (api.ID, bool) {
	id, err := api.ParseID(v.ValueString(), api.CollectionSchedules)
	if err != nil {
		diags.AddAttributeError(path.Root("id"), "Invalid Schedule ID",
			"The schedule's ID in state is not /workspaces/{workspace}/schedules/{name}.\n\n"+
				"Remove it from state (terraform state rm) and import it again.\n\nOriginal error: "+err.Error())
		return id, false
	}
	return id, true
}

type jobScheduleModel struct {
	ID            types.String `tfsdk:"id"`
	Name          types.String `tfsdk:"name"`
	WorkspaceID   types.String `tfsdk:"workspace_id"`
	Trigger       types.Object `tfsdk:"trigger"`
	CreateJob     types.String `tfsdk:"create_job"`
	BasePath      types.String `tfsdk:"base_path"`
	ContentHash   types.String `tfsdk:"content_hash"`
	Enabled       types.Bool   `tfsdk:"enabled"`
	Overlap       types.String `tfsdk:"overlap"`
	CatchUp       types.String `tfsdk:"catch_up"`
	NextRunTime   types.String `tfsdk:"next_run_time"`
	LastRunJob    types.String `tfsdk:"last_run_job"`
	LastRunStatus types.String `tfsdk:"last_run_status"`
}

type triggerModel struct {
	Type       types.String `tfsdk:"type"`
	Expression types.String `tfsdk:"expression"`
	Frequency  types.String `tfsdk:"frequency"`
	Interval   types.Int64  `tfsdk:"interval"`
	Schedule   types.Object `tfsdk:"schedule"`
	StartTime  types.String `tfsdk:"start_time"`
	EndTime    types.String `tfsdk:"end_time"`
	TimeZone   types.String `tfsdk:"time_zone"`
}

type recurrenceModel struct {
	Hours    []int64  `tfsdk:"hours"`
	Minutes  []int64  `tfsdk:"minutes"`
	WeekDays []string `tfsdk:"week_days"`
}

var (
	recurrenceAttrTypes = map[string]attr.Type{
		"hours": types.ListType{ElemType: types.Int64Type}, "minutes": types.ListType{ElemType: types.Int64Type},
		"week_days": types.ListType{ElemType: types.StringType},
	}
	triggerAttrTypes = map[string]attr.Type{
		"type": types.StringType, "expression": types.StringType, "frequency": types.StringType, "interval": types.Int64Type,
		"schedule": types.ObjectType{AttrTypes: recurrenceAttrTypes}, "start_time": types.StringType, "end_time": types.StringType,
		"time_zone": types.StringType,
	}
)

// apiTrigger is the trigger in the engine's terms; known is false while a value of it is
// unknown (a plan of a value from another resource).
func (m *jobScheduleModel) apiTrigger(ctx context.Context, diags *diag.Diagnostics) (t api.JobScheduleTrigger, known bool) {
	if m.Trigger.IsNull() || m.Trigger.IsUnknown() {
		return t, false
	}
	var tm triggerModel
	diags.Append(m.Trigger.As(ctx, &tm, basetypes.ObjectAsOptions{UnhandledUnknownAsEmpty: true})...)
	known = !tm.Schedule.IsUnknown()
	for _, v := range []attr.Value{tm.Type, tm.Expression, tm.Frequency, tm.Interval, tm.StartTime, tm.EndTime, tm.TimeZone} {
		known = known && !v.IsUnknown()
	}
	t = api.JobScheduleTrigger{
		Type: tm.Type.ValueString(), Expression: tm.Expression.ValueString(), Frequency: tm.Frequency.ValueString(),
		Interval: int(tm.Interval.ValueInt64()), StartTime: tm.StartTime.ValueString(), EndTime: tm.EndTime.ValueString(),
		TimeZone: tm.TimeZone.ValueString(),
	}
	if !tm.Schedule.IsNull() && !tm.Schedule.IsUnknown() {
		var rm recurrenceModel
		diags.Append(tm.Schedule.As(ctx, &rm, basetypes.ObjectAsOptions{UnhandledUnknownAsEmpty: true})...)
		t.Schedule = &api.RecurrenceSchedule{WeekDays: rm.WeekDays}
		for _, h := range rm.Hours {
			t.Schedule.Hours = append(t.Schedule.Hours, int(h))
		}
		for _, mi := range rm.Minutes {
			t.Schedule.Minutes = append(t.Schedule.Minutes, int(mi))
		}
	}
	return t, known
}

// fromAPI sets the model from what the engine holds.
func (m *jobScheduleModel) fromAPI(s *api.JobSchedule) diag.Diagnostics {
	var diags diag.Diagnostics
	m.ID = types.StringValue(s.ID)
	m.Name = types.StringValue(s.Name)
	m.WorkspaceID = types.StringValue(api.WorkspaceID(s.Workspace))
	m.CreateJob = types.StringValue(s.CreateJob)
	m.BasePath = types.StringValue(s.BasePath)
	m.ContentHash = types.StringValue(s.ContentHash)
	m.Enabled = types.BoolValue(s.Enabled == nil || *s.Enabled)
	m.Overlap = types.StringValue(s.Overlap)
	m.CatchUp = types.StringValue(s.CatchUp)
	m.NextRunTime = types.StringNull()
	if s.NextRunTime != nil {
		m.NextRunTime = types.StringValue(s.NextRunTime.UTC().Format(time.RFC3339))
	}
	m.LastRunJob = types.StringValue(s.LastRunJob)
	m.LastRunStatus = types.StringValue(s.LastRunStatus)

	t := s.Trigger
	sched := types.ObjectNull(recurrenceAttrTypes)
	if r := t.Schedule; r != nil {
		hours, minutes := make([]int64, len(r.Hours)), make([]int64, len(r.Minutes))
		for i, h := range r.Hours {
			hours[i] = int64(h)
		}
		for i, mi := range r.Minutes {
			minutes[i] = int64(mi)
		}
		var d diag.Diagnostics
		sched, d = types.ObjectValue(recurrenceAttrTypes, map[string]attr.Value{
			"hours": int64ListOrNull(hours), "minutes": int64ListOrNull(minutes), "week_days": stringListOrNull(r.WeekDays),
		})
		diags.Append(d...)
	}
	interval := types.Int64Null()
	if t.Interval != 0 {
		interval = types.Int64Value(int64(t.Interval))
	}
	var d diag.Diagnostics
	m.Trigger, d = types.ObjectValue(triggerAttrTypes, map[string]attr.Value{
		"type": types.StringValue(t.Type), "expression": stringOrNull(t.Expression), "frequency": stringOrNull(t.Frequency),
		"interval": interval, "schedule": sched, "start_time": stringOrNull(t.StartTime), "end_time": stringOrNull(t.EndTime),
		"time_zone": types.StringValue(cmpOr(t.TimeZone, api.DefaultScheduleTimeZone)),
	})
	diags.Append(d...)
	return diags
}

func stringListOrNull(values []string) types.List {
	if len(values) == 0 {
		return types.ListNull(types.StringType)
	}
	return stringList(values)
}

func int64ListOrNull(values []int64) types.List {
	if len(values) == 0 {
		return types.ListNull(types.Int64Type)
	}
	elems := make([]attr.Value, len(values))
	for i, v := range values {
		elems[i] = types.Int64Value(v)
	}
	return types.ListValueMust(types.Int64Type, elems)
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
