package validators

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/validation"
)

func TestStringFunc(t *testing.T) {
	v := StringFunc("Invalid Name", "a workspace name", func(s string) error { return validation.WorkspaceName.Check("name", s) })
	tests := []struct {
		name    string
		value   types.String
		wantErr string
	}{
		{"valid", types.StringValue("team-a"), ""},
		{"null is left to Required", types.StringNull(), ""},
		{"unknown is checked later", types.StringUnknown(), ""},
		{"too short", types.StringValue("ab"), `invalid workspace name "ab"`},
		{"bad character", types.StringValue("team a"), "letters, digits, '-' and '_'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := validator.StringRequest{Path: path.Root("name"), ConfigValue: tt.value}
			var resp validator.StringResponse
			v.ValidateString(context.Background(), req, &resp)
			checkDiags(t, resp.Diagnostics.Errors(), path.Root("name"), "Invalid Name", tt.wantErr)
		})
	}
	if got := v.Description(context.Background()); got != "a workspace name" {
		t.Errorf("Description = %q", got)
	}
}

func TestInt64MapFunc(t *testing.T) {
	v := Int64MapFunc("Invalid Quota", "quotas", validation.Quota)
	quotas := func(m map[string]attr.Value) types.Map { return types.MapValueMust(types.Int64Type, m) }
	tests := []struct {
		name    string
		value   types.Map
		wantKey string
		wantErr string
	}{
		{"valid", quotas(map[string]attr.Value{"standardNCSv3Family": types.Int64Value(48), "standardDSv2Family": types.Int64Value(0)}), "", ""},
		{"null", types.MapNull(types.Int64Type), "", ""},
		{"unknown map", types.MapUnknown(types.Int64Type), "", ""},
		{"unknown entry", quotas(map[string]attr.Value{"standardNCSv3Family": types.Int64Unknown()}), "", ""},
		{"negative", quotas(map[string]attr.Value{"standardNCSv3Family": types.Int64Value(-1)}), "standardNCSv3Family", "0 or more"},
		{"unknown family", quotas(map[string]attr.Value{"standardFooFamily": types.Int64Value(4)}), "standardFooFamily", "allowed families: "},
		{"wrong case", quotas(map[string]attr.Value{"standardncsv3family": types.Int64Value(4)}), "standardncsv3family", `must be spelled "standardNCSv3Family"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := validator.MapRequest{Path: path.Root("quotas"), ConfigValue: tt.value}
			var resp validator.MapResponse
			v.ValidateMap(context.Background(), req, &resp)
			checkDiags(t, resp.Diagnostics.Errors(), path.Root("quotas").AtMapKey(tt.wantKey), "Invalid Quota", tt.wantErr)
		})
	}
}

func TestInt64MapFuncReportsEveryEntry(t *testing.T) {
	v := Int64MapFunc("Bad", "x", func(string, int64) error { return errors.New("bad") })
	req := validator.MapRequest{Path: path.Root("m"), ConfigValue: types.MapValueMust(types.Int64Type, map[string]attr.Value{
		"b": types.Int64Value(1), "a": types.Int64Value(2),
	})}
	var resp validator.MapResponse
	v.ValidateMap(context.Background(), req, &resp)
	if n := resp.Diagnostics.ErrorsCount(); n != 2 {
		t.Fatalf("got %d errors, want 2", n)
	}
}

func checkDiags(t *testing.T, errs diag.Diagnostics, wantPath path.Path, wantSummary, wantErr string) {
	t.Helper()
	if wantErr == "" {
		if len(errs) > 0 {
			t.Fatalf("unexpected errors: %v", errs)
		}
		return
	}
	if len(errs) != 1 {
		t.Fatalf("got %d errors, want 1: %v", len(errs), errs)
	}
	d := errs[0]
	if d.Summary() != wantSummary {
		t.Errorf("summary = %q", d.Summary())
	}
	if !strings.Contains(d.Detail(), wantErr) {
		t.Errorf("detail %q does not contain %q", d.Detail(), wantErr)
	}
	withPath, ok := d.(diag.DiagnosticWithPath)
	if !ok || !withPath.Path().Equal(wantPath) {
		t.Errorf("diagnostic is not on path %s: %v", wantPath, d)
	}
}
