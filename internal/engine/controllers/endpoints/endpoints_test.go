package endpoints_test

import (
	"context"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/controllers/endpoints/endpointstest"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/fake"
)

// The endpoint runtime's rules (runtime.go): instances started to the count, probes and
// their thresholds, restarts with back-off, failed starts marking the deployment, rollout
// and drain, delete, and adoption after a restart, on the controller alone.

func setup(t *testing.T) *endpointstest.Env {
	t.Helper()
	env := endpointstest.New(t, endpointstest.Options{})
	env.Workspace("wsp", nil)
	return env
}

func instanceStates(ep *api.Endpoint, deployment string) []string {
	var out []string
	for _, in := range ep.Deployments[deployment].Instances {
		out = append(out, in.State)
	}
	slices.Sort(out)
	return out
}

// readyEndpoint creates an endpoint whose instances all pass their probes, and steps the
// clock until it is Succeeded.
func readyEndpoint(t *testing.T, env *endpointstest.Env, spec api.EndpointSpec) {
	t.Helper()
	if _, err := env.API.CreateEndpoint(context.Background(), "wsp", spec, ""); err != nil {
		t.Fatal(err)
	}
	for name, d := range spec.Deployments {
		for _, in := range env.Started("wsp", spec.Name, name, 1, int(d.InstanceCount)) {
			env.Probes.Healthy(in, true)
		}
	}
	env.StepUntil("endpoint succeeded", func() bool { return env.Endpoint("wsp", spec.Name).ProvisioningState == api.ProvisioningSucceeded })
}

func TestEndpointReadinessGatesTraffic(t *testing.T) {
	env := setup(t)
	p := env.Probes
	ep, err := env.API.CreateEndpoint(context.Background(), "wsp", api.EndpointSpec{
		Name: "scorer", Deployments: map[string]api.DeploymentSpec{"blue": endpointstest.Deployment(2, "serve")},
		Traffic: map[string]int64{"blue": 100},
	}, "")
	if err != nil {
		t.Fatal(err)
	}
	if ep.ProvisioningState != api.ProvisioningCreating || ep.AuthMode != api.AuthModeKey {
		t.Fatalf("new endpoint: state %s, auth %s", ep.ProvisioningState, ep.AuthMode)
	}
	ins := env.Started("wsp", "scorer", "blue", 1, 2)
	for _, in := range ins {
		task, ok := env.Driver.Task(in.ID, in.Task)
		if !ok || task.Spec.Env["PORT"] != strconv.Itoa(in.Port) || task.Spec.Env["MODEL"] != "m1" || task.Spec.Command[0] != "serve" {
			t.Fatalf("instance %s task %+v; want PORT=%d and the deployment's command and environment", in.ID, task.Spec, in.Port)
		}
	}
	if got := env.Score("wsp", "scorer", ""); got != http.StatusServiceUnavailable {
		t.Fatalf("score before readiness: %d; want 503 (no ready instance)", got)
	}
	for _, in := range ins {
		p.Healthy(in, true)
	}
	// initial_delay passes: one success of the two success_threshold asks for.
	env.Clock.Step(10 * time.Second)
	env.SettlesTo("first probes", func() bool { return p.Count(ins[0].Port, "/ready") == 1 && p.Count(ins[1].Port, "/ready") == 1 })
	if got := instanceStates(env.Endpoint("wsp", "scorer"), "blue"); !slices.Equal(got, []string{"Starting", "Starting"}) {
		t.Fatalf("after one readiness success: %v; want both Starting", got)
	}
	env.Clock.Step(10 * time.Second)
	env.SettlesTo("instances ready", func() bool {
		return env.Endpoint("wsp", "scorer").ProvisioningState == api.ProvisioningSucceeded
	})
	if ep := env.Endpoint("wsp", "scorer"); ep.Deployments["blue"].ReadyInstances != 2 {
		t.Fatalf("ready instances %d; want 2", ep.Deployments["blue"].ReadyInstances)
	}
	// Ready instances are in the router: nothing serves on the fake ports, so the request
	// reaches the proxy and fails to dial (502) instead of finding no instance (503).
	if got := env.Score("wsp", "scorer", ""); got != http.StatusBadGateway {
		t.Fatalf("score after readiness: %d; want 502 from the proxy", got)
	}

	// failure_threshold readiness failures in a row take an instance out of the router.
	p.Set(ins[0].Port, "/ready", false)
	for i := range 3 {
		env.Clock.Step(10 * time.Second)
		env.SettlesTo("probe ran", func() bool { return p.Count(ins[0].Port, "/ready") == 3+i })
	}
	env.SettlesTo("instance unready", func() bool {
		return slices.Equal(instanceStates(env.Endpoint("wsp", "scorer"), "blue"), []string{"Ready", "Starting"})
	})
	if ep := env.Endpoint("wsp", "scorer"); ep.ProvisioningState != api.ProvisioningUpdating {
		t.Fatalf("with one instance unready: %s; want Updating", ep.ProvisioningState)
	}
}

