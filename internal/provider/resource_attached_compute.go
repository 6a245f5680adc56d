package provider

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/float64planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64default"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/objectplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/client"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/validation"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/provider/validators"
)

var (
	_ resource.Resource                   = (*attachedComputeResource)(nil)
	_ resource.ResourceWithConfigure      = (*attachedComputeResource)(nil)
	_ resource.ResourceWithImportState    = (*attachedComputeResource)(nil)
	_ resource.ResourceWithValidateConfig = (*attachedComputeResource)(nil)
	_ resource.ResourceWithModifyPlan     = (*attachedComputeResource)(nil)
)

// Default timeouts of the engine calls. Create and a credential rotation connect to the
// machine once (the engine gives up after 30 s); delete kills the jobs the engine started
// there, which may take a task's grace period.
const (
	defaultAttachedCreateTimeout = 5 * time.Minute
	defaultAttachedUpdateTimeout = 5 * time.Minute
	defaultAttachedDeleteTimeout = 10 * time.Minute
)

var attachedKind = computeKind{"attached compute", "Attached Compute", "mlcompute_attached_compute", "gpu-box"}

// NewAttachedComputeResource returns the mlcompute_attached_compute resource.
func NewAttachedComputeResource() resource.Resource {
	return &attachedComputeResource{}
}

// attachedComputeResource manages an attached compute: a Linux machine the user already
// owns, reached over SSH, or a Kubernetes cluster whose pods run jobs. The engine never
// creates, scales or removes the machine or the cluster.
type attachedComputeResource struct {
	client *client.Client
}

func (r *attachedComputeResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_attached_compute"
}

