package provider

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/mapvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64default"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/mapdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/objectdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/catalog"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/client"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/validation"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/provider/validators"
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
	quotas *quotaCache
}

func (r *onlineEndpointResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_online_endpoint"
}

func (r *onlineEndpointResource) Schema(ctx context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	emptyStringMap := types.MapValueMust(types.StringType, map[string]attr.Value{})
	emptyInt64Map := types.MapValueMust(types.Int64Type, map[string]attr.Value{})
	resp.Schema = schema.Schema{
		MarkdownDescription: "An online endpoint serves a model over HTTP: clients send scoring requests (`POST " +
			"<scoring_uri>`) and one or more deployments answer them. Each deployment runs `instance_count` instances of its " +
			"`command`; the engine's scoring router authenticates every request, splits live traffic between the " +
			"deployments by `traffic`, copies a share to a `mirror_traffic` deployment, and bounds each instance's " +
			"concurrency and each request's time. Changing a deployment rolls it out: the new instances start and " +
			"pass their readiness probe before traffic moves to them, and the old ones finish their requests " +
			"before they stop, so an update drops nothing.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				MarkdownDescription: "The endpoint's ID, `/workspaces/{workspace}/onlineEndpoints/{name}`, which " +
					"`terraform import` takes.",
				Computed:      true,
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"name": nameAttribute(validation.EndpointName, "Invalid Online Endpoint Name", "The endpoint's name, unique across the engine, not only in its workspace",
				"It is part of `scoring_uri`, which is why another workspace cannot use it too. Changing it replaces the endpoint."),
			"workspace_id": workspaceIDAttribute("endpoint"),
			"auth_mode": schema.StringAttribute{
				MarkdownDescription: "How scoring requests authenticate, as `Authorization: Bearer <credential>`: `" +
					api.AuthModeKey + "` takes `primary_key` or `secondary_key`; `" + api.AuthModeAMLToken + "` takes a " +
					"short-lived token from `mlcompute endpoint get-token`. A request without a valid credential gets " +
					"401 and never reaches a deployment. It can be changed in place (default: `" + api.AuthModeKey + "`).",
				Optional:   true,
				Computed:   true,
				Default:    stringdefault.StaticString(api.AuthModeKey),
				Validators: []validator.String{stringvalidator.OneOf(api.AuthModeKey, api.AuthModeAMLToken)},
			},
			"deployments": schema.MapNestedAttribute{
				MarkdownDescription: "The endpoint's deployments, keyed by deployment name (" +
					validation.DeploymentName.Explain + "), for example `{ blue = { ... }, green = { ... } }`. " +
					"Deployments are added, changed and removed in place. A deployment can only be removed when " +
					"no live traffic goes to it any more (it is left out of `traffic`, or set to 0, in the same apply).",
				Required: true,
				Validators: []validator.Map{
					mapvalidator.SizeAtLeast(1),
					mapvalidator.KeysAre(validators.StringFunc("Invalid Deployment Name",
						"the name must be "+validation.DeploymentName.Explain, func(name string) error {
							return validation.DeploymentName.Check("deployments", name)
						})),
				},
				NestedObject: schema.NestedAttributeObject{Attributes: deploymentAttributes(emptyStringMap)},
			},
			"traffic": schema.MapAttribute{
				MarkdownDescription: "The share of live scoring requests, in percent, that goes to each deployment, for " +
					"example `{ blue = 80, green = 20 }`. Every key must be a deployment of this endpoint and the " +
					"values must sum to 100, or to 0 for an endpoint that takes no live traffic yet (a request can " +
					"still pin a deployment with the `azureml-model-deployment` header). It changes in place " +
					"without restarting anything; the router switches to the new split once every deployment it " +
					"sends requests to has rolled out, and the apply waits for that (default: `{}`).",
				ElementType: types.Int64Type,
				Optional:    true,
				Computed:    true,
				Default:     mapdefault.StaticValue(emptyInt64Map),
			},
			"mirror_traffic": schema.MapAttribute{
				MarkdownDescription: "A deployment that receives copies of live requests, and the percent of them it " +
					"receives (at most 50), for example `{ green = 10 }`: at most one deployment, and not one that " +
					"has live traffic. Copies are sent after the live request found an instance; their responses are " +
					"discarded and never delay the client. It can be changed in place (default: `{}`).",
				ElementType: types.Int64Type,
				Optional:    true,
				Computed:    true,
				Default:     mapdefault.StaticValue(emptyInt64Map),
			},
			"description": schema.StringAttribute{
				MarkdownDescription: "A description of the endpoint. It can be changed in place (default: `\"\"`).",
				Optional:            true,
				Computed:            true,
				Default:             stringdefault.StaticString(""),
			},
			"tags": schema.MapAttribute{
				MarkdownDescription: "Tags of the endpoint, as a map of strings. They can be changed in place. " +
					"Leaving `tags` out and setting it to `{}` mean the same: no tags (default: `{}`).",
				ElementType: types.StringType,
				Optional:    true,
				Computed:    true,
				Default:     mapdefault.StaticValue(emptyStringMap),
			},
			"scoring_uri": schema.StringAttribute{
				MarkdownDescription: "Where clients send scoring requests, `http://HOST:PORT/{name}/score`. The " +
					"engine's scoring listener keeps its port across restarts, so the URI never changes.",
				Computed:      true,
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"primary_key": schema.StringAttribute{
				MarkdownDescription: "The endpoint's primary key, for `auth_mode = \"" + api.AuthModeKey + "\"`. " +
					"`mlcompute endpoint regenerate-keys` replaces it; the next refresh reads the new one.",
				Computed:      true,
				Sensitive:     true,
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"secondary_key": schema.StringAttribute{
				MarkdownDescription: "The endpoint's secondary key: rotate clients onto it, then regenerate the " +
					"primary key, and the other way round.",
				Computed:      true,
				Sensitive:     true,
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"provisioning_state": schema.StringAttribute{
				MarkdownDescription: "The endpoint's state when Terraform last read it: `" + strings.Join([]string{
					api.ProvisioningCreating, api.ProvisioningUpdating, api.ProvisioningSucceeded, api.ProvisioningFailed,
					api.ProvisioningDeleting}, "`, `") + "`. Create and update wait for `" + api.ProvisioningSucceeded +
					"`. It never causes a diff.",
				Computed: true,
			},
			"created_on": schema.StringAttribute{
				MarkdownDescription: "When the engine created the endpoint, in RFC 3339 form (UTC).",
				Computed:            true,
				PlanModifiers:       []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"timeouts": timeoutsAttribute(ctx, "endpoint", defaultEndpointCreateTimeout, defaultEndpointUpdateTimeout, defaultEndpointDeleteTimeout),
		},
	}
}

// deploymentAttributes are the attributes of one deployment.
func deploymentAttributes(emptyStringMap types.Map) map[string]schema.Attribute {
	return map[string]schema.Attribute{
		"instance_type": schema.StringAttribute{
			MarkdownDescription: "The VM size of each instance, for example `Standard_DS3_v2`: a size of the catalog " +
				"that supports `OnlineDeployment` and is not retired. Sizes match case-insensitively.",
			Required: true,
			Validators: []validator.String{
				validators.StringFunc("Invalid Instance Type", "the value must be a catalog size that supports OnlineDeployment", func(s string) error {
					_, err := validation.VMSize("instance_type", s, catalog.OnlineDeployment)
					return err
				}),
			},
		},
		"instance_count": schema.Int64Attribute{
			MarkdownDescription: "How many instances of the deployment run, from 1 to " + fmt.Sprint(validation.MaxInstanceCount) + ". The router spreads the " +
				"deployment's requests over the ready ones (default: `1`). Leave it unset with `scale_settings.type = \"" +
				api.ScaleTypeTargetUtilization + "\"`, where the autoscaler decides the count (the state then holds the default, which is ignored).",
			Optional:   true,
			Computed:   true,
			Default:    int64default.StaticInt64(1),
			Validators: []validator.Int64{int64validator.Between(1, validation.MaxInstanceCount)},
		},
		"code_path": schema.StringAttribute{
			MarkdownDescription: "A directory whose contents each instance starts in, usually " +
				"`\"${path.module}/scorer\"`. It is snapshotted as jobs' code is (honouring `.amlignore`, else " +
				"`.gitignore`; at most 300 MB and 2000 files) and its hash is `code_snapshot_id`, so editing a file " +
				"plans a rollout. Leave it unset for a command that needs no code.",
			Optional: true,
		},
		"code_snapshot_id": schema.StringAttribute{
			MarkdownDescription: "The content hash of `code_path`'s snapshot (its files, modes and modification " +
				"times), computed at plan time. A change rolls the deployment out.",
			Computed: true,
		},
		"command": schema.ListAttribute{
			MarkdownDescription: "The command each instance runs, as a list of arguments, for example " +
				"`[\"python3\", \"score.py\"]`. It runs in the code directory with `PORT` in its environment and " +
				"must serve HTTP on that port: the router forwards `POST /{endpoint}/score` to `POST /score`.",
			ElementType: types.StringType,
			Required:    true,
			Validators:  []validator.List{listvalidator.SizeAtLeast(1)},
		},
		"environment_id": schema.StringAttribute{
			MarkdownDescription: "The `id` of an `mlcompute_environment` of the endpoint's workspace " +
				"(`/workspaces/{workspace}/environments/{name}`) that the command runs in. Each instance prepares it " +
				"on its node before starting the command (a system-managed environment is built once per content hash " +
				"and machine and reused; the build counts against the readiness probe's time) and runs the command with " +
				"the environment's interpreter directory first on `PATH`. An update of the environment (a new " +
				"`content_hash`) rolls the deployment out. Leave it unset to run with the node's own `PATH`.",
			Optional: true,
			Validators: []validator.String{
				validators.StringFunc("Invalid Environment ID", "the value must be an environment ID, /workspaces/{workspace}/environments/{name}", func(s string) error {
					_, err := api.ParseID(s, api.CollectionEnvironments)
					return err
				}),
			},
		},
		"environment_variables": schema.MapAttribute{
			MarkdownDescription: "Environment variables of the command: names of letters, digits and `_`, not " +
				"starting with a digit, and not `PORT`, which the engine sets (default: `{}`).",
			ElementType: types.StringType,
			Optional:    true,
			Computed:    true,
			Default:     mapdefault.StaticValue(emptyStringMap),
			Validators: []validator.Map{
				mapvalidator.KeysAre(validators.StringFunc("Invalid Environment Variable",
					"names must be letters, digits and '_', not starting with a digit, and not PORT", checkEnvironmentVariable)),
			},
		},
		"request_settings": schema.SingleNestedAttribute{
			MarkdownDescription: "Bounds on the requests the router sends to the deployment. They change in place " +
				"without restarting instances.",
			Optional: true,
			Computed: true,
			Default:  objectdefault.StaticValue(defaultRequestSettings()),
			Attributes: map[string]schema.Attribute{
				"request_timeout_ms": schema.Int64Attribute{
					MarkdownDescription: fmt.Sprintf("How long a request may take, in milliseconds, from 1 to %d. "+
						"A request past it is cancelled at the instance and answered 504 (default: `%d`).",
						api.MaxRequestTimeoutMS, api.DefaultRequestTimeoutMS),
					Optional:   true,
					Computed:   true,
					Default:    int64default.StaticInt64(api.DefaultRequestTimeoutMS),
					Validators: []validator.Int64{int64validator.Between(1, api.MaxRequestTimeoutMS)},
				},
				"max_concurrent_requests_per_instance": schema.Int64Attribute{
					MarkdownDescription: fmt.Sprintf("How many requests one instance handles at once, 1 or more. A "+
						"request that finds every instance full is answered 429 (default: `%d`).", api.DefaultMaxConcurrentRequestsPerInstance),
					Optional:   true,
					Computed:   true,
					Default:    int64default.StaticInt64(api.DefaultMaxConcurrentRequestsPerInstance),
					Validators: []validator.Int64{int64validator.AtLeast(1)},
				},
				"max_queue_wait_ms": schema.Int64Attribute{
					MarkdownDescription: fmt.Sprintf("How long a request may wait for an instance, in milliseconds, from 1 to %d. "+
						"It applies only to autoscaled deployments (`scale_settings.type = \"%s\"`): one holds requests while "+
						"every instance is busy or while an instance starts (from zero too), up to this wait, and past it "+
						"they get 429. A deployment with a fixed `instance_count` holds nothing: a request that finds "+
						"every instance busy gets 429 at once (default: `%d`, Azure's, or `%d` for a deployment with "+
						"`scale_settings.type = \"%s\"` and `min_instances = 0`).", api.MaxMaxQueueWaitMS,
						api.ScaleTypeTargetUtilization, api.DefaultMaxQueueWaitMS, api.DefaultMaxQueueWaitFromZeroMS, api.ScaleTypeTargetUtilization),
					Optional:   true,
					Computed:   true,
					Validators: []validator.Int64{int64validator.Between(1, api.MaxMaxQueueWaitMS)},
				},
			},
		},
		"scale_settings": scaleSettingsAttribute(),
		"liveness_probe": probeAttribute("How the engine checks that an instance is alive: after `failure_threshold` " +
			"failed checks in a row it restarts the instance."),
		"readiness_probe": probeAttribute("How the engine checks that an instance can take requests: an instance " +
			"receives traffic only after `success_threshold` good checks in a row, and none after " +
			"`failure_threshold` failed ones. A rollout moves traffic only once the new instances are ready."),
	}
}

// scaleSettingsAttribute is a deployment's scale_settings. Every field changes in place,
// without a rollout.
func scaleSettingsAttribute() schema.SingleNestedAttribute {
	scaleDuration := func(what, def string, lo, hi time.Duration, set func(*api.EndpointScaleSettings, string)) schema.StringAttribute {
		a := schema.StringAttribute{
			MarkdownDescription: fmt.Sprintf("%s, as an ISO 8601 duration from `%s` to `%s`", what,
				validation.FormatDuration(lo), validation.FormatDuration(hi)),
			Optional: true,
			Validators: []validator.String{
				validators.StringFunc("Invalid Scale Duration", "the value must be an ISO 8601 duration such as PT1S or PT5M", func(s string) error {
					v := validation.DefaultScale()
					set(&v, s)
					return validation.EndpointScale("deployment", v)
				}),
			},
		}
		if def != "" {
			a.MarkdownDescription += " (default: `" + def + "`)."
			a.Computed, a.Default = true, stringdefault.StaticString(def)
		} else {
			a.MarkdownDescription += " (default: `scale_down_delay`)."
		}
		return a
	}
	count := func(what string, lo, def int64) schema.Int64Attribute {
		return schema.Int64Attribute{
			MarkdownDescription: fmt.Sprintf("%s, from %d to %d (default: `%d`).", what, lo, validation.MaxInstanceCount, def),
			Optional:            true,
			Computed:            true,
			Default:             int64default.StaticInt64(def),
			Validators:          []validator.Int64{int64validator.Between(lo, validation.MaxInstanceCount)},
		}
	}
	return schema.SingleNestedAttribute{
		MarkdownDescription: "How the deployment's instance count follows its load. `type = \"" + api.ScaleTypeDefault +
			"\"` keeps `instance_count` instances; `type = \"" + api.ScaleTypeTargetUtilization + "\"` scales between " +
			"`min_instances` and `max_instances` from the router's own count of requests in flight, sampled every " +
			"`polling_interval`: up on the average of the last 6 samples, down only once the highest need over " +
			"`scale_down_delay` is more than 10% below the count (so 2 goes down to 1, but 10 does not go down to 9), one step to that need, and to zero (with `min_instances = 0`) after no request at all for " +
			"`scale_to_zero_delay`. From zero the first request starts an instance at once and is held until it is " +
			"ready (`request_settings.max_queue_wait_ms`). Changes apply in place, without a rollout. " +
			"`max_instances` instances count against the workspace's quota (a fixed count: `instance_count`), next to its computes and other endpoints.",
		Optional: true,
		Computed: true,
		Default:  objectdefault.StaticValue(defaultScaleSettings()),
		Attributes: map[string]schema.Attribute{
			"type": schema.StringAttribute{
				MarkdownDescription: "`" + strings.Join(validation.ScaleTypes, "` or `") + "` (default: `" + api.ScaleTypeDefault + "`).",
				Optional:            true,
				Computed:            true,
				Default:             stringdefault.StaticString(api.ScaleTypeDefault),
				Validators:          []validator.String{stringvalidator.OneOf(validation.ScaleTypes...)},
			},
			"min_instances": count("The fewest instances; 0 lets the deployment scale to zero", 0, api.DefaultMinInstances),
			"max_instances": count("The most instances", 1, api.DefaultMaxInstances),
			"target_utilization_percentage": schema.Int64Attribute{
				MarkdownDescription: fmt.Sprintf("The share of `max_concurrent_requests_per_instance` each instance should "+
					"carry, from 1 to 100: the deployment needs ceil(in flight / (max_concurrent_requests_per_instance × "+
					"percent / 100)) instances (default: `%d`).", api.DefaultTargetUtilizationPercentage),
				Optional:   true,
				Computed:   true,
				Default:    int64default.StaticInt64(api.DefaultTargetUtilizationPercentage),
				Validators: []validator.Int64{int64validator.Between(1, 100)},
			},
			"polling_interval": scaleDuration("How often the router's count is sampled and a decision made", api.DefaultEndpointPollingInterval,
				validation.MinEndpointPollingInterval, validation.MaxEndpointPollingInterval, func(v *api.EndpointScaleSettings, s string) { v.PollingInterval = s }),
			"scale_down_delay": scaleDuration("How long the need must stay more than 10% below the count before it goes down", api.DefaultEndpointScaleDownDelay,
				validation.MinScaleDelay, validation.MaxScaleDelay, func(v *api.EndpointScaleSettings, s string) { v.ScaleDownDelay = s }),
			"scale_to_zero_delay": scaleDuration("How long without any request before the last instance stops, with `min_instances = 0`", "",
				validation.MinScaleDelay, validation.MaxScaleDelay, func(v *api.EndpointScaleSettings, s string) { v.ScaleToZeroDelay = s }),
		},
	}
}

// probeAttribute is liveness_probe or readiness_probe. A check is an HTTP GET of path on
// the instance's PORT; any 2xx or 3xx answer within timeout is good.
func probeAttribute(what string) schema.SingleNestedAttribute {
	duration := func(what, def string, set func(*api.Probe, string)) schema.StringAttribute {
		return schema.StringAttribute{
			MarkdownDescription: what + ", as an ISO 8601 duration such as `PT10S` (default: `" + def + "`).",
			Optional:            true,
			Computed:            true,
			Default:             stringdefault.StaticString(def),
			Validators: []validator.String{
				validators.StringFunc("Invalid Probe Duration", "the value must be an ISO 8601 duration such as PT10S", func(s string) error {
					return validation.Probe("probe", probeWith(func(p *api.Probe) { set(p, s) }))
				}),
			},
		}
	}
	threshold := func(what string, def int64) schema.Int64Attribute {
		return schema.Int64Attribute{
			MarkdownDescription: fmt.Sprintf("%s, from 1 to %d (default: `%d`).", what, validation.MaxProbeThreshold, def),
			Optional:            true,
			Computed:            true,
			Default:             int64default.StaticInt64(def),
			Validators:          []validator.Int64{int64validator.Between(1, validation.MaxProbeThreshold)},
		}
	}
	return schema.SingleNestedAttribute{
		MarkdownDescription: what + " A check is an HTTP GET of `path` on the instance's port; a 2xx or 3xx answer " +
			"within `timeout` is good. Probe settings change in place without restarting instances.",
		Optional: true,
		Computed: true,
		Default:  objectdefault.StaticValue(defaultProbe()),
		Attributes: map[string]schema.Attribute{
			"path": schema.StringAttribute{
				MarkdownDescription: "The path checked, starting with `/` (default: `" + api.DefaultProbePath + "`).",
				Optional:            true,
				Computed:            true,
				Default:             stringdefault.StaticString(api.DefaultProbePath),
				Validators: []validator.String{
					validators.StringFunc("Invalid Probe Path", "the path must start with /", func(s string) error {
						return validation.Probe("probe", probeWith(func(p *api.Probe) { p.Path = s }))
					}),
				},
			},
			"initial_delay": duration("How long after an instance starts the first check comes", api.DefaultProbeInitialDelay,
				func(p *api.Probe, s string) { p.InitialDelay = s }),
			"period":            duration("How often the check runs", api.DefaultProbePeriod, func(p *api.Probe, s string) { p.Period = s }),
			"timeout":           duration("How long one check may take", api.DefaultProbeTimeout, func(p *api.Probe, s string) { p.Timeout = s }),
			"success_threshold": threshold("Good checks in a row that make a failing instance good again", api.DefaultProbeSuccessThreshold),
			"failure_threshold": threshold("Failed checks in a row that make an instance fail", api.DefaultProbeFailureThreshold),
		},
	}
}

// probeWith returns the default probe with one setting changed, so that a validator of one
// attribute checks that attribute alone with the engine's own rules.
func probeWith(set func(*api.Probe)) api.Probe {
	p := validation.DefaultProbe()
	set(&p)
	return p
}

// checkEnvironmentVariable checks one name of environment_variables with the engine's
// rules for a deployment (validation.Deployment), given a deployment that is otherwise
// valid, so that only the name can fail.
func checkEnvironmentVariable(name string) error {
	return validation.Deployment("deployment", api.DeploymentSpec{
		InstanceType: "Standard_DS2_v2", InstanceCount: 1, Command: []string{"serve"},
		EnvironmentVariables: map[string]string{name: ""},
	})
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
// set, min_instances <= max_instances (validation.InstanceCountWithScale and
// EndpointScale). The single attributes' own validators check their ranges and syntax.
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
		var err error
		if !typ.IsUnknown() {
			err = validation.InstanceCountWithScale(field, !instanceCount.IsNull(), typ.ValueString())
		}
		if err == nil && !count.IsUnknown() && !maxCount.IsUnknown() {
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

// ModifyPlan computes each deployment's code_snapshot_id from its code_path, so that a
// change to the code shows in the plan as a rollout of that deployment, and the default of
// request_settings.max_queue_wait_ms where it is not configured: it depends on
// scale_settings (validation.DefaultMaxQueueWait). It also checks the deployments against
// the workspace's quota (online_endpoint_quota.go).
func (r *onlineEndpointResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
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
		id, diags := plannedSnapshotID(d.CodePath, p.AtName("code_path"))
		resp.Diagnostics.Append(diags...)
		resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, p.AtName("code_snapshot_id"), id)...)
		planQueueWait(ctx, req, resp, p, d)
	}
	r.planQuota(ctx, req, resp, deployments)
	keepStateWhenUnchanged(ctx, req, resp)
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
	id, err := api.ParseID(req.ID, api.CollectionOnlineEndpoints)
	if err != nil {
		resp.Diagnostics.AddError("Invalid Online Endpoint ID",
			fmt.Sprintf("The import ID %q is not an online endpoint ID.\n\nUse /workspaces/{workspace}/onlineEndpoints/{name}, "+
				"for example: terraform import mlcompute_online_endpoint.example /workspaces/team-a/onlineEndpoints/churn\n\n"+
				"Original error: %s", req.ID, err))
		return
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), id.String())...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("name"), id.Name)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("workspace_id"), api.WorkspaceID(id.Workspace))...)
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
