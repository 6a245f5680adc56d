package provider

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/snapshot"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/validation"
)

// This file holds the online endpoint's Go model, its conversion to and from the engine's
// wire types, the code snapshots of its deployments, and the wait for a rollout.

// onlineEndpointModel is the mlcompute_online_endpoint schema as Go values.
type onlineEndpointModel struct {
	ID                types.String   `tfsdk:"id"`
	Name              types.String   `tfsdk:"name"`
	WorkspaceID       types.String   `tfsdk:"workspace_id"`
	AuthMode          types.String   `tfsdk:"auth_mode"`
	Deployments       types.Map      `tfsdk:"deployments"`
	Traffic           types.Map      `tfsdk:"traffic"`
	MirrorTraffic     types.Map      `tfsdk:"mirror_traffic"`
	Description       types.String   `tfsdk:"description"`
	Tags              types.Map      `tfsdk:"tags"`
	ScoringURI        types.String   `tfsdk:"scoring_uri"`
	PrimaryKey        types.String   `tfsdk:"primary_key"`
	SecondaryKey      types.String   `tfsdk:"secondary_key"`
	ProvisioningState types.String   `tfsdk:"provisioning_state"`
	CreatedOn         types.String   `tfsdk:"created_on"`
	Timeouts          timeouts.Value `tfsdk:"timeouts"`
}

// deploymentModel is one element of deployments.
type deploymentModel struct {
	InstanceType         types.String `tfsdk:"instance_type"`
	InstanceCount        types.Int64  `tfsdk:"instance_count"`
	CodePath             types.String `tfsdk:"code_path"`
	CodeSnapshotID       types.String `tfsdk:"code_snapshot_id"`
	ModelPath            types.String `tfsdk:"model_path"`
	ModelDigest          types.String `tfsdk:"model_digest"`
	Command              types.List   `tfsdk:"command"`
	EnvironmentID        types.String `tfsdk:"environment_id"`
	EnvironmentVariables types.Map    `tfsdk:"environment_variables"`
	RequestSettings      types.Object `tfsdk:"request_settings"`
	ScaleSettings        types.Object `tfsdk:"scale_settings"`
	LivenessProbe        types.Object `tfsdk:"liveness_probe"`
	ReadinessProbe       types.Object `tfsdk:"readiness_probe"`
}

// requestSettingsModel is request_settings.
type requestSettingsModel struct {
	RequestTimeoutMS                 types.Int64 `tfsdk:"request_timeout_ms"`
	MaxConcurrentRequestsPerInstance types.Int64 `tfsdk:"max_concurrent_requests_per_instance"`
	MaxQueueWaitMS                   types.Int64 `tfsdk:"max_queue_wait_ms"`
}

// deploymentScaleModel is a deployment's scale_settings.
type deploymentScaleModel struct {
	Type                        types.String `tfsdk:"type"`
	MinInstances                types.Int64  `tfsdk:"min_instances"`
	MaxInstances                types.Int64  `tfsdk:"max_instances"`
	TargetUtilizationPercentage types.Int64  `tfsdk:"target_utilization_percentage"`
	PollingInterval             types.String `tfsdk:"polling_interval"`
	ScaleDownDelay              types.String `tfsdk:"scale_down_delay"`
	ScaleToZeroDelay            types.String `tfsdk:"scale_to_zero_delay"`
}

// probeModel is liveness_probe or readiness_probe.
type probeModel struct {
	Path             types.String `tfsdk:"path"`
	InitialDelay     types.String `tfsdk:"initial_delay"`
	Period           types.String `tfsdk:"period"`
	Timeout          types.String `tfsdk:"timeout"`
	SuccessThreshold types.Int64  `tfsdk:"success_threshold"`
	FailureThreshold types.Int64  `tfsdk:"failure_threshold"`
}

