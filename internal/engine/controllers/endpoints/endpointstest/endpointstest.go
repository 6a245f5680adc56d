// Package endpointstest builds the online endpoints' controller alone for its tests, wired
// as the engine wires it: a real store in a temporary directory, a fake clock, the manual
// work loop (probe timers run the controller's probes, other timers mark their endpoint),
// the fake node driver and the engine's node lifecycle, with recovery through
// lifecycle.Recover. Probes answer from a script (Probes), since the fake driver's nodes
// serve nothing. Nothing runs by itself: a test calls the controller, settles or steps the
// clock, and checks the stored records, the driver's calls and the scoring router, with no
// sleep and no poll.
package endpointstest

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/computes"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/controllers/endpoints"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/controllers/endpoints/endpointapi"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/fake"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/lifecycle"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/router"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/runtime"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/runtime/runtimetest"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/scoring"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store/storetest"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/tasks"
)

// Start is the fake clock's time when a test begins.
var Start = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// Options adjust the controller a test gets.
type Options struct {
	// Fake adjusts the fake driver (nodes created pending).
	Fake fake.Options
}

// Env is the endpoints controller and the endpoints' API on a manual loop, a fake clock
// and a fake driver. Store, Loop, Lifecycle, Quota, Controller, API and Probes are replaced
// by Restart; the clock and the
// driver (its nodes and tasks) outlive it.
type Env struct {
	// Manual is the loop (Settle, Step) and its fake clock.
	runtimetest.Manual
	t          testing.TB
	path       string
	Driver     *fake.Driver
	Store      *store.Store
	Lifecycle  *lifecycle.Nodes
	Quota      *model.QuotaIndex
	Controller *endpoints.Controller
	API        *endpointapi.API
	// Scoring is the scoring front the controller keeps in step, as engine.New builds it.
	Scoring *scoring.Front
	Probes  *Probes

	cancel context.CancelFunc
	built  []*scoring.Front
	// holds gets a value each time the router holds a request or stops holding one
	// (router.Options.OnHoldChange); HeldRequests waits on it.
	holds chan struct{}
}

// New builds and starts the controller.
func New(t testing.TB, opts Options) *Env {
	t.Helper()
	clk := clocktesting.NewFakeClock(Start)
	e := &Env{Manual: runtimetest.Manual{T: t, Clock: clk}, t: t, path: filepath.Join(t.TempDir(), "state.db"), Driver: fake.NewWithOptions(clk, opts.Fake),
		holds: make(chan struct{}, 1)}
	e.start()
	t.Cleanup(func() {
		e.stop()
		_ = e.Driver.Close()
		for _, f := range e.built {
			f.Close()
		}
	})
	return e
}

// start opens the store and builds the controller as engine.New and Engine.Start do: the
// loop routes endpoint keys to Reconcile and the driver's events to the lifecycle, which
// routes them to the controller; then recovery adopts what the store records.
func (e *Env) start() {
	e.t.Helper()
	st, err := store.Open(e.path, time.Second)
	if err != nil {
		e.t.Fatal(err)
	}
	log := hclog.NewNullLogger()
	var c *endpoints.Controller
	var loop *runtime.Loop
	loop = runtime.New(runtime.Config{Clock: e.Clock, Manual: true, OnTimer: func(_ context.Context, t runtime.Timer) {
		if t.Kind == runtime.Probe {
			c.RunProbe(t.Object.Name, t.Sub)
			return
		}
		loop.Mark(t.Object)
	}})
	nodes := lifecycle.New(lifecycle.Config{Clock: e.Clock, Logger: log, Loop: loop})
	// The computes' core is the write path the endpoints take turns in, and holds the
	// quota index both share, as in the engine.
	taskRunner := tasks.New(loop, log)
	core, err := computes.New(computes.Config{Store: st, Clock: e.Clock, Logger: log, Loop: loop, Nodes: nodes, Tasks: taskRunner})
	if err != nil {
		e.t.Fatal(err)
	}
	quota := core.QuotaIndex()
	front := scoring.New(st, e.Clock, log, router.Options{OnHoldChange: func(string, string) {
		select {
		case e.holds <- struct{}{}:
		default: // a wake-up is pending already
		}
	}})
	var seq int
	c = endpoints.New(endpoints.Config{
		Store: st, Clock: e.Clock, Logger: log, Loop: loop, Quota: quota, Nodes: nodes, Tasks: taskRunner, Scoring: front, Turns: core,
		NewID: func(prefix string) string { seq++; return fmt.Sprintf("%s-%04d", prefix, seq) },
	})
	epAPI := endpointapi.New(endpointapi.Config{
		Store: st, Clock: e.Clock, Logger: log, Loop: loop, Quota: quota, Scoring: front, Turns: core, Router: c,
	})
	if err := epAPI.LoadQuotaIndex(); err != nil {
		e.t.Fatal(err)
	}
	probes := NewProbes()
	c.SetProber(probes.Probe)
	loop.Handle(runtime.Endpoint, c.Reconcile)
	ctx, cancel := context.WithCancel(context.Background())
	loop.Watch([]<-chan driver.Event{e.Driver.Events()}, nodes.HandleEvent)
	nodes.Start(e.Driver)
	taskRunner.Start(ctx, e.Driver)
	c.Start(ctx)
	if err := nodes.Recover(ctx, c); err != nil {
		cancel()
		e.t.Fatal(err)
	}
	e.Store, e.Loop, e.Lifecycle, e.Quota, e.Controller, e.API, e.Scoring, e.Probes, e.cancel = st, loop, nodes, quota, c, epAPI, front, probes, cancel
	e.built = append(e.built, front)
}

