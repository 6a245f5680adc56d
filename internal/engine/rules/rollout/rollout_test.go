package rollout

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/rules/autoscale"
)

// t0 is the fake clock's now in every test.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func fixed(count, gen int64) model.Deployment {
	return model.Deployment{Generation: gen, Spec: api.DeploymentSpec{InstanceCount: count, Command: []string{"serve", genName(gen)},
		RequestSettings: &api.RequestSettings{RequestTimeoutMS: 5000}}}
}

func scaled(desired int64) model.Deployment {
	d := fixed(0, 1)
	d.Desired = desired
	d.Spec.ScaleSettings = &api.EndpointScaleSettings{Type: api.ScaleTypeTargetUtilization, MinInstances: 0, MaxInstances: 4}
	d.Spec.RequestSettings.MaxConcurrentRequestsPerInstance = 1
	return d
}

func genName(n int64) string { return "gen" + string(rune('0'+n)) }

func inst(id, dep string, gen int64, state string) model.EndpointInstance {
	return model.EndpointInstance{ID: id, Deployment: dep, Generation: gen, State: state, Task: "serve-0"}
}

func endpoint(deps map[string]model.Deployment, ins ...model.EndpointInstance) model.Endpoint {
	return model.Endpoint{Workspace: "ws", Name: "ep", Deployments: deps, Instances: ins,
		Traffic: map[string]int64{"blue": 100}, LiveTraffic: map[string]int64{"blue": 100}, Provisioned: true}
}

// states is the instances as "id:state[:terminating]", in record order.
func states(r model.Endpoint) string {
	var out []string
	for _, x := range r.Instances {
		s := x.ID + ":" + x.State
		if x.Terminating {
			s += ":T"
		}
		out = append(out, s)
	}
	return strings.Join(out, " ")
}

const (
	ready    = api.EndpointInstanceReady
	starting = api.EndpointInstanceStarting
	draining = api.EndpointInstanceDraining
	failed   = api.EndpointInstanceFailed
)

