package engine

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/controllers/endpoints/endpointstest"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
)

// The engine's wiring of online endpoints: what the workspaces' controller, the computes'
// quota sum and HasWork do with them. The endpoint rules are tested on the controller
// alone, in package controllers/endpoints.

// newProbes gives the engine a script of probe answers: the fake driver's nodes serve
// nothing.
func newProbes(r *rig) *endpointstest.Probes {
	p := endpointstest.NewProbes()
	r.e.SetProber(p.Probe)
	return p
}

func (r *rig) endpoint(ws, name string) *api.Endpoint {
	r.t.Helper()
	ep, err := r.e.GetEndpoint(context.Background(), ws, name)
	if err != nil {
		r.t.Fatal(err)
	}
	return ep
}

// storedInstances reads the endpoint's instances as stored (with their ports).
func (r *rig) storedInstances(ws, name string) []model.EndpointInstance {
	r.t.Helper()
	return endpointstest.StoredInstances(r.t, r.st, ws, name)
}

// started settles and checks that n instances of the deployment and generation have a
// process.
func (r *rig) started(ws, name, deployment string, gen int64, n int) []model.EndpointInstance {
	r.t.Helper()
	var got []model.EndpointInstance
	r.settlesTo("instances started", func() bool {
		got = got[:0]
		for _, in := range r.storedInstances(ws, name) {
			if in.Deployment == deployment && in.Generation == gen && !in.StartedAt.IsZero() && in.State == api.EndpointInstanceStarting {
				got = append(got, in)
			}
		}
		return len(got) == n
	})
	return got
}

// score sends a request through the engine's router and returns the status.
func (r *rig) score(name string) int {
	req := httptest.NewRequest("POST", "/"+name+"/score", strings.NewReader("{}"))
	if keys, err := r.e.GetEndpointKeys(context.Background(), "wsp", name); err == nil {
		req.Header.Set("Authorization", "Bearer "+keys.PrimaryKey)
	}
	rec := httptest.NewRecorder()
	r.e.ScoringHandler().ServeHTTP(rec, req)
	return rec.Code
}

// readyEndpoint creates an endpoint whose instances all pass their probes, and waits
// until it is Succeeded.
func readyEndpoint(t *testing.T, r *rig, p *endpointstest.Probes, spec api.EndpointSpec) {
	t.Helper()
	if _, err := r.e.CreateEndpoint(context.Background(), "wsp", spec, ""); err != nil {
		t.Fatal(err)
	}
	for name, d := range spec.Deployments {
		for _, in := range r.started("wsp", spec.Name, name, 1, int(d.InstanceCount)) {
			p.Healthy(in, true)
		}
	}
	stepUntil(r, "endpoint succeeded", func() bool { return r.endpoint("wsp", spec.Name).ProvisioningState == api.ProvisioningSucceeded })
}

// stepUntil moves the fake clock a second at a time until cond holds.
func stepUntil(r *rig, what string, cond func() bool) {
	r.t.Helper()
	for range 600 {
		if cond() {
			return
		}
		r.clk.Step(time.Second)
		r.settle()
	}
	r.t.Fatalf("never reached: %s", what)
}

func TestWorkspaceForceDeleteStopsItsEndpoints(t *testing.T) {
	r := newRig(t)
	p := newProbes(r)
	r.workspace("wsp", nil)
	readyEndpoint(t, r, p, api.EndpointSpec{Name: "scorer", Deployments: map[string]api.DeploymentSpec{"blue": endpointstest.Deployment(1, "serve")}, Traffic: map[string]int64{"blue": 100}})
	in := r.storedInstances("wsp", "scorer")[0]
	err := r.e.DeleteWorkspace(context.Background(), "wsp", false)
	if !api.IsConflict(err) || !strings.Contains(err.Error(), "/workspaces/wsp/onlineEndpoints/scorer") {
		t.Fatalf("delete without force: %v; want a conflict naming the endpoint", err)
	}
	if err := r.e.DeleteWorkspace(context.Background(), "wsp", true); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.drv.Node(in.ID); ok {
		t.Fatal("the endpoint's instance outlived its workspace")
	}
	if r.score("scorer") != http.StatusNotFound {
		t.Fatal("the router still serves the deleted workspace's endpoint")
	}
}

func TestEndpointKeepsTheEngineUp(t *testing.T) {
	r := newRig(t)
	newProbes(r)
	r.workspace("wsp", nil)
	if r.e.HasWork() {
		t.Fatal("an engine holding only a workspace has work")
	}
	if _, err := r.e.CreateEndpoint(context.Background(), "wsp", api.EndpointSpec{Name: "scorer", Deployments: map[string]api.DeploymentSpec{"blue": endpointstest.Deployment(1, "serve")}}, ""); err != nil {
		t.Fatal(err)
	}
	if !r.e.HasWork() {
		t.Fatal("an engine serving an endpoint may exit when idle")
	}
	r.started("wsp", "scorer", "blue", 1, 1)
	if err := r.e.DeleteEndpoint(context.Background(), "wsp", "scorer"); err != nil {
		t.Fatal(err)
	}
	if r.e.HasWork() {
		t.Fatal("work left after the endpoint was deleted")
	}
}

