package validation

import (
	"fmt"
	"strings"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
)

// ScaleTypes lists the allowed scale_settings.type values of a deployment, default first.
var ScaleTypes = []string{api.ScaleTypeDefault, api.ScaleTypeTargetUtilization}

// Bounds of a deployment's scale_settings. The polling interval is Azure's minimum at the
// low end; a delay of a week is longer than any sensible scale-down.
const (
	MinEndpointPollingInterval = time.Second
	MaxEndpointPollingInterval = 10 * time.Minute
	MinScaleDelay              = time.Second
	MaxScaleDelay              = 7 * 24 * time.Hour
)

// ScaleTimes are a deployment's scale durations, parsed; ScaleToZeroDelay is
// ScaleDownDelay when scale_to_zero_delay is unset.
type ScaleTimes struct {
	PollingInterval  time.Duration `json:"polling_interval"`
	ScaleDownDelay   time.Duration `json:"scale_down_delay"`
	ScaleToZeroDelay time.Duration `json:"scale_to_zero_delay"`
}

// EndpointScale checks a deployment's scale_settings; field is the deployment's attribute
// path ("deployments.blue"). Empty or zero fields mean their defaults (DefaultDeployment
// fills them).
func EndpointScale(field string, s api.EndpointScaleSettings) error {
	f := field + ".scale_settings"
	s = scaleWithDefaults(&s)
	if !containsString(ScaleTypes, s.Type) {
		return api.Errorf(api.CodeInvalid, f+".type", "type %q is not allowed; allowed values: %s", s.Type, strings.Join(ScaleTypes, ", "))
	}
	if s.MinInstances < 0 || s.MinInstances > MaxInstanceCount {
		return api.Errorf(api.CodeInvalid, f+".min_instances", "min_instances must be between 0 and %d, got %d", MaxInstanceCount, s.MinInstances)
	}
	if s.MaxInstances < 1 || s.MaxInstances > MaxInstanceCount {
		return api.Errorf(api.CodeInvalid, f+".max_instances", "max_instances must be between 1 and %d, got %d", MaxInstanceCount, s.MaxInstances)
	}
	if s.MinInstances > s.MaxInstances {
		return api.Errorf(api.CodeInvalid, f+".min_instances", "min_instances (%d) must not exceed max_instances (%d)", s.MinInstances, s.MaxInstances)
	}
	if s.TargetUtilizationPercentage < 1 || s.TargetUtilizationPercentage > 100 {
		return api.Errorf(api.CodeInvalid, f+".target_utilization_percentage", "target_utilization_percentage must be between 1 and 100, got %d", s.TargetUtilizationPercentage)
	}
	if _, err := Duration(f+".polling_interval", s.PollingInterval, MinEndpointPollingInterval, MaxEndpointPollingInterval); err != nil {
		return err
	}
	if _, err := Duration(f+".scale_down_delay", s.ScaleDownDelay, MinScaleDelay, MaxScaleDelay); err != nil {
		return err
	}
	if s.ScaleToZeroDelay != "" {
		if _, err := Duration(f+".scale_to_zero_delay", s.ScaleToZeroDelay, MinScaleDelay, MaxScaleDelay); err != nil {
			return err
		}
	}
	return nil
}

// ParseScale returns a checked scale_settings' durations (defaults filled).
func ParseScale(s *api.EndpointScaleSettings) ScaleTimes {
	v := scaleWithDefaults(s)
	var t ScaleTimes
	t.PollingInterval, _ = Duration("", v.PollingInterval, MinEndpointPollingInterval, MaxEndpointPollingInterval)
	t.ScaleDownDelay, _ = Duration("", v.ScaleDownDelay, MinScaleDelay, MaxScaleDelay)
	t.ScaleToZeroDelay = t.ScaleDownDelay
	if v.ScaleToZeroDelay != "" {
		t.ScaleToZeroDelay, _ = Duration("", v.ScaleToZeroDelay, MinScaleDelay, MaxScaleDelay)
	}
	return t
}

// DefaultScale is scale_settings with every default.
func DefaultScale() api.EndpointScaleSettings { return scaleWithDefaults(nil) }

func scaleWithDefaults(s *api.EndpointScaleSettings) api.EndpointScaleSettings {
	var out api.EndpointScaleSettings
	if s != nil {
		out = *s
	} else {
		out.MinInstances = api.DefaultMinInstances
	}
	if out.Type == "" {
		out.Type = api.ScaleTypeDefault
	}
	if out.MaxInstances == 0 {
		out.MaxInstances = max(api.DefaultMaxInstances, out.MinInstances)
	}
	if out.TargetUtilizationPercentage == 0 {
		out.TargetUtilizationPercentage = api.DefaultTargetUtilizationPercentage
	}
	if out.PollingInterval == "" {
		out.PollingInterval = api.DefaultEndpointPollingInterval
	}
	if out.ScaleDownDelay == "" {
		out.ScaleDownDelay = api.DefaultEndpointScaleDownDelay
	}
	return out
}

// DefaultMaxQueueWait is max_queue_wait_ms when unset: Azure's 500 ms, or 60 s for a
// deployment that can scale to zero, whose first request waits for an instance to start.
func DefaultMaxQueueWait(s *api.EndpointScaleSettings) int64 {
	if s.Autoscaled() && s.MinInstances == 0 {
		return api.DefaultMaxQueueWaitFromZeroMS
	}
	return api.DefaultMaxQueueWaitMS
}

// InstanceCountIgnored is what plan says of a configuration that sets both instance_count
// and scale_settings.type = target_utilization: the autoscaler decides the count between
// min_instances and max_instances, and instance_count is ignored (DESIGN 3), which a user who
// set it should hear. It is empty when there is nothing to say. instanceCountSet is whether
// the configuration sets instance_count.
func InstanceCountIgnored(instanceCountSet bool, scaleType string) string {
	if !instanceCountSet || scaleType != api.ScaleTypeTargetUtilization {
		return ""
	}
	return fmt.Sprintf("instance_count is ignored with scale_settings.type = %q: the autoscaler keeps the deployment between min_instances and max_instances. Remove instance_count, or use type = %q for a fixed count.", api.ScaleTypeTargetUtilization, api.ScaleTypeDefault)
}

// DeploymentQuotaCount is what a deployment holds of its workspace's quota: max_instances
// when it is autoscaled, else instance_count (Azure counts a deployment's instances against
// the subscription's quota too), with the attribute that sets it, relative to the
// deployment.
func DeploymentQuotaCount(d api.DeploymentSpec) (count int64, attribute string) {
	if d.ScaleSettings.Autoscaled() {
		return d.ScaleSettings.MaxInstances, "scale_settings.max_instances"
	}
	return d.InstanceCount, "instance_count"
}

func containsString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