var (
	requestSettingsAttrTypes = map[string]attr.Type{
		"request_timeout_ms":                   types.Int64Type,
		"max_concurrent_requests_per_instance": types.Int64Type,
		"max_queue_wait_ms":                    types.Int64Type,
	}
	scaleSettingsAttrTypes = map[string]attr.Type{
		"type": types.StringType, "min_instances": types.Int64Type, "max_instances": types.Int64Type,
		"target_utilization_percentage": types.Int64Type, "polling_interval": types.StringType,
		"scale_down_delay": types.StringType, "scale_to_zero_delay": types.StringType,
	}
	probeAttrTypes = map[string]attr.Type{
		"path": types.StringType, "initial_delay": types.StringType, "period": types.StringType,
		"timeout": types.StringType, "success_threshold": types.Int64Type, "failure_threshold": types.Int64Type,
	}
	deploymentAttrTypes = map[string]attr.Type{
		"instance_type":         types.StringType,
		"instance_count":        types.Int64Type,
		"code_path":             types.StringType,
		"code_snapshot_id":      types.StringType,
		"model_path":            types.StringType,
		"model_digest":          types.StringType,
		"command":               types.ListType{ElemType: types.StringType},
		"environment_id":        types.StringType,
		"environment_variables": types.MapType{ElemType: types.StringType},
		"request_settings":      types.ObjectType{AttrTypes: requestSettingsAttrTypes},
		"scale_settings":        types.ObjectType{AttrTypes: scaleSettingsAttrTypes},
		"liveness_probe":        types.ObjectType{AttrTypes: probeAttrTypes},
		"readiness_probe":       types.ObjectType{AttrTypes: probeAttrTypes},
	}
	deploymentObjectType = types.ObjectType{AttrTypes: deploymentAttrTypes}
)

// defaultRequestSettings is request_settings when the configuration leaves it out.
// max_queue_wait_ms depends on scale_settings: ModifyPlan sets it when it is not configured.
func defaultRequestSettings() types.Object {
	return types.ObjectValueMust(requestSettingsAttrTypes, map[string]attr.Value{
		"request_timeout_ms":                   types.Int64Value(api.DefaultRequestTimeoutMS),
		"max_concurrent_requests_per_instance": types.Int64Value(api.DefaultMaxConcurrentRequestsPerInstance),
		"max_queue_wait_ms":                    types.Int64Value(api.DefaultMaxQueueWaitMS),
	})
}

// defaultScaleSettings is scale_settings when the configuration leaves it out.
func defaultScaleSettings() types.Object {
	v, _ := scaleSettingsObject(validation.DefaultScale())
	return v
}

func scaleSettingsObject(s api.EndpointScaleSettings) (types.Object, diag.Diagnostics) {
	toZero := types.StringNull()
	if s.ScaleToZeroDelay != "" {
		toZero = types.StringValue(s.ScaleToZeroDelay)
	}
	return types.ObjectValue(scaleSettingsAttrTypes, map[string]attr.Value{
		"type":                          types.StringValue(s.Type),
		"min_instances":                 types.Int64Value(s.MinInstances),
		"max_instances":                 types.Int64Value(s.MaxInstances),
		"target_utilization_percentage": types.Int64Value(s.TargetUtilizationPercentage),
		"polling_interval":              types.StringValue(s.PollingInterval),
		"scale_down_delay":              types.StringValue(s.ScaleDownDelay),
		"scale_to_zero_delay":           toZero,
	})
}

// scaleSettings returns a deployment's scale_settings for the engine.
func (d deploymentModel) scaleSettings(ctx context.Context) (*api.EndpointScaleSettings, diag.Diagnostics) {
	var sm deploymentScaleModel
	diags := d.ScaleSettings.As(ctx, &sm, basetypes.ObjectAsOptions{UnhandledNullAsEmpty: true, UnhandledUnknownAsEmpty: true})
	return &api.EndpointScaleSettings{
		Type: sm.Type.ValueString(), MinInstances: sm.MinInstances.ValueInt64(), MaxInstances: sm.MaxInstances.ValueInt64(),
		TargetUtilizationPercentage: sm.TargetUtilizationPercentage.ValueInt64(),
		PollingInterval:             sm.PollingInterval.ValueString(), ScaleDownDelay: sm.ScaleDownDelay.ValueString(),
		ScaleToZeroDelay: sm.ScaleToZeroDelay.ValueString(),
	}, diags
}