func (r *attachedComputeResource) Schema(ctx context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "An attached compute is a Linux machine you already own, reached over SSH " +
			"(`virtual_machine`), or a Kubernetes cluster (`kubernetes`), on which jobs run (`mlcompute job submit " +
			"--compute NAME`); set exactly one of the two, and switching from one to the other replaces the " +
			"compute. For a machine: on create the engine connects, verifies or pins the " +
			"machine's host key, checks that it runs Linux and reads its vCPUs and memory; an unreachable machine, " +
			"a closed port, rejected credentials or a changed host key fail the apply with a message on the " +
			"attribute to fix, and nothing is recorded. The machine is one node that never scales, so a job on it " +
			"runs with `instance_count = 1`. Deleting the resource detaches the machine: the jobs the engine " +
			"started there are cancelled (their process groups killed), nothing else on the machine is touched, " +
			"and a machine that cannot be reached any more does not block the delete.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				MarkdownDescription: "The attached compute's ID, `/workspaces/{workspace}/computes/{name}`, which " +
					"`terraform import` takes.",
				Computed:      true,
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"name": nameAttribute(validation.ComputeName, "Invalid Compute Name", "The attached compute's name, unique in its workspace",
				"Jobs name their compute by it. Changing it replaces the attached compute."),
			"workspace_id": workspaceIDAttribute("attached compute"),
			"description": schema.StringAttribute{
				MarkdownDescription: "A description of the attached compute. It can be changed in place (default: `\"\"`).",
				Optional:            true,
				Computed:            true,
				Default:             stringdefault.StaticString(""),
			},
			"virtual_machine": schema.SingleNestedAttribute{
				MarkdownDescription: "The machine and how to log in to it over SSH, for example " +
					"`{ address = \"10.0.0.5\", username = \"ml\", private_key = file(\"~/.ssh/id_ed25519\") }`. " +
					"The machine needs `/bin/sh`, `setsid` (util-linux) and `tar`, and `python3` for environments. " +
					"Set exactly one of `password` and `private_key`; either can be changed in place (the engine " +
					"checks the new one against the machine first). Changing `address`, `ssh_port`, `username` or " +
					"`host_key_fingerprint` attaches another machine or login, so it replaces the attached compute.",
				Optional:      true,
				PlanModifiers: []planmodifier.Object{replaceWhenSetOrUnset()},
				Attributes: map[string]schema.Attribute{
					"address": schema.StringAttribute{
						MarkdownDescription: "The machine's host name or IP address, without a port or `user@`.",
						Required:            true,
						PlanModifiers:       []planmodifier.String{stringplanmodifier.RequiresReplace()},
						Validators: []validator.String{
							validators.StringFunc("Invalid Address", "the value must be a host name or an IP address", validation.SSHAddress),
						},
					},
					"ssh_port": schema.Int64Attribute{
						MarkdownDescription: "The machine's SSH port, from 1 to 65535 (default: `22`).",
						Optional:            true,
						Computed:            true,
						Default:             int64default.StaticInt64(api.DefaultSSHPort),
						PlanModifiers:       []planmodifier.Int64{int64planmodifier.RequiresReplace()},
						Validators:          []validator.Int64{int64validator.Between(1, 65535)},
					},
					"username": schema.StringAttribute{
						MarkdownDescription: "The login name jobs run as. Their files live in its home directory, " +
							"under `~/.mlcompute/`.",
						Required:      true,
						PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
						Validators: []validator.String{
							validators.StringFunc("Invalid Username", "the value must be a login name", func(s string) error {
								return validation.VirtualMachine(api.VirtualMachine{Address: "x", Username: s, Password: "x"})
							}),
						},
					},
					"password": schema.StringAttribute{
						MarkdownDescription: "The login's password. Sensitive: the engine keeps it in its store and " +
							"never returns it, so an import cannot read it back.",
						Optional:  true,
						Sensitive: true,
					},
					"private_key": schema.StringAttribute{
						MarkdownDescription: "A private key the login accepts, in PEM form (OpenSSH, PKCS#1, PKCS#8 or " +
							"EC), without a passphrase; for example `file(\"~/.ssh/id_ed25519\")`. Sensitive: the engine " +
							"keeps it in its store and never returns it, so an import cannot read it back.",
						Optional:  true,
						Sensitive: true,
						Validators: []validator.String{
							validators.StringFunc("Invalid Private Key", "the value must be a PEM private key without a passphrase", validation.PrivateKey),
						},
					},
					"host_key_fingerprint": schema.StringAttribute{
						MarkdownDescription: "The machine's host key, as `ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub` " +
							"prints it (`SHA256:` and 43 characters). When set, the engine refuses a machine whose " +
							"key differs; when left out, the first key seen is pinned and shown here, and every later " +
							"connection must present it. A machine whose key changed (reinstalled, or an attacker in " +
							"between) fails with both fingerprints in the message.",
						Optional: true,
						Computed: true,
						PlanModifiers: []planmodifier.String{
							stringplanmodifier.UseStateForUnknown(),
							stringplanmodifier.RequiresReplace(),
						},
						Validators: []validator.String{
							validators.StringFunc("Invalid Host Key Fingerprint", "the value must be an OpenSSH SHA256 fingerprint", validation.HostKeyFingerprint),
						},
					},
				},
			},
			"kubernetes": kubernetesWithReplace(),
			"vcpus": schema.Int64Attribute{
				MarkdownDescription: "The machine's vCPUs (`nproc`), read when it was attached; for a Kubernetes cluster, " +
					"the allocatable CPUs (whole, rounded down) of the nodes its instance types can use, read when it " +
					"was attached or its settings changed (0 when the credentials may not list nodes).",
				Computed:      true,
				PlanModifiers: []planmodifier.Int64{int64planmodifier.UseStateForUnknown()},
			},
			"memory_gb": schema.Float64Attribute{
				MarkdownDescription: "The machine's memory in GiB (`MemTotal` of `/proc/meminfo`, to 0.01), read when " +
					"it was attached; for a Kubernetes cluster, the allocatable memory of the nodes its instance types " +
					"can use.",
				Computed:      true,
				PlanModifiers: []planmodifier.Float64{float64planmodifier.UseStateForUnknown()},
			},
			"created_on": schema.StringAttribute{
				MarkdownDescription: "When the machine was attached, in RFC 3339 form (UTC).",
				Computed:            true,
				PlanModifiers:       []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"timeouts": timeoutsAttribute(ctx, "attached compute", defaultAttachedCreateTimeout, defaultAttachedUpdateTimeout, defaultAttachedDeleteTimeout),
		},
	}
}

func (r *attachedComputeResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.client = clientFrom(req.ProviderData, &resp.Diagnostics)
}

