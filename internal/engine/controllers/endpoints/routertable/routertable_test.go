package routertable

import (
	"testing"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/router"
)

func deployment(count int64) model.Deployment {
	return model.Deployment{Spec: api.DeploymentSpec{
		InstanceCount:   count,
		RequestSettings: &api.RequestSettings{MaxConcurrentRequestsPerInstance: 2, RequestTimeoutMS: 1500, MaxQueueWaitMS: 300},
	}}
}

func TestOfServesReadyInstancesAndCountsDrainingOnes(t *testing.T) {
	rec := model.Endpoint{
		Name: "scorer", AuthMode: api.AuthModeKey, Keys: api.EndpointKeys{PrimaryKey: "p", SecondaryKey: "s"},
		Deployments: map[string]model.Deployment{"green": deployment(2)},
		Retiring:    map[string]model.Deployment{"blue": deployment(1)},
		LiveTraffic: map[string]int64{"blue": 40, "green": 60}, MirrorTraffic: map[string]int64{"green": 10},
		Instances: []model.EndpointInstance{
			{ID: "g1", Deployment: "green", State: api.EndpointInstanceReady, Host: "10.0.0.1", Port: 8001},
			{ID: "g2", Deployment: "green", State: api.EndpointInstanceStarting, Host: "10.0.0.2", Port: 8002},
			{ID: "g3", Deployment: "green", State: api.EndpointInstanceReady, Host: "10.0.0.3", Port: 8003, Terminating: true},
			{ID: "g4", Deployment: "green", State: api.EndpointInstanceReady, Port: 8004}, // no host yet
			{ID: "b1", Deployment: "blue", State: api.EndpointInstanceDraining, Host: "10.0.0.5", Port: 8005},
		},
	}
	var verified string
	held := map[string]bool{}
	ep := Of(rec, Hooks{
		VerifyToken: func(token string) bool { verified = token; return true },
		Hold:        func(dn string, _ model.Deployment, _ *router.Hold) { held[dn] = true },
	})
	if ep.Name != "scorer" || ep.Keys != [2]string{"p", "s"} || ep.Traffic["blue"] != 40 || ep.Traffic["green"] != 60 || ep.Mirror["green"] != 10 {
		t.Fatalf("table %+v; want the endpoint's name, keys, live split and mirror", ep)
	}
	if ep.TokenVerifier == nil || !ep.TokenVerifier("tok") || verified != "tok" {
		t.Fatal("the table's token check is not the hook's")
	}
	green, blue := ep.Deployments["green"], ep.Deployments["blue"]
	if green == nil || blue == nil {
		t.Fatalf("deployments %v; want green and the retiring blue", ep.Deployments)
	}
	if len(green.Backends) != 1 || green.Backends[0].ID != "g1" || !green.Backends[0].Ready || green.Backends[0].URL.Host != "10.0.0.1:8001" {
		t.Fatalf("green backends %+v; want the ready instance alone (not starting, terminating or hostless ones)", green.Backends)
	}
	if len(blue.Backends) != 1 || blue.Backends[0].ID != "b1" || blue.Backends[0].Ready {
		t.Fatalf("blue backends %+v; want the draining instance, taking no request", blue.Backends)
	}
	if green.MaxConcurrentPerInstance != 2 || green.RequestTimeout != 1500*time.Millisecond {
		t.Fatalf("green request settings %+v", green)
	}
	if !held["green"] || !held["blue"] {
		t.Fatalf("hold hook called for %v; want every deployment", held)
	}
}

func TestHoldOfFixedAndAutoscaledDeployments(t *testing.T) {
	fixed := deployment(3)
	fixed.StartError = "exit 1"
	h := Hold(fixed, false)
	if h.MaxWait != 300*time.Millisecond || h.MaxHeld != 2*2*3 || h.WhileStarting || h.StartError != "exit 1" {
		t.Fatalf("fixed hold %+v; want 300 ms, 12 held, not while starting, the start error", h)
	}
	if h := Hold(fixed, true); h.StartError != "" {
		t.Fatalf("hold of a deployment with a ready instance carries the start error %q", h.StartError)
	}
	scaled := deployment(1)
	scaled.Spec.ScaleSettings = &api.EndpointScaleSettings{Type: api.ScaleTypeTargetUtilization, MinInstances: 0, MaxInstances: 5}
	if h := Hold(scaled, false); h.MaxHeld != 2*2*5 || !h.WhileStarting {
		t.Fatalf("autoscaled hold %+v; want 20 held (per max_instances), held while starting", h)
	}
}
