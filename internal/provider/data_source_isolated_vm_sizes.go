package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/client"
)

var (
	_ datasource.DataSource              = (*isolatedVMSizesDataSource)(nil)
	_ datasource.DataSourceWithConfigure = (*isolatedVMSizesDataSource)(nil)
)

// isolatedSizesID is the data source's ID: it has no filters, so one ID fits every read.
const isolatedSizesID = "/sizes/isolated"

// NewIsolatedVMSizesDataSource returns the mlcompute_isolated_vm_sizes data source.
func NewIsolatedVMSizesDataSource() datasource.DataSource {
	return &isolatedVMSizesDataSource{}
}

// isolatedVMSizesDataSource lists the catalog's isolated VM sizes.
type isolatedVMSizesDataSource struct {
	client *client.Client
}

func (d *isolatedVMSizesDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_isolated_vm_sizes"
}

func (d *isolatedVMSizesDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "Lists the isolated VM sizes: sizes that run on hardware dedicated to a single " +
			"customer, for workloads that need isolation for compliance. They include `Standard_M128ms`, " +
			"`Standard_F72s_v2`, `Standard_NC24s_v3` and `Standard_NC24rs_v3` (which is RDMA capable).",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				MarkdownDescription: "The identifier of the list, always `" + isolatedSizesID + "`.",
				Computed:            true,
			},
			"sizes": vmSizesAttribute("The isolated sizes."),
		},
	}
}

func (d *isolatedVMSizesDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	d.client = clientFrom(req.ProviderData, &resp.Diagnostics)
}

func (d *isolatedVMSizesDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var cfg isolatedVMSizesDataSourceModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &cfg)...)
	if resp.Diagnostics.HasError() {
		return
	}

	sizes, err := d.client.ListIsolatedSizes(ctx)
	if err != nil {
		addEngineError(&resp.Diagnostics, req.Config.Schema.Type(), "Cannot List Isolated VM Sizes", "list the isolated VM sizes", err)
		return
	}
	tflog.Debug(ctx, "listed isolated VM sizes", map[string]any{"count": len(sizes)})

	cfg.ID = types.StringValue(isolatedSizesID)
	cfg.Sizes = vmSizeModels(sizes)
	resp.Diagnostics.Append(resp.State.Set(ctx, &cfg)...)
}

// isolatedVMSizesDataSourceModel is the mlcompute_isolated_vm_sizes schema as Go values.
type isolatedVMSizesDataSourceModel struct {
	ID    types.String  `tfsdk:"id"`
	Sizes []vmSizeModel `tfsdk:"sizes"`
}
