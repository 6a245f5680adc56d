package engine

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/rules/autoscale"
)

// autoscaledDeployment scales between min and max, polling every second, down after 2 s.
func autoscaledDeployment(min, max int64) api.DeploymentSpec {
	d := testDeployment(1, "serve") // instance_count is ignored when autoscaled; the provider sends its default
	d.ScaleSettings = &api.EndpointScaleSettings{Type: api.ScaleTypeTargetUtilization, MinInstances: min, MaxInstances: max,
		PollingInterval: "PT1S", ScaleDownDelay: "PT2S"}
	return d
}

// scoreAsync sends a scoring request on its own goroutine and reports its status.
func (r *rig) scoreAsync(name string) <-chan int {
	req := httptest.NewRequest("POST", "/"+name+"/score", strings.NewReader("{}"))
	if keys, err := r.e.GetEndpointKeys(context.Background(), "wsp", name); err == nil {
		req.Header.Set("Authorization", "Bearer "+keys.PrimaryKey)
	}
	out := make(chan int, 1)
	go func() {
		rec := httptest.NewRecorder()
		r.e.ScoringHandler().ServeHTTP(rec, req)
		out <- rec.Code
	}()
	return out
}

// heldRequests waits (in real time, bounded) until the router holds n requests of the
// deployment: the hold is on the request's goroutine, which the manual engine does not run.
func (r *rig) heldRequests(name, deployment string, n int64) {
	r.t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if r.endpoint("wsp", name).Deployments[deployment].HeldRequests == n {
			return
		}
	}
	r.t.Fatalf("the router never held %d requests", n)
}

