package provider

import (
	"context"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/catalog"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/client"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/validation"
)

var (
	_ datasource.DataSource                   = (*vmSizesDataSource)(nil)
	_ datasource.DataSourceWithConfigure      = (*vmSizesDataSource)(nil)
	_ datasource.DataSourceWithValidateConfig = (*vmSizesDataSource)(nil)
)

// NewVMSizesDataSource returns the mlcompute_vm_sizes data source.
func NewVMSizesDataSource() datasource.DataSource {
	return &vmSizesDataSource{}
}

// vmSizesDataSource lists the engine's VM size catalog, filtered.
type vmSizesDataSource struct {
	client *client.Client
}

func (d *vmSizesDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_vm_sizes"
}

func (d *vmSizesDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	computeTypes := validation.ComputeTypeNames()
	resp.Schema = schema.Schema{
		MarkdownDescription: "Lists the VM sizes the engine offers, from its catalog of Azure's published VM " +
			"sizes, narrowed by optional filters. Every filter that is set must match. Retired sizes are left out " +
			"unless `include_retired` is `true`.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				MarkdownDescription: "An identifier of the filter: `/sizes`, followed by the filters that are set " +
					"as a query string, for example `/sizes?family=standardNCSv3Family&min_gpus=2`.",
				Computed: true,
			},
			"compute_type": schema.StringAttribute{
				MarkdownDescription: "Only sizes that can back this compute type: one of `" +
					strings.Join(computeTypes, "`, `") + "`.",
				Optional:   true,
				Validators: []validator.String{stringvalidator.OneOf(computeTypes...)},
			},
			"family": schema.StringAttribute{
				MarkdownDescription: "Only sizes of this VM family, for example `standardNCSv3Family` (matched " +
					"case-insensitively). A family whose sizes are all retired is refused unless " +
					"`include_retired` is `true`; the error names a current family to use instead.",
				Optional: true,
			},
			"min_vcpus": schema.Int64Attribute{
				MarkdownDescription: "Only sizes with at least this many vCPUs (0 or more).",
				Optional:            true,
			},
			"min_memory_gb": schema.Float64Attribute{
				MarkdownDescription: "Only sizes with at least this much memory, in GiB (0 or more).",
				Optional:            true,
			},
			"min_gpus": schema.Int64Attribute{
				MarkdownDescription: "Only sizes with at least this many GPUs (0 or more); `1` lists the GPU sizes.",
				Optional:            true,
			},
			"include_retired": schema.BoolAttribute{
				MarkdownDescription: "Whether to list sizes Azure has retired too; they have `retired_on` set " +
					"(default: `false`).",
				Optional: true,
			},
			"sizes": vmSizesAttribute("The sizes that match every filter."),
		},
	}
}

func (d *vmSizesDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	d.client = clientFrom(req.ProviderData, &resp.Diagnostics)
}

// ValidateConfig applies the engine's own filter rules (validation.SizeFilter) at plan
// time. Each filter is checked on its own so that every bad one is reported; compute_type
// is left to its OneOf validator, which says the same. Unknown values are checked in Read.
func (d *vmSizesDataSource) ValidateConfig(ctx context.Context, req datasource.ValidateConfigRequest, resp *datasource.ValidateConfigResponse) {
	var cfg vmSizesDataSourceModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &cfg)...)
	if resp.Diagnostics.HasError() {
		return
	}
	f := cfg.filter()
	checks := []api.SizeFilter{
		// An unknown include_retired may turn out true, so the family is checked as if it were.
		{Family: f.Family, IncludeRetired: f.IncludeRetired || cfg.IncludeRetired.IsUnknown()},
		{MinVCPUs: f.MinVCPUs},
		{MinMemoryGB: f.MinMemoryGB},
		{MinGPUs: f.MinGPUs},
	}
	for _, check := range checks {
		addFilterError(&resp.Diagnostics, check, validation.SizeFilter(check))
	}
}

func (d *vmSizesDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var cfg vmSizesDataSourceModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &cfg)...)
	if resp.Diagnostics.HasError() {
		return
	}
	f := cfg.filter()
	if err := validation.SizeFilter(f); err != nil {
		addFilterError(&resp.Diagnostics, f, err)
		return
	}

	sizes, err := d.client.ListSizes(ctx, f)
	if err != nil {
		addEngineError(&resp.Diagnostics, req.Config.Schema.Type(), "Cannot List VM Sizes", "list VM sizes", err)
		return
	}
	tflog.Debug(ctx, "listed VM sizes", map[string]any{"filter": api.EncodeSizeFilter(f).Encode(), "count": len(sizes)})

	cfg.ID = types.StringValue(sizesID(f))
	cfg.Sizes = vmSizeModels(sizes)
	resp.Diagnostics.Append(resp.State.Set(ctx, &cfg)...)
}

// addFilterError reports a validation.SizeFilter error on the filter attribute it names
// (the filter's field names are the attribute names). The message already says what is
// wrong and what to use instead.
func addFilterError(diags *diag.Diagnostics, f api.SizeFilter, err error) {
	if err == nil {
		return
	}
	field, summary := api.FieldOf(err), "Invalid VM Size Filter"
	if _, known := catalog.LookupFamily(f.Family); field == "family" && known {
		summary = "VM Family Retired" // a known family is refused only when all its sizes are retired
	}
	diags.AddAttributeError(path.Root(field), summary, err.Error())
}

// sizesID identifies a filter: /sizes plus its set filters as a sorted query string.
func sizesID(f api.SizeFilter) string {
	if q := api.EncodeSizeFilter(f).Encode(); q != "" {
		return "/sizes?" + q
	}
	return "/sizes"
}

// vmSizesDataSourceModel is the mlcompute_vm_sizes schema as Go values.
type vmSizesDataSourceModel struct {
	ID             types.String  `tfsdk:"id"`
	ComputeType    types.String  `tfsdk:"compute_type"`
	Family         types.String  `tfsdk:"family"`
	MinVCPUs       types.Int64   `tfsdk:"min_vcpus"`
	MinMemoryGB    types.Float64 `tfsdk:"min_memory_gb"`
	MinGPUs        types.Int64   `tfsdk:"min_gpus"`
	IncludeRetired types.Bool    `tfsdk:"include_retired"`
	Sizes          []vmSizeModel `tfsdk:"sizes"`
}

// filter returns the filter the configuration sets; null and unknown values filter nothing.
// A family is sent in the catalog's spelling, so the ID does not depend on its case.
func (m vmSizesDataSourceModel) filter() api.SizeFilter {
	f := api.SizeFilter{
		ComputeType:    catalog.ComputeType(m.ComputeType.ValueString()),
		Family:         m.Family.ValueString(),
		MinVCPUs:       m.MinVCPUs.ValueInt64(),
		MinMemoryGB:    m.MinMemoryGB.ValueFloat64(),
		MinGPUs:        m.MinGPUs.ValueInt64(),
		IncludeRetired: m.IncludeRetired.ValueBool(),
	}
	if fam, ok := catalog.LookupFamily(f.Family); ok {
		f.Family = fam.Name
	}
	return f
}
