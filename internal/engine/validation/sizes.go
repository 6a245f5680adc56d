package validation

import (
	"fmt"
	"slices"
	"strings"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/catalog"
)

// ComputeTypeNames lists the compute types in catalog order, for validators, error
// messages and docs.
func ComputeTypeNames() []string {
	types := catalog.ComputeTypes()
	names := make([]string, len(types))
	for i, t := range types {
		names[i] = string(t)
	}
	return names
}

// SizeFilter checks a VM size filter (the mlcompute_vm_sizes data source, GET /v1/sizes and
// 'mlcompute sizes list'). It refuses, with the filter field at fault:
//   - a compute type that is not one of catalog.ComputeTypes (naming the allowed values);
//   - a family the catalog does not know (naming the allowed families); families are
//     matched case-insensitively, as the filter itself matches them;
//   - a family whose sizes are all retired while IncludeRetired is false, because such a
//     filter can only ever return nothing: the message names the retirement date, a
//     current family and size to use instead, and include_retired = true;
//   - a negative minimum.
//
// Every error is an *api.Error with code invalid.
func SizeFilter(f api.SizeFilter) error {
	if f.ComputeType != "" && !f.ComputeType.Valid() {
		msg := fmt.Sprintf("unknown compute type %q; allowed values: %s", f.ComputeType, strings.Join(ComputeTypeNames(), ", "))
		if t, ok := catalog.ParseComputeType(string(f.ComputeType)); ok {
			msg = fmt.Sprintf("compute type %q must be spelled %q", f.ComputeType, t)
		}
		return api.Errorf(api.CodeInvalid, "compute_type", "%s", msg)
	}
	if f.Family != "" {
		if err := sizeFamily(f.Family, f.IncludeRetired); err != nil {
			return err
		}
	}
	for _, m := range []struct {
		field string
		value float64
	}{
		{"min_vcpus", float64(f.MinVCPUs)},
		{"min_memory_gb", f.MinMemoryGB},
		{"min_gpus", float64(f.MinGPUs)},
	} {
		if m.value < 0 {
			return api.Errorf(api.CodeInvalid, m.field, "%s must be 0 or more, got %g", m.field, m.value)
		}
	}
	return nil
}

// sizeFamily checks the family of a size filter.
func sizeFamily(name string, includeRetired bool) error {
	fam, ok := catalog.LookupFamily(name)
	if !ok {
		return api.Errorf(api.CodeInvalid, "family", "unknown VM family %q; allowed families: %s", name, strings.Join(FamilyNames(), ", "))
	}
	if includeRetired {
		return nil
	}
	sizes := catalog.List(catalog.Filter{Family: fam.Name, IncludeRetired: true})
	if len(sizes) == 0 || slices.ContainsFunc(sizes, func(s catalog.Size) bool { return !s.Retired() }) {
		return nil
	}
	// Every size is retired: name the last retirement date (when the family was gone for
	// good) and the successor of its smallest size, which the catalog guarantees is current.
	retiredOn, smallest := "", sizes[0]
	for _, s := range sizes {
		retiredOn = max(retiredOn, s.RetiredOn)
		if s.VCPUs < smallest.VCPUs {
			smallest = s
		}
	}
	successor := smallest.Successor
	succFamily := ""
	if s, ok := catalog.Lookup(successor); ok {
		succFamily = s.Family
	}
	return api.Errorf(api.CodeInvalid, "family",
		"VM family %q was retired on %s and has no current sizes; use family %q (for example size %q) instead, or set include_retired = true to list its retired sizes",
		fam.Name, retiredOn, succFamily, successor)
}
