// Command nullprovider is the floor that `make bench` measures the mlcompute provider
// against: a terraform-plugin-framework provider whose resources do nothing (no I/O, no
// engine), served as the scaffolding template serves a provider but with the SDK's logging
// off, as the provider under test has it. What it costs is what terraform, the plugin
// protocol and the framework cost. benchnull_resource has two
// attributes, so the mlcompute provider's ratio to it is the share of the project's code
// and schema; benchnull_shaped (shaped.go) has the schema of an mlcompute resource, so the
// ratio to it is the share of the project's code alone.
//
// Its address is mlcompute/benchnull and its binary terraform-provider-benchnull; the
// benchmark builds it and reaches it through dev_overrides. Nothing else uses it.
package main

import (
	"context"
	"log"
	"os"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/sdklog"
)

func main() {
	// The provider under test logs nothing unless the user asks terraform for logs, and
	// neither does its floor: the SDK's trace lines would cost terraform and the floor
	// more for a wider schema, and make the floor slower than the provider it bounds.
	if err := sdklog.QuietUnlessAsked(os.Environ(), os.Setenv, "TF_LOG_PROVIDER_BENCHNULL"); err != nil {
		log.Fatal(err.Error())
	}
	var p nullProvider
	shaped, ok, err := loadShapedSchema()
	if err != nil {
		log.Fatal(err.Error())
	}
	if ok {
		p.shaped = &shaped
	}
	err = providerserver.Serve(context.Background(), func() provider.Provider { return p }, providerserver.ServeOpts{
		Address:         "registry.terraform.io/mlcompute/benchnull",
		ProtocolVersion: 6,
	})
	if err != nil {
		log.Fatal(err.Error())
	}
}

// nullProvider serves benchnull_resource, and benchnull_shaped when it has a schema for it.
type nullProvider struct {
	shaped *schema.Schema
}

func (nullProvider) Metadata(_ context.Context, _ provider.MetadataRequest, resp *provider.MetadataResponse) {
	resp.TypeName = "benchnull"
}

func (nullProvider) Schema(context.Context, provider.SchemaRequest, *provider.SchemaResponse) {}

// Configure does nothing: the provider has no settings and no client.
func (nullProvider) Configure(context.Context, provider.ConfigureRequest, *provider.ConfigureResponse) {
}

func (p nullProvider) Resources(context.Context) []func() resource.Resource {
	resources := []func() resource.Resource{func() resource.Resource { return nullResource{} }}
	if p.shaped != nil {
		resources = append(resources, func() resource.Resource { return shapedResource{schema: *p.shaped} })
	}
	return resources
}

func (nullProvider) DataSources(context.Context) []func() datasource.DataSource { return nil }

// nullResource is benchnull_resource: an input and an id, kept in state and nowhere else.
type nullResource struct{}

type nullModel struct {
	ID    types.String `tfsdk:"id"`
	Input types.String `tfsdk:"input"`
}

func (nullResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_resource"
}

func (nullResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				Computed:      true,
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"input": schema.StringAttribute{Required: true},
		},
	}
}

func (nullResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var m nullModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	m.ID = m.Input
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

// Read keeps the state as it is: there is nothing outside it to read.
func (nullResource) Read(context.Context, resource.ReadRequest, *resource.ReadResponse) {}

func (nullResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var m nullModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

// Delete does nothing: the framework drops the state.
func (nullResource) Delete(context.Context, resource.DeleteRequest, *resource.DeleteResponse) {}