// DESIGN 4: max_instances counts against the workspace's quota, in the one sum computes use:
// a compute created after an endpoint sees its holding, other endpoints count, a deployment
// of a fixed count holds its instance_count, and the sum survives a restart.
func TestEndpointQuotaIsSharedWithComputes(t *testing.T) {
	r := newRig(t)
	newProbes(r)
	// Standard_DS2_v2 has 2 vCPUs, Standard_DS3_v2 (the rig's clusters) 4, both of the family.
	r.workspace("wsp", map[string]int64{"standardDSv2Family": 10})
	if _, err := r.e.CreateEndpoint(context.Background(), "wsp", api.EndpointSpec{
		Name: "scorer", Deployments: map[string]api.DeploymentSpec{"blue": endpointstest.Autoscaled(0, 4)},
		Traffic: map[string]int64{"blue": 100},
	}, ""); err != nil {
		t.Fatal(err)
	}
	r.settle()
	createCluster := func() error {
		_, err := r.e.CreateCompute(context.Background(), "wsp", api.ComputeSpec{
			Name: "train", VMSize: "Standard_DS3_v2", ScaleSettings: &api.ScaleSettings{MaxNodeCount: 1},
		}, "")
		return err
	}
	err := createCluster()
	if !api.IsQuotaExceeded(err) || !strings.Contains(err.Error(), "endpoint scorer deployment blue (8 vCPUs)") {
		t.Fatalf("a 4-vCPU cluster next to max_instances 4 x 2 vCPUs in a quota of 10: %v; want a quota error naming the deployment", err)
	}
	other := endpointstest.Autoscaled(0, 2)
	_, err = r.e.CreateEndpoint(context.Background(), "wsp", api.EndpointSpec{Name: "other", Deployments: map[string]api.DeploymentSpec{"xs": other}}, "")
	if !api.IsQuotaExceeded(err) || api.FieldOf(err) != "deployments.xs.scale_settings.max_instances" {
		t.Fatalf("a second endpoint's max_instances 2 x 2 vCPUs over the 2 left: %v", err)
	}
	_, err = r.e.CreateEndpoint(context.Background(), "wsp", api.EndpointSpec{Name: "fixed", Deployments: map[string]api.DeploymentSpec{"xs": endpointstest.Deployment(2, "serve")}}, "")
	if !api.IsQuotaExceeded(err) || api.FieldOf(err) != "deployments.xs.instance_count" {
		t.Fatalf("instance_count 2 x 2 vCPUs over the 2 left: %v", err)
	}
	if _, err := r.e.CreateEndpoint(context.Background(), "wsp", api.EndpointSpec{Name: "fixed", Deployments: map[string]api.DeploymentSpec{"xs": endpointstest.Deployment(1, "serve")}}, ""); err != nil {
		t.Fatalf("instance_count 1 x 2 vCPUs in the 2 left: %v", err)
	}
	r.settle()

	// The engine rebuilds the sum from the store when it starts.
	r.stop()
	r.start()
	if err := createCluster(); !api.IsQuotaExceeded(err) {
		t.Fatalf("after a restart, a cluster over what the endpoints hold: %v", err)
	}
	// Lowering max_instances gives the quota back at once.
	upd := api.EndpointUpdate{Deployments: map[string]api.DeploymentSpec{"blue": endpointstest.Autoscaled(0, 1)}, Traffic: map[string]int64{"blue": 100}}
	if _, err := r.e.UpdateEndpoint(context.Background(), "wsp", "scorer", upd); err != nil {
		t.Fatal(err)
	}
	if err := createCluster(); err != nil {
		t.Fatalf("a 4-vCPU cluster next to 2 + 2 vCPUs of endpoints in a quota of 10: %v", err)
	}
}

// DESIGN 4's one sum under concurrent writers: a compute and an endpoint created at the same
// time, each fitting the workspace's quota alone but not together, are never both made.
// The endpoints' writes take their turns with the computes' (computes.Turns), so the
// second check counts the first's holding whichever kind of record it is.
func TestEndpointAndComputeCreatesShareTheQuotaUnderConcurrency(t *testing.T) {
	r := newRig(t)
	newProbes(r)
	for i := range 10 {
		ws := fmt.Sprintf("wsp%d", i)
		// Standard_DS3_v2 has 4 vCPUs; two Standard_DS2_v2 instances hold 4 too.
		r.workspace(ws, map[string]int64{"standardDSv2Family": 4})
		var wg sync.WaitGroup
		errs := make([]error, 2)
		wg.Add(2)
		go func() {
			defer wg.Done()
			_, errs[0] = r.e.CreateCompute(context.Background(), ws, api.ComputeSpec{
				Name: "train", VMSize: "Standard_DS3_v2", ScaleSettings: &api.ScaleSettings{MaxNodeCount: 1},
			}, "")
		}()
		go func() {
			defer wg.Done()
			_, errs[1] = r.e.CreateEndpoint(context.Background(), ws, api.EndpointSpec{
				Name: "scorer-" + ws, Deployments: map[string]api.DeploymentSpec{"blue": endpointstest.Deployment(2, "serve")},
			}, "")
		}()
		wg.Wait()
		made := 0
		for _, err := range errs {
			switch {
			case err == nil:
				made++
			case !api.IsQuotaExceeded(err):
				t.Fatalf("workspace %s: %v; want success or a quota error", ws, err)
			}
		}
		if made != 1 {
			t.Fatalf("workspace %s: the compute's and the endpoint's creates gave %v; want exactly one made in a quota that holds one", ws, errs)
		}
	}
	r.settle()
}
