package provider

import (
	"context"
	"maps"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/mapdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/validation"
)

// The kubernetes block of mlcompute_attached_compute: an attached Kubernetes cluster.

var (
	podResourcesAttrTypes = map[string]attr.Type{
		"requests": types.MapType{ElemType: types.StringType},
		"limits":   types.MapType{ElemType: types.StringType},
	}
	instanceTypeAttrTypes = map[string]attr.Type{
		"node_selector": types.MapType{ElemType: types.StringType},
		"resources":     types.ObjectType{AttrTypes: podResourcesAttrTypes},
	}
	kubernetesAttrTypes = map[string]attr.Type{
		"kubeconfig": types.StringType, "context": types.StringType, "namespace": types.StringType, "image": types.StringType,
		"instance_types":        types.MapType{ElemType: types.ObjectType{AttrTypes: instanceTypeAttrTypes}},
		"default_instance_type": types.StringType,
	}
)

// kubernetesModel is kubernetes.
type kubernetesModel struct {
	Kubeconfig          types.String `tfsdk:"kubeconfig"`
	Context             types.String `tfsdk:"context"`
	Namespace           types.String `tfsdk:"namespace"`
	Image               types.String `tfsdk:"image"`
	InstanceTypes       types.Map    `tfsdk:"instance_types"`
	DefaultInstanceType types.String `tfsdk:"default_instance_type"`
}

type instanceTypeModel struct {
	NodeSelector types.Map    `tfsdk:"node_selector"`
	Resources    types.Object `tfsdk:"resources"`
}

type podResourcesModel struct {
	Requests types.Map `tfsdk:"requests"`
	Limits   types.Map `tfsdk:"limits"`
}

// defaultInstanceTypes is instance_types when the configuration sets none: Azure's one.
func defaultInstanceTypes() types.Map {
	m, _ := instanceTypesValue(context.Background(), map[string]api.InstanceType{api.DefaultInstanceTypeName: api.DefaultInstanceType()}, types.MapNull(types.ObjectType{AttrTypes: instanceTypeAttrTypes}))
	return m
}

func kubernetesSchema() schema.SingleNestedAttribute {
	quantities := func(what string) schema.MapAttribute {
		return schema.MapAttribute{
			MarkdownDescription: "What each pod " + what + ", by resource name (`cpu`, `memory`, `nvidia.com/gpu`, ...), " +
				"in Kubernetes' quantity syntax (`500m`, `2`, `4Gi`).",
			ElementType: types.StringType,
			Optional:    true,
		}
	}
	return schema.SingleNestedAttribute{
		MarkdownDescription: "A Kubernetes cluster whose pods run the jobs, as Azure Machine Learning's Kubernetes " +
			"compute. On create (and when `kubeconfig`, `context`, `namespace` or `instance_types` change) the engine " +
			"checks that the API answers to the credentials, that the namespace exists and that the credentials may " +
			"create, get, list, watch and delete pods and create `pods/exec` there (a SelfSubjectAccessReview), and " +
			"reads the capacity of the nodes the instance types can use. A job on it (`mlcompute job submit --compute " +
			"NAME [--instance-type TYPE] --instance-count N`) runs as N pods of the instance type, one per rank, " +
			"deleted when the job ends: the cluster holds no pod while idle. Every setting can change in place; jobs " +
			"already running keep the settings they started with. Set exactly one of `virtual_machine` and `kubernetes`.",
		Optional: true,
		Attributes: map[string]schema.Attribute{
			"kubeconfig": schema.StringAttribute{
				MarkdownDescription: "The content of a kubeconfig file, for example `file(\"~/.kube/config\")`. Sensitive: " +
					"the engine keeps it in its store and never returns it, so an import cannot read it back. A new " +
					"one (a rotated token) is checked against the cluster before it replaces the old one.",
				Required:  true,
				Sensitive: true,
			},
			"context": schema.StringAttribute{
				MarkdownDescription: "The kubeconfig context to use (default: the kubeconfig's `current-context`).",
				Optional:            true,
			},
			"namespace": schema.StringAttribute{
				MarkdownDescription: "The namespace job pods run in; it must exist (default: `\"default\"`).",
				Optional:            true,
				Computed:            true,
				Default:             stringdefault.StaticString(api.DefaultKubeNamespace),
			},
			"image": schema.StringAttribute{
				MarkdownDescription: "The image job pods run; it needs `/bin/sh`, `setsid` (util-linux) and `tar` (and `python3` for " +
					"environments). When " +
					"not set, the engine's default image (`MLCOMPUTE_KUBE_IMAGE` in the engine's environment) is used, " +
					"and the attach fails if the engine has none.",
				Optional: true,
			},
			"instance_types": schema.MapNestedAttribute{
				MarkdownDescription: "The instance types jobs choose from with `--instance-type`, keyed by name (a " +
					"DNS label: lowercase letters, digits and `-`). Each says which nodes its pods may run on " +
					"(`node_selector`, node labels) and what each pod requests and is limited to (`resources`). " +
					"Default: one, `defaultinstancetype`, requesting `cpu = \"100m\"` and `memory = \"2Gi\"`, limited to " +
					"`cpu = \"2\"` and `memory = \"2Gi\"` (Azure's). A job asking for an instance type no node can satisfy " +
					"fails at submission with a message naming it.",
				Optional: true,
				Computed: true,
				Default:  mapdefault.StaticValue(defaultInstanceTypes()),
				NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
					"node_selector": schema.MapAttribute{
						MarkdownDescription: "Node labels a node must have to run the instance type's pods, for example " +
							"`{ \"nvidia.com/gpu.present\" = \"true\" }`.",
						ElementType: types.StringType,
						Optional:    true,
					},
					"resources": schema.SingleNestedAttribute{
						MarkdownDescription: "The pods' `requests` and `limits`. A request may not exceed its limit.",
						Optional:            true,
						Attributes: map[string]schema.Attribute{
							"requests": quantities("requests (what the scheduler reserves on a node)"),
							"limits":   quantities("may use at most (GPUs are asked for as limits)"),
						},
					},
				}},
			},
			"default_instance_type": schema.StringAttribute{
				MarkdownDescription: "The instance type of a job that names none; one of `instance_types` (default: " +
					"`\"defaultinstancetype\"`).",
				Optional: true,
				Computed: true,
				Default:  stringdefault.StaticString(api.DefaultInstanceTypeName),
			},
		},
	}
}

