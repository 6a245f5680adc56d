package provider

import (
	"context"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

func TestKeepSpelling(t *testing.T) {
	for _, tt := range []struct {
		configured types.String
		engine     string
		want       string
	}{
		{types.StringValue("standard_ds3_v2"), "Standard_DS3_v2", "standard_ds3_v2"},
		{types.StringValue("Standard_DS3_v2"), "Standard_DS3_v2", "Standard_DS3_v2"},
		{types.StringValue("Standard_DS4_v2"), "Standard_DS3_v2", "Standard_DS3_v2"}, // changed outside: drift
		{types.StringNull(), "Standard_DS3_v2", "Standard_DS3_v2"},                   // import
		{types.StringUnknown(), "Standard_DS3_v2", "Standard_DS3_v2"},
	} {
		if got := keepSpelling(tt.configured, tt.engine); got.ValueString() != tt.want {
			t.Errorf("keepSpelling(%s, %q) = %s, want %q", tt.configured, tt.engine, got, tt.want)
		}
	}
}

func TestRequiresReplaceIfOtherSize(t *testing.T) {
	// The modifier only runs on an update: prior state and plan are both present.
	present := tftypes.NewValue(tftypes.Object{}, map[string]tftypes.Value{})
	for _, tt := range []struct {
		state, plan types.String
		want        bool
	}{
		{types.StringValue("Standard_DS3_v2"), types.StringValue("standard_ds3_v2"), false},
		{types.StringValue("standard_ds3_v2"), types.StringValue("STANDARD_DS3_V2"), false},
		{types.StringValue("Standard_DS3_v2"), types.StringValue("Standard_DS4_v2"), true},
		{types.StringValue("Standard_DS3_v2"), types.StringUnknown(), true},
	} {
		req := planmodifier.StringRequest{
			StateValue: tt.state, PlanValue: tt.plan, ConfigValue: tt.plan,
			State: tfsdk.State{Raw: present}, Plan: tfsdk.Plan{Raw: present},
		}
		var resp planmodifier.StringResponse
		resp.PlanValue = tt.plan
		requiresReplaceIfOtherSize().PlanModifyString(context.Background(), req, &resp)
		if resp.Diagnostics.HasError() || resp.RequiresReplace != tt.want {
			t.Errorf("%s -> %s: RequiresReplace %v (%v), want %v", tt.state, tt.plan, resp.RequiresReplace, resp.Diagnostics, tt.want)
		}
	}
}
