package rollout

import (
	"strings"
	"testing"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
)

func TestProbe(t *testing.T) {
	probe := api.Probe{Path: "/ready", SuccessThreshold: 2, FailureThreshold: 3}
	period, delay := 10*time.Second, 5*time.Second
	started := t0.Add(-time.Second) // this probe began a second ago
	cases := []struct {
		name       string
		state      string
		everReady  bool
		since      time.Duration // the process started this long ago
		counts     Counts
		live, pass bool
		holding    bool
		want       Counts
		state2     string
		failed     string // a part of the reason
		ready      bool
		notReady   bool
		next       time.Time
	}{
		{name: "liveness passes: its failures are forgotten", state: ready, everReady: true, counts: Counts{LiveFail: 2}, live: true, pass: true,
			want: Counts{}, state2: ready, next: started.Add(period)},
		{name: "liveness fails below the threshold", state: ready, everReady: true, counts: Counts{LiveFail: 1}, live: true,
			want: Counts{LiveFail: 2}, state2: ready, next: started.Add(period)},
		{name: "liveness fails a third time: failed", state: ready, everReady: true, counts: Counts{LiveFail: 2}, live: true,
			want: Counts{LiveFail: 3}, state2: ready, failed: "liveness probe GET /ready failed 3 times in a row"},
		{name: "one readiness pass of two", state: starting, counts: Counts{ReadyFail: 2}, pass: true,
			want: Counts{ReadyOK: 1}, state2: starting, next: started.Add(period)},
		{name: "the second pass: ready", state: starting, counts: Counts{ReadyOK: 1}, pass: true,
			want: Counts{ReadyOK: 2}, state2: ready, ready: true, next: started.Add(period)},
		{name: "a ready instance passing stays ready and changes nothing", state: ready, everReady: true, counts: Counts{ReadyOK: 5}, pass: true,
			want: Counts{ReadyOK: 6}, state2: ready, next: started.Add(period)},
		{name: "readiness failures within the budget: a start goes on", state: starting, since: 20 * time.Second, counts: Counts{ReadyFail: 2},
			want: Counts{ReadyFail: 3}, state2: starting, next: started.Add(period)},
		{name: "readiness failures past the budget: a failed start", state: starting, since: 35 * time.Second, counts: Counts{ReadyFail: 2},
			want: Counts{ReadyFail: 3}, state2: starting, failed: "did not pass within 35s"},
		{name: "a ready instance failing readiness stops taking traffic", state: ready, everReady: true, counts: Counts{ReadyOK: 4, ReadyFail: 2},
			want: Counts{ReadyFail: 3}, state2: starting, notReady: true, next: started.Add(period)},
		{name: "one that was ready and is not: stays not ready, not failed", state: starting, everReady: true, counts: Counts{ReadyFail: 5},
			want: Counts{ReadyFail: 6}, state2: starting, next: started.Add(period)},
		{name: "held requests wait for a starting instance: probed again soon", state: starting, counts: Counts{}, holding: true,
			want: Counts{ReadyFail: 1}, state2: starting, next: started.Add(HeldReadyProbe)},
		{name: "held requests, liveness: a period", state: starting, live: true, pass: true, holding: true,
			want: Counts{}, state2: starting, next: started.Add(period)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dep := fixed(1, 1)
			dep.Error = "failed before"
			rec := endpoint(map[string]model.Deployment{"blue": dep}, inst("a", "blue", 1, c.state))
			x := &rec.Instances[0]
			x.EverReady, x.StartedAt = c.everReady, t0.Add(-c.since)
			r := Probe(&rec, x, c.counts, ProbeInput{Live: c.live, Passed: c.pass, Probe: probe, InitialDelay: delay, Period: period, Started: started, Holding: c.holding}, t0)
			if r.Counts != c.want || x.State != c.state2 || r.Ready != c.ready || r.NotReady != c.notReady || !r.Next.Equal(c.next) {
				t.Fatalf("got counts %+v state %s ready %v notReady %v next %v; want %+v %s %v %v %v",
					r.Counts, x.State, r.Ready, r.NotReady, r.Next, c.want, c.state2, c.ready, c.notReady, c.next)
			}
			if (r.Failed == "") != (c.failed == "") || !strings.Contains(r.Failed, c.failed) {
				t.Fatalf("failed %q, want %q", r.Failed, c.failed)
			}
			if c.ready && (rec.Deployments["blue"].Error != "" || !x.EverReady) {
				t.Fatalf("ready left the error %q or EverReady %v", rec.Deployments["blue"].Error, x.EverReady)
			}
		})
	}
}