func TestEndpointLivenessFailureRestartsTheProcess(t *testing.T) {
	env := setup(t)
	p := env.Probes
	readyEndpoint(t, env, api.EndpointSpec{Name: "scorer", Deployments: map[string]api.DeploymentSpec{"blue": endpointstest.Deployment(1, "serve")}, Traffic: map[string]int64{"blue": 100}})
	in := env.Instances("wsp", "scorer")[0]
	p.Set(in.Port, "/live", false)
	for range 2 {
		env.Step(10 * time.Second)
	}
	if task, _ := env.Driver.Task(in.ID, "serve-0"); !task.Status.Running {
		t.Fatal("the process was killed after 2 liveness failures; failure_threshold is 3")
	}
	env.Clock.Step(10 * time.Second)
	env.SettlesTo("process killed", func() bool { task, _ := env.Driver.Task(in.ID, "serve-0"); return !task.Status.Running })
	if got := env.Instances("wsp", "scorer")[0]; got.State != api.EndpointInstanceFailed {
		t.Fatalf("after liveness failed: state %s; want Failed", got.State)
	}
	p.Set(in.Port, "/live", true)
	// The process was ready once, so the back-off is the shortest: 1 s.
	env.Clock.Step(time.Second)
	env.SettlesTo("restarted", func() bool { _, ok := env.Driver.Task(in.ID, "serve-1"); return ok })
	env.StepUntil("ready again", func() bool {
		return env.Endpoint("wsp", "scorer").Deployments["blue"].ReadyInstances == 1
	})
	got := env.Endpoint("wsp", "scorer").Deployments["blue"].Instances[0]
	if got.Restarts != 1 || got.ID != in.ID {
		t.Fatalf("instance %+v; want the same instance (node) with 1 restart", got)
	}
}

func TestEndpointExitedProcessRestartsAndRepeatedFailureFails(t *testing.T) {
	env := setup(t)
	p := env.Probes
	readyEndpoint(t, env, api.EndpointSpec{Name: "scorer", Deployments: map[string]api.DeploymentSpec{"blue": endpointstest.Deployment(1, "serve")}, Traffic: map[string]int64{"blue": 100}})
	in := env.Instances("wsp", "scorer")[0]

	// The process exits: it is restarted on its node.
	p.Set(in.Port, "/ready", false)
	env.Driver.AppendOutput(in.ID, "serve-0", []byte("Traceback: model file missing\n"))
	env.Driver.FinishTask(in.ID, "serve-0", 3)
	env.SettlesTo("instance failed", func() bool { return env.Instances("wsp", "scorer")[0].State == api.EndpointInstanceFailed })
	env.SettlesTo("failed instance out of the router", func() bool { return env.Score("wsp", "scorer", "") == http.StatusServiceUnavailable })
	// Now every start fails: readiness never passes within 10s + 3*10s. After three
	// failed starts in a row the endpoint reads Failed with the reason.
	env.StepUntil("endpoint failed", func() bool { return env.Endpoint("wsp", "scorer").ProvisioningState == api.ProvisioningFailed })
	ep := env.Endpoint("wsp", "scorer")
	if !strings.Contains(ep.Error, "deployment blue: instance "+in.ID+" failed 3 times in a row before becoming ready") ||
		!strings.Contains(ep.Error, "readiness probe GET /ready did not pass within 40s") {
		t.Fatalf("error %q", ep.Error)
	}
	if ep.Deployments["blue"].Instances[0].Restarts < 3 {
		t.Fatalf("restarts %d; want at least 3", ep.Deployments["blue"].Instances[0].Restarts)
	}
	// Fixing the readiness endpoint clears the error once an instance is ready.
	p.Set(in.Port, "/ready", true)
	env.StepUntil("endpoint recovered", func() bool { return env.Endpoint("wsp", "scorer").ProvisioningState == api.ProvisioningSucceeded })
	if ep := env.Endpoint("wsp", "scorer"); ep.Error != "" {
		t.Fatalf("error after recovery: %q", ep.Error)
	}
}

