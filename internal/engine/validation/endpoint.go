package validation

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/catalog"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/lazyregexp"
)

// AuthModes lists the allowed auth_mode values, default first.
var AuthModes = []string{api.AuthModeKey, api.AuthModeAMLToken}

// KeyTypes lists the key names regeneration accepts.
var KeyTypes = []string{api.KeyPrimary, api.KeySecondary}

// Bounds of an online deployment's settings. Probe bounds follow Azure's managed online
// deployments: a probe may wait up to an hour to start and run at most once a second.
const (
	MaxProbeInitialDelay = time.Hour
	MinProbePeriod       = time.Second
	MaxProbePeriod       = time.Hour
	MinProbeTimeout      = time.Second
	MaxProbeTimeout      = 5 * time.Minute
	MaxProbeThreshold    = 1000
	MaxMirrorPercent     = 50
	// MaxInstanceCount bounds instance_count: every instance is a process with its own port.
	MaxInstanceCount = 100
)

// ReservedEnvironmentVariables are set by the engine for every instance; a deployment may
// not set them.
var ReservedEnvironmentVariables = []string{"PORT"}

var envName = lazyregexp.New(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Endpoint checks a whole endpoint spec: name, auth mode, every deployment, and the
// traffic and mirror maps against the deployments.
func Endpoint(spec api.EndpointSpec) error {
	if err := EndpointName.Check("name", spec.Name); err != nil {
		return err
	}
	return EndpointUpdate(api.EndpointUpdate{
		AuthMode: spec.AuthMode, Description: spec.Description, Tags: spec.Tags,
		Deployments: spec.Deployments, Traffic: spec.Traffic, MirrorTraffic: spec.MirrorTraffic,
	})
}

// EndpointUpdate checks everything of an endpoint but its name.
func EndpointUpdate(upd api.EndpointUpdate) error {
	if err := AuthMode(upd.AuthMode); err != nil {
		return err
	}
	if len(upd.Deployments) == 0 {
		return api.Errorf(api.CodeInvalid, "deployments", "an online endpoint needs at least one deployment in deployments")
	}
	for _, name := range slices.Sorted(maps.Keys(upd.Deployments)) {
		field := "deployments." + name
		if err := DeploymentName.Check(field, name); err != nil {
			return err
		}
		if err := Deployment(field, upd.Deployments[name]); err != nil {
			return err
		}
	}
	return Traffic(slices.Collect(maps.Keys(upd.Deployments)), upd.Traffic, upd.MirrorTraffic)
}

// AuthMode checks auth_mode; empty means the default, key.
func AuthMode(mode string) error {
	if mode == "" || slices.Contains(AuthModes, mode) {
		return nil
	}
	return api.Errorf(api.CodeInvalid, "auth_mode", "auth_mode %q is not allowed; allowed values: %s", mode, strings.Join(AuthModes, ", "))
}

// KeyType checks the key_type of a key regeneration.
func KeyType(t string) error {
	if slices.Contains(KeyTypes, t) {
		return nil
	}
	return api.Errorf(api.CodeInvalid, "key_type", "key_type %q is not allowed; allowed values: %s", t, strings.Join(KeyTypes, ", "))
}

// Deployment checks one deployment; field is its attribute path ("deployments.blue").
// Unset request settings and probes, and zero fields inside them, mean the defaults
// (DefaultDeployment fills them).
func Deployment(field string, d api.DeploymentSpec) error {
	if _, err := VMSize(field+".instance_type", d.InstanceType, catalog.OnlineDeployment); err != nil {
		return err
	}
	autoscaled := d.ScaleSettings.Autoscaled()
	if (d.InstanceCount < 1 && !autoscaled) || d.InstanceCount < 0 || d.InstanceCount > MaxInstanceCount {
		return api.Errorf(api.CodeInvalid, field+".instance_count", "instance_count must be between 1 and %d, got %d", MaxInstanceCount, d.InstanceCount)
	}
	if len(d.Command) == 0 || strings.TrimSpace(d.Command[0]) == "" {
		return api.Errorf(api.CodeInvalid, field+".command", "command must name a program that serves HTTP on the port in $PORT, e.g. [\"python3\", \"score.py\"]")
	}
	if err := Command(field+".command", d.Command); err != nil {
		return err
	}
	for _, k := range slices.Sorted(maps.Keys(d.EnvironmentVariables)) {
		f := field + ".environment_variables." + k
		if !envName.MatchString(k) {
			return api.Errorf(api.CodeInvalid, f, "environment variable name %q is not allowed: use letters, digits and '_', not starting with a digit", k)
		}
		if slices.Contains(ReservedEnvironmentVariables, k) {
			return api.Errorf(api.CodeInvalid, f, "environment variable %s is set by the engine to the port the instance must serve on; remove it", k)
		}
	}
	if err := EnvVars(field+".environment_variables", d.EnvironmentVariables); err != nil {
		return err
	}
	if rs := d.RequestSettings; rs != nil {
		if rs.RequestTimeoutMS != 0 && (rs.RequestTimeoutMS < 1 || rs.RequestTimeoutMS > api.MaxRequestTimeoutMS) {
			return api.Errorf(api.CodeInvalid, field+".request_settings.request_timeout_ms", "request_timeout_ms must be between 1 and %d, got %d", api.MaxRequestTimeoutMS, rs.RequestTimeoutMS)
		}
		if rs.MaxConcurrentRequestsPerInstance < 0 {
			return api.Errorf(api.CodeInvalid, field+".request_settings.max_concurrent_requests_per_instance", "max_concurrent_requests_per_instance must be 1 or more, got %d", rs.MaxConcurrentRequestsPerInstance)
		}
		if rs.MaxQueueWaitMS < 0 || rs.MaxQueueWaitMS > api.MaxMaxQueueWaitMS {
			return api.Errorf(api.CodeInvalid, field+".request_settings.max_queue_wait_ms", "max_queue_wait_ms must be between 1 and %d, got %d", api.MaxMaxQueueWaitMS, rs.MaxQueueWaitMS)
		}
	}
	if d.ScaleSettings != nil {
		if err := EndpointScale(field, *d.ScaleSettings); err != nil {
			return err
		}
	}
	if d.LivenessProbe != nil {
		if err := Probe(field+".liveness_probe", *d.LivenessProbe); err != nil {
			return err
		}
	}
	if d.ReadinessProbe != nil {
		if err := Probe(field+".readiness_probe", *d.ReadinessProbe); err != nil {
			return err
		}
	}
	return nil
}

// Probe checks a liveness or readiness probe; field is its attribute path. Empty or zero
// fields mean their defaults.
func Probe(field string, p api.Probe) error {
	p = probeWithDefaults(&p)
	if !strings.HasPrefix(p.Path, "/") {
		return api.Errorf(api.CodeInvalid, field+".path", "path must be an HTTP path starting with '/', got %q", p.Path)
	}
	if hasControl(p.Path) || strings.ContainsAny(p.Path, " #") {
		return api.Errorf(api.CodeInvalid, field+".path", "path must be an HTTP path without spaces, '#' or control characters (CR, LF, TAB...), got %q", p.Path)
	}
	if _, err := Duration(field+".initial_delay", p.InitialDelay, 0, MaxProbeInitialDelay); err != nil {
		return err
	}
	if _, err := Duration(field+".period", p.Period, MinProbePeriod, MaxProbePeriod); err != nil {
		return err
	}
	if _, err := Duration(field+".timeout", p.Timeout, MinProbeTimeout, MaxProbeTimeout); err != nil {
		return err
	}
	for _, th := range []struct {
		name string
		v    int64
	}{{"success_threshold", p.SuccessThreshold}, {"failure_threshold", p.FailureThreshold}} {
		if th.v < 1 || th.v > MaxProbeThreshold {
			return api.Errorf(api.CodeInvalid, field+"."+th.name, "%s must be between 1 and %d, got %d", th.name, MaxProbeThreshold, th.v)
		}
	}
	return nil
}

// ProbeTimes are a probe's durations, parsed.
type ProbeTimes struct {
	InitialDelay time.Duration `json:"initial_delay"`
	Period       time.Duration `json:"period"`
	Timeout      time.Duration `json:"timeout"`
}

// ParseProbe returns a checked probe's durations (defaults filled).
func ParseProbe(p api.Probe) ProbeTimes {
	p = probeWithDefaults(&p)
	var t ProbeTimes
	t.InitialDelay, _ = Duration("", p.InitialDelay, 0, MaxProbeInitialDelay)
	t.Period, _ = Duration("", p.Period, MinProbePeriod, MaxProbePeriod)
	t.Timeout, _ = Duration("", p.Timeout, MinProbeTimeout, MaxProbeTimeout)
	return t
}

// Traffic checks the traffic and mirror_traffic maps against the deployment names:
// every key a deployment, each traffic value 0..100 and their sum 0 or 100; at most one
// mirror, 0..50, to a deployment without live traffic.
func Traffic(deployments []string, traffic, mirror map[string]int64) error {
	known := slices.Sorted(slices.Values(deployments))
	unknown := func(field, attr, name string) error {
		return api.Errorf(api.CodeInvalid, field, "%s names deployment %q, which is not in deployments; known deployments: %s", attr, name, listOrNone(known))
	}
	var sum int64
	for _, name := range slices.Sorted(maps.Keys(traffic)) {
		v := traffic[name]
		if !slices.Contains(known, name) {
			return unknown("traffic."+name, "traffic", name)
		}
		if v < 0 || v > 100 {
			return api.Errorf(api.CodeInvalid, "traffic."+name, "traffic for deployment %q must be a percent between 0 and 100, got %d", name, v)
		}
		sum += v
	}
	if sum != 0 && sum != 100 {
		return api.Errorf(api.CodeInvalid, "traffic", "traffic percents must sum to 100 (or 0 to send no traffic), got %d (%s)", sum, describeTraffic(traffic))
	}
	if len(mirror) > 1 {
		return api.Errorf(api.CodeInvalid, "mirror_traffic", "mirror_traffic may name at most one deployment, got %d (%s)", len(mirror), strings.Join(slices.Sorted(maps.Keys(mirror)), ", "))
	}
	for name, v := range mirror {
		if !slices.Contains(known, name) {
			return unknown("mirror_traffic."+name, "mirror_traffic", name)
		}
		if v < 0 || v > MaxMirrorPercent {
			return api.Errorf(api.CodeInvalid, "mirror_traffic."+name, "mirror_traffic for deployment %q must be a percent between 0 and %d, got %d", name, MaxMirrorPercent, v)
		}
		if traffic[name] > 0 && v > 0 {
			return api.Errorf(api.CodeInvalid, "mirror_traffic."+name, "deployment %q receives %d%% of live traffic, so it cannot also be the mirror; mirror to a deployment whose traffic is 0", name, traffic[name])
		}
	}
	return nil
}

func listOrNone(names []string) string {
	if len(names) == 0 {
		return "(none)"
	}
	return strings.Join(names, ", ")
}

func describeTraffic(traffic map[string]int64) string {
	parts := make([]string, 0, len(traffic))
	for _, name := range slices.Sorted(maps.Keys(traffic)) {
		parts = append(parts, fmt.Sprintf("%s = %d", name, traffic[name]))
	}
	return strings.Join(parts, ", ")
}

// DefaultDeployment fills a deployment's unset settings with their documented defaults,
// so the engine stores, and the provider reads back, every value explicitly.
func DefaultDeployment(d *api.DeploymentSpec) {
	rs := api.RequestSettings{}
	if d.RequestSettings != nil {
		rs = *d.RequestSettings
	}
	if rs.RequestTimeoutMS == 0 {
		rs.RequestTimeoutMS = api.DefaultRequestTimeoutMS
	}
	if rs.MaxConcurrentRequestsPerInstance == 0 {
		rs.MaxConcurrentRequestsPerInstance = api.DefaultMaxConcurrentRequestsPerInstance
	}
	scale := scaleWithDefaults(d.ScaleSettings)
	d.ScaleSettings = &scale
	if rs.MaxQueueWaitMS == 0 {
		rs.MaxQueueWaitMS = DefaultMaxQueueWait(&scale)
	}
	d.RequestSettings = &rs
	live := probeWithDefaults(d.LivenessProbe)
	ready := probeWithDefaults(d.ReadinessProbe)
	d.LivenessProbe, d.ReadinessProbe = &live, &ready
}

// DefaultProbe is a probe with every default.
func DefaultProbe() api.Probe { return probeWithDefaults(nil) }

func probeWithDefaults(p *api.Probe) api.Probe {
	var out api.Probe
	if p != nil {
		out = *p
	}
	if out.Path == "" {
		out.Path = api.DefaultProbePath
	}
	if out.InitialDelay == "" {
		out.InitialDelay = api.DefaultProbeInitialDelay
	}
	if out.Period == "" {
		out.Period = api.DefaultProbePeriod
	}
	if out.Timeout == "" {
		out.Timeout = api.DefaultProbeTimeout
	}
	if out.SuccessThreshold == 0 {
		out.SuccessThreshold = api.DefaultProbeSuccessThreshold
	}
	if out.FailureThreshold == 0 {
		out.FailureThreshold = api.DefaultProbeFailureThreshold
	}
	return out
}

// DeploymentEnvironment checks a deployment's environment_id: empty, or the ID of an
// environment in the endpoint's own workspace (an endpoint cannot use another workspace's
// environment, as it cannot use its computes). It returns the environment's name.
func DeploymentEnvironment(field, workspace, id string) (string, error) {
	if id == "" {
		return "", nil
	}
	env, err := api.ParseID(id, api.CollectionEnvironments)
	if err != nil {
		return "", api.Errorf(api.CodeInvalid, field, "environment_id %q is not an environment ID; use an mlcompute_environment's id, /workspaces/{workspace}/environments/{name}", id)
	}
	if env.Workspace != workspace {
		return "", api.Errorf(api.CodeInvalid, field, "environment_id %q is in workspace %q, but the endpoint is in workspace %q; use an environment of the endpoint's workspace", id, env.Workspace, workspace)
	}
	return env.Name, nil
}
