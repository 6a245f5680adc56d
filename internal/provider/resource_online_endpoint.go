package provider

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/client"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/validation"
)

var (
	_ resource.Resource                   = (*onlineEndpointResource)(nil)
	_ resource.ResourceWithConfigure      = (*onlineEndpointResource)(nil)
	_ resource.ResourceWithValidateConfig = (*onlineEndpointResource)(nil)
	_ resource.ResourceWithModifyPlan     = (*onlineEndpointResource)(nil)
	_ resource.ResourceWithImportState    = (*onlineEndpointResource)(nil)
)

// Default timeouts. Create and update wait until every deployment's instances passed their
// readiness probe (the default probe waits 10 s before its first try); delete waits until
// every instance is confirmed stopped.
const (
	defaultEndpointCreateTimeout = 30 * time.Minute
	defaultEndpointUpdateTimeout = 30 * time.Minute
	defaultEndpointDeleteTimeout = 20 * time.Minute
)

// NewOnlineEndpointResource returns the mlcompute_online_endpoint resource.
func NewOnlineEndpointResource() resource.Resource {
	return &onlineEndpointResource{}
}

// onlineEndpointResource manages an online endpoint: deployments of a model server, each
// running instance_count instances, behind the engine's scoring router, which splits live
// traffic between them.
type onlineEndpointResource struct {
	client *client.Client
	quotas *quotaPlans
}

func (r *onlineEndpointResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_online_endpoint"
}

func (r *onlineEndpointResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.client = clientFrom(req.ProviderData, &resp.Diagnostics)
	r.quotas = quotasFrom(req.ProviderData)
}

// ValidateConfig applies the engine's traffic rules (validation.Traffic) at plan time:
// every traffic key a deployment, a sum of 0 or 100, and a mirror to one deployment without
// live traffic. It runs once the deployments' names and both maps are known. It also checks
// that each environment_id is of the endpoint's workspace.
func (r *onlineEndpointResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var deployments, traffic, mirror types.Map
	resp.Diagnostics.Append(req.Config.GetAttribute(ctx, path.Root("deployments"), &deployments)...)
	resp.Diagnostics.Append(req.Config.GetAttribute(ctx, path.Root("traffic"), &traffic)...)
	resp.Diagnostics.Append(req.Config.GetAttribute(ctx, path.Root("mirror_traffic"), &mirror)...)
	if resp.Diagnostics.HasError() || deployments.IsUnknown() || deployments.IsNull() {
		return
	}
	checkDeploymentEnvironments(ctx, req.Config, deployments, &resp.Diagnostics)
	checkDeploymentScale(req.Config.Schema.Type(), deployments, &resp.Diagnostics)
	t, tKnown := knownInt64Map(traffic)
	m, mKnown := knownInt64Map(mirror)
	if !tKnown || !mKnown {
		return
	}
	names := slices.Sorted(maps.Keys(deployments.Elements()))
	if err := validation.Traffic(names, t, m); err != nil {
		if p, ok := fieldPath(req.Config.Schema.Type(), api.FieldOf(err)); ok {
			resp.Diagnostics.AddAttributeError(p, "Invalid Traffic", err.Error())
		} else {
			resp.Diagnostics.AddError("Invalid Traffic", err.Error())
		}
	}
}

// checkDeploymentEnvironments applies validation.DeploymentEnvironment at plan time when
// the workspace and an environment_id are both known: an endpoint runs only in an
// environment of its own workspace.
func checkDeploymentEnvironments(ctx context.Context, config tfsdk.Config, deployments types.Map, diags *diag.Diagnostics) {
	var wsID types.String
	diags.Append(config.GetAttribute(ctx, path.Root("workspace_id"), &wsID)...)
	ws, err := api.ParseID(wsID.ValueString(), "")
	if diags.HasError() || wsID.IsUnknown() || wsID.IsNull() || err != nil {
		return
	}
	for name, v := range deployments.Elements() {
		obj, ok := v.(types.Object)
		if !ok || obj.IsUnknown() || obj.IsNull() {
			continue
		}
		id, ok := obj.Attributes()["environment_id"].(types.String)
		if !ok || id.IsUnknown() || id.IsNull() {
			continue
		}
		if _, err := validation.DeploymentEnvironment("environment_id", ws.Workspace, id.ValueString()); err != nil {
			diags.AddAttributeError(path.Root("deployments").AtMapKey(name).AtName("environment_id"), "Invalid Environment ID",
				fmt.Sprintf("%s.\n\nSet environment_id to the id of an mlcompute_environment whose workspace_id is this endpoint's.", err))
		}
	}
}

