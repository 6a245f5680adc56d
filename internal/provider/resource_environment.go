package provider

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/objectvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/listdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/client"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/imagearchive"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/snapshot"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/validation"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/jobfile"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/provider/validators"
)

var (
	_ resource.Resource                = (*environmentResource)(nil)
	_ resource.ResourceWithConfigure   = (*environmentResource)(nil)
	_ resource.ResourceWithImportState = (*environmentResource)(nil)
	_ resource.ResourceWithModifyPlan  = (*environmentResource)(nil)
)

// NewEnvironmentResource returns the mlcompute_environment resource.
func NewEnvironmentResource() resource.Resource {
	return &environmentResource{}
}

// environmentResource manages an environment: what a job runs in, built by the engine on
// the nodes that need it (python), the user's own interpreter (user_managed) or an image
// (container).
type environmentResource struct {
	client *client.Client
}

// pythonAttributes are the attributes of a python block: the environment's own, or the one
// a container environment builds on top of its image.
func pythonAttributes() map[string]schema.Attribute {
	emptyList := listdefault.StaticValue(types.ListValueMust(types.StringType, []attr.Value{}))
	return map[string]schema.Attribute{
		"requirements": schema.ListAttribute{
			MarkdownDescription: "pip requirement specifiers, such as `\"numpy==1.26.4\"` or `\"torch>=2,<3\"` " +
				"(a project name, optional extras, version clauses and a marker; pip options and URLs go in " +
				"`find_links` and `index_url`) (default: `[]`).",
			ElementType: types.StringType,
			Optional:    true,
			Computed:    true,
			Default:     emptyList,
			Validators: []validator.List{listvalidator.ValueStringsAre(validators.StringFunc("Invalid Requirement",
				"each value must be a pip requirement specifier", func(s string) error { return validation.Requirement("requirement", s) }))},
		},
		"find_links": schema.ListAttribute{
			MarkdownDescription: "Where pip looks for distributions: absolute directories on the node (a " +
				"local wheel directory) or `http(s)://` and `file://` URLs (default: `[]`).",
			ElementType: types.StringType,
			Optional:    true,
			Computed:    true,
			Default:     emptyList,
			Validators: []validator.List{listvalidator.ValueStringsAre(validators.StringFunc("Invalid Find Links Entry",
				"each value must be an absolute directory or a URL", func(s string) error { return validation.FindLink("find_links", s) }))},
		},
		"index_url": schema.StringAttribute{
			MarkdownDescription: "A package index to use in place of pip's default, such as " +
				"`\"https://pypi.org/simple\"`; empty means pip's default, or none when `find_links` is set " +
				"(default: `\"\"`).",
			Optional: true,
			Computed: true,
			Default:  stringdefault.StaticString(""),
			Validators: []validator.String{validators.StringFunc("Invalid Index URL", "the value must be an http(s) URL",
				func(s string) error {
					if s == "" {
						return nil
					}
					return validation.IndexURL("index_url", s)
				})},
		},
		"python": schema.StringAttribute{
			MarkdownDescription: "The interpreter the virtual environment is made with: a command on the " +
				"node's `PATH` or an absolute path (default: `\"" + api.DefaultPython + "\"`).",
			Optional: true,
			Computed: true,
			Default:  stringdefault.StaticString(api.DefaultPython),
			Validators: []validator.String{validators.StringFunc("Invalid Interpreter", "the value must be a command name or an absolute path",
				func(s string) error { return validation.Interpreter("python", s) })},
		},
	}
}

func (r *environmentResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_environment"
}