func TestEndpointFirstStartErrorNamesTheOutput(t *testing.T) {
	env := setup(t)
	if _, err := env.API.CreateEndpoint(context.Background(), "wsp", api.EndpointSpec{Name: "scorer", Deployments: map[string]api.DeploymentSpec{"blue": endpointstest.Deployment(1, "serve")}}, ""); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		ins := env.Started("wsp", "scorer", "blue", 1, 1)
		env.Driver.AppendOutput(ins[0].ID, ins[0].Task, []byte("ImportError: no module named sklearn\n"))
		env.Driver.FinishTask(ins[0].ID, ins[0].Task, 1)
		if i < 2 {
			env.StepUntil("restarted", func() bool {
				in := env.Instances("wsp", "scorer")[0]
				return in.Restarts == int64(i+1) && !in.StartedAt.IsZero()
			})
		}
	}
	env.SettlesTo("failed", func() bool { return env.Endpoint("wsp", "scorer").ProvisioningState == api.ProvisioningFailed })
	if ep := env.Endpoint("wsp", "scorer"); !strings.Contains(ep.Error, "its command exited with code 1; output: ImportError: no module named sklearn") {
		t.Fatalf("error %q", ep.Error)
	}
}

// A process that never became ready and exits waits before its next start: 1 s after the
// first failed start (DESIGN's "1 s doubling to 5 min"), doubling with each failed start in
// a row (rules/backoff), and not a moment less.
func TestEndpointRestartBackOffDoublesPerFailedStart(t *testing.T) {
	env := setup(t)
	if _, err := env.API.CreateEndpoint(context.Background(), "wsp", api.EndpointSpec{Name: "scorer", Deployments: map[string]api.DeploymentSpec{"blue": endpointstest.Deployment(1, "serve")}}, ""); err != nil {
		t.Fatal(err)
	}
	for i, wait := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second} {
		in := env.Started("wsp", "scorer", "blue", 1, 1)[0]
		if in.Restarts != int64(i) || in.Task != "serve-"+strconv.Itoa(i) {
			t.Fatalf("start %d: restarts %d, task %s; want %d, serve-%d", i+1, in.Restarts, in.Task, i, i)
		}
		env.Driver.FinishTask(in.ID, in.Task, 1)
		env.SettlesTo("failed", func() bool { return env.Instances("wsp", "scorer")[0].State == api.EndpointInstanceFailed })
		env.Step(wait - time.Millisecond)
		if got := env.Instances("wsp", "scorer")[0]; got.State != api.EndpointInstanceFailed || got.Restarts != int64(i) {
			t.Fatalf("failed start %d, %s later: %s with %d restarts; want Failed until %s have passed", i+1, wait-time.Millisecond, got.State, got.Restarts, wait)
		}
		env.Step(time.Millisecond)
	}
	if in := env.Started("wsp", "scorer", "blue", 1, 1)[0]; in.Restarts != 3 {
		t.Fatalf("restarts %d; want 3", in.Restarts)
	}
}