func TestDecide(t *testing.T) {
	drainingAt := func(x model.EndpointInstance, until time.Time) model.EndpointInstance {
		x.State, x.DrainUntil = draining, until
		return x
	}
	failedUntil := func(x model.EndpointInstance, at time.Time) model.EndpointInstance {
		x.State, x.RestartAt, x.Restarts = failed, at, 2
		return x
	}
	cases := []struct {
		name     string
		in       Input
		adds     int
		states   string
		drained  []string
		steps    map[string]time.Time
		live     map[string]int64
		provised bool
	}{
		{
			name:   "missing instances are added as Starting",
			in:     Input{Endpoint: endpoint(map[string]model.Deployment{"blue": fixed(3, 1)}, inst("a", "blue", 1, ready))},
			adds:   2,
			states: "a:Ready",
			live:   map[string]int64{"blue": 100},
		},
		{
			name: "at target and ready: nothing to do, provisioned",
			in: Input{Endpoint: func() model.Endpoint {
				e := endpoint(map[string]model.Deployment{"blue": fixed(1, 1)}, inst("a", "blue", 1, ready))
				e.Provisioned = false
				return e
			}()},
			states:   "a:Ready",
			live:     map[string]int64{"blue": 100},
			provised: true,
		},
		{
			name: "extra instances drain, the not ready ones first, then the newest",
			in: Input{Endpoint: endpoint(map[string]model.Deployment{"blue": fixed(1, 1)},
				inst("a", "blue", 1, ready), inst("b", "blue", 1, starting), inst("c", "blue", 1, ready))},
			states:  "a:Ready b:Draining:T c:Draining",
			drained: []string{"c", "b"},
			steps:   map[string]time.Time{"c": t0.Add(6 * time.Second)},
			live:    map[string]int64{"blue": 100},
		},
		{
			name: "a new generation not ready yet: the old one keeps serving",
			in: Input{Endpoint: endpoint(map[string]model.Deployment{"blue": fixed(1, 2)},
				inst("a", "blue", 1, ready), inst("b", "blue", 2, starting))},
			states: "a:Ready b:Starting",
			live:   map[string]int64{"blue": 100},
		},
		{
			name: "the new generation ready: the old one drains",
			in: Input{Endpoint: endpoint(map[string]model.Deployment{"blue": fixed(1, 2)},
				inst("a", "blue", 1, ready), inst("b", "blue", 2, ready))},
			states:  "a:Draining b:Ready",
			drained: []string{"a"},
			steps:   map[string]time.Time{"a": t0.Add(6 * time.Second)},
			live:    map[string]int64{"blue": 100},
		},
		{
			name: "the split waits for the deployment it sends to",
			in: Input{Endpoint: func() model.Endpoint {
				e := endpoint(map[string]model.Deployment{"blue": fixed(1, 1), "green": fixed(1, 1)}, inst("a", "blue", 1, ready), inst("b", "green", 1, starting))
				e.Traffic = map[string]int64{"green": 100}
				return e
			}()},
			states: "a:Ready b:Starting",
			live:   map[string]int64{"blue": 100},
		},
		{
			name: "the split moves once the deployment rolled out, and the retiring one is let go and drains",
			in: Input{Endpoint: func() model.Endpoint {
				e := endpoint(map[string]model.Deployment{"green": fixed(1, 1)}, inst("a", "blue", 1, ready), inst("b", "green", 1, ready))
				e.Traffic, e.Retiring = map[string]int64{"green": 100}, map[string]model.Deployment{"blue": fixed(1, 1)}
				return e
			}()},
			states:  "a:Draining b:Ready",
			drained: []string{"a"},
			// blue is no longer known: the default request timeout.
			steps: map[string]time.Time{"a": t0.Add(time.Duration(api.DefaultRequestTimeoutMS)*time.Millisecond + DrainGrace)},
			live:  map[string]int64{"green": 100},
		},
		{
			name: "a draining instance is terminated at its drain end",
			in: Input{Endpoint: endpoint(map[string]model.Deployment{"blue": fixed(1, 1)},
				inst("a", "blue", 1, ready), drainingAt(inst("b", "blue", 1, ""), t0), drainingAt(inst("c", "blue", 1, ""), t0.Add(time.Second)))},
			states: "a:Ready b:Draining:T c:Draining",
			steps:  map[string]time.Time{"c": t0.Add(time.Second)},
			live:   map[string]int64{"blue": 100},
		},
		{
			name: "an autoscaled deployment's drain ends once the router counts nothing in flight, a grace after it began",
			in: Input{
				Endpoint: endpoint(map[string]model.Deployment{"blue": scaled(1)}, inst("a", "blue", 1, ready),
					// began 1 s ago (5 s timeout + 1 s grace): idle; began just now: not yet; busy: not yet.
					drainingAt(inst("b", "blue", 1, ""), t0.Add(5*time.Second)),
					drainingAt(inst("c", "blue", 1, ""), t0.Add(6*time.Second)),
					drainingAt(inst("d", "blue", 1, ""), t0.Add(5*time.Second)),
					drainingAt(inst("e", "blue", 1, ""), t0.Add(5*time.Second))),
				Scale:    map[string]Scale{"blue": {Next: t0.Add(time.Hour)}},
				InFlight: map[string]int64{"b": 0, "c": 0, "d": 2},
			},
			states: "a:Ready b:Draining:T c:Draining d:Draining e:Draining",
			steps:  map[string]time.Time{"c": t0.Add(6 * time.Second), "d": t0.Add(5 * time.Second), "e": t0.Add(5 * time.Second)},
			live:   map[string]int64{"blue": 100},
		},
		{
			name: "a failed instance restarts at its RestartAt as a new process, and waits before",
			in: Input{Endpoint: endpoint(map[string]model.Deployment{"blue": fixed(2, 1)},
				failedUntil(inst("a", "blue", 1, ""), t0), failedUntil(inst("b", "blue", 1, ""), t0.Add(time.Second)))},
			states: "a:Starting b:Failed",
			steps:  map[string]time.Time{"b": t0.Add(time.Second)},
			live:   map[string]int64{"blue": 100},
		},
		{
			name: "a removed deployment's instances drain; terminating ones are left alone",
			in: Input{Endpoint: func() model.Endpoint {
				x := inst("c", "red", 1, ready)
				x.Terminating = true
				return endpoint(map[string]model.Deployment{"blue": fixed(1, 1)}, inst("a", "blue", 1, ready), inst("b", "red", 1, starting), x)
			}()},
			states:  "a:Ready b:Draining:T c:Ready:T",
			drained: []string{"b"},
			live:    map[string]int64{"blue": 100},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := states(c.in.Endpoint)
			d := Decide(c.in, t0)
			if got := states(d.Endpoint); got != c.states {
				t.Errorf("instances = %q, want %q", got, c.states)
			}
			if states(c.in.Endpoint) != before {
				t.Errorf("Decide changed its input: %q, was %q", states(c.in.Endpoint), before)
			}
			if len(d.Add) != c.adds {
				t.Errorf("added %d, want %d", len(d.Add), c.adds)
			}
			for _, a := range d.Add {
				if a.State != starting || a.Task != "serve-0" || a.ID != "" || !slices.Equal(a.Process.Command, c.in.Endpoint.Deployments[a.Deployment].Spec.Command) {
					t.Errorf("added %+v", a)
				}
			}
			if !slices.Equal(d.Drained, c.drained) {
				t.Errorf("drained %v, want %v", d.Drained, c.drained)
			}
			if c.steps == nil {
				c.steps = map[string]time.Time{}
			}
			if !maps.Equal(d.Steps, c.steps) {
				t.Errorf("steps %v, want %v", d.Steps, c.steps)
			}
			if !maps.Equal(d.Endpoint.LiveTraffic, c.live) {
				t.Errorf("live traffic %v, want %v", d.Endpoint.LiveTraffic, c.live)
			}
			if d.Provisioned != c.provised {
				t.Errorf("provisioned %v, want %v", d.Provisioned, c.provised)
			}
		})
	}
}