// validateKubernetes checks the kubernetes block at plan time with the engine's rules; a
// part whose value is not known yet is left for apply.
func validateKubernetes(ctx context.Context, config attrGetter, schemaType attr.Type, diags *diag.Diagnostics) {
	var obj types.Object
	diags.Append(config.GetAttribute(ctx, path.Root("kubernetes"), &obj)...)
	if diags.HasError() || obj.IsNull() || obj.IsUnknown() {
		return
	}
	var m kubernetesModel
	diags.Append(obj.As(ctx, &m, basetypes.ObjectAsOptions{UnhandledUnknownAsEmpty: true})...)
	if diags.HasError() {
		return
	}
	report := func(err error) {
		if err == nil {
			return
		}
		p, ok := fieldPath(schemaType, api.FieldOf(err))
		if !ok {
			p = path.Root("kubernetes")
		}
		diags.AddAttributeError(p, "Invalid Kubernetes Settings", err.Error()+".\n\nCorrect the value, then plan again.")
	}
	if !m.Kubeconfig.IsUnknown() && !m.Context.IsUnknown() {
		report(validation.Kubeconfig(m.Kubeconfig.ValueString(), m.Context.ValueString()))
	}
	if m.Namespace.IsUnknown() || m.DefaultInstanceType.IsUnknown() || m.InstanceTypes.IsUnknown() || m.Image.IsUnknown() {
		return
	}
	if !m.InstanceTypes.IsNull() && len(m.InstanceTypes.Elements()) == 0 {
		diags.AddAttributeError(path.Root("kubernetes").AtName("instance_types"), "Invalid Kubernetes Settings",
			"kubernetes.instance_types is empty, so jobs would have no instance type to run as.\n\nDeclare at least one, "+
				"or leave instance_types out for the default one (defaultinstancetype: requests cpu 100m and memory 2Gi, "+
				"limits cpu 2 and memory 2Gi).")
		return
	}
	k, d := m.spec(ctx)
	if d.HasError() {
		return // an unknown value inside instance_types
	}
	report(validation.KubernetesSettings(k))
}

// attrGetter is the part of tfsdk.Config that validateKubernetes reads.
type attrGetter interface {
	GetAttribute(ctx context.Context, p path.Path, target interface{}) diag.Diagnostics
}

// spec is the block as the engine takes it.
func (m kubernetesModel) spec(ctx context.Context) (api.Kubernetes, diag.Diagnostics) {
	var diags diag.Diagnostics
	k := api.Kubernetes{
		Kubeconfig: m.Kubeconfig.ValueString(), Context: m.Context.ValueString(), Namespace: m.Namespace.ValueString(),
		Image: m.Image.ValueString(), DefaultInstanceType: m.DefaultInstanceType.ValueString(),
	}
	if m.InstanceTypes.IsNull() || m.InstanceTypes.IsUnknown() {
		return k, diags
	}
	var types map[string]instanceTypeModel
	diags.Append(m.InstanceTypes.ElementsAs(ctx, &types, false)...)
	k.InstanceTypes = map[string]api.InstanceType{}
	for name, it := range types {
		var out api.InstanceType
		diags.Append(it.NodeSelector.ElementsAs(ctx, &out.NodeSelector, false)...)
		if !it.Resources.IsNull() && !it.Resources.IsUnknown() {
			var r podResourcesModel
			diags.Append(it.Resources.As(ctx, &r, basetypes.ObjectAsOptions{})...)
			out.Resources = &api.PodResources{}
			diags.Append(r.Requests.ElementsAs(ctx, &out.Resources.Requests, false)...)
			diags.Append(r.Limits.ElementsAs(ctx, &out.Resources.Limits, false)...)
		}
		k.InstanceTypes[name] = out
	}
	return k, diags
}

