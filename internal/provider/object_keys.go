package provider

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/zclconf/go-cty/cty"
)

// Terraform converts an object value such as `scale_settings = { max_node_countt = 3 }` to
// the attribute's type before the provider sees it, and the conversion drops keys the type
// does not have (terraform-plugin-framework#1210): a misspelled key vanishes without a word
// and the plan uses the default. The provider cannot see the dropped key in what terraform
// sends, so it reads the configuration's own text: the root module's .tf files in the
// working directory terraform runs in (and runs its provider in), where it finds each
// object written inline in a resource of this provider and checks its keys against the
// attribute's schema. Objects built elsewhere (variables, locals, modules, JSON syntax)
// are not seen; the docs' common mistakes say so.

// unknownObjectKeys returns an error for every key of an inline object value, in a resource
// of this provider in the .tf files of dir, that its attribute does not have.
func unknownObjectKeys(ctx context.Context, dir string, resources []func() resource.Resource) diag.Diagnostics {
	files, _ := filepath.Glob(filepath.Join(dir, "*.tf"))
	if len(files) == 0 {
		return nil
	}
	schemas := map[string]map[string]schema.Attribute{}
	for _, newResource := range resources {
		r := newResource()
		var md resource.MetadataResponse
		r.Metadata(ctx, resource.MetadataRequest{ProviderTypeName: "mlcompute"}, &md)
		var sr resource.SchemaResponse
		r.Schema(ctx, resource.SchemaRequest{}, &sr)
		schemas[md.TypeName] = sr.Schema.Attributes
	}
	var diags diag.Diagnostics
	for _, name := range files {
		src, err := os.ReadFile(name)
		if err != nil {
			continue
		}
		file, parseDiags := hclsyntax.ParseConfig(src, filepath.Base(name), hcl.InitialPos)
		if parseDiags.HasErrors() {
			continue // terraform reports the syntax
		}
		body, ok := file.Body.(*hclsyntax.Body)
		if !ok {
			continue
		}
		for _, block := range body.Blocks {
			if block.Type != "resource" || len(block.Labels) != 2 {
				continue
			}
			attrs, ok := schemas[block.Labels[0]]
			if !ok {
				continue
			}
			where := block.Labels[0] + "." + block.Labels[1]
			inOrder := make([]*hclsyntax.Attribute, 0, len(block.Body.Attributes))
			for _, a := range block.Body.Attributes {
				inOrder = append(inOrder, a)
			}
			slices.SortFunc(inOrder, func(a, b *hclsyntax.Attribute) int { return a.SrcRange.Start.Byte - b.SrcRange.Start.Byte })
			for _, a := range inOrder {
				if s, ok := attrs[a.Name]; ok {
					checkObjectKeys(&diags, where, a.Name, a.Expr, s)
				}
			}
		}
	}
	return diags
}

// checkObjectKeys checks expr, the value of attribute s at path, against s's nested schema.
func checkObjectKeys(diags *diag.Diagnostics, where, path string, expr hclsyntax.Expression, s schema.Attribute) {
	switch s := s.(type) {
	case schema.SingleNestedAttribute:
		checkObject(diags, where, path, expr, s.Attributes)
	case schema.MapNestedAttribute:
		if obj, ok := expr.(*hclsyntax.ObjectConsExpr); ok {
			for _, item := range obj.Items {
				key, ok := objectKey(item.KeyExpr)
				if !ok {
					continue
				}
				checkObject(diags, where, fmt.Sprintf("%s[%q]", path, key), item.ValueExpr, s.NestedObject.Attributes)
			}
		}
	case schema.ListNestedAttribute:
		checkElements(diags, where, path, expr, s.NestedObject.Attributes)
	case schema.SetNestedAttribute:
		checkElements(diags, where, path, expr, s.NestedObject.Attributes)
	}
}

func checkElements(diags *diag.Diagnostics, where, path string, expr hclsyntax.Expression, attrs map[string]schema.Attribute) {
	if tuple, ok := expr.(*hclsyntax.TupleConsExpr); ok {
		for i, e := range tuple.Exprs {
			checkObject(diags, where, fmt.Sprintf("%s[%d]", path, i), e, attrs)
		}
	}
}

// checkObject checks an inline object's keys against attrs, and its values in turn.
func checkObject(diags *diag.Diagnostics, where, path string, expr hclsyntax.Expression, attrs map[string]schema.Attribute) {
	obj, ok := expr.(*hclsyntax.ObjectConsExpr)
	if !ok {
		return // a reference or a function's result: its keys are not in the text
	}
	for _, item := range obj.Items {
		key, ok := objectKey(item.KeyExpr)
		if !ok {
			continue
		}
		s, ok := attrs[key]
		if !ok {
			known := make([]string, 0, len(attrs))
			for name := range attrs {
				known = append(known, name)
			}
			slices.Sort(known)
			r := item.KeyExpr.Range()
			diags.AddError("Unknown Attribute In Object",
				fmt.Sprintf("%s:%d: %s in %s has no attribute %q. Terraform drops keys an object's type does not have "+
					"without a word (terraform-plugin-framework#1210), so the plan would not use this value.\n\n"+
					"Correct or remove %q: %s has %s.", r.Filename, r.Start.Line, path, where, key, key, path,
					strings.Join(known, ", ")))
			continue
		}
		checkObjectKeys(diags, where, path+"."+key, item.ValueExpr, s)
	}
}

// objectKey returns an object item's key when the text fixes it: a bare name or a string.
func objectKey(expr hclsyntax.Expression) (string, bool) {
	if name := hcl.ExprAsKeyword(expr); name != "" {
		return name, true
	}
	v, d := expr.Value(nil)
	if d.HasErrors() || !v.IsKnown() || v.IsNull() || v.Type() != cty.String {
		return "", false
	}
	return v.AsString(), true
}
