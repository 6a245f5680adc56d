package provider

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	dsschema "github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/client"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/provider/validators"
)

var (
	_ datasource.DataSource              = (*computeDataSource)(nil)
	_ datasource.DataSourceWithConfigure = (*computeDataSource)(nil)
)

// NewComputeDataSource returns the mlcompute_compute data source.
func NewComputeDataSource() datasource.DataSource {
	return &computeDataSource{}
}

// computeDataSource reads a compute's runtime counters: the values that change as the
// engine scales (node counts by state, target, allocation state). They live here rather
// than on mlcompute_compute_cluster because a resource carries every attribute through
// every plan and refresh, and these change on every read without ever being configured.
type computeDataSource struct {
	client *client.Client
}

func (d *computeDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_compute"
}

func (d *computeDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	resp.Schema = dsschema.Schema{
		MarkdownDescription: "Reads a compute of a workspace (a cluster, an instance or an attached compute) as the " +
			"engine holds it now: its nodes counted by state, the count it is scaling to and whether it is resizing. " +
			"The values change as the engine scales; each plan or apply reads them again.",
		Attributes: map[string]dsschema.Attribute{
			"workspace_id": dsschema.StringAttribute{
				MarkdownDescription: "The ID of the compute's workspace, `/workspaces/{name}`, usually " +
					"`mlcompute_workspace.<name>.id`.",
				Required: true,
				Validators: []validator.String{
					validators.StringFunc("Invalid Workspace ID", "the value must be a workspace ID, /workspaces/{name}", checkWorkspaceID),
				},
			},
			"name": dsschema.StringAttribute{
				MarkdownDescription: "The compute's name in its workspace, usually `mlcompute_compute_cluster.<name>.name`.",
				Required:            true,
			},
			"id": dsschema.StringAttribute{
				MarkdownDescription: "The compute's ID, `/workspaces/{workspace}/computes/{name}`.",
				Computed:            true,
			},
			"type": dsschema.StringAttribute{
				MarkdownDescription: "The kind of compute: `" + api.TypeComputeCluster + "`, `" + api.TypeComputeInstance + "`, `" +
					api.TypeAttached + "` (an attached machine) or `" + api.TypeKubernetes + "` (an attached Kubernetes cluster).",
				Computed: true,
			},
			"current_node_count": dsschema.Int64Attribute{
				MarkdownDescription: "The number of nodes that are up (idle or running a job).",
				Computed:            true,
			},
			"target_node_count": targetNodeCountAttribute,
			"allocation_state":  allocationStateAttribute,
			"node_state_counts": nodeStateCountsAttribute("The compute's nodes counted by state."),
		},
	}
}

// The runtime attributes a cluster resource and this data source share (the resource as
// DESIGN lists them; the data source for any compute, read at every plan).
const (
	targetNodeCountDescription = "The number of nodes the engine is scaling to: the nodes that are up or preparing."
	allocationStateDescription = "`" + api.AllocationSteady + "` when no node is preparing or leaving, `" +
		api.AllocationResizing + "` otherwise."
)

var (
	targetNodeCountAttribute = dsschema.Int64Attribute{MarkdownDescription: targetNodeCountDescription, Computed: true}
	allocationStateAttribute = dsschema.StringAttribute{MarkdownDescription: allocationStateDescription, Computed: true}
)

// nodeCountDescriptions describe the counters of node_state_counts.
var nodeCountDescriptions = map[string]string{
	"idle":      "Nodes that are up and run no job.",
	"running":   "Nodes that run a job.",
	"preparing": "Nodes being started, or waiting for engine capacity.",
	"leaving":   "Nodes being released, or draining their job before they are.",
	"unusable":  "Nodes that died; the engine replaces them.",
	"preempted": "`LowPriority` nodes that gave their capacity to `Dedicated` nodes.",
}

func nodeStateCountsAttribute(description string) dsschema.SingleNestedAttribute {
	attrs := map[string]dsschema.Attribute{}
	for name, d := range nodeCountDescriptions {
		attrs[name] = nodeCountAttribute(d)
	}
	return dsschema.SingleNestedAttribute{MarkdownDescription: description, Computed: true, Attributes: attrs}
}

// nodeStateCountsValue is node_state_counts of a compute as the engine holds it.
func nodeStateCountsValue(n api.NodeStateCounts) (types.Object, diag.Diagnostics) {
	return types.ObjectValue(nodeStateCountsAttrTypes, map[string]attr.Value{
		"idle": types.Int64Value(n.Idle), "running": types.Int64Value(n.Running), "preparing": types.Int64Value(n.Preparing),
		"leaving": types.Int64Value(n.Leaving), "unusable": types.Int64Value(n.Unusable), "preempted": types.Int64Value(n.Preempted),
	})
}

// nodeCountAttribute is one counter of node_state_counts.
func nodeCountAttribute(description string) dsschema.Int64Attribute {
	return dsschema.Int64Attribute{MarkdownDescription: description, Computed: true}
}

func (d *computeDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	d.client = clientFrom(req.ProviderData, &resp.Diagnostics)
}

func (d *computeDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var cfg computeDataSourceModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &cfg)...)
	if resp.Diagnostics.HasError() {
		return
	}
	ws, err := api.ParseID(cfg.WorkspaceID.ValueString(), "")
	if err != nil {
		resp.Diagnostics.AddAttributeError(path.Root("workspace_id"), "Invalid Workspace ID", err.Error())
		return
	}

	name := cfg.Name.ValueString()
	c, err := d.client.GetCompute(ctx, ws.Workspace, name)
	if err != nil {
		summary := "Cannot Read Compute"
		if api.IsNotFound(err) {
			summary = "Compute Not Found"
		}
		addEngineError(&resp.Diagnostics, req.Config.Schema.Type(), summary,
			fmt.Sprintf("read compute %q in workspace %q", name, ws.Workspace), err)
		return
	}

	resp.Diagnostics.Append(cfg.fromAPI(c)...)
	resp.Diagnostics.Append(resp.State.Set(ctx, &cfg)...)
}

// computeDataSourceModel is the mlcompute_compute schema as Go values.
type computeDataSourceModel struct {
	WorkspaceID      types.String `tfsdk:"workspace_id"`
	Name             types.String `tfsdk:"name"`
	ID               types.String `tfsdk:"id"`
	Type             types.String `tfsdk:"type"`
	CurrentNodeCount types.Int64  `tfsdk:"current_node_count"`
	TargetNodeCount  types.Int64  `tfsdk:"target_node_count"`
	AllocationState  types.String `tfsdk:"allocation_state"`
	NodeStateCounts  types.Object `tfsdk:"node_state_counts"`
}

var nodeStateCountsAttrTypes = map[string]attr.Type{
	"idle": types.Int64Type, "running": types.Int64Type, "preparing": types.Int64Type,
	"leaving": types.Int64Type, "unusable": types.Int64Type, "preempted": types.Int64Type,
}

// fromAPI sets the computed attributes to the engine's values.
func (m *computeDataSourceModel) fromAPI(c *api.Compute) diag.Diagnostics {
	m.ID = types.StringValue(c.ID)
	m.Type = types.StringValue(c.Type)
	m.CurrentNodeCount = types.Int64Value(c.CurrentNodeCount)
	m.TargetNodeCount = types.Int64Value(c.TargetNodeCount)
	m.AllocationState = types.StringValue(c.AllocationState)
	var diags diag.Diagnostics
	m.NodeStateCounts, diags = nodeStateCountsValue(c.NodeStateCounts)
	return diags
}