func TestEndpointAutoscaleFromZeroAndBackToZero(t *testing.T) {
	r := newRig(t)
	p := newProbes(r)
	r.workspace("wsp", nil)
	if _, err := r.e.CreateEndpoint(context.Background(), "wsp", api.EndpointSpec{
		Name: "scorer", Deployments: map[string]api.DeploymentSpec{"blue": autoscaledDeployment(0, 3)},
		Traffic: map[string]int64{"blue": 100},
	}, ""); err != nil {
		t.Fatal(err)
	}
	r.settle()
	ep := r.endpoint("wsp", "scorer")
	if d := ep.Deployments["blue"]; ep.ProvisioningState != api.ProvisioningSucceeded || d.DesiredInstances != 0 || len(d.Instances) != 0 {
		t.Fatalf("at min_instances 0: state %s, desired %d, %d instances; want Succeeded with none", ep.ProvisioningState, d.DesiredInstances, len(d.Instances))
	}
	if d := ep.Deployments["blue"]; d.RequestSettings.MaxQueueWaitMS != api.DefaultMaxQueueWaitFromZeroMS {
		t.Fatalf("max_queue_wait_ms %d; want the from-zero default", d.RequestSettings.MaxQueueWaitMS)
	}

	// The first request is held and decides at once: no clock step is needed to start an
	// instance.
	res := r.scoreAsync("scorer")
	r.heldRequests("scorer", "blue", 1)
	ins := r.started("wsp", "scorer", "blue", 1, 1)
	ep = r.endpoint("wsp", "scorer")
	d := ep.Deployments["blue"]
	if d.DesiredInstances != 1 || len(d.ScaleDecisions) != 1 || d.ScaleDecisions[0].From != 0 || d.ScaleDecisions[0].To != 1 ||
		d.ScaleDecisions[0].Reason != autoscale.ReasonFromZero || !d.ScaleDecisions[0].Time.Equal(r.clk.Now()) {
		t.Fatalf("after the first request: desired %d, decisions %+v; want one decision 0 -> 1 now", d.DesiredInstances, d.ScaleDecisions)
	}
	p.set(ins[0].Port, "/ready", true)
	p.set(ins[0].Port, "/live", true)
	// initial_delay (10 s), then the two successes success_threshold asks for; the second
	// comes at the held-request cadence, not a 10 s period later.
	r.clk.Step(10 * time.Second)
	r.settle()
	r.clk.Step(20 * time.Millisecond)
	r.settle()
	// The instance is ready: the held request goes to it. Nothing serves on the fake port, so
	// the proxy's dial fails (502): it was dispatched, not refused.
	select {
	case code := <-res:
		if code != http.StatusBadGateway {
			t.Fatalf("held request: %d; want 502 from the dispatch to the fake instance", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the held request was never dispatched")
	}

	// No request: down to zero once scale_to_zero_delay (the 2 s scale_down_delay) passed.
	stepUntil(r, "desired 0", func() bool { return r.endpoint("wsp", "scorer").Deployments["blue"].DesiredInstances == 0 })
	stepUntil(r, "instance gone", func() bool { return len(r.endpoint("wsp", "scorer").Deployments["blue"].Instances) == 0 })
	d = r.endpoint("wsp", "scorer").Deployments["blue"]
	if n := len(d.ScaleDecisions); n != 2 || d.ScaleDecisions[1].To != 0 || d.ScaleDecisions[1].Reason != autoscale.ReasonToZero {
		t.Fatalf("decisions %+v; want 0 -> 1, then 1 -> 0 (%s)", d.ScaleDecisions, autoscale.ReasonToZero)
	}
}

// An instance that cannot start answers the held request 503 with the start error at once.
func TestEndpointAutoscaleStartFailureAnswersHeldRequests(t *testing.T) {
	r := newRig(t)
	newProbes(r)
	r.workspace("wsp", nil)
	if _, err := r.e.CreateEndpoint(context.Background(), "wsp", api.EndpointSpec{
		Name: "scorer", Deployments: map[string]api.DeploymentSpec{"blue": autoscaledDeployment(0, 2)},
		Traffic: map[string]int64{"blue": 100},
	}, ""); err != nil {
		t.Fatal(err)
	}
	r.settle()
	res := r.scoreAsync("scorer")
	r.heldRequests("scorer", "blue", 1)
	ins := r.started("wsp", "scorer", "blue", 1, 1)
	r.drv.AppendOutput(ins[0].ID, ins[0].Task, []byte("ImportError: no module named sklearn\n"))
	r.drv.FinishTask(ins[0].ID, ins[0].Task, 1)
	r.settle()
	select {
	case code := <-res:
		if code != http.StatusServiceUnavailable {
			t.Fatalf("held request: %d; want 503", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the held request was not answered at once")
	}
}

// Scale settings change in place: no new generation, and the count follows the new bounds
// at once.
func TestEndpointAutoscaleSettingsApplyWithoutRollout(t *testing.T) {
	r := newRig(t)
	newProbes(r)
	r.workspace("wsp", nil)
	spec := api.EndpointSpec{Name: "scorer", Deployments: map[string]api.DeploymentSpec{"blue": autoscaledDeployment(0, 2)}, Traffic: map[string]int64{"blue": 100}}
	if _, err := r.e.CreateEndpoint(context.Background(), "wsp", spec, ""); err != nil {
		t.Fatal(err)
	}
	r.settle()
	upd := api.EndpointUpdate{Deployments: map[string]api.DeploymentSpec{"blue": autoscaledDeployment(2, 4)}, Traffic: spec.Traffic}
	ep, err := r.e.UpdateEndpoint(context.Background(), "wsp", "scorer", upd)
	if err != nil {
		t.Fatal(err)
	}
	if d := ep.Deployments["blue"]; d.Generation != 1 || d.DesiredInstances != 2 {
		t.Fatalf("after raising min_instances to 2: generation %d, desired %d; want 1 and 2", d.Generation, d.DesiredInstances)
	}
	r.started("wsp", "scorer", "blue", 1, 2)
	// Over the quota: Standard_DS2_v2 has 2 vCPUs; 4 instances need 8.
	r.workspace("small", map[string]int64{"standardDSv2Family": 6})
	small := autoscaledDeployment(0, 4)
	_, err = r.e.CreateEndpoint(context.Background(), "small", api.EndpointSpec{Name: "tiny", Deployments: map[string]api.DeploymentSpec{"blue": small}}, "")
	if !api.IsQuotaExceeded(err) || api.FieldOf(err) != "deployments.blue.scale_settings.max_instances" {
		t.Fatalf("max_instances over the quota: %v", err)
	}
}
