package provider

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-go/tftypes"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
)

// The cluster's model moves in and out of plan and state through these functions rather
// than the framework's reflection (Plan.Get, State.Set): reflection checks every struct tag
// against a regular expression it compiles anew for each field and call, which on a plan or
// refresh of many clusters costs more than the provider's own work. State is built directly
// as a tftypes value, which is also what the protocol fast path (protocol.go) answers with.

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

// clusterState returns the state of cluster c as the engine holds it, an object of
// stateType, so that drift shows in the next plan. From basis (the state read, or the plan
// applied) it keeps what the engine does not hold: the configured spelling of the same
// vm_size, and timeouts. No tags is an empty map, never null, matching the schema's default.
func clusterState(stateType tftypes.Object, basis tftypes.Value, c *api.Compute) (tftypes.Value, error) {
	var prior map[string]tftypes.Value
	if !basis.IsNull() && basis.IsKnown() {
		if err := basis.As(&prior); err != nil {
			return tftypes.Value{}, fmt.Errorf("the cluster's data is not an object: %w", err)
		}
	}
	attrs := stateType.AttributeTypes
	str := func(s string) tftypes.Value { return tftypes.NewValue(tftypes.String, s) }
	num := func(n int64) tftypes.Value { return tftypes.NewValue(tftypes.Number, n) }

	vmSize := str(c.VMSize)
	var configured string
	if v, ok := prior["vm_size"]; ok && v.IsKnown() && !v.IsNull() && v.As(&configured) == nil && strings.EqualFold(configured, c.VMSize) {
		vmSize = v
	}
	timeoutsValue, ok := prior["timeouts"]
	if !ok {
		timeoutsValue = tftypes.NewValue(attrs["timeouts"], nil)
	}
	settings := api.ScaleSettings{ScaleDownNodesAfterIdleDuration: api.DefaultScaleDownAfterIdle}
	if c.ScaleSettings != nil {
		settings = *c.ScaleSettings
	}
	tags := make(map[string]tftypes.Value, len(c.Tags))
	for k, v := range c.Tags {
		tags[k] = str(v)
	}
	n := c.NodeStateCounts
	vals := map[string]tftypes.Value{
		"id":           str(c.ID),
		"name":         str(c.Name),
		"workspace_id": str(api.WorkspaceID(c.Workspace)),
		"vm_size":      vmSize,
		"vm_priority":  str(c.VMPriority),
		"scale_settings": tftypes.NewValue(attrs["scale_settings"], map[string]tftypes.Value{
			"min_node_count":                       num(settings.MinNodeCount),
			"max_node_count":                       num(settings.MaxNodeCount),
			"scale_down_nodes_after_idle_duration": str(settings.ScaleDownNodesAfterIdleDuration),
		}),
		"description":        str(c.Description),
		"tags":               tftypes.NewValue(attrs["tags"], tags),
		"current_node_count": num(c.CurrentNodeCount),
		"target_node_count":  num(c.TargetNodeCount),
		"allocation_state":   str(c.AllocationState),
		"node_state_counts": tftypes.NewValue(attrs["node_state_counts"], map[string]tftypes.Value{
			"idle": num(n.Idle), "running": num(n.Running), "preparing": num(n.Preparing),
			"leaving": num(n.Leaving), "unusable": num(n.Unusable), "preempted": num(n.Preempted),
		}),
		"created_on": str(c.CreatedOn.UTC().Format(time.RFC3339)),
		"timeouts":   timeoutsValue,
	}
	if len(vals) != len(attrs) {
		return tftypes.Value{}, fmt.Errorf("the cluster's schema has %d attributes, the provider sets %d", len(attrs), len(vals))
	}
	if err := tftypes.ValidateValue(stateType, vals); err != nil {
		return tftypes.Value{}, err
	}
	return tftypes.NewValue(stateType, vals), nil
}

// setClusterState sets raw to the state of cluster c (see clusterState).
func setClusterState(ctx context.Context, schemaType attr.Type, raw *tftypes.Value, basis tftypes.Value, c *api.Compute) diag.Diagnostics {
	var diags diag.Diagnostics
	t, ok := schemaType.TerraformType(ctx).(tftypes.Object)
	if !ok {
		diags.AddError("Unexpected Schema", "The cluster's schema is not an object.")
		return diags
	}
	v, err := clusterState(t, basis, c)
	if err != nil {
		diags.AddError("Unexpected Value", fmt.Sprintf("The cluster's state cannot be written: %s.", err))
		return diags
	}
	*raw = v
	return diags
}
