package endpoints_test

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/controllers/endpoints/endpointstest"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/fake"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/rules/autoscale"
)

// Endpoint autoscaling (autoscale.go): the router's counts, the rule's decisions, held
// requests from zero, on the controller alone.

func TestEndpointAutoscaleFromZeroAndBackToZero(t *testing.T) {
	env := setup(t)
	if _, err := env.API.CreateEndpoint(context.Background(), "wsp", api.EndpointSpec{
		Name: "scorer", Deployments: map[string]api.DeploymentSpec{"blue": endpointstest.Autoscaled(0, 3)},
		Traffic: map[string]int64{"blue": 100},
	}, ""); err != nil {
		t.Fatal(err)
	}
	env.Settle()
	ep := env.Endpoint("wsp", "scorer")
	if d := ep.Deployments["blue"]; ep.ProvisioningState != api.ProvisioningSucceeded || d.DesiredInstances != 0 || len(d.Instances) != 0 {
		t.Fatalf("at min_instances 0: state %s, desired %d, %d instances; want Succeeded with none", ep.ProvisioningState, d.DesiredInstances, len(d.Instances))
	}
	if d := ep.Deployments["blue"]; d.RequestSettings.MaxQueueWaitMS != api.DefaultMaxQueueWaitFromZeroMS {
		t.Fatalf("max_queue_wait_ms %d; want the from-zero default", d.RequestSettings.MaxQueueWaitMS)
	}

	// The first request is held and decides at once: no clock step is needed to start an
	// instance.
	res := env.ScoreAsync("wsp", "scorer")
	env.HeldRequests("wsp", "scorer", "blue", 1)
	ins := env.Started("wsp", "scorer", "blue", 1, 1)
	ep = env.Endpoint("wsp", "scorer")
	d := ep.Deployments["blue"]
	if d.DesiredInstances != 1 || len(d.ScaleDecisions) != 1 || d.ScaleDecisions[0].From != 0 || d.ScaleDecisions[0].To != 1 ||
		d.ScaleDecisions[0].Reason != autoscale.ReasonFromZero || !d.ScaleDecisions[0].Time.Equal(env.Clock.Now()) {
		t.Fatalf("after the first request: desired %d, decisions %+v; want one decision 0 -> 1 now", d.DesiredInstances, d.ScaleDecisions)
	}
	env.Probes.Healthy(ins[0], true)
	// initial_delay (10 s), then the two successes success_threshold asks for; the second
	// comes at the held-request cadence, not a 10 s period later.
	env.Step(10 * time.Second)
	env.Step(20 * time.Millisecond)
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
	env.StepUntil("desired 0", func() bool { return env.Endpoint("wsp", "scorer").Deployments["blue"].DesiredInstances == 0 })
	env.StepUntil("instance gone", func() bool { return len(env.Endpoint("wsp", "scorer").Deployments["blue"].Instances) == 0 })
	d = env.Endpoint("wsp", "scorer").Deployments["blue"]
	if n := len(d.ScaleDecisions); n != 2 || d.ScaleDecisions[1].To != 0 || d.ScaleDecisions[1].Reason != autoscale.ReasonToZero {
		t.Fatalf("decisions %+v; want 0 -> 1, then 1 -> 0 (%s)", d.ScaleDecisions, autoscale.ReasonToZero)
	}
}

// An instance that cannot start answers the held request 503 with the start error at once.
func TestEndpointAutoscaleStartFailureAnswersHeldRequests(t *testing.T) {
	env := setup(t)
	if _, err := env.API.CreateEndpoint(context.Background(), "wsp", api.EndpointSpec{
		Name: "scorer", Deployments: map[string]api.DeploymentSpec{"blue": endpointstest.Autoscaled(0, 2)},
		Traffic: map[string]int64{"blue": 100},
	}, ""); err != nil {
		t.Fatal(err)
	}
	env.Settle()
	res := env.ScoreAsync("wsp", "scorer")
	env.HeldRequests("wsp", "scorer", "blue", 1)
	ins := env.Started("wsp", "scorer", "blue", 1, 1)
	env.Driver.AppendOutput(ins[0].ID, ins[0].Task, []byte("ImportError: no module named sklearn\n"))
	env.Driver.FinishTask(ins[0].ID, ins[0].Task, 1)
	env.Settle()
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
	env := setup(t)
	spec := api.EndpointSpec{Name: "scorer", Deployments: map[string]api.DeploymentSpec{"blue": endpointstest.Autoscaled(0, 2)}, Traffic: map[string]int64{"blue": 100}}
	if _, err := env.API.CreateEndpoint(context.Background(), "wsp", spec, ""); err != nil {
		t.Fatal(err)
	}
	env.Settle()
	upd := api.EndpointUpdate{Deployments: map[string]api.DeploymentSpec{"blue": endpointstest.Autoscaled(2, 4)}, Traffic: spec.Traffic}
	ep, err := env.API.UpdateEndpoint(context.Background(), "wsp", "scorer", upd)
	if err != nil {
		t.Fatal(err)
	}
	if d := ep.Deployments["blue"]; d.Generation != 1 || d.DesiredInstances != 2 {
		t.Fatalf("after raising min_instances to 2: generation %d, desired %d; want 1 and 2", d.Generation, d.DesiredInstances)
	}
	env.Started("wsp", "scorer", "blue", 1, 2)
	// Over the quota: Standard_DS2_v2 has 2 vCPUs; 4 instances need 8.
	env.Workspace("small", map[string]int64{"standardDSv2Family": 6})
	_, err = env.API.CreateEndpoint(context.Background(), "small", api.EndpointSpec{Name: "tiny", Deployments: map[string]api.DeploymentSpec{"blue": endpointstest.Autoscaled(0, 4)}}, "")
	if !api.IsQuotaExceeded(err) || api.FieldOf(err) != "deployments.blue.scale_settings.max_instances" {
		t.Fatalf("max_instances over the quota: %v", err)
	}
}

