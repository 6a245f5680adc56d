package provider

import (
	"context"
	"errors"
	"maps"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
)

// testSchemaType has the shapes future resources use: nested objects, maps of objects,
// lists of objects, maps of primitives and sets.
var testSchemaType = types.ObjectType{AttrTypes: map[string]attr.Type{
	"name":   types.StringType,
	"quotas": types.MapType{ElemType: types.Int64Type},
	"scale_settings": types.ObjectType{AttrTypes: map[string]attr.Type{
		"max_node_count": types.Int64Type,
	}},
	"deployments": types.MapType{ElemType: types.ObjectType{AttrTypes: map[string]attr.Type{
		"instance_type": types.StringType,
	}}},
	"schedules": types.ListType{ElemType: types.ObjectType{AttrTypes: map[string]attr.Type{
		"cron": types.StringType,
	}}},
	"labels": types.SetType{ElemType: types.StringType},
}}

func TestFieldPath(t *testing.T) {
	tests := []struct {
		field  string
		want   path.Path
		wantOK bool
	}{
		{"name", path.Root("name"), true},
		{"quotas.standardNCSv3Family", path.Root("quotas").AtMapKey("standardNCSv3Family"), true},
		{"quotas.key.with.dots", path.Root("quotas").AtMapKey("key.with.dots"), true},
		{"scale_settings.max_node_count", path.Root("scale_settings").AtName("max_node_count"), true},
		{"deployments.blue.instance_type", path.Root("deployments").AtMapKey("blue").AtName("instance_type"), true},
		{"schedules.2.cron", path.Root("schedules").AtListIndex(2).AtName("cron"), true},
		// Unresolvable tails fall back to the deepest attribute found.
		{"scale_settings.no_such", path.Root("scale_settings"), true},
		{"schedules.first.cron", path.Root("schedules"), true},
		{"labels.x", path.Root("labels"), true},
		{"name.extra", path.Root("name"), true},
		// Fields that are not attributes of the schema have no path.
		{"token", path.Empty(), false},
		{"", path.Empty(), false},
	}
	for _, tt := range tests {
		got, ok := fieldPath(testSchemaType, tt.field)
		if ok != tt.wantOK || (ok && !got.Equal(tt.want)) {
			t.Errorf("fieldPath(%q) = %s, %v; want %s, %v", tt.field, got, ok, tt.want, tt.wantOK)
		}
	}
}

func TestAddEngineError(t *testing.T) {
	tests := []struct {
		name     string
		err      error
		wantPath path.Path // empty: no attribute
		want     []string
	}{
		{
			name:     "invalid with a field",
			err:      api.Errorf(api.CodeInvalid, "quotas.standardFooFamily", "unknown VM family %q", "standardFooFamily"),
			wantPath: path.Root("quotas").AtMapKey("standardFooFamily"),
			want:     []string{"refused to create workspace \"w\"", "Correct the value", "Engine error: unknown VM family"},
		},
		{
			name:     "conflict on force_destroy",
			err:      api.Errorf(api.CodeConflict, "force_destroy", "workspace \"w\" still holds /workspaces/w/computes/c"),
			wantPath: path.Root("force_destroy"),
			want:     []string{"conflicts with what the engine already holds", "still holds /workspaces/w/computes/c"},
		},
		{
			name: "quota",
			err:  api.Errorf(api.CodeQuotaExceeded, "", "family standardNCSv3Family has 0 vCPUs left"),
			want: []string{"vCPU quota would be exceeded", "Raise the family's limit"},
		},
		{
			name: "unauthorized names a provider attribute",
			err:  api.Errorf(api.CodeUnauthorized, "token", "missing or wrong token"),
			want: []string{"token is missing or wrong", "MLCOMPUTE_TOKEN"},
		},
		{
			name: "forbidden names the missing permission",
			err:  api.Errorf(api.CodeForbidden, "", `token "ci" (role reader, workspaces w) lacks the permission write on workspace "w"`),
			want: []string{"lacks the permission (its role or workspaces", "mlcompute token create", `lacks the permission write on workspace "w"`},
		},
		{
			name: "not an API error",
			err:  errors.New("boom"),
			want: []string{"The engine failed to create workspace \"w\".", "bug in the engine", "Engine error: boom"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var diags diag.Diagnostics
			addEngineError(&diags, testSchemaTypeWithForceDestroy(), "Cannot Create Workspace", `create workspace "w"`, tt.err)
			if diags.ErrorsCount() != 1 {
				t.Fatalf("got %v", diags)
			}
			d := diags.Errors()[0]
			if d.Summary() != "Cannot Create Workspace" {
				t.Errorf("summary = %q", d.Summary())
			}
			for _, w := range tt.want {
				if !strings.Contains(d.Detail(), w) {
					t.Errorf("detail %q does not contain %q", d.Detail(), w)
				}
			}
			withPath, hasPath := d.(diag.DiagnosticWithPath)
			switch {
			case len(tt.wantPath.Steps()) == 0 && hasPath:
				t.Errorf("diagnostic has path %s, want none", withPath.Path())
			case len(tt.wantPath.Steps()) > 0 && (!hasPath || !withPath.Path().Equal(tt.wantPath)):
				t.Errorf("diagnostic %v is not on %s", d, tt.wantPath)
			}
		})
	}
}

func testSchemaTypeWithForceDestroy() attr.Type {
	attrs := map[string]attr.Type{"force_destroy": types.BoolType}
	maps.Copy(attrs, testSchemaType.AttrTypes)
	return types.ObjectType{AttrTypes: attrs}
}

// The workspace schema's own type resolves the engine's workspace fields.
func TestFieldPathWorkspaceSchema(t *testing.T) {
	var resp resource.SchemaResponse
	NewWorkspaceResource().Schema(context.Background(), resource.SchemaRequest{}, &resp)
	for field, want := range map[string]path.Path{
		"name":                       path.Root("name"),
		"location":                   path.Root("location"),
		"quotas.standardNCSv3Family": path.Root("quotas").AtMapKey("standardNCSv3Family"),
		"force_destroy":              path.Root("force_destroy"),
	} {
		if got, ok := fieldPath(resp.Schema.Type(), field); !ok || !got.Equal(want) {
			t.Errorf("fieldPath(%q) = %s, %v; want %s", field, got, ok, want)
		}
	}
}

func TestHCLField(t *testing.T) {
	for field, want := range map[string]string{
		"schedules.1.cron":               "schedules[1].cron",
		"schedules.0":                    "schedules[0]",
		"scale_settings.max_node_count":  "scale_settings.max_node_count",
		"deployments.blue.instance_type": "deployments.blue.instance_type",
		"vm_size":                        "vm_size",
	} {
		if got := hclField(field); got != want {
			t.Errorf("hclField(%q) = %q; want %q", field, got, want)
		}
	}
	err := api.Errorf(api.CodeInvalid, "schedules.1.cron", `schedules.1.cron "x" is not a valid cron expression`)
	if got := engineMessage(err); !strings.Contains(got, `schedules[1].cron "x"`) {
		t.Errorf("engineMessage = %q; want the path written schedules[1].cron", got)
	}
}
