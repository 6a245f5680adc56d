package validation

import (
	"strings"
	"testing"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
)

func validDeployment() api.DeploymentSpec {
	return api.DeploymentSpec{InstanceType: "Standard_DS2_v2", InstanceCount: 1, Command: []string{"python3", "score.py"}}
}

func validEndpoint() api.EndpointSpec {
	return api.EndpointSpec{
		Name:        "scoring",
		Deployments: map[string]api.DeploymentSpec{"blue": validDeployment(), "green": validDeployment()},
		Traffic:     map[string]int64{"blue": 100},
	}
}

func TestEndpoint(t *testing.T) {
	for _, tc := range []struct {
		name  string
		edit  func(*api.EndpointSpec)
		field string
		err   string
	}{
		{"valid", func(*api.EndpointSpec) {}, "", ""},
		{"aml token", func(s *api.EndpointSpec) { s.AuthMode = "aml_token" }, "", ""},
		{"bad name", func(s *api.EndpointSpec) { s.Name = "1x" }, "name", "invalid online endpoint name"},
		{"name ends in dash", func(s *api.EndpointSpec) { s.Name = "abc-" }, "name", "ending with a letter or digit"},
		{"auth mode", func(s *api.EndpointSpec) { s.AuthMode = "Key" }, "auth_mode", `auth_mode "Key" is not allowed; allowed values: key, aml_token`},
		{"no deployments", func(s *api.EndpointSpec) { s.Deployments = nil; s.Traffic = nil }, "deployments", "at least one deployment"},
		{"deployment name", func(s *api.EndpointSpec) { s.Deployments["b_1"] = validDeployment() }, "deployments.b_1", "invalid deployment name"},
		{"deployment size", func(s *api.EndpointSpec) {
			d := validDeployment()
			d.InstanceType = "Standard_M128ms"
			s.Deployments["green"] = d
		}, "deployments.green.instance_type", "does not support OnlineDeployment"},
		{"sum 90", func(s *api.EndpointSpec) { s.Traffic = map[string]int64{"blue": 80, "green": 10} }, "traffic", "traffic percents must sum to 100 (or 0 to send no traffic), got 90 (blue = 80, green = 10)"},
		{"unknown in traffic", func(s *api.EndpointSpec) { s.Traffic = map[string]int64{"blue": 50, "red": 50} }, "traffic.red", `traffic names deployment "red", which is not in deployments; known deployments: blue, green`},
		{"two mirrors", func(s *api.EndpointSpec) { s.MirrorTraffic = map[string]int64{"blue": 0, "green": 10} }, "mirror_traffic", "at most one deployment, got 2 (blue, green)"},
		{"mirror 60", func(s *api.EndpointSpec) { s.MirrorTraffic = map[string]int64{"green": 60} }, "mirror_traffic.green", "between 0 and 50, got 60"},
		{"mirror with live traffic", func(s *api.EndpointSpec) { s.MirrorTraffic = map[string]int64{"blue": 10} }, "mirror_traffic.blue", "receives 100% of live traffic"},
		{"mirror unknown", func(s *api.EndpointSpec) { s.MirrorTraffic = map[string]int64{"red": 10} }, "mirror_traffic.red", "not in deployments"},
		{"mirror ok", func(s *api.EndpointSpec) { s.MirrorTraffic = map[string]int64{"green": 50} }, "", ""},
		{"zero traffic", func(s *api.EndpointSpec) { s.Traffic = map[string]int64{"blue": 0, "green": 0} }, "", ""},
		{"negative traffic", func(s *api.EndpointSpec) { s.Traffic = map[string]int64{"blue": 110, "green": -10} }, "traffic.blue", "between 0 and 100, got 110"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := validEndpoint()
			tc.edit(&spec)
			checkErr(t, Endpoint(spec), tc.field, tc.err)
		})
	}
}

