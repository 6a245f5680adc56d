package provider

// The online endpoint's schema: the endpoint, its deployments, their scale settings and
// probes. The resource's methods are in resource_online_endpoint.go.

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/mapvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64default"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/mapdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/objectdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/catalog"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/validation"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/provider/validators"
)

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
				validators.StringFunc(summaryInstanceType, "the value must be a catalog size that supports OnlineDeployment", func(s string) error {
					_, err := validation.VMSize("instance_type", s, catalog.OnlineDeployment)
					return err
				}),
			},
		},
		"instance_count": schema.Int64Attribute{
			MarkdownDescription: "How many instances of the deployment run, from 1 to " + fmt.Sprint(validation.MaxInstanceCount) + ". The router spreads the " +
				"deployment's requests over the ready ones (default: `1`). With `scale_settings.type = \"" +
				api.ScaleTypeTargetUtilization + "\"` the autoscaler decides the count and `instance_count` is ignored (plan warns when it is set).",
			Optional:   true,
			Computed:   true,
			Default:    int64default.StaticInt64(1),
			Validators: []validator.Int64{int64validator.Between(1, validation.MaxInstanceCount)},
		},
		"code_path": schema.StringAttribute{
			MarkdownDescription: "A directory whose contents each instance starts in, usually " +
				"`\"${path.module}/scorer\"`. It is snapshotted as jobs' code is (honouring `.amlignore`, else " +
				"`.gitignore`; at most 300 MiB and 2000 files) and its hash is `code_snapshot_id`, so editing a file " +
				"plans a rollout. Leave it unset for a command that needs no code.",
			Optional: true,
		},
		"code_snapshot_id": schema.StringAttribute{
			MarkdownDescription: "The content hash of `code_path`'s snapshot (its files, modes and modification " +
				"times), computed at plan time. A change rolls the deployment out.",
			Computed: true,
		},
		"model_path": schema.StringAttribute{
			MarkdownDescription: "The model the deployment serves: a local directory, usually " +
				"`\"${path.module}/model\"` (snapshotted as `code_path` is, honouring `.amlignore`, else " +
				"`.gitignore`; at most 300 MiB and 2000 files), or a Completed job's registered output, " +
				"`azureml://jobs/<job>/outputs/<output>`. Each instance finds a copy of its files in the directory " +
				"named by the environment variable `AZUREML_MODEL_DIR`, as in Azure. An unknown job or output, or " +
				"the output of a job that is not Completed, is a plan error. Leave it unset for a deployment " +
				"without a model.",
			Optional: true,
		},
		"model_digest": schema.StringAttribute{
			MarkdownDescription: "The model's digest, computed at plan time: for a local directory the content " +
				"hash of its snapshot (as `code_snapshot_id` is of the code), for a job's output its manifest " +
				"digest (`sha256:...`, as `mlcompute job show` lists it). Null without `model_path`. A change " +
				"rolls the deployment out.",
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
					MarkdownDescription: fmt.Sprintf("How long a request may wait for an instance, in milliseconds, from 1 to %d "+
						"(default: `%d`, Azure's, or `%d` for a deployment with `scale_settings.type = \"%s\"` and `min_instances = 0`). "+
						"A request that finds every ready instance serving `max_concurrent_requests_per_instance` "+
						"requests, or, in an autoscaled deployment, no instance ready yet (while it starts one, "+
						"from zero too), is held up to this wait for one with room, and past it gets 429 "+
						"with `Retry-After`. At most 2 x `max_concurrent_requests_per_instance` x the instance count "+
						"(`max_instances` when autoscaled) are held at once; one more gets 429 at once. A deployment of a "+
						"fixed count with no ready instance at all answers 503 at once.",
						api.MaxMaxQueueWaitMS, api.DefaultMaxQueueWaitMS, api.DefaultMaxQueueWaitFromZeroMS, api.ScaleTypeTargetUtilization),
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
			"\"` keeps `instance_count` instances; `type = \"" + api.ScaleTypeTargetUtilization + "\"` ignores `instance_count` and scales between " +
			"`min_instances` and `max_instances` from the router's own count of requests in flight, sampled every " +
			"`polling_interval`: up once the average of the last 6 samples needs more than the count serves by over 10%, down only once the highest need over " +
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
