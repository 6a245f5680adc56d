package model

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
)

func TestDeploymentDurationsParsedOnceAndReadFromOldRecords(t *testing.T) {
	spec := api.DeploymentSpec{
		ReadinessProbe: &api.Probe{InitialDelay: "PT5S", Period: "PT2S", Timeout: "PT3S", SuccessThreshold: 1, FailureThreshold: 3},
		LivenessProbe:  &api.Probe{InitialDelay: "PT1M", Period: "PT10S", Timeout: "PT1S", SuccessThreshold: 1, FailureThreshold: 3},
		ScaleSettings:  &api.EndpointScaleSettings{Type: api.ScaleTypeTargetUtilization, MaxInstances: 2, PollingInterval: "PT2S", ScaleDownDelay: "PT30S"},
	}
	d := Deployment{Spec: spec}
	d.ParseDurations()
	want := DeploymentDurations{}
	want.Readiness.InitialDelay, want.Readiness.Period, want.Readiness.Timeout = 5*time.Second, 2*time.Second, 3*time.Second
	want.Liveness.InitialDelay, want.Liveness.Period, want.Liveness.Timeout = time.Minute, 10*time.Second, time.Second
	want.Scale.PollingInterval, want.Scale.ScaleDownDelay, want.Scale.ScaleToZeroDelay = 2*time.Second, 30*time.Second, 30*time.Second
	if got := d.Times(); got != want {
		t.Fatalf("parsed %+v, want %+v", got, want)
	}
	// Stored and read back, the parsed durations come with the record.
	b, _ := json.Marshal(d)
	var back Deployment
	if err := json.Unmarshal(b, &back); err != nil || back.Durations == nil || *back.Durations != want {
		t.Fatalf("read back %+v (%v) from %s", back.Durations, err, b)
	}
	// A record stored before durations were: parsed when read, the same.
	old := Deployment{Spec: spec}
	if got := old.Times(); got != want {
		t.Fatalf("old record: %+v, want %+v", got, want)
	}
}