func TestDeployment(t *testing.T) {
	for _, tc := range []struct {
		name  string
		edit  func(*api.DeploymentSpec)
		field string
		err   string
	}{
		{"valid", func(*api.DeploymentSpec) {}, "", ""},
		{"size any case", func(d *api.DeploymentSpec) { d.InstanceType = "standard_ds2_v2" }, "", ""},
		{"unknown size", func(d *api.DeploymentSpec) { d.InstanceType = "Standard_X1" }, "d.instance_type", "Standard_X1"},
		{"count 0", func(d *api.DeploymentSpec) { d.InstanceCount = 0 }, "d.instance_count", "between 1 and 100, got 0"},
		{"no command", func(d *api.DeploymentSpec) { d.Command = nil }, "d.command", "serves HTTP on the port in $PORT"},
		{"env name", func(d *api.DeploymentSpec) { d.EnvironmentVariables = map[string]string{"1X": "y"} }, "d.environment_variables.1X", "not allowed"},
		{"env PORT", func(d *api.DeploymentSpec) { d.EnvironmentVariables = map[string]string{"PORT": "80"} }, "d.environment_variables.PORT", "set by the engine"},
		{"timeout high", func(d *api.DeploymentSpec) {
			d.RequestSettings = &api.RequestSettings{RequestTimeoutMS: 180001}
		}, "d.request_settings.request_timeout_ms", "between 1 and 180000, got 180001"},
		{"timeout negative", func(d *api.DeploymentSpec) {
			d.RequestSettings = &api.RequestSettings{RequestTimeoutMS: -1}
		}, "d.request_settings.request_timeout_ms", "between 1 and 180000"},
		{"concurrency", func(d *api.DeploymentSpec) {
			d.RequestSettings = &api.RequestSettings{MaxConcurrentRequestsPerInstance: -2}
		}, "d.request_settings.max_concurrent_requests_per_instance", "1 or more"},
		{"probe path", func(d *api.DeploymentSpec) { d.LivenessProbe = &api.Probe{Path: "health"} }, "d.liveness_probe.path", "starting with '/'"},
		{"probe period", func(d *api.DeploymentSpec) { d.ReadinessProbe = &api.Probe{Period: "10s"} }, "d.readiness_probe.period", "not an ISO 8601 duration"},
		{"probe period zero", func(d *api.DeploymentSpec) { d.ReadinessProbe = &api.Probe{Period: "PT0S"} }, "d.readiness_probe.period", "between PT1S and PT1H"},
		{"probe delay", func(d *api.DeploymentSpec) { d.ReadinessProbe = &api.Probe{InitialDelay: "PT2H"} }, "d.readiness_probe.initial_delay", "between PT0S and PT1H"},
		{"probe timeout", func(d *api.DeploymentSpec) { d.ReadinessProbe = &api.Probe{Timeout: "PT10M"} }, "d.readiness_probe.timeout", "between PT1S and PT5M"},
		{"probe threshold", func(d *api.DeploymentSpec) { d.LivenessProbe = &api.Probe{FailureThreshold: -1} }, "d.liveness_probe.failure_threshold", "between 1 and 1000, got -1"},
		{"probe full", func(d *api.DeploymentSpec) {
			d.LivenessProbe = &api.Probe{Path: "/health", InitialDelay: "PT0S", Period: "PT1S", Timeout: "PT1S", SuccessThreshold: 1, FailureThreshold: 3}
		}, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := validDeployment()
			tc.edit(&d)
			checkErr(t, Deployment("d", d), tc.field, tc.err)
		})
	}
}