// checkDeploymentScale applies the engine's scale rules at plan time to each deployment
// whose scale_settings are known: instance_count and type = target_utilization not both
// set (a warning: validation.InstanceCountIgnored), min_instances <= max_instances
// (validation.EndpointScale). The single attributes' own validators check their ranges and syntax.
func checkDeploymentScale(schemaType attr.Type, deployments types.Map, diags *diag.Diagnostics) {
	for _, name := range slices.Sorted(maps.Keys(deployments.Elements())) {
		obj, ok := deployments.Elements()[name].(types.Object)
		if !ok || obj.IsUnknown() || obj.IsNull() {
			continue
		}
		field := "deployments." + name
		scale, ok := obj.Attributes()["scale_settings"].(types.Object)
		if !ok || scale.IsUnknown() || scale.IsNull() {
			continue
		}
		attrs := scale.Attributes()
		typ, _ := attrs["type"].(types.String)
		count, _ := attrs["min_instances"].(types.Int64)
		maxCount, _ := attrs["max_instances"].(types.Int64)
		instanceCount, _ := obj.Attributes()["instance_count"].(types.Int64)
		if !typ.IsUnknown() {
			if msg := validation.InstanceCountIgnored(!instanceCount.IsNull(), typ.ValueString()); msg != "" {
				if p, ok := fieldPath(schemaType, field+".instance_count"); ok {
					diags.AddAttributeWarning(p, "Instance Count Ignored", msg)
				} else {
					diags.AddWarning("Instance Count Ignored", msg)
				}
			}
		}
		var err error
		if !count.IsUnknown() && !maxCount.IsUnknown() {
			v := validation.DefaultScale()
			if !count.IsNull() {
				v.MinInstances = count.ValueInt64()
			}
			if !maxCount.IsNull() {
				v.MaxInstances = maxCount.ValueInt64()
			}
			if v.MinInstances <= v.MaxInstances {
				continue
			}
			err = validation.EndpointScale(field, v)
		}
		if err == nil {
			continue
		}
		if p, ok := fieldPath(schemaType, api.FieldOf(err)); ok {
			diags.AddAttributeError(p, "Invalid Scale Settings", err.Error())
		} else {
			diags.AddError("Invalid Scale Settings", err.Error())
		}
	}
}

// knownInt64Map returns a map of numbers whose every value is known; a null map is empty.
func knownInt64Map(m types.Map) (map[string]int64, bool) {
	if m.IsUnknown() {
		return nil, false
	}
	out := map[string]int64{}
	for k, v := range m.Elements() {
		n, ok := v.(types.Int64)
		if !ok || n.IsUnknown() {
			return nil, false
		}
		out[k] = n.ValueInt64()
	}
	return out, true
}

// ModifyPlan computes each deployment's code_snapshot_id from its code_path and its
// model_digest from its model_path, so that a change to the code or model shows in the plan as a rollout of that deployment, and the default of
// request_settings.max_queue_wait_ms where it is not configured: it depends on
// scale_settings (validation.DefaultMaxQueueWait). It also checks the deployments against
// the workspace's quota (quota_plan.go).
func (r *onlineEndpointResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	reportObjectKeys(ctx, "mlcompute_online_endpoint", req, &resp.Diagnostics)
	if req.Plan.Raw.IsNull() {
		return // a destroy
	}
	// Only deployments is read, not the whole plan.
	var plan onlineEndpointModel
	resp.Diagnostics.Append(req.Plan.GetAttribute(ctx, path.Root("deployments"), &plan.Deployments)...)
	if resp.Diagnostics.HasError() || plan.Deployments.IsUnknown() {
		return
	}
	deployments, diags := plan.deploymentModels(ctx)
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	for name, d := range deployments {
		p := path.Root("deployments").AtMapKey(name)
		id, diags := plannedSnapshotID(d.CodePath, p.AtName("code_path"), "code")
		resp.Diagnostics.Append(diags...)
		resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, p.AtName("code_snapshot_id"), id)...)
		digest, diags := r.plannedModelDigest(ctx, req, d.ModelPath, p.AtName("model_path"))
		resp.Diagnostics.Append(diags...)
		resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, p.AtName("model_digest"), digest)...)
		planQueueWait(ctx, req, resp, p, d)
	}
	r.planQuota(ctx, req, resp, deployments)
	keepStateWhenUnchanged(ctx, req, resp)
}

