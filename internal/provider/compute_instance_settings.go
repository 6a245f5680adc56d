package provider

import (
	"context"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/validation"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/provider/validators"
)

// This file holds the instance's nested arguments, schedules and setup_scripts: their
// schema pieces and plan-time checks (the engine's own validation functions), their Go
// models, and their conversion to the engine's api.InstanceSettings. It also holds the
// plan's cost warning, which reads them.

// Bounds of a setup script's timeout, as the engine checks them when it records the
// instance (validateInstance in internal/engine/controllers/instances).
const (
	minSetupScriptTimeout = time.Second
	maxSetupScriptTimeout = 24 * time.Hour
)

// setupScriptAttribute is creation_script or startup_script.
func setupScriptAttribute(description string) schema.SingleNestedAttribute {
	maxTimeout := validation.FormatDuration(maxSetupScriptTimeout)
	return schema.SingleNestedAttribute{
		MarkdownDescription: description,
		Optional:            true,
		Attributes: map[string]schema.Attribute{
			"inline": schema.StringAttribute{
				MarkdownDescription: "The script, run with `sh -c` on the node, with `MLCOMPUTE_WORKSPACE` and " +
					"`MLCOMPUTE_COMPUTE` in its environment. A heredoc suits scripts of several lines.",
				Required: true,
			},
			"timeout": schema.StringAttribute{
				MarkdownDescription: "How long the script may run before it is killed and counts as failed, as an " +
					"ISO 8601 duration from `PT1S` to `" + maxTimeout + "` (default: `" + api.DefaultSetupScriptTimeout + "`).",
				Optional: true,
				Computed: true,
				Default:  stringdefault.StaticString(api.DefaultSetupScriptTimeout),
				Validators: []validator.String{
					validators.StringFunc("Invalid Setup Script Timeout",
						"the value must be an ISO 8601 duration from PT1S to "+maxTimeout, checkSetupScriptTimeout),
				},
			},
		},
	}
}

// checkIdleTimeBeforeShutdown checks idle_time_before_shutdown with the engine's bounds,
// except the engine's policy minimum, which only the engine knows and checks at apply.
func checkIdleTimeBeforeShutdown(s string) error {
	_, err := validation.IdleTimeBeforeShutdown(s, 0)
	return err
}

// checkSetupScriptTimeout checks a setup script's timeout with the engine's bounds.
func checkSetupScriptTimeout(s string) error {
	_, err := validation.Duration("timeout", s, minSetupScriptTimeout, maxSetupScriptTimeout)
	return err
}

// scheduleFieldValidator checks one field of a schedule, "cron" or "time_zone", with the
// engine's own validation.Schedules, so plan and apply say the same words. The engine
// names the entry by its index ("schedules.2.cron", written "schedules[2].cron" in the
// message, as the configuration spells it): the value is checked as entry i of a
// list whose entries before it, and whose other fields, are placeholders that pass, so the
// message carries the right index and every bad field of every entry is reported. An entry
// past validation.MaxSchedules is left alone: the list's size validator reports the list.
type scheduleFieldValidator struct {
	field   string
	summary string
}

func (v scheduleFieldValidator) Description(context.Context) string {
	if v.field == "cron" {
		return "the value must be a five-field cron expression (" + validation.CronExample + ")"
	}
	return "the value must be an IANA time zone name, such as UTC or Europe/Berlin"
}

func (v scheduleFieldValidator) MarkdownDescription(ctx context.Context) string {
	return v.Description(ctx)
}

func (v scheduleFieldValidator) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	index := 0
	if step, _ := req.Path.ParentPath().Steps().LastStep(); step != nil {
		if i, ok := step.(path.PathStepElementKeyInt); ok {
			index = int(i)
		}
	}
	if index >= validation.MaxSchedules {
		return
	}
	list := make([]api.Schedule, index+1)
	for i := range list {
		list[i] = api.Schedule{Action: validation.ScheduleActions[0], Cron: validation.CronExample, TimeZone: api.DefaultScheduleTimeZone}
	}
	switch v.field {
	case "cron":
		list[index].Cron = req.ConfigValue.ValueString()
	case "time_zone":
		list[index].TimeZone = req.ConfigValue.ValueString()
	}
	if err := validation.Schedules(list); err != nil {
		resp.Diagnostics.AddAttributeError(req.Path, v.summary, engineMessage(err))
	}
}