func TestDefaultDeployment(t *testing.T) {
	d := validDeployment()
	d.ReadinessProbe = &api.Probe{Path: "/ready", FailureThreshold: 3}
	DefaultDeployment(&d)
	want := api.RequestSettings{RequestTimeoutMS: 5000, MaxConcurrentRequestsPerInstance: 1, MaxQueueWaitMS: 500}
	if *d.RequestSettings != want {
		t.Errorf("request settings %+v; want %+v", *d.RequestSettings, want)
	}
	wantScale := api.EndpointScaleSettings{Type: "default", MinInstances: 1, MaxInstances: 1, TargetUtilizationPercentage: 70, PollingInterval: "PT1S", ScaleDownDelay: "PT5M"}
	if *d.ScaleSettings != wantScale {
		t.Errorf("scale settings %+v; want %+v", *d.ScaleSettings, wantScale)
	}
	if got, want := *d.LivenessProbe, (api.Probe{Path: "/", InitialDelay: "PT10S", Period: "PT10S", Timeout: "PT2S", SuccessThreshold: 1, FailureThreshold: 30}); got != want {
		t.Errorf("liveness probe %+v; want %+v", got, want)
	}
	if got, want := *d.ReadinessProbe, (api.Probe{Path: "/ready", InitialDelay: "PT10S", Period: "PT10S", Timeout: "PT2S", SuccessThreshold: 1, FailureThreshold: 3}); got != want {
		t.Errorf("readiness probe %+v; want %+v", got, want)
	}
	if err := Deployment("d", d); err != nil {
		t.Errorf("defaults do not validate: %v", err)
	}
}

// TestDefaultDeploymentFromZero: a deployment that can scale to zero waits up to 60 s for
// its first instance by default; an explicit max_queue_wait_ms is kept.
func TestDefaultDeploymentFromZero(t *testing.T) {
	d := validDeployment()
	d.ScaleSettings = &api.EndpointScaleSettings{Type: "target_utilization", MinInstances: 0, MaxInstances: 3}
	DefaultDeployment(&d)
	if d.RequestSettings.MaxQueueWaitMS != 60000 {
		t.Errorf("max_queue_wait_ms %d; want 60000", d.RequestSettings.MaxQueueWaitMS)
	}
	if d.ScaleSettings.MinInstances != 0 || d.ScaleSettings.MaxInstances != 3 || d.ScaleSettings.ScaleToZeroDelay != "" {
		t.Errorf("scale settings %+v", *d.ScaleSettings)
	}
	d = validDeployment()
	d.ScaleSettings = &api.EndpointScaleSettings{Type: "target_utilization", MaxInstances: 3}
	d.RequestSettings = &api.RequestSettings{MaxQueueWaitMS: 2000}
	DefaultDeployment(&d)
	if d.RequestSettings.MaxQueueWaitMS != 2000 {
		t.Errorf("max_queue_wait_ms %d; want 2000 kept", d.RequestSettings.MaxQueueWaitMS)
	}
	if got := ParseScale(d.ScaleSettings); got != (ScaleTimes{time.Second, 5 * time.Minute, 5 * time.Minute}) {
		t.Errorf("ParseScale = %+v", got)
	}
}