// plannedModelDigest is a deployment's model_digest as planned: the hash of a local
// directory's snapshot, or the manifest digest of the registered job output that an
// azureml://jobs/<job>/outputs/<output> model_path names, as the engine answers it
// (unknown while the workspace is, or without an engine to ask). An unknown job or output,
// or a job that is not Completed, is the engine's error naming it.
func (r *onlineEndpointResource) plannedModelDigest(ctx context.Context, req resource.ModifyPlanRequest, modelPath types.String, at path.Path) (types.String, diag.Diagnostics) {
	if modelPath.IsUnknown() || modelPath.IsNull() || !strings.HasPrefix(modelPath.ValueString(), "azureml:") {
		return plannedSnapshotID(modelPath, at, "model")
	}
	var diags diag.Diagnostics
	uri := modelPath.ValueString()
	jobID, output, ok := api.ParseJobOutputURI(uri)
	if !ok {
		diags.AddAttributeError(at, "Invalid Model Path", fmt.Sprintf("%q is not a job's output: the form is "+
			"azureml://jobs/<job>/outputs/<output>; a local model is a directory path.", uri))
		return types.StringUnknown(), diags
	}
	var workspaceID types.String
	diags.Append(req.Plan.GetAttribute(ctx, path.Root("workspace_id"), &workspaceID)...)
	if r.client == nil || diags.HasError() || workspaceID.IsUnknown() || workspaceID.IsNull() {
		return types.StringUnknown(), diags
	}
	id, err := api.ParseID(workspaceID.ValueString(), "")
	if err != nil {
		return types.StringUnknown(), diags // workspace_id's own validator reports it
	}
	// Which outputs are registered and may be served is the engine's rule: its answer
	// names the unknown job or output, or the job that did not complete.
	out, err := r.client.GetJobOutput(ctx, id.Workspace, jobID, output)
	if err != nil {
		diags.AddAttributeError(at, "Cannot Serve Model Path", engineErrorDetail(
			fmt.Sprintf("resolve model_path %s in workspace %q", uri, id.Workspace), err))
		return types.StringUnknown(), diags
	}
	return types.StringValue(out.Digest), diags
}

// keepStateWhenUnchanged plans no change when, once max_queue_wait_ms's default is worked
// out, the plan equals the state but for provisioning_state: the framework marks that
// unknown whenever the proposed plan differs from the state, and the static default of
// request_settings (500 ms) differs for a deployment that scales to zero until ModifyPlan
// sets it.
func keepStateWhenUnchanged(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.State.Raw.IsNull() || resp.Diagnostics.HasError() {
		return
	}
	var state types.String
	if req.State.GetAttribute(ctx, path.Root("provisioning_state"), &state).HasError() {
		return
	}
	candidate := tfsdk.Plan{Schema: resp.Plan.Schema, Raw: resp.Plan.Raw.Copy()}
	if candidate.SetAttribute(ctx, path.Root("provisioning_state"), state).HasError() {
		return
	}
	if candidate.Raw.Equal(req.State.Raw) {
		resp.Plan = candidate
	}
}

// planQueueWait sets a deployment's planned max_queue_wait_ms to its default when the
// configuration leaves it out and the planned scale_settings are known.
func planQueueWait(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse, at path.Path, d deploymentModel) {
	wait := at.AtName("request_settings").AtName("max_queue_wait_ms")
	var configured types.Int64
	if diags := req.Config.GetAttribute(ctx, wait, &configured); diags.HasError() || !configured.IsNull() {
		return // configured (or not readable: the request settings are unknown)
	}
	if d.ScaleSettings.IsUnknown() || d.RequestSettings.IsUnknown() || d.RequestSettings.IsNull() {
		return
	}
	for _, v := range d.ScaleSettings.Attributes() {
		if v.IsUnknown() {
			return
		}
	}
	scale, diags := d.scaleSettings(ctx)
	resp.Diagnostics.Append(diags...)
	resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, wait, types.Int64Value(validation.DefaultMaxQueueWait(scale)))...)
}

func (r *onlineEndpointResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan onlineEndpointModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	timeout, diags := plan.Timeouts.Create(ctx, defaultEndpointCreateTimeout)
	resp.Diagnostics.Append(diags...)
	ws, wsErr := api.ParseID(plan.WorkspaceID.ValueString(), "")
	if wsErr != nil {
		resp.Diagnostics.AddAttributeError(path.Root("workspace_id"), "Invalid Workspace ID", wsErr.Error())
	}
	if resp.Diagnostics.HasError() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	upd, diags := plan.toAPI(ctx, r.uploader(ws.Workspace))
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	spec := api.EndpointSpec{
		Name: plan.Name.ValueString(), AuthMode: upd.AuthMode, Description: upd.Description, Tags: upd.Tags,
		Deployments: upd.Deployments, Traffic: upd.Traffic, MirrorTraffic: upd.MirrorTraffic,
	}
	action := fmt.Sprintf("create online endpoint %q in workspace %q", spec.Name, ws.Workspace)
	e, err := r.client.CreateEndpoint(ctx, ws.Workspace, spec)
	if err != nil {
		if mayHaveCreated(ctx, err) {
			resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), api.EndpointID(ws.Workspace, spec.Name))...)
			resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("name"), spec.Name)...)
			resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("workspace_id"), plan.WorkspaceID)...)
			resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("timeouts"), plan.Timeouts)...)
		}
		if !addTimeoutError(ctx, &resp.Diagnostics, "Online Endpoint Create Timed Out", "create", action, timeout, err) {
			addEngineError(&resp.Diagnostics, req.Plan.Schema.Type(), "Cannot Create Online Endpoint", action, err)
		}
		return
	}
	tflog.Info(ctx, "created online endpoint", map[string]any{"endpoint": e.ID})
	r.settle(ctx, &plan, e, &resp.State, &resp.Diagnostics, "create", action, timeout)
}