func TestEndpointRolloutWaitsForReadinessThenDrains(t *testing.T) {
	env := setup(t)
	p := env.Probes
	ctx := context.Background()
	spec := api.EndpointSpec{Name: "scorer", Deployments: map[string]api.DeploymentSpec{"blue": endpointstest.Deployment(2, "serve", "v1")}, Traffic: map[string]int64{"blue": 100}}
	readyEndpoint(t, env, spec)
	old := env.Instances("wsp", "scorer")

	// Only the traffic or request settings: no new instances.
	upd := api.EndpointUpdate{Deployments: spec.Deployments, Traffic: spec.Traffic}
	d := endpointstest.Deployment(2, "serve", "v1")
	d.RequestSettings.MaxConcurrentRequestsPerInstance = 4
	upd.Deployments = map[string]api.DeploymentSpec{"blue": d}
	ep, err := env.API.UpdateEndpoint(ctx, "wsp", "scorer", upd)
	if err != nil {
		t.Fatal(err)
	}
	if ep.Deployments["blue"].Generation != 1 || ep.ProvisioningState != api.ProvisioningSucceeded {
		t.Fatalf("request settings change: generation %d, state %s; want 1, Succeeded", ep.Deployments["blue"].Generation, ep.ProvisioningState)
	}

	// A new command is a new generation.
	d.Command = []string{"serve", "v2"}
	upd.Deployments = map[string]api.DeploymentSpec{"blue": d}
	if ep, err = env.API.UpdateEndpoint(ctx, "wsp", "scorer", upd); err != nil {
		t.Fatal(err)
	}
	if ep.Deployments["blue"].Generation != 2 || ep.ProvisioningState != api.ProvisioningUpdating {
		t.Fatalf("command change: generation %d, state %s; want 2, Updating", ep.Deployments["blue"].Generation, ep.ProvisioningState)
	}
	fresh := env.Started("wsp", "scorer", "blue", 2, 2)
	if task, _ := env.Driver.Task(fresh[0].ID, "serve-0"); !slices.Equal(task.Spec.Command, []string{"serve", "v2"}) {
		t.Fatalf("new generation runs %v; want serve v2", task.Spec.Command)
	}
	// An old instance that crashes during the rollout restarts with its own command.
	env.Driver.FinishTask(old[0].ID, "serve-0", 1)
	env.StepUntil("old instance restarted", func() bool {
		for _, in := range env.Instances("wsp", "scorer") {
			if in.ID == old[0].ID && in.State == api.EndpointInstanceReady && in.Restarts == 1 {
				return true
			}
		}
		return false
	})
	if task, ok := env.Driver.Task(old[0].ID, "serve-1"); !ok || !slices.Equal(task.Spec.Command, []string{"serve", "v1"}) {
		t.Fatalf("old instance restarted with %v; want its own serve v1", task.Spec.Command)
	}
	// The old instances keep serving while the new ones are not ready.
	for range 5 {
		env.Step(10 * time.Second)
	}
	for _, in := range env.Instances("wsp", "scorer") {
		if in.Generation == 1 && in.State != api.EndpointInstanceReady {
			t.Fatalf("old instance %s is %s before the new generation is ready", in.ID, in.State)
		}
	}
	if env.Score("wsp", "scorer", "") != http.StatusBadGateway {
		t.Fatal("the old instances do not take traffic during the rollout")
	}
	// New generation ready: the old instances drain, and go after the request timeout.
	for _, in := range fresh {
		p.Healthy(in, true)
	}
	env.StepUntil("old draining", func() bool {
		for _, in := range env.Instances("wsp", "scorer") {
			if in.Generation == 1 && in.State != api.EndpointInstanceDraining {
				return false
			}
		}
		return true
	})
	for _, in := range old {
		if _, ok := env.Driver.Node(in.ID); !ok {
			t.Fatalf("old instance %s terminated at once; it must drain for the request timeout first", in.ID)
		}
	}
	env.Clock.Step(4 * time.Second) // request_timeout_ms 3000 + 1 s
	env.SettlesTo("old terminated", func() bool {
		for _, in := range old {
			if _, ok := env.Driver.Node(in.ID); ok {
				return false
			}
		}
		return len(env.Instances("wsp", "scorer")) == 2
	})
	ep = env.Endpoint("wsp", "scorer")
	if ep.ProvisioningState != api.ProvisioningSucceeded || ep.Deployments["blue"].ReadyInstances != 2 {
		t.Fatalf("after rollout: %s with %d ready", ep.ProvisioningState, ep.Deployments["blue"].ReadyInstances)
	}

	// Scaling in drains one instance; removing a deployment drains all of it.
	d.InstanceCount = 1
	green := endpointstest.Deployment(1, "serve", "green")
	upd = api.EndpointUpdate{Deployments: map[string]api.DeploymentSpec{"blue": d, "green": green}, Traffic: map[string]int64{"blue": 100}}
	if _, err := env.API.UpdateEndpoint(ctx, "wsp", "scorer", upd); err != nil {
		t.Fatal(err)
	}
	g := env.Started("wsp", "scorer", "green", 1, 1)
	p.Healthy(g[0], true)
	env.StepUntil("scaled in", func() bool {
		return len(env.Instances("wsp", "scorer")) == 2 && env.Endpoint("wsp", "scorer").ProvisioningState == api.ProvisioningSucceeded
	})
	if _, err := env.API.UpdateEndpoint(ctx, "wsp", "scorer", api.EndpointUpdate{
		Deployments: map[string]api.DeploymentSpec{"green": green}, Traffic: map[string]int64{"blue": 100},
	}); !api.IsInvalid(err) || api.FieldOf(err) != "traffic.blue" {
		t.Fatalf("removing a deployment that keeps traffic: %v; want invalid on traffic.blue", err)
	}
	if _, err := env.API.UpdateEndpoint(ctx, "wsp", "scorer", api.EndpointUpdate{
		Deployments: map[string]api.DeploymentSpec{"green": green}, Traffic: map[string]int64{"green": 100},
	}); err != nil {
		t.Fatal(err)
	}
	env.StepUntil("blue gone", func() bool {
		ins := env.Instances("wsp", "scorer")
		return len(ins) == 1 && ins[0].Deployment == "green"
	})
	if got := env.Score("wsp", "scorer", "blue"); got != http.StatusNotFound {
		t.Fatalf("pinned to the removed deployment: %d; want 404", got)
	}
}