// stop ends the controller as a crash would: nothing is cleaned up.
func (e *Env) stop() {
	if e.cancel == nil {
		return
	}
	e.cancel()
	e.Loop.Stop()
	_ = e.Store.Close()
	e.cancel = nil
}

// Restart stops the controller as a crash would and builds a new one on the same store and
// the same nodes, as an engine restart does: the driver stops watching its nodes until
// recovery finds them again, and the new controller has a fresh Probes (every probe fails
// until the test scripts it again).
func (e *Env) Restart() {
	e.t.Helper()
	e.stop()
	_ = e.Driver.Close()
	e.Driver.Reopen()
	e.start()
}

// SettlesTo settles and checks that cond holds: the manual loop has then done all it will
// do until the clock moves or the test acts.
func (e *Env) SettlesTo(what string, cond func() bool) {
	e.t.Helper()
	e.Settle()
	if !cond() {
		e.t.Fatalf("not reached once the controller settled: %s", what)
	}
}

// StepUntil moves the fake clock a second at a time, settling after each step, until cond
// holds; it fails the test after ten minutes of fake time.
func (e *Env) StepUntil(what string, cond func() bool) {
	e.t.Helper()
	for range 600 {
		if cond() {
			return
		}
		e.Step(time.Second)
	}
	e.t.Fatalf("never reached: %s", what)
}

// Workspace stores a workspace with the given quotas (vCPUs per family), as the
// workspaces' controller would.
func (e *Env) Workspace(name string, quotas map[string]int64) {
	e.t.Helper()
	storetest.PutWorkspace(e.t, e.Store, name, quotas, Start)
}

// CreateBlue creates endpoint name in workspace with one deployment, "blue", of one
// instance running "serve", taking all the traffic; the test fails on an error.
func (e *Env) CreateBlue(workspace, name string) {
	e.t.Helper()
	if _, err := e.API.CreateEndpoint(context.Background(), workspace, api.EndpointSpec{
		Name: name, Deployments: map[string]api.DeploymentSpec{"blue": Deployment(1, "serve")},
		Traffic: map[string]int64{"blue": 100},
	}, ""); err != nil {
		e.t.Fatal(err)
	}
}

// Endpoint returns an endpoint as the API shows it; the test fails when it is gone.
func (e *Env) Endpoint(workspace, name string) *api.Endpoint {
	e.t.Helper()
	ep, err := e.API.GetEndpoint(context.Background(), workspace, name)
	if err != nil {
		e.t.Fatal(err)
	}
	return ep
}

// Instances returns the endpoint's instances as stored (with their ports and tasks).
func (e *Env) Instances(workspace, name string) []model.EndpointInstance {
	e.t.Helper()
	return StoredInstances(e.t, e.Store, workspace, name)
}

