package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// benchnull_shaped is the do-nothing resource with the schema of another provider's
// resource: the benchmark writes that resource's block, as `terraform providers schema
// -json` prints it, to the file named by shapedSchemaEnv. Terraform and the framework do
// the same work for it as for the real resource (state of the same size, the same
// attribute paths to walk on every call), so the real resource's ratio to it is what the
// provider's own code costs, and its ratio to benchnull_resource is what the shape costs.
//
// It plans what the framework plans for a schema without defaults or plan modifiers, and
// Create fills every value the plan left unknown with its type's zero value.

// shapedSchemaEnv names the file holding the shaped resource's schema block; without it
// the provider has no benchnull_shaped.
const shapedSchemaEnv = "BENCHNULL_SHAPED_SCHEMA"

// jsonBlock and jsonAttribute are the parts of `terraform providers schema -json` that a
// schema of attributes (no blocks) uses.
type jsonBlock struct {
	Attributes map[string]jsonAttribute `json:"attributes"`
}

type jsonAttribute struct {
	Type        json.RawMessage `json:"type"`
	NestedType  *jsonNested     `json:"nested_type"`
	Description string          `json:"description"`
	Required    bool            `json:"required"`
	Optional    bool            `json:"optional"`
	Computed    bool            `json:"computed"`
	Sensitive   bool            `json:"sensitive"`
}

type jsonNested struct {
	Attributes  map[string]jsonAttribute `json:"attributes"`
	NestingMode string                   `json:"nesting_mode"`
}

// loadShapedSchema reads the schema named by shapedSchemaEnv, or returns false when it is unset.
func loadShapedSchema() (schema.Schema, bool, error) {
	file := os.Getenv(shapedSchemaEnv)
	if file == "" {
		return schema.Schema{}, false, nil
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		return schema.Schema{}, false, err
	}
	var resourceSchema struct {
		Block jsonBlock `json:"block"`
	}
	if err := json.Unmarshal(raw, &resourceSchema); err != nil {
		return schema.Schema{}, false, fmt.Errorf("%s: %w", file, err)
	}
	attrs, err := shapedAttributes(resourceSchema.Block.Attributes)
	if err != nil {
		return schema.Schema{}, false, fmt.Errorf("%s: %w", file, err)
	}
	return schema.Schema{Attributes: attrs}, true, nil
}

// shapedAttributes converts the attributes of the JSON schema to the framework's.
func shapedAttributes(in map[string]jsonAttribute) (map[string]schema.Attribute, error) {
	out := make(map[string]schema.Attribute, len(in))
	for name, a := range in {
		if a.NestedType != nil {
			if a.NestedType.NestingMode != "single" {
				return nil, fmt.Errorf("%s: nesting mode %q is not supported", name, a.NestedType.NestingMode)
			}
			nested, err := shapedAttributes(a.NestedType.Attributes)
			if err != nil {
				return nil, fmt.Errorf("%s.%w", name, err)
			}
			out[name] = schema.SingleNestedAttribute{Attributes: nested, MarkdownDescription: a.Description,
				Required: a.Required, Optional: a.Optional, Computed: a.Computed, Sensitive: a.Sensitive}
			continue
		}
		var kind any
		if err := json.Unmarshal(a.Type, &kind); err != nil {
			return nil, fmt.Errorf("%s: type: %w", name, err)
		}
		switch kind {
		case "string":
			out[name] = schema.StringAttribute{MarkdownDescription: a.Description,
				Required: a.Required, Optional: a.Optional, Computed: a.Computed, Sensitive: a.Sensitive}
		case "number":
			out[name] = schema.Int64Attribute{MarkdownDescription: a.Description,
				Required: a.Required, Optional: a.Optional, Computed: a.Computed, Sensitive: a.Sensitive}
		case "bool":
			out[name] = schema.BoolAttribute{MarkdownDescription: a.Description,
				Required: a.Required, Optional: a.Optional, Computed: a.Computed, Sensitive: a.Sensitive}
		default:
			if k, ok := kind.([]any); ok && len(k) == 2 && k[0] == "map" && k[1] == "string" {
				out[name] = schema.MapAttribute{ElementType: types.StringType, MarkdownDescription: a.Description,
					Required: a.Required, Optional: a.Optional, Computed: a.Computed, Sensitive: a.Sensitive}
				continue
			}
			return nil, fmt.Errorf("%s: type %s is not supported", name, a.Type)
		}
	}
	return out, nil
}

// shapedResource is benchnull_shaped: its plan, with unknowns made zero, kept in state.
type shapedResource struct{ schema schema.Schema }

func (r shapedResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_shaped"
}

func (r shapedResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = r.schema
}

func (shapedResource) Create(_ context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	keepPlan(req.Plan, &resp.State, &resp.Diagnostics)
}

// Read keeps the state as it is: there is nothing outside it to read.
func (shapedResource) Read(context.Context, resource.ReadRequest, *resource.ReadResponse) {}

func (shapedResource) Update(_ context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	keepPlan(req.Plan, &resp.State, &resp.Diagnostics)
}

// Delete does nothing: the framework drops the state.
func (shapedResource) Delete(context.Context, resource.DeleteRequest, *resource.DeleteResponse) {}

// keepPlan makes the plan, with its unknowns made zero, the new state.
func keepPlan(plan tfsdk.Plan, state *tfsdk.State, diags *diag.Diagnostics) {
	raw, err := knownZeros(plan.Raw)
	if err != nil {
		diags.AddError("Cannot Keep the Plan", err.Error())
		return
	}
	state.Raw = raw
}

// knownZeros returns v with every unknown value replaced by its type's zero value, as the
// state after an apply must be wholly known.
func knownZeros(v tftypes.Value) (tftypes.Value, error) {
	return tftypes.Transform(v, func(_ *tftypes.AttributePath, v tftypes.Value) (tftypes.Value, error) {
		if v.IsKnown() {
			return v, nil
		}
		return zeroValue(v.Type())
	})
}

// zeroValue is the zero value of a type the shaped schema uses.
func zeroValue(t tftypes.Type) (tftypes.Value, error) {
	switch {
	case t.Is(tftypes.String):
		return tftypes.NewValue(t, ""), nil
	case t.Is(tftypes.Number):
		return tftypes.NewValue(t, 0), nil
	case t.Is(tftypes.Bool):
		return tftypes.NewValue(t, false), nil
	case t.Is(tftypes.Map{}):
		return tftypes.NewValue(t, map[string]tftypes.Value{}), nil
	case t.Is(tftypes.Object{}):
		attrs := map[string]tftypes.Value{}
		for name, at := range t.(tftypes.Object).AttributeTypes {
			v, err := zeroValue(at)
			if err != nil {
				return tftypes.Value{}, err
			}
			attrs[name] = v
		}
		return tftypes.NewValue(t, attrs), nil
	}
	return tftypes.Value{}, fmt.Errorf("no zero value for %s", t)
}
