package engine

import (
	"context"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/fake"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
)

// probes scripts probe answers per instance port and probe path; the fake driver's nodes
// serve nothing, so the rules are tested against these answers on the fake clock.
type probes struct {
	mu     sync.Mutex
	health map[string]bool // "port path" -> answer; default false
	calls  map[string]int
}

func newProbes(r *rig) *probes {
	p := &probes{health: map[string]bool{}, calls: map[string]int{}}
	r.e.SetProber(func(_ context.Context, raw string, _ time.Duration) bool {
		u, _ := url.Parse(raw)
		p.mu.Lock()
		defer p.mu.Unlock()
		p.calls[u.Port()+" "+u.Path]++
		return p.health[u.Port()+" "+u.Path]
	})
	return p
}

func (p *probes) count(port int, path string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls[itoa(port)+" "+path]
}

func (p *probes) set(port int, path string, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.health[itoa(port)+" "+path] = ok
}

func itoa(i int) string { return strconv.Itoa(i) }

func testDeployment(count int64, command ...string) api.DeploymentSpec {
	probe := func(path string) *api.Probe {
		return &api.Probe{Path: path, InitialDelay: "PT10S", Period: "PT10S", Timeout: "PT1S", SuccessThreshold: 2, FailureThreshold: 3}
	}
	return api.DeploymentSpec{
		InstanceType: "Standard_DS2_v2", InstanceCount: count, Command: command,
		EnvironmentVariables: map[string]string{"MODEL": "m1"},
		RequestSettings:      &api.RequestSettings{RequestTimeoutMS: 3000, MaxConcurrentRequestsPerInstance: 2},
		LivenessProbe:        probe("/live"), ReadinessProbe: probe("/ready"),
	}
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
	var out []model.EndpointInstance
	err := r.st.View(func(tx *store.Tx) error {
		rec, err := model.GetEndpoint(tx, ws, name)
		out = rec.Instances
		return err
	})
	if err != nil {
		r.t.Fatal(err)
	}
	return out
}

// started waits until n instances of the deployment and generation have a process.
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
func (r *rig) score(name, deployment string) int {
	req := httptest.NewRequest("POST", "/"+name+"/score", strings.NewReader("{}"))
	if deployment != "" {
		req.Header.Set("azureml-model-deployment", deployment)
	}
	if keys, err := r.e.GetEndpointKeys(context.Background(), "wsp", name); err == nil {
		req.Header.Set("Authorization", "Bearer "+keys.PrimaryKey)
	}
	rec := httptest.NewRecorder()
	r.e.ScoringHandler().ServeHTTP(rec, req)
	return rec.Code
}

func instanceStates(ep *api.Endpoint, deployment string) []string {
	var out []string
	for _, in := range ep.Deployments[deployment].Instances {
		out = append(out, in.State)
	}
	slices.Sort(out)
	return out
}

