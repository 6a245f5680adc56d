package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

func TestShapedAttributes(t *testing.T) {
	const block = `{
		"id": {"type": "string", "computed": true},
		"name": {"type": "string", "description": "The name.", "required": true},
		"count": {"type": "number", "optional": true, "computed": true},
		"enabled": {"type": "bool", "optional": true},
		"tags": {"type": ["map", "string"], "optional": true, "computed": true},
		"settings": {"nested_type": {"nesting_mode": "single", "attributes": {
			"max": {"type": "number", "required": true}
		}}, "optional": true}
	}`
	var in map[string]jsonAttribute
	if err := json.Unmarshal([]byte(block), &in); err != nil {
		t.Fatal(err)
	}
	attrs, err := shapedAttributes(in)
	if err != nil {
		t.Fatal(err)
	}
	if a, ok := attrs["id"].(schema.StringAttribute); !ok || !a.Computed || a.Optional || a.Required {
		t.Errorf("id = %#v, want a computed string", attrs["id"])
	}
	if a, ok := attrs["name"].(schema.StringAttribute); !ok || !a.Required || a.MarkdownDescription != "The name." {
		t.Errorf("name = %#v, want a required string with its description", attrs["name"])
	}
	if a, ok := attrs["count"].(schema.Int64Attribute); !ok || !a.Optional || !a.Computed {
		t.Errorf("count = %#v, want an optional computed number", attrs["count"])
	}
	if _, ok := attrs["enabled"].(schema.BoolAttribute); !ok {
		t.Errorf("enabled = %#v, want a bool", attrs["enabled"])
	}
	if _, ok := attrs["tags"].(schema.MapAttribute); !ok {
		t.Errorf("tags = %#v, want a map", attrs["tags"])
	}
	nested, ok := attrs["settings"].(schema.SingleNestedAttribute)
	if !ok || !nested.Optional {
		t.Fatalf("settings = %#v, want an optional single nested attribute", attrs["settings"])
	}
	if a, ok := nested.Attributes["max"].(schema.Int64Attribute); !ok || !a.Required {
		t.Errorf("settings.max = %#v, want a required number", nested.Attributes["max"])
	}

	for block, want := range map[string]string{
		`{"l": {"type": ["list", "string"], "optional": true}}`:                                        `l: type ["list", "string"] is not supported`,
		`{"s": {"nested_type": {"nesting_mode": "list", "attributes": {}}, "optional": true}}`:         `s: nesting mode "list" is not supported`,
		`{"s": {"nested_type": {"nesting_mode": "single", "attributes": {"x": {"type": "dynamic"}}}}}`: `s.x: type "dynamic" is not supported`,
	} {
		var in map[string]jsonAttribute
		if err := json.Unmarshal([]byte(block), &in); err != nil {
			t.Fatal(err)
		}
		if _, err := shapedAttributes(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", block, err, want)
		}
	}
}

func TestKnownZeros(t *testing.T) {
	counts := tftypes.Object{AttributeTypes: map[string]tftypes.Type{"idle": tftypes.Number, "running": tftypes.Number}}
	typ := tftypes.Object{AttributeTypes: map[string]tftypes.Type{
		"id": tftypes.String, "name": tftypes.String, "enabled": tftypes.Bool,
		"tags": tftypes.Map{ElementType: tftypes.String}, "counts": counts,
	}}
	plan := tftypes.NewValue(typ, map[string]tftypes.Value{
		"id":      tftypes.NewValue(tftypes.String, tftypes.UnknownValue),
		"name":    tftypes.NewValue(tftypes.String, "cpu000"),
		"enabled": tftypes.NewValue(tftypes.Bool, tftypes.UnknownValue),
		"tags":    tftypes.NewValue(tftypes.Map{ElementType: tftypes.String}, tftypes.UnknownValue),
		"counts":  tftypes.NewValue(counts, tftypes.UnknownValue),
	})
	got, err := knownZeros(plan)
	if err != nil {
		t.Fatal(err)
	}
	want := tftypes.NewValue(typ, map[string]tftypes.Value{
		"id":      tftypes.NewValue(tftypes.String, ""),
		"name":    tftypes.NewValue(tftypes.String, "cpu000"),
		"enabled": tftypes.NewValue(tftypes.Bool, false),
		"tags":    tftypes.NewValue(tftypes.Map{ElementType: tftypes.String}, map[string]tftypes.Value{}),
		"counts": tftypes.NewValue(counts, map[string]tftypes.Value{
			"idle": tftypes.NewValue(tftypes.Number, 0), "running": tftypes.NewValue(tftypes.Number, 0),
		}),
	})
	if !got.Equal(want) {
		t.Errorf("knownZeros = %s, want %s", got, want)
	}
}