func (r *environmentResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	kinds := path.Expressions{path.MatchRoot("python"), path.MatchRoot("user_managed"), path.MatchRoot("container")}
	images := path.Expressions{path.MatchRelative().AtParent().AtName("image"), path.MatchRelative().AtParent().AtName("image_archive")}
	resp.Schema = schema.Schema{
		MarkdownDescription: "An environment is what a job runs in, so the same job moves between compute targets " +
			"unchanged (`mlcompute job submit --compute C --environment NAME`). A `python` environment is " +
			"system-managed: the engine builds a virtual environment from its requirements on each node that needs " +
			"it, once per content hash and machine, and reuses it, so the first job pays the build and later jobs " +
			"start at once; while it builds the job is `Preparing` with reason `building environment`, the build's " +
			"output opens the job's log, and a failed build fails the job with pip's last lines. A `user_managed` " +
			"environment is your own interpreter: nothing is installed, and the engine only checks that it exists on " +
			"the node. Either way the job runs with the interpreter's directory first on `PATH`. A `container` " +
			"environment names an image (`image`, or an archive file, `image_archive`). Set exactly one of " +
			"`python`, `user_managed` and `container`. A change of any is an update in place with a new `content_hash`; jobs " +
			"already submitted keep the environment they were submitted with.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				MarkdownDescription: "The environment's ID, `/workspaces/{workspace}/environments/{name}`, which " +
					"`terraform import` takes.",
				Computed:      true,
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"name": nameAttribute(validation.EnvironmentName, "Invalid Environment Name", "The environment's name, unique in its workspace",
				"Jobs name their environment by it. Changing it replaces the environment."),
			"workspace_id": workspaceIDAttribute("environment"),
			"python": schema.SingleNestedAttribute{
				MarkdownDescription: "A system-managed environment: a virtual environment made with `python -m venv` " +
					"and the requirements installed by pip, in a per-machine cache keyed by the content hash (local " +
					"nodes share the engine's, under its data dir; an attached machine builds its own, under " +
					"`~/.mlcompute/envs`). With `find_links` and no `index_url`, pip runs offline (`--no-index`).",
				Optional:   true,
				Validators: []validator.Object{objectvalidator.ExactlyOneOf(kinds...)},
				Attributes: pythonAttributes(),
			},
			"user_managed": schema.SingleNestedAttribute{
				MarkdownDescription: "Your own interpreter, such as a conda environment's: nothing is installed.",
				Optional:            true,
				Validators:          []validator.Object{objectvalidator.ExactlyOneOf(kinds...)},
				Attributes: map[string]schema.Attribute{
					"interpreter_path": schema.StringAttribute{
						MarkdownDescription: "The interpreter's absolute path on the nodes, such as " +
							"`\"/opt/conda/envs/x/bin/python\"`; a job whose node lacks it fails with a message naming it.",
						Required: true,
						Validators: []validator.String{validators.StringFunc("Invalid Interpreter Path", "the value must be an absolute path",
							func(s string) error { return validation.InterpreterPath("interpreter_path", s) })},
					},
				},
			},
			"container": schema.SingleNestedAttribute{
				MarkdownDescription: "A container environment: jobs and endpoint deployments run in an image. Set exactly " +
					"one of `image` and `image_archive`, and optionally `python`. They run on the engine's local nodes " +
					"when it has a containerd (its default socket, `MLCOMPUTE_CONTAINERD_ADDRESS`, or `mlcompute serve " +
					"--containerd-address`); on the engine's Slurm nodes and attached machines with their own containerd; " +
					"on the engine's own Kubernetes pods (but for sizes with GPUs); and, for jobs, on attached Kubernetes " +
					"clusters as their pods' image. Anywhere else a job or deployment in a container environment is refused at " +
					"submit, naming the environment and why (see the environments guide).",
				Optional:   true,
				Validators: []validator.Object{objectvalidator.ExactlyOneOf(kinds...)},
				Attributes: map[string]schema.Attribute{
					"image": schema.StringAttribute{
						MarkdownDescription: "An image reference, `[registry[:port]/]name[:tag][@sha256:digest]`, such as " +
							"`\"registry.example.com/team/train:1.4\"`. The content hash covers the reference as written: " +
							"pin a digest (`name@sha256:...`) for a hash that follows the image's content.",
						Optional: true,
						Validators: []validator.String{
							stringvalidator.ExactlyOneOf(images...),
							validators.StringFunc("Invalid Image Reference", "the value must be an image reference such as \"registry.example.com/team/train:1.4\"",
								func(s string) error { return validation.ImageReference("image", s) }),
						},
					},
					"image_archive": schema.StringAttribute{
						MarkdownDescription: "The path of an OCI or Docker image archive holding one image (`docker save -o " +
							"image.tar NAME`, `podman save`, `skopeo copy ... oci-archive:image.tar`), plain or gzip-compressed; " +
							"a relative path is read from the directory Terraform runs in. The provider reads it at plan: a " +
							"file that is not such an archive is a plan error, and `image_digest` and `content_hash` follow its " +
							"image, so a new archive at the same path is an update in place. At apply the provider uploads it " +
							"to the engine (at most 300 MiB), refusing an archive that changed since the plan.",
						Optional: true,
						Validators: []validator.String{validators.StringFunc("Invalid Image Archive Path", "the value must be the path of an image archive file",
							func(s string) error { return validation.ImageArchivePath("image_archive", s) })},
					},
					"image_digest": schema.StringAttribute{
						MarkdownDescription: "The digest (`sha256:...`) of the archive's image config, read from the " +
							"archive's manifest at plan; null for `image`.",
						Computed: true,
					},
					"python": schema.SingleNestedAttribute{
						MarkdownDescription: "A system-managed environment to build on top of the image, once per content hash: " +
							"the same attributes as the environment's own `python`. It is built on the node, in a container of the " +
							"image with the image's interpreter (`python3` unless `python` says otherwise), and jobs and deployments " +
							"run in the image with it first on `PATH`. An image without that interpreter fails the job, naming it.",
						Optional:   true,
						Attributes: pythonAttributes(),
					},
				},
			},
			"content_hash": schema.StringAttribute{
				MarkdownDescription: "A hash (hex SHA-256) of the normalised definition: requirements in any order " +
					"or with stray spaces give the same hash, and a change of any input gives a new one (for a container, " +
					"its image reference or its archive's config digest, not the archive's path). Nodes cache builds by it.",
				Computed: true,
			},
			"created_on": schema.StringAttribute{
				MarkdownDescription: "When the environment was created, in RFC 3339 form (UTC).",
				Computed:            true,
				PlanModifiers:       []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
		},
	}
}