func TestEndpointReadinessGatesTraffic(t *testing.T) {
	r := newRig(t)
	p := newProbes(r)
	r.workspace("wsp", nil)
	ep, err := r.e.CreateEndpoint(context.Background(), "wsp", api.EndpointSpec{
		Name: "scorer", Deployments: map[string]api.DeploymentSpec{"blue": testDeployment(2, "serve")},
		Traffic: map[string]int64{"blue": 100},
	}, "")
	if err != nil {
		t.Fatal(err)
	}
	if ep.ProvisioningState != api.ProvisioningCreating || ep.AuthMode != api.AuthModeKey {
		t.Fatalf("new endpoint: state %s, auth %s", ep.ProvisioningState, ep.AuthMode)
	}
	ins := r.started("wsp", "scorer", "blue", 1, 2)
	for _, in := range ins {
		task, ok := r.drv.Task(in.ID, in.Task)
		if !ok || task.Spec.Env["PORT"] != itoa(in.Port) || task.Spec.Env["MODEL"] != "m1" || task.Spec.Command[0] != "serve" {
			t.Fatalf("instance %s task %+v; want PORT=%d and the deployment's command and environment", in.ID, task.Spec, in.Port)
		}
	}
	if got := r.score("scorer", ""); got != http.StatusServiceUnavailable {
		t.Fatalf("score before readiness: %d; want 503 (no ready instance)", got)
	}
	for _, in := range ins {
		p.set(in.Port, "/ready", true)
		p.set(in.Port, "/live", true)
	}
	// initial_delay passes: one success of the two success_threshold asks for.
	r.clk.Step(10 * time.Second)
	r.settlesTo("first probes", func() bool { return p.count(ins[0].Port, "/ready") == 1 && p.count(ins[1].Port, "/ready") == 1 })
	r.settle()
	if got := instanceStates(r.endpoint("wsp", "scorer"), "blue"); !slices.Equal(got, []string{"Starting", "Starting"}) {
		t.Fatalf("after one readiness success: %v; want both Starting", got)
	}
	r.clk.Step(10 * time.Second)
	r.settlesTo("instances ready", func() bool {
		return r.endpoint("wsp", "scorer").ProvisioningState == api.ProvisioningSucceeded
	})
	if ep := r.endpoint("wsp", "scorer"); ep.Deployments["blue"].ReadyInstances != 2 {
		t.Fatalf("ready instances %d; want 2", ep.Deployments["blue"].ReadyInstances)
	}
	// Ready instances are in the router: nothing serves on the fake ports, so the request
	// reaches the proxy and fails to dial (502) instead of finding no instance (503).
	if got := r.score("scorer", ""); got != http.StatusBadGateway {
		t.Fatalf("score after readiness: %d; want 502 from the proxy", got)
	}

	// failure_threshold readiness failures in a row take an instance out of the router.
	p.set(ins[0].Port, "/ready", false)
	for i := range 3 {
		r.clk.Step(10 * time.Second)
		r.settlesTo("probe ran", func() bool { return p.count(ins[0].Port, "/ready") == 3+i })
	}
	r.settlesTo("instance unready", func() bool {
		return slices.Equal(instanceStates(r.endpoint("wsp", "scorer"), "blue"), []string{"Ready", "Starting"})
	})
	if ep := r.endpoint("wsp", "scorer"); ep.ProvisioningState != api.ProvisioningUpdating {
		t.Fatalf("with one instance unready: %s; want Updating", ep.ProvisioningState)
	}
}