// StoredInstances reads an endpoint's instances from a store (with their ports and
// tasks); the test fails when the endpoint is gone.
func StoredInstances(t testing.TB, st *store.Store, workspace, name string) []model.EndpointInstance {
	t.Helper()
	var out []model.EndpointInstance
	err := st.View(func(tx *store.Tx) error {
		rec, err := model.GetEndpoint(tx, workspace, name)
		out = rec.Instances
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Started settles and checks that exactly n instances of the deployment and generation have
// a process and await readiness; it returns them.
func (e *Env) Started(workspace, name, deployment string, gen int64, n int) []model.EndpointInstance {
	e.t.Helper()
	var got []model.EndpointInstance
	e.SettlesTo(fmt.Sprintf("%d instances of %s generation %d started", n, deployment, gen), func() bool {
		got = got[:0]
		for _, in := range e.Instances(workspace, name) {
			if in.Deployment == deployment && in.Generation == gen && !in.StartedAt.IsZero() && in.State == api.EndpointInstanceStarting {
				got = append(got, in)
			}
		}
		return len(got) == n
	})
	return got
}

// Score sends a scoring request through the controller's router, with the endpoint's
// primary key, pinned to deployment unless it is empty, and returns the status.
func (e *Env) Score(workspace, name, deployment string) int {
	rec := httptest.NewRecorder()
	e.Scoring.ServeHTTP(rec, e.scoreRequest(workspace, name, deployment))
	return rec.Code
}

// ScoreAsync sends a scoring request on its own goroutine and reports its status: a
// request the router holds returns only once an instance takes it or the hold ends.
func (e *Env) ScoreAsync(workspace, name string) <-chan int {
	req := e.scoreRequest(workspace, name, "")
	out := make(chan int, 1)
	go func() {
		rec := httptest.NewRecorder()
		e.Scoring.ServeHTTP(rec, req)
		out <- rec.Code
	}()
	return out
}

func (e *Env) scoreRequest(workspace, name, deployment string) *http.Request {
	req := httptest.NewRequest(http.MethodPost, "/"+name+"/score", strings.NewReader("{}"))
	if deployment != "" {
		req.Header.Set("azureml-model-deployment", deployment)
	}
	if keys, err := e.API.GetEndpointKeys(context.Background(), workspace, name); err == nil {
		req.Header.Set("Authorization", "Bearer "+keys.PrimaryKey)
	}
	return req
}

// HeldRequests waits until the router holds n requests of the deployment: the hold
// happens on the request's goroutine, which the manual loop does not run, and the router
// says each time its count changes. It fails after 10 seconds of real time.
func (e *Env) HeldRequests(workspace, name, deployment string, n int64) {
	e.t.Helper()
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	for e.Endpoint(workspace, name).Deployments[deployment].HeldRequests != n {
		select {
		case <-e.holds:
		case <-deadline.C:
			e.t.Fatalf("the router never held %d requests of %s", n, deployment)
		}
	}
}

// RequestsTo counts the requests the router sent to each deployment of the endpoint.
func (e *Env) RequestsTo(name string) map[string]uint64 {
	out := map[string]uint64{}
	for d, st := range e.Scoring.Stats(name) {
		out[d] = st.Requests
	}
	return out
}

// Deployment is a deployment of count instances of Standard_DS2_v2 (2 vCPUs) running
// command, with MODEL=m1 in its environment, a 3 s request timeout, 2 concurrent requests
// per instance, and probes of /live and /ready every 10 s after 10 s, 2 successes to pass
// and 3 failures to fail.
func Deployment(count int64, command ...string) api.DeploymentSpec {
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

// Autoscaled is Deployment("serve") scaled between min and max instances, polling every
// second and scaling down after 2 s.
func Autoscaled(min, max int64) api.DeploymentSpec {
	d := Deployment(1, "serve") // instance_count is ignored when autoscaled; the provider sends its default
	d.ScaleSettings = &api.EndpointScaleSettings{Type: api.ScaleTypeTargetUtilization, MinInstances: min, MaxInstances: max,
		PollingInterval: "PT1S", ScaleDownDelay: "PT2S"}
	return d
}

// Probes scripts the answers of endpoint instances' probes by port and path, and counts
// the probes; an unscripted probe fails.
type Probes struct {
	mu     sync.Mutex
	health map[string]bool // "port path" -> answer
	calls  map[string]int
}

// NewProbes returns a script where every probe fails.
func NewProbes() *Probes {
	return &Probes{health: map[string]bool{}, calls: map[string]int{}}
}

// Probe is the serving.Prober that answers from the script.
func (p *Probes) Probe(_ context.Context, raw string, _ time.Duration) bool {
	u, _ := url.Parse(raw)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls[u.Port()+" "+u.Path]++
	return p.health[u.Port()+" "+u.Path]
}

// Set scripts the answer of the probe of path on port.
func (p *Probes) Set(port int, path string, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.health[strconv.Itoa(port)+" "+path] = ok
}

// Healthy scripts both probes (/ready and /live, as Deployment names them) of an instance
// to pass, or to fail.
func (p *Probes) Healthy(in model.EndpointInstance, ok bool) {
	p.Set(in.Port, "/ready", ok)
	p.Set(in.Port, "/live", ok)
}

// Count reports how many probes of path on port ran.
func (p *Probes) Count(port int, path string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls[strconv.Itoa(port)+" "+path]
}