func TestEndpointTrafficMovesOnlyOnceItsDeploymentsAreRolledOut(t *testing.T) {
	env := setup(t)
	readyEndpoint(t, env, api.EndpointSpec{Name: "scorer", Deployments: map[string]api.DeploymentSpec{"blue": endpointstest.Deployment(1, "serve", "blue")}, Traffic: map[string]int64{"blue": 100}})
	blue := env.Instances("wsp", "scorer")[0]

	// One apply adds green, gives it all traffic and removes blue.
	if _, err := env.API.UpdateEndpoint(context.Background(), "wsp", "scorer", api.EndpointUpdate{
		Deployments: map[string]api.DeploymentSpec{"green": endpointstest.Deployment(1, "serve", "green")},
		Traffic:     map[string]int64{"green": 100},
	}); err != nil {
		t.Fatal(err)
	}
	ep := env.Endpoint("wsp", "scorer")
	if ep.ProvisioningState != api.ProvisioningUpdating || !maps.Equal(ep.LiveTraffic, map[string]int64{"blue": 100}) {
		t.Fatalf("right after the update: %s, live traffic %v; want Updating with blue 100 live", ep.ProvisioningState, ep.LiveTraffic)
	}
	// Nothing of green is ready: requests still reach blue's instance (502: the fake node
	// serves nothing) instead of finding no instance (503).
	if got := env.Score("wsp", "scorer", ""); got != http.StatusBadGateway {
		t.Fatalf("score during the rollout: %d; want 502 from blue's instance", got)
	}
	if got := env.RequestsTo("scorer"); got["blue"] != 1 || got["green"] != 0 {
		t.Fatalf("requests during the rollout: %v; want 1 to blue, none to green", got)
	}

	// The split in force survives a restart.
	green := env.Started("wsp", "scorer", "green", 1, 1)[0]
	env.Restart()
	p := env.Probes
	p.Healthy(blue, true)
	env.StepUntil("blue back in the router", func() bool { return env.Score("wsp", "scorer", "") == http.StatusBadGateway })
	for _, in := range env.Instances("wsp", "scorer") {
		if in.ID == blue.ID && in.State != api.EndpointInstanceReady {
			t.Fatalf("blue's instance is %s while it still has the live traffic", in.State)
		}
	}

	p.Healthy(green, true)
	env.StepUntil("rollout done", func() bool { return env.Endpoint("wsp", "scorer").ProvisioningState == api.ProvisioningSucceeded })
	if ep := env.Endpoint("wsp", "scorer"); !maps.Equal(ep.LiveTraffic, ep.Traffic) {
		t.Fatalf("after the rollout: live traffic %v; want the declared %v", ep.LiveTraffic, ep.Traffic)
	}
	before := env.RequestsTo("scorer")
	if got := env.Score("wsp", "scorer", ""); got != http.StatusBadGateway {
		t.Fatalf("score after the rollout: %d; want 502 from green's instance", got)
	}
	if got := env.RequestsTo("scorer"); got["green"] != before["green"]+1 || got["blue"] != before["blue"] {
		t.Fatalf("requests after the rollout: %v (before %v); want the new one on green", got, before)
	}
	env.Clock.Step(4 * time.Second) // blue drains for request_timeout_ms 3000 + 1 s
	env.StepUntil("blue terminated", func() bool {
		_, ok := env.Driver.Node(blue.ID)
		return !ok && len(env.Instances("wsp", "scorer")) == 1
	})
}

