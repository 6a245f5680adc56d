package provider

import (
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
)

func TestStateComputeID(t *testing.T) {
	var diags diag.Diagnostics
	id, ok := stateComputeID(types.StringValue("/workspaces/lab/computes/cpu"), &diags)
	if !ok || id != (api.ID{Workspace: "lab", Collection: api.CollectionComputes, Name: "cpu"}) || diags.HasError() {
		t.Fatalf("got %+v, %v, %v", id, ok, diags)
	}
	for _, bad := range []types.String{types.StringValue("/workspaces/lab"), types.StringNull()} {
		diags = nil
		if _, ok := stateComputeID(bad, &diags); ok || diags.ErrorsCount() != 1 {
			t.Fatalf("%s: ok %v, diags %v; want one error", bad, ok, diags)
		}
		d := diags[0].(diag.DiagnosticWithPath)
		if !d.Path().Equal(path.Root("id")) || !strings.Contains(d.Detail(), "terraform state rm") {
			t.Errorf("%s: %v", bad, d)
		}
	}
}