// ModifyPlan reports the unknown keys written in the block's inline objects (object_keys.go).
// It also reads container.image_archive: its image's config digest is planned as
// container.image_digest, and a digest other than the state's plans a new content_hash.
func (r *environmentResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	reportObjectKeys(ctx, "mlcompute_environment", req, &resp.Diagnostics)
	if req.Plan.Raw.IsNull() {
		return
	}
	var plan environmentModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() || plan.Container.IsNull() || plan.Container.IsUnknown() {
		return
	}
	var c containerModel
	resp.Diagnostics.Append(plan.Container.As(ctx, &c, basetypes.ObjectAsOptions{})...)
	if resp.Diagnostics.HasError() || c.ImageArchive.IsUnknown() {
		return
	}
	digest := types.StringNull()
	if !c.ImageArchive.IsNull() {
		d, err := archiveDigest(c.ImageArchive.ValueString())
		if err != nil {
			resp.Diagnostics.AddAttributeError(path.Root("container").AtName("image_archive"), "Invalid Image Archive", err.Error())
			return
		}
		digest = types.StringValue(d)
	}
	resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root("container").AtName("image_digest"), digest)...)
	if req.State.Raw.IsNull() {
		return
	}
	var prior types.String
	resp.Diagnostics.Append(req.State.GetAttribute(ctx, path.Root("container").AtName("image_digest"), &prior)...)
	if !prior.Equal(digest) {
		resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root("content_hash"), types.StringUnknown())...)
	}
}

func (r *environmentResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.client = clientFrom(req.ProviderData, &resp.Diagnostics)
}