func TestEndpointTrafficBetweenReadyDeploymentsMovesAtOnce(t *testing.T) {
	env := setup(t)
	deployments := map[string]api.DeploymentSpec{"blue": endpointstest.Deployment(1, "serve", "blue"), "green": endpointstest.Deployment(1, "serve", "green")}
	readyEndpoint(t, env, api.EndpointSpec{Name: "scorer", Deployments: deployments, Traffic: map[string]int64{"blue": 100}})

	ep, err := env.API.UpdateEndpoint(context.Background(), "wsp", "scorer", api.EndpointUpdate{Deployments: deployments, Traffic: map[string]int64{"blue": 0, "green": 100}})
	if err != nil {
		t.Fatal(err)
	}
	if ep.ProvisioningState != api.ProvisioningSucceeded || !maps.Equal(ep.LiveTraffic, ep.Traffic) {
		t.Fatalf("a split between ready deployments: %s, live %v; want Succeeded with the declared split live", ep.ProvisioningState, ep.LiveTraffic)
	}
	_ = env.Score("wsp", "scorer", "")
	if got := env.RequestsTo("scorer"); got["green"] != 1 || got["blue"] != 0 {
		t.Fatalf("requests: %v; want the one request on green", got)
	}
}

func TestEndpointDeleteTerminatesEveryInstance(t *testing.T) {
	env := setup(t)
	readyEndpoint(t, env, api.EndpointSpec{Name: "scorer", Deployments: map[string]api.DeploymentSpec{"blue": endpointstest.Deployment(2, "serve")}, Traffic: map[string]int64{"blue": 100}})
	ins := env.Instances("wsp", "scorer")
	if err := env.API.DeleteEndpoint(context.Background(), "wsp", "scorer"); err != nil {
		t.Fatal(err)
	}
	for _, in := range ins {
		if _, ok := env.Driver.Node(in.ID); ok {
			t.Fatalf("instance %s still has its node after delete returned", in.ID)
		}
	}
	if _, err := env.API.GetEndpoint(context.Background(), "wsp", "scorer"); !api.IsNotFound(err) {
		t.Fatalf("get after delete: %v", err)
	}
	if env.Score("wsp", "scorer", "") != http.StatusNotFound {
		t.Fatal("the router still serves a deleted endpoint")
	}
}

func TestEndpointInstancesAdoptedAfterRestart(t *testing.T) {
	env := setup(t)
	readyEndpoint(t, env, api.EndpointSpec{Name: "scorer", Deployments: map[string]api.DeploymentSpec{"blue": endpointstest.Deployment(2, "serve")}, Traffic: map[string]int64{"blue": 100}})
	ins := env.Instances("wsp", "scorer")
	env.Driver.ResetCalls()
	env.Restart()
	// The stored state still says Succeeded, so the router serves from the moment recovery
	// returns, before any pass has run.
	if got := env.Score("wsp", "scorer", ""); got != http.StatusBadGateway {
		t.Fatalf("score right after recovery: %d; want the adopted instances in the router (502 from the fake port)", got)
	}
	p := env.Probes
	for _, in := range ins {
		p.Healthy(in, true)
	}
	env.Settle()
	if got := env.Driver.CallsTo(fake.MethodTerminate); len(got) != 0 {
		t.Fatalf("restart terminated %v; endpoint instances must be adopted", got)
	}
	if got := env.Score("wsp", "scorer", ""); got != http.StatusBadGateway {
		t.Fatalf("score after restart: %d; want the adopted instances in the router (502 from the fake port)", got)
	}
	// Probes resume: a liveness failure still restarts.
	p.Set(ins[0].Port, "/live", false)
	env.StepUntil("restarted after adoption", func() bool { _, ok := env.Driver.Task(ins[0].ID, "serve-1"); return ok })
}

// An endpoint instance whose node is created not ready (a pod being scheduled, a queued
// Slurm allocation) waits for it: its process starts once the node is ready, and the
// node's NodeReady event is no failure.
func TestEndpointInstanceWaitsForItsNodeToBeReady(t *testing.T) {
	env := endpointstest.New(t, endpointstest.Options{Fake: fake.Options{CreatePending: true}})
	env.Workspace("wsp", nil)
	env.CreateBlue("wsp", "scorer")
	env.Settle()
	ins := env.Instances("wsp", "scorer")
	if len(ins) != 1 || !ins[0].StartedAt.IsZero() {
		t.Fatalf("instances %+v; want one, not started while its node is not ready", ins)
	}
	if _, ok := env.Driver.Task(ins[0].ID, ins[0].Task); ok {
		t.Fatalf("a task was started on a node that is not ready")
	}
	env.Driver.MakeReady(ins[0].ID)
	started := env.Started("wsp", "scorer", "blue", 1, 1)
	if started[0].ID != ins[0].ID || started[0].Restarts != 0 {
		t.Fatalf("instance %+v; want the same instance started with no restart", started[0])
	}
}
