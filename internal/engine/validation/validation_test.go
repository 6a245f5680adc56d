package validation

import (
	"strings"
	"testing"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
)

func TestNameRules(t *testing.T) {
	for _, tc := range []struct {
		rule NameRule
		name string
		ok   bool
	}{
		{WorkspaceName, "abc", true},
		{WorkspaceName, "a_b-c9", true},
		{WorkspaceName, "9lives", true},
		{WorkspaceName, "ab", false},
		{WorkspaceName, "-abc", false},
		{WorkspaceName, strings.Repeat("a", 33), true},
		{WorkspaceName, strings.Repeat("a", 34), false},
		{ComputeName, "gpu-cluster", true},
		{ComputeName, "cpu", true},
		{ComputeName, "1cpu", false},
		{ComputeName, "cpu_1", false},
		{ComputeName, "cluster-42", false}, // ends in -<digits>
		{ComputeName, "cluster-4a", true},
		{ComputeName, strings.Repeat("a", 24), true},
		{ComputeName, strings.Repeat("a", 25), false},
		{EndpointName, "scorer", true},
		{EndpointName, "scorer-", false},
		{EndpointName, "ab", false},
		{DeploymentName, "blue", true},
		{DeploymentName, "b", false},
	} {
		err := tc.rule.Check("name", tc.name)
		if (err == nil) != tc.ok {
			t.Errorf("%s %q: err = %v; want ok=%v", tc.rule.Kind, tc.name, err, tc.ok)
		}
		if err != nil && (!api.IsInvalid(err) || api.FieldOf(err) != "name") {
			t.Errorf("%s %q: error %v is not invalid on field name", tc.rule.Kind, tc.name, err)
		}
	}
}

func TestDuration(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		err  string
	}{
		{"PT120S", 120 * time.Second, ""},
		{"PT0S", 0, ""},
		{"P7D", 7 * 24 * time.Hour, ""},
		{"P1DT2H30M", 26*time.Hour + 30*time.Minute, ""},
		{"P8D", 0, "between PT0S and P7D"},
		{"P1M", 0, "years or months"},
		{"120s", 0, "not an ISO 8601 duration"},
		{"", 0, "not an ISO 8601 duration"},
		{"-PT5S", 0, "not an ISO 8601 duration"},
	} {
		got, err := Duration("d", tc.in, 0, MaxScaleDownAfterIdle)
		if tc.err == "" && (err != nil || got != tc.want) {
			t.Errorf("Duration(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
		if tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("Duration(%q) error = %v; want it to contain %q", tc.in, err, tc.err)
		}
	}
}

func TestScaleSettings(t *testing.T) {
	for _, tc := range []struct {
		s     api.ScaleSettings
		field string
	}{
		{api.ScaleSettings{MinNodeCount: 0, MaxNodeCount: 4}, ""},
		{api.ScaleSettings{MinNodeCount: -1, MaxNodeCount: 4}, "scale_settings.min_node_count"},
		{api.ScaleSettings{MinNodeCount: 0, MaxNodeCount: 0}, "scale_settings.max_node_count"},
		{api.ScaleSettings{MinNodeCount: 5, MaxNodeCount: 4}, "scale_settings.min_node_count"},
		{api.ScaleSettings{MaxNodeCount: 4, ScaleDownNodesAfterIdleDuration: "P10D"}, "scale_settings.scale_down_nodes_after_idle_duration"},
	} {
		_, err := ScaleSettings(&tc.s)
		if got := api.FieldOf(err); got != tc.field || (tc.field == "") != (err == nil) {
			t.Errorf("%+v: err = %v (field %q); want field %q", tc.s, err, got, tc.field)
		}
	}
}

func TestComputeClusterSize(t *testing.T) {
	base := api.ComputeSpec{Name: "gpu", Type: api.TypeComputeCluster, ScaleSettings: &api.ScaleSettings{MaxNodeCount: 2}}
	for _, tc := range []struct {
		size, want, err string
	}{
		{"standard_ds3_V2", "Standard_DS3_v2", ""},
		{"Standard_NC6", "", "retired on 2023-08-31"},
		{"Standard_Nope", "", "unknown VM size"},
	} {
		spec := base
		spec.VMSize = tc.size
		s, err := ComputeCluster(spec)
		if tc.err == "" && (err != nil || s.Name != tc.want) {
			t.Errorf("%s: %v, %v; want %s", tc.size, s.Name, err, tc.want)
		}
		if tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err) || api.FieldOf(err) != "vm_size") {
			t.Errorf("%s: err = %v; want vm_size error containing %q", tc.size, err, tc.err)
		}
	}
	spec := base
	spec.VMSize, spec.VMPriority = "Standard_DS3_v2", "Spot"
	if _, err := ComputeCluster(spec); api.FieldOf(err) != "vm_priority" || !strings.Contains(err.Error(), "Dedicated, LowPriority") {
		t.Errorf("bad priority: %v", err)
	}
}

func TestQuota(t *testing.T) {
	if err := Quota("standardNCSv3Family", 48); err != nil {
		t.Errorf("valid quota: %v", err)
	}
	if err := Quota("standardNCSv3Family", -1); api.FieldOf(err) != "quotas.standardNCSv3Family" {
		t.Errorf("negative quota: %v", err)
	}
	if err := Quota("standardncsv3family", 1); err == nil || !strings.Contains(err.Error(), `"standardNCSv3Family"`) {
		t.Errorf("wrong case: %v", err)
	}
}