// serveInstance serves h on an instance's loopback port, as its scoring process would.
func serveInstance(t *testing.T, in model.EndpointInstance, h http.HandlerFunc) {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(in.Port)))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
}

// gate is an instance handler that keeps each request until let lets it go.
type gate struct {
	arrived chan struct{}
	tokens  chan struct{}
}

func newGate(t *testing.T) *gate {
	g := &gate{arrived: make(chan struct{}, 64), tokens: make(chan struct{}, 64)}
	t.Cleanup(func() { close(g.tokens) }) // before the instance's server closes (cleanups run in reverse)
	return g
}

func (g *gate) serve(w http.ResponseWriter, _ *http.Request) {
	g.arrived <- struct{}{}
	<-g.tokens
	w.WriteHeader(http.StatusOK)
}

// let lets n requests go.
func (g *gate) let(n int) {
	for range n {
		g.tokens <- struct{}{}
	}
}

// wait waits (in real time, bounded) for n more requests to reach the gate.
func (g *gate) wait(t *testing.T, n int) {
	t.Helper()
	for range n {
		select {
		case <-g.arrived:
		case <-time.After(10 * time.Second):
			t.Fatal("the request never reached the instance")
		}
	}
}

// DESIGN 4: the autoscaler's load leaves mirror copies out. A deployment that only receives
// mirrored traffic stays at its count however many copies it serves; requests of its own
// (pinned to it) still scale it.
func TestEndpointAutoscaleIgnoresMirroredCopies(t *testing.T) {
	env := endpointstest.New(t, endpointstest.Options{Fake: fake.Options{TaskPort: fake.LoopbackPort}}) // its instances listen for real
	env.Workspace("wsp", nil)
	green := endpointstest.Autoscaled(1, 3)                          // 2 concurrent requests per instance, 70%: 2 in flight need 2
	green.RequestSettings.RequestTimeoutMS = api.MaxRequestTimeoutMS // the gated requests outlast the steps below
	if _, err := env.API.CreateEndpoint(context.Background(), "wsp", api.EndpointSpec{
		Name: "scorer", Deployments: map[string]api.DeploymentSpec{"blue": endpointstest.Deployment(1, "serve"), "green": green},
		Traffic: map[string]int64{"blue": 100}, MirrorTraffic: map[string]int64{"green": 50},
	}, ""); err != nil {
		t.Fatal(err)
	}
	blue := env.Started("wsp", "scorer", "blue", 1, 1)[0]
	gi := env.Started("wsp", "scorer", "green", 1, 1)[0]
	serveInstance(t, blue, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	g := newGate(t)
	serveInstance(t, gi, g.serve)
	env.Probes.Healthy(blue, true)
	env.Probes.Healthy(gi, true)
	env.StepUntil("both deployments ready", func() bool {
		ep := env.Endpoint("wsp", "scorer")
		return ep.Deployments["blue"].ReadyInstances == 1 && ep.Deployments["green"].ReadyInstances == 1
	})

	// Half the requests are copied to green: send until its one instance is full of copies.
	for i := 0; len(g.arrived) < 2; i++ {
		if i == 1000 {
			t.Fatalf("no 2 mirror copies reached green in %d requests", i)
		}
		if code := env.Score("wsp", "scorer", ""); code != http.StatusOK {
			t.Fatalf("request %d: %d; want 200 from blue", i, code)
		}
	}
	g.wait(t, 2)
	if d := env.Endpoint("wsp", "scorer").Deployments["green"]; d.RequestsInFlight != 2 {
		t.Fatalf("green serves %d requests; want the 2 mirror copies", d.RequestsInFlight)
	}
	// Several polling intervals, more than the up window: the copies are no load.
	for range 8 {
		env.Step(time.Second)
	}
	if d := env.Endpoint("wsp", "scorer").Deployments["green"]; d.RequestsInFlight != 2 {
		t.Fatalf("green serves %d requests after the steps; want the 2 mirror copies still", d.RequestsInFlight)
	}
	if d := env.Endpoint("wsp", "scorer").Deployments["green"]; d.DesiredInstances != 1 || len(d.ScaleDecisions) != 0 {
		t.Fatalf("green with only mirror copies in flight: desired %d, decisions %+v; want 1 and none", d.DesiredInstances, d.ScaleDecisions)
	}

	// The same count of green's own requests (pinned to it) is load: it grows to 2.
	g.let(2)
	env.StepUntil("copies done", func() bool { return env.Endpoint("wsp", "scorer").Deployments["green"].RequestsInFlight == 0 })
	codes := make(chan int, 2)
	for range 2 {
		go func() { codes <- env.Score("wsp", "scorer", "green") }()
	}
	g.wait(t, 2)
	for range 8 {
		env.Step(time.Second)
	}
	if d := env.Endpoint("wsp", "scorer").Deployments["green"]; d.DesiredInstances != 2 {
		t.Fatalf("green with 2 requests of its own in flight: desired %d, decisions %+v; want 2", d.DesiredInstances, d.ScaleDecisions)
	}
	g.let(2)
	for range 2 {
		if code := <-codes; code != http.StatusOK {
			t.Fatalf("pinned request: %d; want 200", code)
		}
	}
}