func TestDecideRestartCountsTheProcess(t *testing.T) {
	x := inst("a", "blue", 1, "")
	x.State, x.RestartAt, x.Restarts, x.EverReady, x.StartedAt = failed, t0, 2, true, t0.Add(-time.Minute)
	d := Decide(Input{Endpoint: endpoint(map[string]model.Deployment{"blue": fixed(1, 1)}, x)}, t0)
	got := d.Endpoint.Instances[0]
	if got.Restarts != 3 || got.Task != "serve-3" || !got.StartedAt.IsZero() || !got.RestartAt.IsZero() || got.EverReady {
		t.Fatalf("restarted instance = %+v", got)
	}
}

func TestDecideScales(t *testing.T) {
	set := autoscale.Settings{Max: 4, TargetUtilizationPercentage: 100, MaxConcurrentRequestsPerInstance: 1, PollingInterval: time.Second, ScaleDownDelay: time.Minute}
	cases := []struct {
		name        string
		desired     int64
		s           Scale
		want        int64
		next        time.Time
		requests    uint64
		decisions   int
		startErrSet bool
	}{
		{name: "not due and not kicked: no sample", desired: 0, s: Scale{Settings: set, Next: t0.Add(time.Second), Sample: Sample{InFlight: 3}},
			want: 0, next: t0.Add(time.Second), startErrSet: true},
		{name: "due: a sample, the next one a polling interval on", desired: 0, s: Scale{Settings: set, Next: t0, Sample: Sample{InFlight: 1, Requests: 7}},
			want: 1, next: t0.Add(time.Second), requests: 7, decisions: 1},
		{name: "kicked out of turn: decides from zero, leaves the arrivals and the schedule", desired: 0,
			s:    Scale{Settings: set, Next: t0.Add(time.Second), Kicked: true, Requests: 5, Sample: Sample{InFlight: 1, Requests: 9}},
			want: 1, next: t0.Add(time.Second), requests: 5, decisions: 1},
		{name: "due at the count the load needs: no decision", desired: 2, s: Scale{Settings: set, Next: t0, Sample: Sample{InFlight: 2}},
			want: 2, next: t0.Add(time.Second), startErrSet: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dep := scaled(c.desired)
			dep.StartError = "instance x: exited"
			in := Input{Endpoint: endpoint(map[string]model.Deployment{"blue": dep}), Scale: map[string]Scale{"blue": c.s}}
			d := Decide(in, t0)
			got := d.Endpoint.Deployments["blue"]
			if got.Desired != c.want || len(got.Decisions) != c.decisions {
				t.Fatalf("desired %d with %d decisions, want %d with %d", got.Desired, len(got.Decisions), c.want, c.decisions)
			}
			if len(d.Add) != int(c.want) {
				t.Errorf("added %d instances, want %d", len(d.Add), c.want)
			}
			s := d.Scale["blue"]
			if !s.Next.Equal(c.next) || s.Requests != c.requests || s.Kicked {
				t.Errorf("memory after: next %v requests %d kicked %v; want %v %d false", s.Next, s.Requests, s.Kicked, c.next, c.requests)
			}
			if (got.StartError != "") != c.startErrSet {
				t.Errorf("start error %q, want set %v", got.StartError, c.startErrSet)
			}
			if c.decisions > 0 && (len(d.Scaled) != 1 || d.Scaled[0].Kicked != c.s.Kicked || d.Scaled[0].Decision.From != c.desired) {
				t.Errorf("scaled %+v", d.Scaled)
			}
		})
	}
}