// kubernetesSpec is the planned block for the engine.
func (m *attachedComputeModel) kubernetesSpec(ctx context.Context) (*api.Kubernetes, diag.Diagnostics) {
	var km kubernetesModel
	diags := m.Kubernetes.As(ctx, &km, basetypes.ObjectAsOptions{})
	if diags.HasError() {
		return nil, diags
	}
	k, d := km.spec(ctx)
	diags.Append(d...)
	return &k, diags
}

// kubernetesFromAPI is the block as the engine holds it. The kubeconfig is never returned,
// so it keeps prior's (the plan's, or the state's on refresh; null after an import); an
// empty map the configuration wrote stays empty rather than null.
func kubernetesFromAPI(ctx context.Context, k *api.Kubernetes, prior types.Object) (types.Object, diag.Diagnostics) {
	var diags diag.Diagnostics
	var p kubernetesModel
	if !prior.IsNull() && !prior.IsUnknown() {
		diags.Append(prior.As(ctx, &p, basetypes.ObjectAsOptions{UnhandledUnknownAsEmpty: true})...)
	} else {
		p.Kubeconfig = types.StringNull()
	}
	instanceTypes, d := instanceTypesValue(ctx, k.InstanceTypes, p.InstanceTypes)
	diags.Append(d...)
	out, d := types.ObjectValueFrom(ctx, kubernetesAttrTypes, kubernetesModel{
		Kubeconfig: p.Kubeconfig, Context: optionalString(k.Context), Namespace: types.StringValue(k.Namespace),
		Image: optionalString(k.Image), InstanceTypes: instanceTypes, DefaultInstanceType: types.StringValue(k.DefaultInstanceType),
	})
	diags.Append(d...)
	return out, diags
}

func optionalString(s string) types.String {
	if s == "" {
		return types.StringNull()
	}
	return types.StringValue(s)
}

func instanceTypesValue(ctx context.Context, its map[string]api.InstanceType, prior types.Map) (types.Map, diag.Diagnostics) {
	var diags diag.Diagnostics
	priorTypes := map[string]instanceTypeModel{}
	if !prior.IsNull() && !prior.IsUnknown() {
		diags.Append(prior.ElementsAs(ctx, &priorTypes, false)...)
	}
	out := map[string]instanceTypeModel{}
	for name, it := range its {
		pt, known := priorTypes[name]
		if !known {
			pt = instanceTypeModel{NodeSelector: types.MapNull(types.StringType), Resources: types.ObjectNull(podResourcesAttrTypes)}
		}
		m := instanceTypeModel{NodeSelector: stringMapValue(it.NodeSelector, pt.NodeSelector), Resources: types.ObjectNull(podResourcesAttrTypes)}
		if it.Resources != nil {
			var pr podResourcesModel
			if !pt.Resources.IsNull() && !pt.Resources.IsUnknown() {
				diags.Append(pt.Resources.As(ctx, &pr, basetypes.ObjectAsOptions{UnhandledUnknownAsEmpty: true})...)
			}
			var d diag.Diagnostics
			m.Resources, d = types.ObjectValueFrom(ctx, podResourcesAttrTypes, podResourcesModel{
				Requests: stringMapValue(it.Resources.Requests, pr.Requests), Limits: stringMapValue(it.Resources.Limits, pr.Limits),
			})
			diags.Append(d...)
		}
		out[name] = m
	}
	v, d := types.MapValueFrom(ctx, types.ObjectType{AttrTypes: instanceTypeAttrTypes}, out)
	diags.Append(d...)
	return v, diags
}

// stringMapValue is m as a Terraform map: an empty one is null unless prior was an empty
// map (what the configuration wrote).
func stringMapValue(m map[string]string, prior types.Map) types.Map {
	if len(m) == 0 {
		if !prior.IsNull() && !prior.IsUnknown() && len(prior.Elements()) == 0 {
			return types.MapValueMust(types.StringType, map[string]attr.Value{})
		}
		return types.MapNull(types.StringType)
	}
	elems := make(map[string]attr.Value, len(m))
	for k, v := range maps.All(m) {
		elems[k] = types.StringValue(v)
	}
	return types.MapValueMust(types.StringType, elems)
}

// ModifyPlan shows vcpus and memory_gb as known after apply when the kubernetes block
// changes: the engine reads the capacity of the nodes again.
func (r *attachedComputeResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	reportObjectKeys(ctx, "mlcompute_attached_compute", req, &resp.Diagnostics)
	if req.State.Raw.IsNull() || req.Plan.Raw.IsNull() {
		return
	}
	var planned, prior types.Object
	resp.Diagnostics.Append(req.Plan.GetAttribute(ctx, path.Root("kubernetes"), &planned)...)
	resp.Diagnostics.Append(req.State.GetAttribute(ctx, path.Root("kubernetes"), &prior)...)
	if resp.Diagnostics.HasError() || planned.IsNull() || planned.Equal(prior) {
		return
	}
	resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root("vcpus"), types.Int64Unknown())...)
	resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root("memory_gb"), types.Float64Unknown())...)
}
