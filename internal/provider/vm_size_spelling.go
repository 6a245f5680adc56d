package provider

import (
	"context"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// The catalog matches VM sizes case-insensitively and the engine stores its canonical
// spelling. Resources keep the configured spelling in state while it names the size the
// engine holds, so `standard_ds3_v2` plans no diff and apply reports no inconsistent
// result; an import, which knows no configuration, records the canonical spelling.

// keepSpelling returns the configured spelling of a size when it names the engine's size,
// and the engine's spelling otherwise (another size is drift, shown in the next plan).
func keepSpelling(configured types.String, engine string) types.String {
	if !configured.IsNull() && !configured.IsUnknown() && strings.EqualFold(configured.ValueString(), engine) {
		return configured
	}
	return types.StringValue(engine)
}

// requiresReplaceIfOtherSize is the plan modifier of a size that cannot change in place:
// another size replaces the resource, while a change of letter case alone names the same
// size and is an in-place update of the spelling in state.
func requiresReplaceIfOtherSize() planmodifier.String {
	const description = "Changing the size other than in letter case replaces the resource."
	return stringplanmodifier.RequiresReplaceIf(func(_ context.Context, req planmodifier.StringRequest, resp *stringplanmodifier.RequiresReplaceIfFuncResponse) {
		resp.RequiresReplace = req.PlanValue.IsUnknown() || !strings.EqualFold(req.PlanValue.ValueString(), req.StateValue.ValueString())
	}, description, description)
}
