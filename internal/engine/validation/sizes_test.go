package validation

import (
	"strings"
	"testing"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/catalog"
)

func TestSizeFilter(t *testing.T) {
	tests := []struct {
		name   string
		filter api.SizeFilter
		field  string   // "" when the filter is valid
		want   []string // substrings of the message
	}{
		{name: "empty", filter: api.SizeFilter{}},
		{name: "every compute type", filter: api.SizeFilter{ComputeType: catalog.OnlineDeployment}},
		{name: "current family", filter: api.SizeFilter{Family: "standardNCSv3Family", MinGPUs: 2, MinVCPUs: 12, MinMemoryGB: 200.5}},
		{name: "family in another case", filter: api.SizeFilter{Family: "STANDARDncsV3family"}},
		{name: "retired family with include_retired", filter: api.SizeFilter{Family: "standardNCFamily", IncludeRetired: true}},
		{
			name:   "unknown compute type",
			filter: api.SizeFilter{ComputeType: "Serverless"},
			field:  "compute_type",
			want:   []string{`unknown compute type "Serverless"`, "ComputeCluster, ComputeInstance, OnlineDeployment"},
		},
		{
			name:   "compute type in another case",
			filter: api.SizeFilter{ComputeType: "computecluster"},
			field:  "compute_type",
			want:   []string{`must be spelled "ComputeCluster"`},
		},
		{
			name:   "unknown family",
			filter: api.SizeFilter{Family: "standardXYZFamily"},
			field:  "family",
			want:   []string{`unknown VM family "standardXYZFamily"`, "standardNCSv3Family", "standardDSv2Family"},
		},
		{
			name:   "retired family",
			filter: api.SizeFilter{Family: "standardNCFamily"},
			field:  "family",
			want:   []string{"retired on 2023-08-31", `"standardNCASv3_T4Family"`, `"Standard_NC4as_T4_v3"`, "include_retired = true"},
		},
		{
			name:   "retired family spelled in another case",
			filter: api.SizeFilter{Family: "standardhbsfamily"},
			field:  "family",
			want:   []string{`"standardHBSFamily" was retired on 2024-08-31`, `"standardHBv3Family"`, `"Standard_HB120rs_v3"`},
		},
		{name: "negative vcpus", filter: api.SizeFilter{MinVCPUs: -1}, field: "min_vcpus", want: []string{"min_vcpus must be 0 or more, got -1"}},
		{name: "negative memory", filter: api.SizeFilter{MinMemoryGB: -0.5}, field: "min_memory_gb", want: []string{"got -0.5"}},
		{name: "negative gpus", filter: api.SizeFilter{MinGPUs: -2}, field: "min_gpus", want: []string{"min_gpus must be 0 or more"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := SizeFilter(tt.filter)
			if tt.field == "" {
				if err != nil {
					t.Fatalf("SizeFilter(%+v) = %v, want nil", tt.filter, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("SizeFilter(%+v) = nil, want an error on %s", tt.filter, tt.field)
			}
			if got := api.FieldOf(err); got != tt.field {
				t.Errorf("field = %q, want %q", got, tt.field)
			}
			if !api.IsInvalid(err) {
				t.Errorf("code = %q, want invalid", api.CodeOf(err))
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("message %q does not contain %q", err.Error(), w)
				}
			}
		})
	}
}

// Every family whose sizes are all retired must be refused without include_retired, and
// its message must name a successor that is current.
func TestSizeFilterEveryRetiredFamily(t *testing.T) {
	for _, fam := range catalog.Families() {
		sizes := catalog.List(catalog.Filter{Family: fam.Name, IncludeRetired: true})
		current := catalog.List(catalog.Filter{Family: fam.Name})
		err := SizeFilter(api.SizeFilter{Family: fam.Name})
		switch {
		case len(sizes) > 0 && len(current) == 0:
			if err == nil {
				t.Errorf("family %s is retired but SizeFilter accepted it", fam.Name)
				continue
			}
			if !strings.Contains(err.Error(), "retired on "+sizes[0].RetiredOn) {
				t.Errorf("family %s: message %q does not name the retirement date", fam.Name, err)
			}
			named := false
			for _, s := range sizes {
				succ, ok := catalog.Lookup(s.Successor)
				named = named || ok && !succ.Retired() && strings.Contains(err.Error(), `"`+succ.Name+`"`)
			}
			if !named {
				t.Errorf("family %s: message %q does not name a current successor", fam.Name, err)
			}
		case err != nil:
			t.Errorf("family %s has current sizes but SizeFilter refused it: %v", fam.Name, err)
		}
	}
}

func TestComputeTypeNames(t *testing.T) {
	got := strings.Join(ComputeTypeNames(), ",")
	if got != "ComputeCluster,ComputeInstance,OnlineDeployment" {
		t.Errorf("ComputeTypeNames() = %s", got)
	}
}