func TestEndpointScale(t *testing.T) {
	auto := func(edit func(*api.EndpointScaleSettings)) func(*api.DeploymentSpec) {
		return func(d *api.DeploymentSpec) {
			s := api.EndpointScaleSettings{Type: "target_utilization", MinInstances: 0, MaxInstances: 4}
			edit(&s)
			d.ScaleSettings = &s
		}
	}
	for _, tc := range []struct {
		name  string
		edit  func(*api.DeploymentSpec)
		field string
		err   string
	}{
		{"valid", auto(func(*api.EndpointScaleSettings) {}), "", ""},
		{"full", auto(func(s *api.EndpointScaleSettings) {
			*s = api.EndpointScaleSettings{Type: "target_utilization", MinInstances: 1, MaxInstances: 100, TargetUtilizationPercentage: 100, PollingInterval: "PT2S", ScaleDownDelay: "PT1S", ScaleToZeroDelay: "P7D"}
		}), "", ""},
		{"count ignored when autoscaled", func(d *api.DeploymentSpec) { auto(func(*api.EndpointScaleSettings) {})(d); d.InstanceCount = 0 }, "", ""},
		{"type", auto(func(s *api.EndpointScaleSettings) { s.Type = "TargetUtilization" }), "d.scale_settings.type", `type "TargetUtilization" is not allowed; allowed values: default, target_utilization`},
		{"min above max", auto(func(s *api.EndpointScaleSettings) { s.MinInstances = 5 }), "d.scale_settings.min_instances", "min_instances (5) must not exceed max_instances (4)"},
		{"min negative", auto(func(s *api.EndpointScaleSettings) { s.MinInstances = -1 }), "d.scale_settings.min_instances", "between 0 and 100, got -1"},
		{"max high", auto(func(s *api.EndpointScaleSettings) { s.MaxInstances = 101 }), "d.scale_settings.max_instances", "between 1 and 100, got 101"},
		{"percent 0 is the default", auto(func(s *api.EndpointScaleSettings) { s.TargetUtilizationPercentage = 0 }), "", ""},
		{"percent high", auto(func(s *api.EndpointScaleSettings) { s.TargetUtilizationPercentage = 101 }), "d.scale_settings.target_utilization_percentage", "between 1 and 100, got 101"},
		{"percent negative", auto(func(s *api.EndpointScaleSettings) { s.TargetUtilizationPercentage = -5 }), "d.scale_settings.target_utilization_percentage", "between 1 and 100, got -5"},
		{"polling not ISO", auto(func(s *api.EndpointScaleSettings) { s.PollingInterval = "1s" }), "d.scale_settings.polling_interval", "not an ISO 8601 duration"},
		{"polling zero", auto(func(s *api.EndpointScaleSettings) { s.PollingInterval = "PT0S" }), "d.scale_settings.polling_interval", "between PT1S and PT10M"},
		{"down delay", auto(func(s *api.EndpointScaleSettings) { s.ScaleDownDelay = "P8D" }), "d.scale_settings.scale_down_delay", "between PT1S and P7D"},
		{"zero delay", auto(func(s *api.EndpointScaleSettings) { s.ScaleToZeroDelay = "soon" }), "d.scale_settings.scale_to_zero_delay", "not an ISO 8601 duration"},
		{"queue wait", func(d *api.DeploymentSpec) {
			d.RequestSettings = &api.RequestSettings{MaxQueueWaitMS: 600001}
		}, "d.request_settings.max_queue_wait_ms", "between 1 and 600000, got 600001"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := validDeployment()
			tc.edit(&d)
			checkErr(t, Deployment("d", d), tc.field, tc.err)
		})
	}
}

func TestInstanceCountIgnored(t *testing.T) {
	if got := InstanceCountIgnored(true, "default"); got != "" {
		t.Errorf("a fixed count: %q; want nothing said", got)
	}
	if got := InstanceCountIgnored(false, "target_utilization"); got != "" {
		t.Errorf("autoscaled without instance_count: %q; want nothing said", got)
	}
	if got := InstanceCountIgnored(true, "target_utilization"); !strings.Contains(got, "instance_count is ignored") || !strings.Contains(got, `"default"`) {
		t.Errorf("autoscaled with instance_count: %q; want it said to be ignored, naming type = \"default\"", got)
	}
}

func TestKeyType(t *testing.T) {
	checkErr(t, KeyType("primary"), "", "")
	checkErr(t, KeyType("secondary"), "", "")
	checkErr(t, KeyType("both"), "key_type", `key_type "both" is not allowed; allowed values: primary, secondary`)
}

func checkErr(t *testing.T, err error, field, want string) {
	t.Helper()
	if want == "" {
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return
	}
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("error %v; want it to contain %q", err, want)
	}
	if !api.IsInvalid(err) || api.FieldOf(err) != field {
		t.Fatalf("error %v is not invalid on field %q (got %q)", err, field, api.FieldOf(err))
	}
}