func TestDecideKeepsNoScalerForAFixedDeployment(t *testing.T) {
	d := Decide(Input{Endpoint: endpoint(map[string]model.Deployment{"blue": fixed(1, 1)}), Scale: map[string]Scale{"blue": {}, "gone": {}}}, t0)
	if len(d.Scale) != 0 {
		t.Fatalf("scale memory %v, want none", d.Scale)
	}
}

func TestDecideKeepsScaleDecisionsBounded(t *testing.T) {
	dep := scaled(0)
	for range api.MaxScaleDecisions {
		dep.Decisions = append(dep.Decisions, api.ScaleDecision{Reason: "old"})
	}
	in := Input{Endpoint: endpoint(map[string]model.Deployment{"blue": dep}), Scale: map[string]Scale{"blue": {Settings: autoscale.Settings{Max: 4}, Kicked: true, Next: t0.Add(time.Second), Sample: Sample{InFlight: 1}}}}
	got := Decide(in, t0).Endpoint.Deployments["blue"].Decisions
	if len(got) != api.MaxScaleDecisions || got[len(got)-1].Reason != autoscale.ReasonFromZero {
		t.Fatalf("decisions = %d, last %+v", len(got), got[len(got)-1])
	}
}

func TestFail(t *testing.T) {
	cases := []struct {
		name       string
		dep        model.Deployment
		failures   int64
		everReady  bool
		wait       time.Duration
		err        bool
		startError bool
	}{
		{name: "first failed start: 1 s", dep: fixed(1, 1), wait: time.Second},
		{name: "second: 2 s", dep: fixed(1, 1), failures: 1, wait: 2 * time.Second},
		{name: "third in a row: Failed", dep: fixed(1, 1), failures: 2, wait: 4 * time.Second, err: true},
		{name: "the back-off stops at 5 minutes", dep: fixed(1, 1), failures: 20, wait: 5 * time.Minute, err: true},
		{name: "a process that was ready once: not a failed start", dep: fixed(1, 1), failures: 0, everReady: true, wait: time.Second},
		{name: "autoscaled: the held requests get why", dep: scaled(1), wait: time.Second, startError: true},
		{name: "autoscaled, ready once: no start error", dep: scaled(1), everReady: true, wait: time.Second},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := endpoint(map[string]model.Deployment{"blue": c.dep}, inst("a", "blue", 1, starting))
			x := &rec.Instances[0]
			x.Failures, x.EverReady = c.failures, c.everReady
			wait := Fail(&rec, x, "exited with code 1", t0)
			if wait != c.wait || x.State != failed || !x.RestartAt.Equal(t0.Add(c.wait)) {
				t.Fatalf("wait %v, instance %+v; want %v", wait, x, c.wait)
			}
			d := rec.Deployments["blue"]
			if (d.Error != "") != c.err || (d.StartError != "") != c.startError {
				t.Fatalf("error %q start error %q; want %v %v", d.Error, d.StartError, c.err, c.startError)
			}
			if c.err && !strings.Contains(d.Error, "exited with code 1") {
				t.Fatalf("error %q does not say why", d.Error)
			}
		})
	}
}

