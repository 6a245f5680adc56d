package validation

import (
	"fmt"
	"strings"
	"time"

	"github.com/sosodev/duration"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/catalog"
)

// VMPriorities lists the allowed vm_priority values, default first.
var VMPriorities = []string{api.PriorityDedicated, api.PriorityLowPriority}

// Bounds of scale_down_nodes_after_idle_duration.
const (
	MinScaleDownAfterIdle = 0
	MaxScaleDownAfterIdle = 7 * 24 * time.Hour
)

// Duration parses an ISO 8601 duration ("PT120S", "P1DT2H") and checks it lies in
// [min, max]. Years and months are refused: their length depends on the calendar.
func Duration(field, s string, min, max time.Duration) (time.Duration, error) {
	d, err := duration.Parse(s)
	if err != nil || strings.ContainsAny(s, "-,") {
		return 0, api.Errorf(api.CodeInvalid, field, "%s %q is not an ISO 8601 duration such as PT120S, PT15M or P1D", field, s)
	}
	if d.Years != 0 || d.Months != 0 {
		return 0, api.Errorf(api.CodeInvalid, field, "%s %q uses years or months; give it in weeks, days, hours, minutes or seconds", field, s)
	}
	td := d.ToTimeDuration()
	if td < min || td > max {
		return 0, api.Errorf(api.CodeInvalid, field, "%s %q is out of range: it must be between %s and %s", field, s, FormatDuration(min), FormatDuration(max))
	}
	return td, nil
}

// FormatDuration writes a duration in ISO 8601 form, e.g. PT2M or P7D.
func FormatDuration(d time.Duration) string {
	if d == 0 {
		return "PT0S"
	}
	if d%(24*time.Hour) == 0 {
		return fmt.Sprintf("P%dD", d/(24*time.Hour))
	}
	return duration.Format(d)
}

// VMSize checks that a size exists, supports the compute type and is not retired, and
// returns it in the catalog's canonical spelling.
func VMSize(field, name string, t catalog.ComputeType) (catalog.Size, error) {
	s, err := catalog.Resolve(name, t)
	if err != nil {
		return catalog.Size{}, api.Errorf(api.CodeInvalid, field, "%s", err.Error())
	}
	return s, nil
}

// VMPriority checks a vm_priority value.
func VMPriority(p string) error {
	for _, v := range VMPriorities {
		if p == v {
			return nil
		}
	}
	return api.Errorf(api.CodeInvalid, "vm_priority", "vm_priority %q is not allowed; allowed values: %s", p, strings.Join(VMPriorities, ", "))
}

// MaxNodeCount bounds max_node_count (and so min_node_count and a job's instance_count):
// Azure Machine Learning allows at most 65,000 nodes in one cluster. The bound keeps every
// node count, and every vCPU sum built from one (65,000 x the largest size's vCPUs x any
// number of computes a store can hold), far from int64 overflow.
const MaxNodeCount = 65000

// InstanceCount checks a job's instance_count: 1 to MaxNodeCount.
func InstanceCount(n int64) error {
	if n < 1 || n > MaxNodeCount {
		return api.Errorf(api.CodeInvalid, "instance_count", "instance_count must be between 1 and %d, got %d", MaxNodeCount, n)
	}
	return nil
}

// ScaleSettings checks a cluster's scale settings and returns the idle duration.
func ScaleSettings(s *api.ScaleSettings) (time.Duration, error) {
	if s == nil {
		return 0, api.Errorf(api.CodeInvalid, "scale_settings", "scale_settings is required for a compute cluster")
	}
	if s.MinNodeCount < 0 {
		return 0, api.Errorf(api.CodeInvalid, "scale_settings.min_node_count", "min_node_count must be 0 or more, got %d", s.MinNodeCount)
	}
	if s.MinNodeCount > MaxNodeCount {
		return 0, api.Errorf(api.CodeInvalid, "scale_settings.min_node_count", "min_node_count must be at most %d, got %d", MaxNodeCount, s.MinNodeCount)
	}
	if s.MaxNodeCount < 1 || s.MaxNodeCount > MaxNodeCount {
		return 0, api.Errorf(api.CodeInvalid, "scale_settings.max_node_count", "max_node_count must be between 1 and %d, got %d", MaxNodeCount, s.MaxNodeCount)
	}
	if s.MinNodeCount > s.MaxNodeCount {
		return 0, api.Errorf(api.CodeInvalid, "scale_settings.min_node_count", "min_node_count (%d) must not be greater than max_node_count (%d)", s.MinNodeCount, s.MaxNodeCount)
	}
	idle := s.WithDefaults().ScaleDownNodesAfterIdleDuration
	return Duration("scale_settings.scale_down_nodes_after_idle_duration", idle, MinScaleDownAfterIdle, MaxScaleDownAfterIdle)
}

// ComputeCluster checks a cluster spec and returns its size.
func ComputeCluster(spec api.ComputeSpec) (catalog.Size, error) {
	if err := ComputeName.Check("name", spec.Name); err != nil {
		return catalog.Size{}, err
	}
	size, err := VMSize("vm_size", spec.VMSize, catalog.ComputeCluster)
	if err != nil {
		return size, err
	}
	if spec.VMPriority != "" {
		if err := VMPriority(spec.VMPriority); err != nil {
			return size, err
		}
	}
	if spec.VMPriority == api.PriorityLowPriority && !size.LowPriorityCapable {
		return size, api.Errorf(api.CodeInvalid, "vm_priority", "VM size %s cannot run at LowPriority; use Dedicated", size.Name)
	}
	_, err = ScaleSettings(spec.ScaleSettings)
	return size, err
}