// neverStopsWarning returns the plan's cost warning for an instance that nothing stops:
// no idle_time_before_shutdown and no enabled Stop schedule. It returns nil when either is
// set, or may be once unknown values are known.
func neverStopsWarning(ctx context.Context, idle types.String, schedules types.List) diag.Diagnostic {
	if idle.IsUnknown() || idle.ValueString() != "" || schedules.IsUnknown() {
		return nil
	}
	var list []scheduleModel
	if !schedules.IsNull() {
		if diags := schedules.ElementsAs(ctx, &list, false); diags.HasError() {
			return nil
		}
	}
	for _, s := range list {
		stops := s.Action.IsUnknown() || s.Action.ValueString() == "Stop"
		if stops && (s.Enabled.IsNull() || s.Enabled.IsUnknown() || s.Enabled.ValueBool()) {
			return nil
		}
	}
	return diag.NewAttributeWarningDiagnostic(path.Root("idle_time_before_shutdown"),
		"Compute Instance Never Stops By Itself",
		"Neither idle_time_before_shutdown nor an enabled Stop schedule is set, so the instance keeps running until "+
			"someone stops it, even when nobody uses it: it holds its vCPUs (and, on a cloud, costs money) while idle.\n\n"+
			"Set idle_time_before_shutdown, for example \"PT30M\" (the engine's minimum is "+
			validation.FormatDuration(validation.DefaultMinIdleTimeBeforeShutdown)+" unless its operator lowered it), "+
			"or add a schedule such as { action = \"Stop\", cron = \"0 19 * * 1-5\" }.")
}

// scheduleModel is one entry of schedules; its values may be unknown at plan time.
type scheduleModel struct {
	Action   types.String `tfsdk:"action"`
	Cron     types.String `tfsdk:"cron"`
	TimeZone types.String `tfsdk:"time_zone"`
	Enabled  types.Bool   `tfsdk:"enabled"`
}

var scheduleAttrTypes = map[string]attr.Type{
	"action": types.StringType, "cron": types.StringType, "time_zone": types.StringType, "enabled": types.BoolType,
}

// setupScriptsModel is setup_scripts; each script is null when not set.
type setupScriptsModel struct {
	CreationScript types.Object `tfsdk:"creation_script"`
	StartupScript  types.Object `tfsdk:"startup_script"`
}

// setupScriptModel is creation_script or startup_script.
type setupScriptModel struct {
	Inline  types.String `tfsdk:"inline"`
	Timeout types.String `tfsdk:"timeout"`
}

var (
	setupScriptAttrTypes  = map[string]attr.Type{"inline": types.StringType, "timeout": types.StringType}
	setupScriptsAttrTypes = map[string]attr.Type{
		"creation_script": types.ObjectType{AttrTypes: setupScriptAttrTypes},
		"startup_script":  types.ObjectType{AttrTypes: setupScriptAttrTypes},
	}
)

// instanceSettings returns the planned instance settings for the engine. A schedule's
// enabled and a script's timeout are always known by apply (their defaults); a null one
// would be left to the engine's default all the same.
func (m *computeInstanceModel) instanceSettings(ctx context.Context) (*api.InstanceSettings, diag.Diagnostics) {
	var diags diag.Diagnostics
	out := &api.InstanceSettings{IdleTimeBeforeShutdown: m.IdleTimeBeforeShutdown.ValueString()}
	var schedules []scheduleModel
	if !m.Schedules.IsNull() && !m.Schedules.IsUnknown() {
		diags.Append(m.Schedules.ElementsAs(ctx, &schedules, false)...)
	}
	for _, s := range schedules {
		sc := api.Schedule{Action: s.Action.ValueString(), Cron: s.Cron.ValueString(), TimeZone: s.TimeZone.ValueString()}
		if !s.Enabled.IsNull() && !s.Enabled.IsUnknown() {
			sc.Enabled = s.Enabled.ValueBoolPointer()
		}
		out.Schedules = append(out.Schedules, sc)
	}
	if !m.SetupScripts.IsNull() && !m.SetupScripts.IsUnknown() {
		var ss setupScriptsModel
		diags.Append(m.SetupScripts.As(ctx, &ss, basetypes.ObjectAsOptions{})...)
		out.SetupScripts = &api.SetupScripts{}
		for _, p := range []struct {
			from types.Object
			to   **api.SetupScript
		}{{ss.CreationScript, &out.SetupScripts.CreationScript}, {ss.StartupScript, &out.SetupScripts.StartupScript}} {
			if p.from.IsNull() || p.from.IsUnknown() {
				continue
			}
			var s setupScriptModel
			diags.Append(p.from.As(ctx, &s, basetypes.ObjectAsOptions{})...)
			*p.to = &api.SetupScript{Inline: s.Inline.ValueString(), Timeout: s.Timeout.ValueString()}
		}
	}
	return out, diags
}

// setupScriptObject is a script as the engine holds it, or null.
func setupScriptObject(s *api.SetupScript) types.Object {
	if s == nil {
		return types.ObjectNull(setupScriptAttrTypes)
	}
	timeout := s.Timeout
	if timeout == "" {
		timeout = api.DefaultSetupScriptTimeout
	}
	return types.ObjectValueMust(setupScriptAttrTypes, map[string]attr.Value{
		"inline": types.StringValue(s.Inline), "timeout": types.StringValue(timeout),
	})
}