// defaultProbe is a probe when the configuration leaves it out.
func defaultProbe() types.Object {
	v, _ := probeObject(probeWith(func(*api.Probe) {}))
	return v
}

func probeObject(p api.Probe) (types.Object, diag.Diagnostics) {
	return types.ObjectValue(probeAttrTypes, map[string]attr.Value{
		"path":              types.StringValue(p.Path),
		"initial_delay":     types.StringValue(p.InitialDelay),
		"period":            types.StringValue(p.Period),
		"timeout":           types.StringValue(p.Timeout),
		"success_threshold": types.Int64Value(p.SuccessThreshold),
		"failure_threshold": types.Int64Value(p.FailureThreshold),
	})
}

// deploymentModels returns deployments as Go values.
func (m *onlineEndpointModel) deploymentModels(ctx context.Context) (map[string]deploymentModel, diag.Diagnostics) {
	out := map[string]deploymentModel{}
	diags := m.Deployments.ElementsAs(ctx, &out, false)
	return out, diags
}

// uploadFunc uploads a code directory's snapshot and returns its ID.
type uploadFunc func(ctx context.Context, dir string) (string, error)

// uploader uploads snapshots into workspace.
func (r *onlineEndpointResource) uploader(workspace string) uploadFunc {
	return func(ctx context.Context, dir string) (string, error) {
		archive, _, err := packCode(dir, true)
		if err != nil {
			return "", err
		}
		return r.client.PutSnapshot(ctx, workspace, archive)
	}
}

// packCode packs a code directory as jobs' code is packed, and returns the archive (when
// keep) and its content hash, which is the snapshot ID the engine gives it.
func packCode(dir string, keep bool) ([]byte, string, error) {
	var buf bytes.Buffer
	w := io.Discard
	if keep {
		w = &buf
	}
	m, err := snapshot.Pack(dir, w, snapshot.DefaultLimits)
	if err != nil {
		return nil, "", err
	}
	return buf.Bytes(), m.SHA256, nil
}

// plannedSnapshotID is a deployment's code_snapshot_id (what is "code") or model_digest
// (what is "model") as planned: the hash of the directory's snapshot, unknown while the
// directory is, null without one.
func plannedSnapshotID(dir types.String, at path.Path, what string) (types.String, diag.Diagnostics) {
	var diags diag.Diagnostics
	switch {
	case dir.IsUnknown():
		return types.StringUnknown(), nil
	case dir.IsNull():
		return types.StringNull(), nil
	}
	_, id, err := packCode(dir.ValueString(), false)
	if err != nil {
		diags.AddAttributeError(at, "Cannot Snapshot "+strings.ToUpper(what[:1])+what[1:], fmt.Sprintf("The provider "+
			"could not snapshot the %s directory %q.\n\nCheck that the directory exists and that it fits the snapshot "+
			"limits (300 MiB, 2000 files; leave large files out with .amlignore or .gitignore).\n\nError: %s",
			what, dir.ValueString(), err))
		return types.StringUnknown(), diags
	}
	return types.StringValue(id), diags
}

// uploadDir uploads a deployment's code or model directory and checks that it is the
// snapshot the plan hashed (planned); it returns the snapshot's ID.
func uploadDir(ctx context.Context, upload uploadFunc, dir, planned string, at path.Path, what string, diags *diag.Diagnostics) string {
	id, err := upload(ctx, dir)
	title := strings.ToUpper(what[:1]) + what[1:]
	switch {
	case err != nil:
		diags.AddAttributeError(at, "Cannot Upload "+title, fmt.Sprintf("The provider could not "+
			"upload the %s directory %q to the engine.\n\nError: %s", what, dir, err))
	case id != planned:
		diags.AddAttributeError(at, title+" Changed After Plan", fmt.Sprintf("The %s "+
			"directory %q changed between plan and apply (its snapshot was %s, it is now %s).\n\nRun plan "+
			"again, so that the plan shows the %s it rolls out.", what, dir, planned, id, what))
	}
	return id
}

