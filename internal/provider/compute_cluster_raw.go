package provider

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// The cluster's model moves in and out of plan and state through these two functions
// rather than the framework's reflection (Plan.Get, State.Set): reflection checks every
// struct tag against a regular expression it compiles anew for each field and call, which
// on a plan or refresh of many clusters costs more than the provider's own work.

// clusterFromRaw reads a plan or state object into m.
func clusterFromRaw(ctx context.Context, schemaType attr.Type, raw tftypes.Value, m *computeClusterModel) diag.Diagnostics {
	var diags diag.Diagnostics
	var vals map[string]tftypes.Value
	if err := raw.As(&vals); err != nil {
		diags.AddError("Unexpected Value", fmt.Sprintf("The cluster's data is not an object: %s.", err))
		return diags
	}
	attrTypes := schemaType.(attr.TypeWithAttributeTypes).AttributeTypes()
	get := func(name string) attr.Value {
		v, err := attrTypes[name].ValueFromTerraform(ctx, vals[name])
		if err != nil {
			diags.AddError("Unexpected Value", fmt.Sprintf("The cluster's %s cannot be read: %s.", name, err))
			return nil
		}
		return v
	}
	str := func(name string) types.String { s, _ := get(name).(types.String); return s }
	m.ID, m.Name, m.WorkspaceID = str("id"), str("name"), str("workspace_id")
	m.VMSize, m.VMPriority = str("vm_size"), str("vm_priority")
	m.Description, m.CreatedOn = str("description"), str("created_on")
	m.ScaleSettings, _ = get("scale_settings").(types.Object)
	m.Tags, _ = get("tags").(types.Map)
	m.CurrentNodeCount, _ = get("current_node_count").(types.Int64)
	m.TargetNodeCount, _ = get("target_node_count").(types.Int64)
	m.AllocationState, _ = get("allocation_state").(types.String)
	m.NodeStateCounts, _ = get("node_state_counts").(types.Object)
	m.Timeouts, _ = get("timeouts").(timeouts.Value)
	return diags
}

// clusterToRaw returns m as a plan or state object of schemaType.
func clusterToRaw(ctx context.Context, schemaType attr.Type, m *computeClusterModel) (tftypes.Value, diag.Diagnostics) {
	var diags diag.Diagnostics
	vals := map[string]attr.Value{
		"id": m.ID, "name": m.Name, "workspace_id": m.WorkspaceID, "vm_size": m.VMSize, "vm_priority": m.VMPriority,
		"scale_settings": m.ScaleSettings, "description": m.Description, "tags": m.Tags,
		"current_node_count": m.CurrentNodeCount, "target_node_count": m.TargetNodeCount,
		"allocation_state": m.AllocationState, "node_state_counts": m.NodeStateCounts,
		"created_on": m.CreatedOn, "timeouts": m.Timeouts,
	}
	attrTypes := schemaType.(attr.TypeWithAttributeTypes).AttributeTypes()
	out := make(map[string]tftypes.Value, len(attrTypes))
	for name, t := range attrTypes {
		v, ok := vals[name]
		if !ok {
			diags.AddError("Unexpected Attribute", fmt.Sprintf("The cluster's schema has %s, which the provider does not set.", name))
			continue
		}
		if v == nil || v.IsNull() { // a zero attr.Value has no type of its own: use the schema's
			out[name] = tftypes.NewValue(t.TerraformType(ctx), nil)
			continue
		}
		tv, err := v.ToTerraformValue(ctx)
		if err != nil {
			diags.AddError("Unexpected Value", fmt.Sprintf("The cluster's %s cannot be written: %s.", name, err))
			continue
		}
		out[name] = tv
	}
	return tftypes.NewValue(schemaType.TerraformType(ctx), out), diags
}

// setClusterState replaces the whole state with m.
func setClusterState(ctx context.Context, state *tfsdk.State, m *computeClusterModel) diag.Diagnostics {
	raw, diags := clusterToRaw(ctx, state.Schema.Type(), m)
	if !diags.HasError() {
		state.Raw = raw
	}
	return diags
}