// readyEndpoint creates an endpoint whose instances all pass their probes, and waits
// until it is Succeeded.
func readyEndpoint(t *testing.T, r *rig, p *probes, spec api.EndpointSpec) {
	t.Helper()
	if _, err := r.e.CreateEndpoint(context.Background(), "wsp", spec, ""); err != nil {
		t.Fatal(err)
	}
	for name, d := range spec.Deployments {
		for _, in := range r.started("wsp", spec.Name, name, 1, int(d.InstanceCount)) {
			p.set(in.Port, "/ready", true)
			p.set(in.Port, "/live", true)
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

func TestEndpointLivenessFailureRestartsTheProcess(t *testing.T) {
	r := newRig(t)
	p := newProbes(r)
	r.workspace("wsp", nil)
	readyEndpoint(t, r, p, api.EndpointSpec{Name: "scorer", Deployments: map[string]api.DeploymentSpec{"blue": testDeployment(1, "serve")}, Traffic: map[string]int64{"blue": 100}})
	in := r.storedInstances("wsp", "scorer")[0]
	p.set(in.Port, "/live", false)
	for range 2 {
		r.clk.Step(10 * time.Second)
		r.settle()
	}
	if task, _ := r.drv.Task(in.ID, "serve-0"); !task.Status.Running {
		t.Fatal("the process was killed after 2 liveness failures; failure_threshold is 3")
	}
	r.clk.Step(10 * time.Second)
	r.settlesTo("process killed", func() bool { task, _ := r.drv.Task(in.ID, "serve-0"); return !task.Status.Running })
	if got := r.storedInstances("wsp", "scorer")[0]; got.State != api.EndpointInstanceFailed {
		t.Fatalf("after liveness failed: state %s; want Failed", got.State)
	}
	p.set(in.Port, "/live", true)
	// The process was ready once, so the back-off is the shortest: 1 s.
	r.clk.Step(time.Second)
	r.settlesTo("restarted", func() bool { _, ok := r.drv.Task(in.ID, "serve-1"); return ok })
	stepUntil(r, "ready again", func() bool {
		ep := r.endpoint("wsp", "scorer")
		return ep.Deployments["blue"].ReadyInstances == 1
	})
	got := r.endpoint("wsp", "scorer").Deployments["blue"].Instances[0]
	if got.Restarts != 1 || got.ID != in.ID {
		t.Fatalf("instance %+v; want the same instance (node) with 1 restart", got)
	}
}

func TestEndpointExitedProcessRestartsAndRepeatedFailureFails(t *testing.T) {
	r := newRig(t)
	p := newProbes(r)
	r.workspace("wsp", nil)
	readyEndpoint(t, r, p, api.EndpointSpec{Name: "scorer", Deployments: map[string]api.DeploymentSpec{"blue": testDeployment(1, "serve")}, Traffic: map[string]int64{"blue": 100}})
	in := r.storedInstances("wsp", "scorer")[0]

	// The process exits: it is restarted on its node.
	p.set(in.Port, "/ready", false)
	r.drv.AppendOutput(in.ID, "serve-0", []byte("Traceback: model file missing\n"))
	r.drv.FinishTask(in.ID, "serve-0", 3)
	r.settlesTo("instance failed", func() bool { return r.storedInstances("wsp", "scorer")[0].State == api.EndpointInstanceFailed })
	r.settlesTo("failed instance out of the router", func() bool { return r.score("scorer", "") == http.StatusServiceUnavailable })
	// Now every start fails: readiness never passes within 10s + 3*10s. After three
	// failed starts in a row the endpoint reads Failed with the reason.
	stepUntil(r, "endpoint failed", func() bool { return r.endpoint("wsp", "scorer").ProvisioningState == api.ProvisioningFailed })
	ep := r.endpoint("wsp", "scorer")
	if !strings.Contains(ep.Error, "deployment blue: instance "+in.ID+" failed 3 times in a row before becoming ready") ||
		!strings.Contains(ep.Error, "readiness probe GET /ready did not pass within 40s") {
		t.Fatalf("error %q", ep.Error)
	}
	if ep.Deployments["blue"].Instances[0].Restarts < 3 {
		t.Fatalf("restarts %d; want at least 3", ep.Deployments["blue"].Instances[0].Restarts)
	}
	// Back-off grows: 1 s after the exit, then 2 s, 4 s, 8 s. The fourth start happens
	// only after 8 s more.
	// Fixing the readiness endpoint clears the error once an instance is ready.
	p.set(in.Port, "/ready", true)
	stepUntil(r, "endpoint recovered", func() bool { return r.endpoint("wsp", "scorer").ProvisioningState == api.ProvisioningSucceeded })
	if ep := r.endpoint("wsp", "scorer"); ep.Error != "" {
		t.Fatalf("error after recovery: %q", ep.Error)
	}
}

func TestEndpointFirstStartErrorNamesTheOutput(t *testing.T) {
	r := newRig(t)
	newProbes(r)
	r.workspace("wsp", nil)
	if _, err := r.e.CreateEndpoint(context.Background(), "wsp", api.EndpointSpec{Name: "scorer", Deployments: map[string]api.DeploymentSpec{"blue": testDeployment(1, "serve")}}, ""); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		ins := r.started("wsp", "scorer", "blue", 1, 1)
		r.drv.AppendOutput(ins[0].ID, ins[0].Task, []byte("ImportError: no module named sklearn\n"))
		r.drv.FinishTask(ins[0].ID, ins[0].Task, 1)
		if i < 2 {
			stepUntil(r, "restarted", func() bool {
				return r.storedInstances("wsp", "scorer")[0].Restarts == int64(i+1) && !r.storedInstances("wsp", "scorer")[0].StartedAt.IsZero()
			})
		}
	}
	r.settlesTo("failed", func() bool { return r.endpoint("wsp", "scorer").ProvisioningState == api.ProvisioningFailed })
	if ep := r.endpoint("wsp", "scorer"); !strings.Contains(ep.Error, "its command exited with code 1; output: ImportError: no module named sklearn") {
		t.Fatalf("error %q", ep.Error)
	}
}

func TestEndpointRolloutWaitsForReadinessThenDrains(t *testing.T) {
	r := newRig(t)
	p := newProbes(r)
	r.workspace("wsp", nil)
	spec := api.EndpointSpec{Name: "scorer", Deployments: map[string]api.DeploymentSpec{"blue": testDeployment(2, "serve", "v1")}, Traffic: map[string]int64{"blue": 100}}
	readyEndpoint(t, r, p, spec)
	old := r.storedInstances("wsp", "scorer")

	// Only the traffic or request settings: no new instances.
	upd := api.EndpointUpdate{Deployments: spec.Deployments, Traffic: spec.Traffic}
	d := testDeployment(2, "serve", "v1")
	d.RequestSettings.MaxConcurrentRequestsPerInstance = 4
	upd.Deployments = map[string]api.DeploymentSpec{"blue": d}
	ep, err := r.e.UpdateEndpoint(context.Background(), "wsp", "scorer", upd)
	if err != nil {
		t.Fatal(err)
	}
	if ep.Deployments["blue"].Generation != 1 || ep.ProvisioningState != api.ProvisioningSucceeded {
		t.Fatalf("request settings change: generation %d, state %s; want 1, Succeeded", ep.Deployments["blue"].Generation, ep.ProvisioningState)
	}

	// A new command is a new generation.
	d.Command = []string{"serve", "v2"}
	upd.Deployments = map[string]api.DeploymentSpec{"blue": d}
	if ep, err = r.e.UpdateEndpoint(context.Background(), "wsp", "scorer", upd); err != nil {
		t.Fatal(err)
	}
	if ep.Deployments["blue"].Generation != 2 || ep.ProvisioningState != api.ProvisioningUpdating {
		t.Fatalf("command change: generation %d, state %s; want 2, Updating", ep.Deployments["blue"].Generation, ep.ProvisioningState)
	}
	fresh := r.started("wsp", "scorer", "blue", 2, 2)
	if task, _ := r.drv.Task(fresh[0].ID, "serve-0"); !slices.Equal(task.Spec.Command, []string{"serve", "v2"}) {
		t.Fatalf("new generation runs %v; want serve v2", task.Spec.Command)
	}
	// An old instance that crashes during the rollout restarts with its own command.
	r.drv.FinishTask(old[0].ID, "serve-0", 1)
	stepUntil(r, "old instance restarted", func() bool {
		for _, in := range r.storedInstances("wsp", "scorer") {
			if in.ID == old[0].ID && in.State == api.EndpointInstanceReady && in.Restarts == 1 {
				return true
			}
		}
		return false
	})
	if task, ok := r.drv.Task(old[0].ID, "serve-1"); !ok || !slices.Equal(task.Spec.Command, []string{"serve", "v1"}) {
		t.Fatalf("old instance restarted with %v; want its own serve v1", task.Spec.Command)
	}
	// The old instances keep serving while the new ones are not ready.
	for range 5 {
		r.clk.Step(10 * time.Second)
		r.settle()
	}
	for _, in := range r.storedInstances("wsp", "scorer") {
		if in.Generation == 1 && in.State != api.EndpointInstanceReady {
			t.Fatalf("old instance %s is %s before the new generation is ready", in.ID, in.State)
		}
	}
	if r.score("scorer", "") != http.StatusBadGateway {
		t.Fatal("the old instances do not take traffic during the rollout")
	}
	// New generation ready: the old instances drain, and go after the request timeout.
	for _, in := range fresh {
		p.set(in.Port, "/ready", true)
		p.set(in.Port, "/live", true)
	}
	stepUntil(r, "old draining", func() bool {
		for _, in := range r.storedInstances("wsp", "scorer") {
			if in.Generation == 1 && in.State != api.EndpointInstanceDraining {
				return false
			}
		}
		return true
	})
	for _, in := range old {
		if _, ok := r.drv.Node(in.ID); !ok {
			t.Fatalf("old instance %s terminated at once; it must drain for the request timeout first", in.ID)
		}
	}
	r.clk.Step(4 * time.Second) // request_timeout_ms 3000 + 1 s
	r.settlesTo("old terminated", func() bool {
		for _, in := range old {
			if _, ok := r.drv.Node(in.ID); ok {
				return false
			}
		}
		return len(r.storedInstances("wsp", "scorer")) == 2
	})
	ep = r.endpoint("wsp", "scorer")
	if ep.ProvisioningState != api.ProvisioningSucceeded || ep.Deployments["blue"].ReadyInstances != 2 {
		t.Fatalf("after rollout: %s with %d ready", ep.ProvisioningState, ep.Deployments["blue"].ReadyInstances)
	}

	// Scaling in drains one instance; removing a deployment drains all of it.
	d.InstanceCount = 1
	green := testDeployment(1, "serve", "green")
	upd = api.EndpointUpdate{Deployments: map[string]api.DeploymentSpec{"blue": d, "green": green}, Traffic: map[string]int64{"blue": 100}}
	if _, err := r.e.UpdateEndpoint(context.Background(), "wsp", "scorer", upd); err != nil {
		t.Fatal(err)
	}
	g := r.started("wsp", "scorer", "green", 1, 1)
	p.set(g[0].Port, "/ready", true)
	p.set(g[0].Port, "/live", true)
	stepUntil(r, "scaled in", func() bool {
		return len(r.storedInstances("wsp", "scorer")) == 2 && r.endpoint("wsp", "scorer").ProvisioningState == api.ProvisioningSucceeded
	})
	if _, err := r.e.UpdateEndpoint(context.Background(), "wsp", "scorer", api.EndpointUpdate{
		Deployments: map[string]api.DeploymentSpec{"green": green}, Traffic: map[string]int64{"blue": 100},
	}); !api.IsInvalid(err) || api.FieldOf(err) != "traffic.blue" {
		t.Fatalf("removing a deployment that keeps traffic: %v; want invalid on traffic.blue", err)
	}
	if _, err := r.e.UpdateEndpoint(context.Background(), "wsp", "scorer", api.EndpointUpdate{
		Deployments: map[string]api.DeploymentSpec{"green": green}, Traffic: map[string]int64{"green": 100},
	}); err != nil {
		t.Fatal(err)
	}
	stepUntil(r, "blue gone", func() bool {
		ins := r.storedInstances("wsp", "scorer")
		return len(ins) == 1 && ins[0].Deployment == "green"
	})
	if got := r.score("scorer", "blue"); got != http.StatusNotFound {
		t.Fatalf("pinned to the removed deployment: %d; want 404", got)
	}
}

// requestsTo counts the requests the router sent to each deployment of the endpoint.
func (r *rig) requestsTo(name string) map[string]uint64 {
	out := map[string]uint64{}
	for d, st := range r.e.ScoringStats(name) {
		out[d] = st.Requests
	}
	return out
}

func TestEndpointTrafficMovesOnlyOnceItsDeploymentsAreRolledOut(t *testing.T) {
	r := newRig(t)
	p := newProbes(r)
	r.workspace("wsp", nil)
	readyEndpoint(t, r, p, api.EndpointSpec{Name: "scorer", Deployments: map[string]api.DeploymentSpec{"blue": testDeployment(1, "serve", "blue")}, Traffic: map[string]int64{"blue": 100}})
	blue := r.storedInstances("wsp", "scorer")[0]

	// One apply adds green, gives it all traffic and removes blue.
	if _, err := r.e.UpdateEndpoint(context.Background(), "wsp", "scorer", api.EndpointUpdate{
		Deployments: map[string]api.DeploymentSpec{"green": testDeployment(1, "serve", "green")},
		Traffic:     map[string]int64{"green": 100},
	}); err != nil {
		t.Fatal(err)
	}
	ep := r.endpoint("wsp", "scorer")
	if ep.ProvisioningState != api.ProvisioningUpdating || !maps.Equal(ep.LiveTraffic, map[string]int64{"blue": 100}) {
		t.Fatalf("right after the update: %s, live traffic %v; want Updating with blue 100 live", ep.ProvisioningState, ep.LiveTraffic)
	}
	// Nothing of green is ready: requests still reach blue's instance (502: the fake node
	// serves nothing) instead of finding no instance (503).
	if got := r.score("scorer", ""); got != http.StatusBadGateway {
		t.Fatalf("score during the rollout: %d; want 502 from blue's instance", got)
	}
	if got := r.requestsTo("scorer"); got["blue"] != 1 || got["green"] != 0 {
		t.Fatalf("requests during the rollout: %v; want 1 to blue, none to green", got)
	}

	// The split in force survives an engine restart.
	green := r.started("wsp", "scorer", "green", 1, 1)[0]
	r.stop()
	r.drv.Reopen()
	r.start()
	p = newProbes(r)
	p.set(blue.Port, "/ready", true)
	p.set(blue.Port, "/live", true)
	stepUntil(r, "blue back in the router", func() bool { return r.score("scorer", "") == http.StatusBadGateway })
	for _, in := range r.storedInstances("wsp", "scorer") {
		if in.ID == blue.ID && in.State != api.EndpointInstanceReady {
			t.Fatalf("blue's instance is %s while it still has the live traffic", in.State)
		}
	}

	p.set(green.Port, "/ready", true)
	p.set(green.Port, "/live", true)
	stepUntil(r, "rollout done", func() bool { return r.endpoint("wsp", "scorer").ProvisioningState == api.ProvisioningSucceeded })
	if ep := r.endpoint("wsp", "scorer"); !maps.Equal(ep.LiveTraffic, ep.Traffic) {
		t.Fatalf("after the rollout: live traffic %v; want the declared %v", ep.LiveTraffic, ep.Traffic)
	}
	before := r.requestsTo("scorer")
	if got := r.score("scorer", ""); got != http.StatusBadGateway {
		t.Fatalf("score after the rollout: %d; want 502 from green's instance", got)
	}
	if got := r.requestsTo("scorer"); got["green"] != before["green"]+1 || got["blue"] != before["blue"] {
		t.Fatalf("requests after the rollout: %v (before %v); want the new one on green", got, before)
	}
	r.clk.Step(4 * time.Second) // blue drains for request_timeout_ms 3000 + 1 s
	stepUntil(r, "blue terminated", func() bool {
		_, ok := r.drv.Node(blue.ID)
		return !ok && len(r.storedInstances("wsp", "scorer")) == 1
	})
}

func TestEndpointTrafficBetweenReadyDeploymentsMovesAtOnce(t *testing.T) {
	r := newRig(t)
	p := newProbes(r)
	r.workspace("wsp", nil)
	deployments := map[string]api.DeploymentSpec{"blue": testDeployment(1, "serve", "blue"), "green": testDeployment(1, "serve", "green")}
	readyEndpoint(t, r, p, api.EndpointSpec{Name: "scorer", Deployments: deployments, Traffic: map[string]int64{"blue": 100}})

	ep, err := r.e.UpdateEndpoint(context.Background(), "wsp", "scorer", api.EndpointUpdate{Deployments: deployments, Traffic: map[string]int64{"blue": 0, "green": 100}})
	if err != nil {
		t.Fatal(err)
	}
	if ep.ProvisioningState != api.ProvisioningSucceeded || !maps.Equal(ep.LiveTraffic, ep.Traffic) {
		t.Fatalf("a split between ready deployments: %s, live %v; want Succeeded with the declared split live", ep.ProvisioningState, ep.LiveTraffic)
	}
	_ = r.score("scorer", "")
	if got := r.requestsTo("scorer"); got["green"] != 1 || got["blue"] != 0 {
		t.Fatalf("requests: %v; want the one request on green", got)
	}
}

func TestEndpointDeleteTerminatesEveryInstance(t *testing.T) {
	r := newRig(t)
	p := newProbes(r)
	r.workspace("wsp", nil)
	readyEndpoint(t, r, p, api.EndpointSpec{Name: "scorer", Deployments: map[string]api.DeploymentSpec{"blue": testDeployment(2, "serve")}, Traffic: map[string]int64{"blue": 100}})
	ins := r.storedInstances("wsp", "scorer")
	if err := r.e.DeleteEndpoint(context.Background(), "wsp", "scorer"); err != nil {
		t.Fatal(err)
	}
	for _, in := range ins {
		if _, ok := r.drv.Node(in.ID); ok {
			t.Fatalf("instance %s still has its node after delete returned", in.ID)
		}
	}
	if _, err := r.e.GetEndpoint(context.Background(), "wsp", "scorer"); !api.IsNotFound(err) {
		t.Fatalf("get after delete: %v", err)
	}
	if r.score("scorer", "") != http.StatusNotFound {
		t.Fatal("the router still serves a deleted endpoint")
	}
}

func TestEndpointInstancesAdoptedAfterRestart(t *testing.T) {
	r := newRig(t)
	p := newProbes(r)
	r.workspace("wsp", nil)
	readyEndpoint(t, r, p, api.EndpointSpec{Name: "scorer", Deployments: map[string]api.DeploymentSpec{"blue": testDeployment(2, "serve")}, Traffic: map[string]int64{"blue": 100}})
	ins := r.storedInstances("wsp", "scorer")
	r.stop()
	r.drv.Reopen()
	r.drv.ResetCalls()
	r.start()
	// The stored state still says Succeeded, so the router serves from the moment Start
	// returns, before any pass has run.
	if got := r.score("scorer", ""); got != http.StatusBadGateway {
		t.Fatalf("score right after Start: %d; want the adopted instances in the router (502 from the fake port)", got)
	}
	p = newProbes(r)
	for _, in := range ins {
		p.set(in.Port, "/ready", true)
		p.set(in.Port, "/live", true)
	}
	r.settle()
	if got := r.drv.CallsTo(fake.MethodTerminate); len(got) != 0 {
		t.Fatalf("restart terminated %v; endpoint instances must be adopted", got)
	}
	if got := r.score("scorer", ""); got != http.StatusBadGateway {
		t.Fatalf("score after restart: %d; want the adopted instances in the router (502 from the fake port)", got)
	}
	// Probes resume: a liveness failure still restarts.
	p.set(ins[0].Port, "/live", false)
	stepUntil(r, "restarted after adoption", func() bool { _, ok := r.drv.Task(ins[0].ID, "serve-1"); return ok })
}

func TestEndpointKeysAndTokens(t *testing.T) {
	r := newRig(t)
	newProbes(r)
	r.workspace("wsp", nil)
	ctx := context.Background()
	spec := api.EndpointSpec{Name: "scorer", Deployments: map[string]api.DeploymentSpec{"blue": testDeployment(1, "serve")}}
	if _, err := r.e.CreateEndpoint(ctx, "wsp", spec, ""); err != nil {
		t.Fatal(err)
	}
	keys, err := r.e.GetEndpointKeys(ctx, "wsp", "scorer")
	if err != nil || len(keys.PrimaryKey) != 43 || keys.PrimaryKey == keys.SecondaryKey {
		t.Fatalf("keys %+v, %v", keys, err)
	}
	after, err := r.e.RegenerateEndpointKeys(ctx, "wsp", "scorer", "secondary")
	if err != nil || after.PrimaryKey != keys.PrimaryKey || after.SecondaryKey == keys.SecondaryKey {
		t.Fatalf("regenerate secondary: %+v, %v", after, err)
	}
	if _, err := r.e.RegenerateEndpointKeys(ctx, "wsp", "scorer", "tertiary"); api.FieldOf(err) != "key_type" {
		t.Fatalf("bad key type: %v", err)
	}
	if _, err := r.e.GetEndpointToken(ctx, "wsp", "scorer"); api.FieldOf(err) != "auth_mode" {
		t.Fatalf("token for a key endpoint: %v", err)
	}
	if _, err := r.e.CreateEndpoint(ctx, "wsp", spec, ""); !api.IsConflict(err) {
		t.Fatalf("same name twice: %v", err)
	}
	r.workspace("other", nil)
	if _, err := r.e.CreateEndpoint(ctx, "other", spec, ""); !api.IsConflict(err) || !strings.Contains(err.Error(), `taken by workspace "wsp"`) {
		t.Fatalf("same name in another workspace: %v", err)
	}

	if _, err := r.e.UpdateEndpoint(ctx, "wsp", "scorer", api.EndpointUpdate{AuthMode: "aml_token", Deployments: spec.Deployments}); err != nil {
		t.Fatal(err)
	}
	tok, err := r.e.GetEndpointToken(ctx, "wsp", "scorer")
	if err != nil {
		t.Fatal(err)
	}
	if !tok.ExpiresOn.Equal(r.clk.Now().Add(time.Hour).Truncate(time.Second)) {
		t.Fatalf("expires %s", tok.ExpiresOn)
	}
	if !r.e.endpoints.VerifyToken("wsp", "scorer", tok.AccessToken) {
		t.Fatal("a fresh token does not verify")
	}
	if r.e.endpoints.VerifyToken("other", "scorer", tok.AccessToken) {
		t.Fatal("a token verifies for another endpoint")
	}
	payload, mac, _ := strings.Cut(tok.AccessToken, ".")
	if r.e.endpoints.VerifyToken("wsp", "scorer", payload+"x."+mac) || r.e.endpoints.VerifyToken("wsp", "scorer", "") {
		t.Fatal("a forged token verifies")
	}
	r.clk.Step(time.Hour)
	if r.e.endpoints.VerifyToken("wsp", "scorer", tok.AccessToken) {
		t.Fatal("an expired token verifies")
	}
}

func TestWorkspaceForceDeleteStopsItsEndpoints(t *testing.T) {
	r := newRig(t)
	p := newProbes(r)
	r.workspace("wsp", nil)
	readyEndpoint(t, r, p, api.EndpointSpec{Name: "scorer", Deployments: map[string]api.DeploymentSpec{"blue": testDeployment(1, "serve")}, Traffic: map[string]int64{"blue": 100}})
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
	if r.score("scorer", "") != http.StatusNotFound {
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
	if _, err := r.e.CreateEndpoint(context.Background(), "wsp", api.EndpointSpec{Name: "scorer", Deployments: map[string]api.DeploymentSpec{"blue": testDeployment(1, "serve")}}, ""); err != nil {
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

// An endpoint instance whose node is created not ready (a pod being scheduled, a queued
// Slurm allocation) waits for it: its process starts once the node is ready, and the
// node's NodeReady event is no failure.
func TestEndpointInstanceWaitsForItsNodeToBeReady(t *testing.T) {
	r := newRigWithDriver(t, 0, fake.Options{CreatePending: true})
	r.workspace("wsp", nil)
	if _, err := r.e.CreateEndpoint(context.Background(), "wsp", api.EndpointSpec{
		Name: "scorer", Deployments: map[string]api.DeploymentSpec{"blue": testDeployment(1, "serve")},
		Traffic: map[string]int64{"blue": 100},
	}, ""); err != nil {
		t.Fatal(err)
	}
	r.settle()
	ins := r.storedInstances("wsp", "scorer")
	if len(ins) != 1 || !ins[0].StartedAt.IsZero() {
		t.Fatalf("instances %+v; want one, not started while its node is not ready", ins)
	}
	if _, ok := r.drv.Task(ins[0].ID, ins[0].Task); ok {
		t.Fatalf("a task was started on a node that is not ready")
	}
	r.drv.MakeReady(ins[0].ID)
	started := r.started("wsp", "scorer", "blue", 1, 1)
	if started[0].ID != ins[0].ID || started[0].Restarts != 0 {
		t.Fatalf("instance %+v; want the same instance started with no restart", started[0])
	}
}