// toAPI returns the planned endpoint for the engine, uploading each deployment's code and
// checking that it is the code the plan hashed.
func (m *onlineEndpointModel) toAPI(ctx context.Context, upload uploadFunc) (api.EndpointUpdate, diag.Diagnostics) {
	upd := api.EndpointUpdate{
		AuthMode:    m.AuthMode.ValueString(),
		Description: m.Description.ValueString(),
		Deployments: map[string]api.DeploymentSpec{},
	}
	diags := m.Tags.ElementsAs(ctx, &upd.Tags, false)
	diags.Append(m.Traffic.ElementsAs(ctx, &upd.Traffic, false)...)
	diags.Append(m.MirrorTraffic.ElementsAs(ctx, &upd.MirrorTraffic, false)...)
	deployments, d := m.deploymentModels(ctx)
	diags.Append(d...)
	if diags.HasError() {
		return upd, diags
	}
	for name, dm := range deployments {
		at := path.Root("deployments").AtMapKey(name)
		spec, d := dm.toAPI(ctx)
		diags.Append(d...)
		if !dm.CodePath.IsNull() {
			spec.SnapshotID = uploadDir(ctx, upload, dm.CodePath.ValueString(), dm.CodeSnapshotID.ValueString(),
				at.AtName("code_path"), "code", &diags)
		}
		if !dm.ModelPath.IsNull() && !strings.HasPrefix(dm.ModelPath.ValueString(), "azureml:") {
			spec.ModelSnapshotID = uploadDir(ctx, upload, dm.ModelPath.ValueString(), dm.ModelDigest.ValueString(),
				at.AtName("model_path"), "model", &diags)
		}
		upd.Deployments[name] = spec
	}
	return upd, diags
}

// toAPI returns one deployment for the engine, without its snapshot.
func (d deploymentModel) toAPI(ctx context.Context) (api.DeploymentSpec, diag.Diagnostics) {
	spec := api.DeploymentSpec{
		InstanceType:  d.InstanceType.ValueString(),
		InstanceCount: d.InstanceCount.ValueInt64(),
		CodePath:      d.CodePath.ValueString(),
		ModelPath:     d.ModelPath.ValueString(),
		EnvironmentID: d.EnvironmentID.ValueString(),
	}
	diags := d.Command.ElementsAs(ctx, &spec.Command, false)
	diags.Append(d.EnvironmentVariables.ElementsAs(ctx, &spec.EnvironmentVariables, false)...)
	var rs requestSettingsModel
	diags.Append(d.RequestSettings.As(ctx, &rs, basetypes.ObjectAsOptions{})...)
	spec.RequestSettings = &api.RequestSettings{
		RequestTimeoutMS:                 rs.RequestTimeoutMS.ValueInt64(),
		MaxConcurrentRequestsPerInstance: rs.MaxConcurrentRequestsPerInstance.ValueInt64(),
		MaxQueueWaitMS:                   rs.MaxQueueWaitMS.ValueInt64(),
	}
	var d2 diag.Diagnostics
	spec.ScaleSettings, d2 = d.scaleSettings(ctx)
	diags.Append(d2...)
	for _, p := range []struct {
		obj types.Object
		out **api.Probe
	}{{d.LivenessProbe, &spec.LivenessProbe}, {d.ReadinessProbe, &spec.ReadinessProbe}} {
		var pm probeModel
		diags.Append(p.obj.As(ctx, &pm, basetypes.ObjectAsOptions{})...)
		*p.out = &api.Probe{
			Path: pm.Path.ValueString(), InitialDelay: pm.InitialDelay.ValueString(), Period: pm.Period.ValueString(),
			Timeout: pm.Timeout.ValueString(), SuccessThreshold: pm.SuccessThreshold.ValueInt64(),
			FailureThreshold: pm.FailureThreshold.ValueInt64(),
		}
	}
	return spec, diags
}