// ValidateConfig requires exactly one of virtual_machine.password and
// virtual_machine.private_key, in one diagnostic on virtual_machine that names both paths
// (the framework's ExactlyOneOf, set on both attributes, says it twice in its own path
// syntax). A value not known yet, such as a file() of a resource's output, is left alone.
func (r *attachedComputeResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var vmObj, kubeObj types.Object
	resp.Diagnostics.Append(req.Config.GetAttribute(ctx, path.Root("virtual_machine"), &vmObj)...)
	resp.Diagnostics.Append(req.Config.GetAttribute(ctx, path.Root("kubernetes"), &kubeObj)...)
	if resp.Diagnostics.HasError() {
		return
	}
	switch {
	case !vmObj.IsNull() && !kubeObj.IsNull():
		resp.Diagnostics.AddAttributeError(path.Root("kubernetes"), "Conflicting Attached Compute Kinds",
			"Both virtual_machine and kubernetes are set, but an attached compute is one machine or one Kubernetes "+
				"cluster.\n\nRemove one of them, and declare another mlcompute_attached_compute for the other.")
		return
	case vmObj.IsNull() && kubeObj.IsNull():
		resp.Diagnostics.AddError("Missing Attached Compute Kind",
			"Neither virtual_machine nor kubernetes is set, so there is nothing to attach.\n\nSet exactly one of "+
				"virtual_machine = { address, username, private_key } and kubernetes = { kubeconfig = file(\"~/.kube/config\") }.")
		return
	case !kubeObj.IsNull():
		validateKubernetes(ctx, req.Config, req.Config.Schema.Type(), &resp.Diagnostics)
		return
	}
	vmPath := path.Root("virtual_machine")
	var password, privateKey types.String
	resp.Diagnostics.Append(req.Config.GetAttribute(ctx, vmPath.AtName("password"), &password)...)
	resp.Diagnostics.Append(req.Config.GetAttribute(ctx, vmPath.AtName("private_key"), &privateKey)...)
	if resp.Diagnostics.HasError() || password.IsUnknown() || privateKey.IsUnknown() {
		return
	}
	var vm types.Object
	resp.Diagnostics.Append(req.Config.GetAttribute(ctx, vmPath, &vm)...)
	if resp.Diagnostics.HasError() || vm.IsNull() || vm.IsUnknown() {
		return
	}
	switch {
	case !password.IsNull() && !privateKey.IsNull():
		resp.Diagnostics.AddAttributeError(vmPath, "Conflicting Credentials",
			"virtual_machine.password and virtual_machine.private_key are both set, but the engine logs in with "+
				"exactly one of them.\n\nRemove one: keep virtual_machine.private_key for key authentication "+
				"(recommended), or virtual_machine.password.")
	case password.IsNull() && privateKey.IsNull():
		resp.Diagnostics.AddAttributeError(vmPath, "Missing Credentials",
			"Neither virtual_machine.password nor virtual_machine.private_key is set, so the engine cannot log "+
				"in to the machine.\n\nSet exactly one of them, for example "+
				"private_key = file(\"~/.ssh/id_ed25519\").")
	}
}