func (r *onlineEndpointResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state onlineEndpointModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	id, ok := stateEndpointID(state.ID, &resp.Diagnostics)
	if !ok {
		return
	}
	e, err := r.client.GetEndpoint(ctx, id.Workspace, id.Name)
	if !readFound(ctx, req, resp, err, "Online Endpoint", fmt.Sprintf("online endpoint %q in workspace %q", id.Name, id.Workspace)) {
		return
	}
	resp.Diagnostics.Append(r.readBack(ctx, &state, e)...)
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

func (r *onlineEndpointResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan onlineEndpointModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	timeout, diags := plan.Timeouts.Update(ctx, defaultEndpointUpdateTimeout)
	resp.Diagnostics.Append(diags...)
	id, _ := stateEndpointID(plan.ID, &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	upd, diags := plan.toAPI(ctx, r.uploader(id.Workspace))
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	action := fmt.Sprintf("update online endpoint %q in workspace %q", id.Name, id.Workspace)
	e, err := r.client.UpdateEndpoint(ctx, id.Workspace, id.Name, upd)
	if err != nil {
		if !addTimeoutError(ctx, &resp.Diagnostics, "Online Endpoint Update Timed Out", "update", action, timeout, err) {
			addEngineError(&resp.Diagnostics, req.Plan.Schema.Type(), "Cannot Update Online Endpoint", action, err)
		}
		return
	}
	tflog.Info(ctx, "updated online endpoint", map[string]any{"endpoint": e.ID})
	r.settle(ctx, &plan, e, &resp.State, &resp.Diagnostics, "update", action, timeout)
}

func (r *onlineEndpointResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state onlineEndpointModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	timeout, diags := state.Timeouts.Delete(ctx, defaultEndpointDeleteTimeout)
	resp.Diagnostics.Append(diags...)
	id, _ := stateEndpointID(state.ID, &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	action := fmt.Sprintf("delete online endpoint %q in workspace %q", id.Name, id.Workspace)
	err := r.client.DeleteEndpoint(ctx, id.Workspace, id.Name)
	if api.IsNotFound(err) {
		tflog.Debug(ctx, "online endpoint already gone", map[string]any{"endpoint": id.String()})
		return
	}
	if err != nil {
		if !addTimeoutError(ctx, &resp.Diagnostics, "Online Endpoint Delete Timed Out", "delete", action, timeout, err) {
			addEngineError(&resp.Diagnostics, req.State.Schema.Type(), "Cannot Delete Online Endpoint", action, err)
		}
		return
	}
	tflog.Info(ctx, "deleted online endpoint", map[string]any{"endpoint": id.String()})
}

// ImportState takes an endpoint ID, /workspaces/{workspace}/onlineEndpoints/{name}; Read
// fills in everything else from the engine. timeouts stays null.
func (r *onlineEndpointResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	importWorkspaceObject(ctx, req, resp, workspaceObject{
		collection: api.CollectionOnlineEndpoints, title: "Online Endpoint", noun: "an online endpoint",
		example: "mlcompute_online_endpoint.example", name: "churn",
	})
}

// stateEndpointID parses the endpoint ID held in state.
func stateEndpointID(v types.String, diags *diag.Diagnostics) (api.ID, bool) {
	id, err := api.ParseID(v.ValueString(), api.CollectionOnlineEndpoints)
	if err != nil {
		diags.AddAttributeError(path.Root("id"), "Invalid Online Endpoint ID",
			fmt.Sprintf("The state holds an ID that is not an online endpoint ID.\n\nRemove the resource from state with "+
				"'terraform state rm' and import it by /workspaces/{workspace}/onlineEndpoints/{name}.\n\nOriginal error: %s", err))
		return api.ID{}, false
	}
	return id, true
}