func TestFailOfARetiringDeploymentSetsNoError(t *testing.T) {
	rec := endpoint(map[string]model.Deployment{}, inst("a", "blue", 1, starting))
	rec.Retiring = map[string]model.Deployment{"blue": fixed(1, 1)}
	rec.Instances[0].Failures = 5
	Fail(&rec, &rec.Instances[0], "lost", t0)
	if rec.Retiring["blue"].Error != "" || len(rec.Deployments) != 0 {
		t.Fatalf("retiring deployment changed: %+v %+v", rec.Retiring, rec.Deployments)
	}
}

func TestReadyClearsTheErrors(t *testing.T) {
	dep := fixed(1, 1)
	dep.Error, dep.StartError = "failed 3 times", "exited"
	rec := endpoint(map[string]model.Deployment{"blue": dep}, inst("a", "blue", 1, starting))
	rec.Instances[0].Failures = 3
	Ready(&rec, &rec.Instances[0])
	x, d := rec.Instances[0], rec.Deployments["blue"]
	if x.State != ready || !x.EverReady || x.Failures != 0 || d.Error != "" || d.StartError != "" {
		t.Fatalf("instance %+v deployment %+v", x, d)
	}
}

func TestSettled(t *testing.T) {
	deps := map[string]model.Deployment{"blue": fixed(1, 2)}
	cases := []struct {
		name string
		rec  model.Endpoint
		want bool
	}{
		{"ready at its generation", endpoint(deps, inst("a", "blue", 2, ready)), true},
		{"an old generation drains: settled", endpoint(deps, inst("a", "blue", 2, ready), inst("b", "blue", 1, draining)), true},
		{"an old generation serves", endpoint(deps, inst("a", "blue", 2, ready), inst("b", "blue", 1, ready)), false},
		{"not ready", endpoint(deps, inst("a", "blue", 2, starting)), false},
		{"the split has not moved", func() model.Endpoint {
			e := endpoint(deps, inst("a", "blue", 2, ready))
			e.LiveTraffic = nil
			return e
		}(), false},
		{"a deployment retires", func() model.Endpoint {
			e := endpoint(deps, inst("a", "blue", 2, ready))
			e.Retiring = map[string]model.Deployment{"red": fixed(1, 1)}
			return e
		}(), false},
	}
	for _, c := range cases {
		if got := Settled(c.rec); got != c.want {
			t.Errorf("%s: Settled = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestRolledOutCountsOnlyLiveReadyInstancesOfTheGeneration(t *testing.T) {
	x := inst("c", "blue", 2, ready)
	x.Terminating = true
	rec := endpoint(map[string]model.Deployment{"blue": fixed(2, 2)}, inst("a", "blue", 2, ready), inst("b", "blue", 1, ready), x)
	if RolledOut(rec, "blue") || RolledOut(rec, "nope") {
		t.Fatal("rolled out with one ready instance of the generation")
	}
	rec.Instances = append(rec.Instances, inst("d", "blue", 2, ready))
	if !RolledOut(rec, "blue") {
		t.Fatal("not rolled out with two")
	}
}