func (r *attachedComputeResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan attachedComputeModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	timeout, diags := plan.Timeouts.Create(ctx, defaultAttachedCreateTimeout)
	resp.Diagnostics.Append(diags...)
	ws, wsErr := api.ParseID(plan.WorkspaceID.ValueString(), "")
	spec := api.ComputeSpec{Name: plan.Name.ValueString(), Type: api.TypeAttached, Description: plan.Description.ValueString()}
	if plan.Kubernetes.IsNull() {
		spec.VirtualMachine, diags = plan.virtualMachine(ctx)
	} else {
		spec.Type = api.TypeKubernetes
		spec.Kubernetes, diags = plan.kubernetesSpec(ctx)
	}
	resp.Diagnostics.Append(diags...)
	if wsErr != nil {
		resp.Diagnostics.AddAttributeError(path.Root("workspace_id"), "Invalid Workspace ID", wsErr.Error())
	}
	if resp.Diagnostics.HasError() {
		return
	}

	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	action := fmt.Sprintf("attach the Kubernetes cluster as %q in workspace %q", spec.Name, ws.Workspace)
	summary := "Cannot Attach Kubernetes Cluster"
	if spec.VirtualMachine != nil {
		action = fmt.Sprintf("attach %s as %q in workspace %q", spec.VirtualMachine.Address, spec.Name, ws.Workspace)
		summary = "Cannot Attach Machine"
	}
	c, err := r.client.CreateCompute(ctx, ws.Workspace, spec)
	if err != nil {
		if mayHaveCreated(ctx, err) {
			trackPossiblyCreated(ctx, &resp.State, &resp.Diagnostics, ws.Workspace, spec.Name, plan.WorkspaceID, plan.Timeouts)
		}
		if !addTimeoutError(ctx, &resp.Diagnostics, "Attached Compute Create Timed Out", "create", action, timeout, err) {
			addEngineError(&resp.Diagnostics, req.Plan.Schema.Type(), summary, action, err)
		}
		return
	}
	tflog.Info(ctx, "attached compute", map[string]any{"compute": c.ID, "type": c.Type})

	resp.Diagnostics.Append(plan.fromAPI(ctx, c)...)
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

func (r *attachedComputeResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state attachedComputeModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	id, ok := stateComputeID(state.ID, &resp.Diagnostics)
	if !ok {
		return
	}

	c, err := r.client.GetCompute(ctx, id.Workspace, id.Name)
	if !readFound(ctx, req, resp, err, "Attached Compute", fmt.Sprintf("attached compute %q in workspace %q", id.Name, id.Workspace)) {
		return
	}
	if (c.Type != api.TypeAttached || c.VirtualMachine == nil) && (c.Type != api.TypeKubernetes || c.Kubernetes == nil) {
		resp.Diagnostics.AddError("Not An Attached Compute",
			fmt.Sprintf("The compute %s is a %s, not an attached compute (%s or %s).\n\nManage it with the resource of its "+
				"type, or import the ID of an attached compute.", id, c.Type, api.TypeAttached, api.TypeKubernetes))
		return
	}

	resp.Diagnostics.Append(state.fromAPI(ctx, c)...)
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

// Update changes the description and rotates the password or private key; every other
// input of virtual_machine replaces the resource. The pinned host key goes with the
// update, so the engine checks the new credential against the same machine.
func (r *attachedComputeResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan attachedComputeModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	timeout, diags := plan.Timeouts.Update(ctx, defaultAttachedUpdateTimeout)
	resp.Diagnostics.Append(diags...)
	id, _ := stateComputeID(plan.ID, &resp.Diagnostics)
	upd := api.ComputeUpdate{Description: plan.Description.ValueString()}
	if plan.Kubernetes.IsNull() {
		upd.VirtualMachine, diags = plan.virtualMachine(ctx)
	} else {
		upd.Kubernetes, diags = plan.kubernetesSpec(ctx)
	}
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}

	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c := updateCompute(ctx, r.client, &resp.Diagnostics, req.Plan.Schema.Type(), attachedKind, id, upd, timeout)
	if c == nil {
		return
	}

	resp.Diagnostics.Append(plan.fromAPI(ctx, c)...)
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

func (r *attachedComputeResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state attachedComputeModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	timeout, diags := state.Timeouts.Delete(ctx, defaultAttachedDeleteTimeout)
	resp.Diagnostics.Append(diags...)
	id, _ := stateComputeID(state.ID, &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}

	deleteCompute(ctx, r.client, &resp.Diagnostics, req.State.Schema.Type(), attachedKind, id, timeout)
}

// ImportState takes a compute ID, /workspaces/{workspace}/computes/{name}; Read fills in
// everything the engine returns. password and private_key are never returned, so they
// stay null until the configuration sets them (an update in place that the engine checks
// against the machine).
func (r *attachedComputeResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	importComputeID(ctx, req, resp, attachedKind)
}

// attachedComputeModel is the mlcompute_attached_compute schema as Go values.
type attachedComputeModel struct {
	ID             types.String   `tfsdk:"id"`
	Name           types.String   `tfsdk:"name"`
	WorkspaceID    types.String   `tfsdk:"workspace_id"`
	Description    types.String   `tfsdk:"description"`
	VirtualMachine types.Object   `tfsdk:"virtual_machine"`
	Kubernetes     types.Object   `tfsdk:"kubernetes"`
	VCPUs          types.Int64    `tfsdk:"vcpus"`
	MemoryGB       types.Float64  `tfsdk:"memory_gb"`
	CreatedOn      types.String   `tfsdk:"created_on"`
	Timeouts       timeouts.Value `tfsdk:"timeouts"`
}

// virtualMachineModel is virtual_machine.
type virtualMachineModel struct {
	Address            types.String `tfsdk:"address"`
	SSHPort            types.Int64  `tfsdk:"ssh_port"`
	Username           types.String `tfsdk:"username"`
	Password           types.String `tfsdk:"password"`
	PrivateKey         types.String `tfsdk:"private_key"`
	HostKeyFingerprint types.String `tfsdk:"host_key_fingerprint"`
}

var virtualMachineAttrTypes = map[string]attr.Type{
	"address": types.StringType, "ssh_port": types.Int64Type, "username": types.StringType,
	"password": types.StringType, "private_key": types.StringType, "host_key_fingerprint": types.StringType,
}

// virtualMachine returns the planned machine for the engine; an unknown host key (to be
// pinned) goes as empty.
func (m *attachedComputeModel) virtualMachine(ctx context.Context) (*api.VirtualMachine, diag.Diagnostics) {
	var vm virtualMachineModel
	diags := m.VirtualMachine.As(ctx, &vm, basetypes.ObjectAsOptions{})
	return &api.VirtualMachine{
		Address: vm.Address.ValueString(), SSHPort: vm.SSHPort.ValueInt64(), Username: vm.Username.ValueString(),
		Password: vm.Password.ValueString(), PrivateKey: vm.PrivateKey.ValueString(),
		HostKeyFingerprint: vm.HostKeyFingerprint.ValueString(),
	}, diags
}

// fromAPI sets every attribute the engine holds to the engine's value. The engine never
// returns password and private_key, so they keep the model's values (the plan's, or the
// state's on refresh; null after an import). timeouts is Terraform's alone.
func (m *attachedComputeModel) fromAPI(ctx context.Context, c *api.Compute) diag.Diagnostics {
	var diags, d diag.Diagnostics
	if k := c.Kubernetes; k != nil {
		m.ID = types.StringValue(c.ID)
		m.Name = types.StringValue(c.Name)
		m.WorkspaceID = types.StringValue(api.WorkspaceID(c.Workspace))
		m.Description = types.StringValue(c.Description)
		m.VirtualMachine = types.ObjectNull(virtualMachineAttrTypes)
		m.Kubernetes, d = kubernetesFromAPI(ctx, k, m.Kubernetes)
		diags.Append(d...)
		m.VCPUs = types.Int64Value(k.VCPUs)
		m.MemoryGB = types.Float64Value(k.MemoryGB)
		m.CreatedOn = types.StringValue(c.CreatedOn.UTC().Format(time.RFC3339))
		return diags
	}
	m.Kubernetes = types.ObjectNull(kubernetesAttrTypes)
	var prior virtualMachineModel
	if !m.VirtualMachine.IsNull() && !m.VirtualMachine.IsUnknown() {
		diags.Append(m.VirtualMachine.As(ctx, &prior, basetypes.ObjectAsOptions{})...)
	} else {
		prior.Password, prior.PrivateKey = types.StringNull(), types.StringNull()
	}
	vm := c.VirtualMachine
	m.ID = types.StringValue(c.ID)
	m.Name = types.StringValue(c.Name)
	m.WorkspaceID = types.StringValue(api.WorkspaceID(c.Workspace))
	m.Description = types.StringValue(c.Description)
	m.VirtualMachine, d = types.ObjectValueFrom(ctx, virtualMachineAttrTypes, virtualMachineModel{
		Address: types.StringValue(vm.Address), SSHPort: types.Int64Value(vm.SSHPort), Username: types.StringValue(vm.Username),
		Password: prior.Password, PrivateKey: prior.PrivateKey, HostKeyFingerprint: types.StringValue(vm.HostKeyFingerprint),
	})
	diags.Append(d...)
	m.VCPUs = types.Int64Value(vm.VCPUs)
	m.MemoryGB = types.Float64Value(vm.MemoryGB)
	m.CreatedOn = types.StringValue(c.CreatedOn.UTC().Format(time.RFC3339))
	return diags
}

// replaceWhenSetOrUnset replaces the attached compute when a block appears or goes: a
// machine and a Kubernetes cluster are different computes.
func replaceWhenSetOrUnset() planmodifier.Object {
	return objectplanmodifier.RequiresReplaceIf(func(_ context.Context, req planmodifier.ObjectRequest, resp *objectplanmodifier.RequiresReplaceIfFuncResponse) {
		resp.RequiresReplace = !req.State.Raw.IsNull() && req.StateValue.IsNull() != req.PlanValue.IsNull()
	}, "Changes between virtual_machine and kubernetes replace the attached compute.",
		"Changes between `virtual_machine` and `kubernetes` replace the attached compute.")
}

// kubernetesWithReplace is the kubernetes attribute, replaced when it appears or goes.
func kubernetesWithReplace() schema.SingleNestedAttribute {
	a := kubernetesSchema()
	a.PlanModifiers = []planmodifier.Object{replaceWhenSetOrUnset()}
	return a
}