// fromAPI sets every attribute the engine holds to the engine's value, so that state is
// exactly what the engine has and drift shows in the next plan. Instance types keep the
// configured spelling of the same size; keys are set by the caller.
func (m *onlineEndpointModel) fromAPI(ctx context.Context, e *api.Endpoint) diag.Diagnostics {
	var diags, d diag.Diagnostics
	prior := map[string]deploymentModel{}
	if !m.Deployments.IsNull() && !m.Deployments.IsUnknown() {
		diags.Append(m.Deployments.ElementsAs(ctx, &prior, false)...)
	}
	m.ID = types.StringValue(e.ID)
	m.Name = types.StringValue(e.Name)
	m.WorkspaceID = types.StringValue(api.WorkspaceID(e.Workspace))
	m.AuthMode = types.StringValue(e.AuthMode)
	m.Description = types.StringValue(e.Description)
	m.Tags, d = types.MapValueFrom(ctx, types.StringType, nonNilMap(e.Tags))
	diags.Append(d...)
	m.Traffic, d = types.MapValueFrom(ctx, types.Int64Type, nonNilMap(e.Traffic))
	diags.Append(d...)
	m.MirrorTraffic, d = types.MapValueFrom(ctx, types.Int64Type, nonNilMap(e.MirrorTraffic))
	diags.Append(d...)

	deployments := map[string]attr.Value{}
	for name, dep := range e.Deployments {
		obj, d := deploymentFromAPI(ctx, dep.DeploymentSpec, prior[name].InstanceType)
		diags.Append(d...)
		deployments[name] = obj
	}
	m.Deployments, d = types.MapValue(deploymentObjectType, deployments)
	diags.Append(d...)
	m.ScoringURI = types.StringValue(e.ScoringURI)
	m.ProvisioningState = types.StringValue(e.ProvisioningState)
	m.CreatedOn = types.StringValue(e.CreatedOn.UTC().Format(time.RFC3339))
	return diags
}

// deploymentFromAPI is one deployment as state holds it. An empty code path or snapshot
// is null, as the configuration leaves them out.
func deploymentFromAPI(ctx context.Context, s api.DeploymentSpec, configuredType types.String) (types.Object, diag.Diagnostics) {
	var diags diag.Diagnostics
	orNull := func(s string) types.String {
		if s == "" {
			return types.StringNull()
		}
		return types.StringValue(s)
	}
	command, d := types.ListValueFrom(ctx, types.StringType, s.Command)
	diags.Append(d...)
	env, d := types.MapValueFrom(ctx, types.StringType, nonNilMap(s.EnvironmentVariables))
	diags.Append(d...)
	// The engine fills every default; an endpoint of an older engine reads as the defaults.
	validation.DefaultDeployment(&s)
	rs := *s.RequestSettings
	requestSettings, d := types.ObjectValue(requestSettingsAttrTypes, map[string]attr.Value{
		"request_timeout_ms":                   types.Int64Value(rs.RequestTimeoutMS),
		"max_concurrent_requests_per_instance": types.Int64Value(rs.MaxConcurrentRequestsPerInstance),
		"max_queue_wait_ms":                    types.Int64Value(rs.MaxQueueWaitMS),
	})
	diags.Append(d...)
	scaleSettings, d := scaleSettingsObject(*s.ScaleSettings)
	diags.Append(d...)
	probe := func(p *api.Probe) types.Object {
		if p == nil {
			return defaultProbe()
		}
		obj, d := probeObject(*p)
		diags.Append(d...)
		return obj
	}
	obj, d := types.ObjectValue(deploymentAttrTypes, map[string]attr.Value{
		"instance_type":         keepSpelling(configuredType, s.InstanceType),
		"instance_count":        types.Int64Value(s.InstanceCount),
		"code_path":             orNull(s.CodePath),
		"code_snapshot_id":      orNull(s.SnapshotID),
		"model_path":            orNull(s.ModelPath),
		"model_digest":          orNull(s.ModelSnapshotID + s.ModelDigest),
		"command":               command,
		"environment_id":        orNull(s.EnvironmentID),
		"environment_variables": env,
		"request_settings":      requestSettings,
		"scale_settings":        scaleSettings,
		"liveness_probe":        probe(s.LivenessProbe),
		"readiness_probe":       probe(s.ReadinessProbe),
	})
	diags.Append(d...)
	return obj, diags
}