func (r *environmentResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan environmentModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	ws, err := api.ParseID(plan.WorkspaceID.ValueString(), "")
	if err != nil {
		resp.Diagnostics.AddAttributeError(path.Root("workspace_id"), "Invalid Workspace ID", err.Error())
	}
	spec := api.EnvironmentSpec{Name: plan.Name.ValueString()}
	spec.Python, spec.UserManaged, spec.Container = plan.definition(ctx, &resp.Diagnostics)
	r.uploadArchive(ctx, ws.Workspace, spec.Container, &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}

	env, err := r.client.CreateEnvironment(ctx, ws.Workspace, spec)
	if err != nil {
		addEngineError(&resp.Diagnostics, req.Plan.Schema.Type(), "Cannot Create Environment",
			fmt.Sprintf("create environment %q in workspace %q", spec.Name, ws.Workspace), err)
		return
	}
	tflog.Info(ctx, "created environment", map[string]any{"environment": env.ID, "content_hash": env.ContentHash})

	resp.Diagnostics.Append(plan.fromAPI(env)...)
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

func (r *environmentResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state environmentModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	id, ok := stateEnvironmentID(state.ID, &resp.Diagnostics)
	if !ok {
		return
	}

	env, err := r.client.GetEnvironment(ctx, id.Workspace, id.Name)
	if !readFound(ctx, req, resp, err, "Environment", fmt.Sprintf("environment %q in workspace %q", id.Name, id.Workspace)) {
		return
	}

	resp.Diagnostics.Append(state.fromAPI(env)...)
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

func (r *environmentResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan environmentModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	id, _ := stateEnvironmentID(plan.ID, &resp.Diagnostics)
	var upd api.EnvironmentUpdate
	upd.Python, upd.UserManaged, upd.Container = plan.definition(ctx, &resp.Diagnostics)
	r.uploadArchive(ctx, id.Workspace, upd.Container, &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}

	env, err := r.client.UpdateEnvironment(ctx, id.Workspace, id.Name, upd)
	if err != nil {
		addEngineError(&resp.Diagnostics, req.Plan.Schema.Type(), "Cannot Update Environment",
			fmt.Sprintf("update environment %q in workspace %q", id.Name, id.Workspace), err)
		return
	}

	resp.Diagnostics.Append(plan.fromAPI(env)...)
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

func (r *environmentResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state environmentModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	id, ok := stateEnvironmentID(state.ID, &resp.Diagnostics)
	if !ok {
		return
	}

	err := r.client.DeleteEnvironment(ctx, id.Workspace, id.Name)
	if err != nil && !api.IsNotFound(err) {
		addEngineError(&resp.Diagnostics, req.State.Schema.Type(), "Cannot Delete Environment",
			fmt.Sprintf("delete environment %q in workspace %q", id.Name, id.Workspace), err)
	}
}

func (r *environmentResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	importWorkspaceObject(ctx, req, resp, workspaceObject{
		collection: api.CollectionEnvironments, title: "Environment", noun: "an environment",
		example: "mlcompute_environment.example", name: "train",
	})
}

// stateEnvironmentID parses the ID held in state.
func stateEnvironmentID(v types.String, diags *diag.Diagnostics) (api.ID, bool) {
	id, err := api.ParseID(v.ValueString(), api.CollectionEnvironments)
	if err != nil {
		diags.AddAttributeError(path.Root("id"), "Invalid Environment ID",
			"The environment's ID in state is not /workspaces/{workspace}/environments/{name}.\n\n"+
				"Remove it from state (terraform state rm) and import it again.\n\nOriginal error: "+err.Error())
		return id, false
	}
	return id, true
}

type environmentModel struct {
	ID          types.String `tfsdk:"id"`
	Name        types.String `tfsdk:"name"`
	WorkspaceID types.String `tfsdk:"workspace_id"`
	Python      types.Object `tfsdk:"python"`
	UserManaged types.Object `tfsdk:"user_managed"`
	Container   types.Object `tfsdk:"container"`
	ContentHash types.String `tfsdk:"content_hash"`
	CreatedOn   types.String `tfsdk:"created_on"`
}

type pythonEnvironmentModel struct {
	Requirements []string     `tfsdk:"requirements"`
	FindLinks    []string     `tfsdk:"find_links"`
	IndexURL     types.String `tfsdk:"index_url"`
	Python       types.String `tfsdk:"python"`
}

type userManagedModel struct {
	InterpreterPath types.String `tfsdk:"interpreter_path"`
}

type containerModel struct {
	Image        types.String `tfsdk:"image"`
	ImageArchive types.String `tfsdk:"image_archive"`
	ImageDigest  types.String `tfsdk:"image_digest"`
	Python       types.Object `tfsdk:"python"`
}

var (
	pythonEnvironmentAttrTypes = map[string]attr.Type{
		"requirements": types.ListType{ElemType: types.StringType}, "find_links": types.ListType{ElemType: types.StringType},
		"index_url": types.StringType, "python": types.StringType,
	}
	userManagedAttrTypes = map[string]attr.Type{"interpreter_path": types.StringType}
	containerAttrTypes   = map[string]attr.Type{
		"image": types.StringType, "image_archive": types.StringType, "image_digest": types.StringType,
		"python": types.ObjectType{AttrTypes: pythonEnvironmentAttrTypes},
	}
)

// definition is the planned python, user_managed or container object in the engine's terms.
func (m *environmentModel) definition(ctx context.Context, diags *diag.Diagnostics) (*api.PythonEnvironment, *api.UserManagedEnvironment, *api.ContainerEnvironment) {
	var um *api.UserManagedEnvironment
	var c *api.ContainerEnvironment
	py := pythonDefinition(ctx, m.Python, diags)
	if !m.UserManaged.IsNull() && !m.UserManaged.IsUnknown() {
		var u userManagedModel
		diags.Append(m.UserManaged.As(ctx, &u, basetypes.ObjectAsOptions{})...)
		um = &api.UserManagedEnvironment{InterpreterPath: u.InterpreterPath.ValueString()}
	}
	if !m.Container.IsNull() && !m.Container.IsUnknown() {
		var cm containerModel
		diags.Append(m.Container.As(ctx, &cm, basetypes.ObjectAsOptions{})...)
		c = &api.ContainerEnvironment{Image: cm.Image.ValueString(), ImageArchive: cm.ImageArchive.ValueString(),
			ImageDigest: cm.ImageDigest.ValueString(), Python: pythonDefinition(ctx, cm.Python, diags)}
	}
	return py, um, c
}

// uploadArchive ships an image archive to the engine, which takes it to the nodes from
// there: packed as a snapshot holding api.ImageArchiveFile, whose ID goes in
// c.ImageSnapshot. The archive is read again first. Its digest was planned (or, for a path
// that was unknown at plan because it came from another resource, is read now), and an
// archive that changed since the plan is refused rather than shipped under the planned
// digest.
func (r *environmentResource) uploadArchive(ctx context.Context, workspace string, c *api.ContainerEnvironment, diags *diag.Diagnostics) {
	if c == nil || c.ImageArchive == "" || diags.HasError() {
		return
	}
	attr := path.Root("container").AtName("image_archive")
	digest, err := archiveDigest(c.ImageArchive)
	if err != nil {
		diags.AddAttributeError(attr, "Invalid Image Archive", err.Error())
		return
	}
	if c.ImageDigest != "" && c.ImageDigest != digest {
		diags.AddAttributeError(attr, "Image Archive Changed Since Plan",
			fmt.Sprintf("container.image_archive %q holds image %s now, and the plan was made for %s. Run terraform plan again.", c.ImageArchive, digest, c.ImageDigest))
		return
	}
	c.ImageDigest = digest
	c.ImageSnapshot, err = jobfile.UploadFile(ctx, r.client, workspace, c.ImageArchive, api.ImageArchiveFile)
	if err != nil {
		diags.AddAttributeError(attr, "Cannot Upload Image Archive",
			fmt.Sprintf("uploading container.image_archive %q to the engine: %v. An archive is uploaded as a snapshot, which holds at most %d MiB; "+
				"a larger image is better named by container.image and pulled on the node.", c.ImageArchive, err, snapshot.DefaultLimits.MaxBytes>>20))
		return
	}
	tflog.Info(ctx, "uploaded image archive", map[string]any{"image_archive": c.ImageArchive, "image_digest": digest, "snapshot": c.ImageSnapshot})
}

// archiveDigest reads the config digest of the image archive at file.
func archiveDigest(file string) (string, error) {
	img, err := imagearchive.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("container.image_archive %q cannot be used: %w.\n\nName an OCI or Docker image archive of one image, "+
			"such as one written by docker save -o image.tar NAME or skopeo copy docker://NAME oci-archive:image.tar", file, err)
	}
	return img.ConfigDigest, nil
}

// pythonDefinition is a planned python object in the engine's terms; nil when it is not set.
func pythonDefinition(ctx context.Context, o types.Object, diags *diag.Diagnostics) *api.PythonEnvironment {
	if o.IsNull() || o.IsUnknown() {
		return nil
	}
	var p pythonEnvironmentModel
	diags.Append(o.As(ctx, &p, basetypes.ObjectAsOptions{})...)
	return &api.PythonEnvironment{Requirements: p.Requirements, FindLinks: p.FindLinks, IndexURL: p.IndexURL.ValueString(), Python: p.Python.ValueString()}
}

// fromAPI sets the model from what the engine holds.
func (m *environmentModel) fromAPI(env *api.Environment) diag.Diagnostics {
	var diags diag.Diagnostics
	m.ID = types.StringValue(env.ID)
	m.Name = types.StringValue(env.Name)
	m.WorkspaceID = types.StringValue(api.WorkspaceID(env.Workspace))
	m.ContentHash = types.StringValue(env.ContentHash)
	m.CreatedOn = types.StringValue(env.CreatedOn.UTC().Format(time.RFC3339))
	m.Python = pythonObject(env.Python, &diags)
	m.UserManaged = types.ObjectNull(userManagedAttrTypes)
	m.Container = types.ObjectNull(containerAttrTypes)
	if um := env.UserManaged; um != nil {
		var d diag.Diagnostics
		m.UserManaged, d = types.ObjectValue(userManagedAttrTypes, map[string]attr.Value{"interpreter_path": types.StringValue(um.InterpreterPath)})
		diags.Append(d...)
	}
	if c := env.Container; c != nil {
		var d diag.Diagnostics
		m.Container, d = types.ObjectValue(containerAttrTypes, map[string]attr.Value{
			"image": stringOrNull(c.Image), "image_archive": stringOrNull(c.ImageArchive), "image_digest": stringOrNull(c.ImageDigest),
			"python": pythonObject(c.Python, &diags),
		})
		diags.Append(d...)
	}
	return diags
}

// pythonObject is the python object of py; null when py is nil.
func pythonObject(py *api.PythonEnvironment, diags *diag.Diagnostics) types.Object {
	if py == nil {
		return types.ObjectNull(pythonEnvironmentAttrTypes)
	}
	o, d := types.ObjectValue(pythonEnvironmentAttrTypes, map[string]attr.Value{
		"requirements": stringList(py.Requirements), "find_links": stringList(py.FindLinks),
		"index_url": types.StringValue(py.IndexURL), "python": types.StringValue(py.Python),
	})
	diags.Append(d...)
	return o
}

// stringList is a list value that is empty, never null, for a nil slice.
func stringList(values []string) types.List {
	elems := make([]attr.Value, len(values))
	for i, v := range values {
		elems[i] = types.StringValue(v)
	}
	return types.ListValueMust(types.StringType, elems)
}

// stringOrNull is s, or null when it is empty (an optional attribute the engine leaves out).
func stringOrNull(s string) types.String {
	if s == "" {
		return types.StringNull()
	}
	return types.StringValue(s)
}