// readBack sets m from the engine's endpoint and its keys.
func (r *onlineEndpointResource) readBack(ctx context.Context, m *onlineEndpointModel, e *api.Endpoint) diag.Diagnostics {
	diags := m.fromAPI(ctx, e)
	keys, err := r.client.GetEndpointKeys(ctx, e.Workspace, e.Name)
	if err != nil {
		addEngineError(&diags, nil, "Cannot Read Online Endpoint Keys",
			fmt.Sprintf("read the keys of online endpoint %q in workspace %q", e.Name, e.Workspace), err)
		return diags
	}
	m.PrimaryKey = types.StringValue(keys.PrimaryKey)
	m.SecondaryKey = types.StringValue(keys.SecondaryKey)
	return diags
}

// Polling bounds of settle: the first poll comes soon, later ones back off.
const (
	endpointPollFirst = 100 * time.Millisecond
	endpointPollMax   = 500 * time.Millisecond
)

// settle waits until the engine has finished rolling the endpoint out (provisioning_state
// is no longer Creating or Updating), then records what it holds in state. A Failed
// endpoint is recorded too, with an error that gives the engine's account: after a failed
// create Terraform then holds the endpoint as tainted and replaces it at the next apply.
func (r *onlineEndpointResource) settle(ctx context.Context, m *onlineEndpointModel, e *api.Endpoint, state *tfsdk.State, diags *diag.Diagnostics, operation, action string, timeout time.Duration) {
	delay := endpointPollFirst
	var err error
	for e.ProvisioningState == api.ProvisioningCreating || e.ProvisioningState == api.ProvisioningUpdating {
		tflog.Trace(ctx, "waiting for online endpoint", map[string]any{"endpoint": e.ID, "state": e.ProvisioningState})
		timer := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			timer.Stop()
			err = ctx.Err()
		case <-timer.C:
		}
		if err != nil {
			break
		}
		delay = min(2*delay, endpointPollMax)
		var next *api.Endpoint
		if next, err = r.client.GetEndpoint(ctx, e.Workspace, e.Name); err != nil {
			break
		}
		e = next
	}
	// Record the endpoint as the engine last had it, whatever happened: it exists.
	keysCtx := context.WithoutCancel(ctx)
	diags.Append(r.readBack(keysCtx, m, e)...)
	diags.Append(state.Set(ctx, m)...)
	title := "Online Endpoint " + map[string]string{"create": "Create", "update": "Update"}[operation]
	switch {
	case err != nil:
		if !addTimeoutError(ctx, diags, title+" Timed Out", operation, action+" and roll it out", timeout, err) {
			addEngineError(diags, nil, "Cannot Read Online Endpoint", action, err)
		}
	case e.ProvisioningState == api.ProvisioningFailed:
		diags.AddAttributeError(path.Root("deployments"), title+" Failed", fmt.Sprintf("The engine could not roll out "+
			"online endpoint %s: a deployment's instances did not become ready.\n\nCheck the deployment's command and "+
			"readiness_probe; 'mlcompute endpoint show' lists each instance's state and restarts.\n\nEngine: %s", e.ID, e.Error))
	}
}
