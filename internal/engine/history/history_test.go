package history_test

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/history"
)

var start = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func TestRingKeepsTheNewestValuesInOrder(t *testing.T) {
	r := history.NewRing[int](3)
	for i := 1; i <= 7; i++ {
		r.Push(i)
	}
	if got := r.Values(); len(got) != 3 || got[0] != 5 || got[1] != 6 || got[2] != 7 {
		t.Fatalf("ring of 3 after pushing 1..7 holds %v; want [5 6 7]", got)
	}
	r.DropOldest(func(v int) bool { return v < 7 })
	if got := r.Values(); len(got) != 1 || got[0] != 7 {
		t.Fatalf("after dropping values below 7 the ring holds %v; want [7]", got)
	}
	r.Push(8)
	r.Push(9)
	r.Push(10)
	if got := r.Values(); len(got) != 3 || got[0] != 8 || got[2] != 10 {
		t.Fatalf("ring holds %v; want [8 9 10]", got)
	}
	r.DropOldest(func(int) bool { return true })
	if r.Len() != 0 || r.Cap() != 3 {
		t.Fatalf("emptied ring has len %d cap %d; want 0 and 3", r.Len(), r.Cap())
	}
}

func snapshot(nodes int64, requests uint64) history.Snapshot {
	return history.Snapshot{
		Computes:    map[string]history.ComputeCounts{"lab/cpu": {Nodes: nodes, Queued: 1, Running: 2}},
		Deployments: map[history.DeploymentKey]history.DeploymentCounts{{Workspace: "lab", Endpoint: "ep", Deployment: "blue"}: {Instances: 1, Requests: requests}},
	}
}

// Two hours of samples keep exactly the last hour in each series: Capacity points, the
// oldest within the window, and the one exactly a window old dropped.
func TestHistoryKeepsOneHourPerSeries(t *testing.T) {
	clk := clocktesting.NewFakeClock(start)
	h := history.New(clk.Now())
	for i := 1; i <= 2*history.Capacity; i++ {
		clk.Step(history.Interval)
		h.Record(clk.Now(), snapshot(int64(i), uint64(i)*10))
	}
	got := h.Workspace("lab", clk.Now())
	if len(got.Computes) != 1 || len(got.Deployments) != 1 {
		t.Fatalf("history has %d computes and %d deployments; want 1 and 1", len(got.Computes), len(got.Deployments))
	}
	pts := got.Computes[0].Points
	if len(pts) != history.Capacity {
		t.Fatalf("compute series holds %d points after two hours; want %d", len(pts), history.Capacity)
	}
	if oldest := clk.Now().Sub(pts[0].Time); oldest != history.Window-history.Interval {
		t.Fatalf("oldest point is %v old; want %v (the one a full window old is dropped)", oldest, history.Window-history.Interval)
	}
	if last := pts[len(pts)-1]; !last.Time.Equal(clk.Now()) || last.Nodes != int64(2*history.Capacity) || last.JobsQueued != 1 || last.JobsRunning != 2 {
		t.Fatalf("newest point is %+v; want the last sample at %v", last, clk.Now())
	}
	for i := 1; i < len(pts); i++ {
		if pts[i].Time.Sub(pts[i-1].Time) != history.Interval {
			t.Fatalf("points %d and %d are %v apart; want %v", i-1, i, pts[i].Time.Sub(pts[i-1].Time), history.Interval)
		}
	}
	if n := len(got.Deployments[0].Points); n != history.Capacity {
		t.Fatalf("deployment series holds %d points; want %d", n, history.Capacity)
	}
	if got.IntervalSeconds != 10 || got.WindowSeconds != 3600 || !got.Since.Equal(start) {
		t.Fatalf("history says interval %d s, window %d s, since %v", got.IntervalSeconds, got.WindowSeconds, got.Since)
	}
}

// The request rate is the counter's growth over the time since the series' previous
// sample; a new series counts from the previous sample of any series (the router counts
// from the engine's start), and a counter that went down counts from zero.
func TestHistoryRequestRate(t *testing.T) {
	clk := clocktesting.NewFakeClock(start)
	h := history.New(clk.Now())
	blue := history.DeploymentKey{Workspace: "lab", Endpoint: "ep", Deployment: "blue"}
	green := history.DeploymentKey{Workspace: "lab", Endpoint: "ep", Deployment: "green"}
	record := func(step time.Duration, counts map[history.DeploymentKey]uint64) {
		clk.Step(step)
		s := history.Snapshot{Deployments: map[history.DeploymentKey]history.DeploymentCounts{}}
		for k, n := range counts {
			s.Deployments[k] = history.DeploymentCounts{Instances: 2, Requests: n}
		}
		h.Record(clk.Now(), s)
	}
	record(10*time.Second, map[history.DeploymentKey]uint64{blue: 100})            // 100 since start: 10/s
	record(10*time.Second, map[history.DeploymentKey]uint64{blue: 300})            // 200 in 10 s: 20/s
	record(20*time.Second, map[history.DeploymentKey]uint64{blue: 50, green: 40})  // reset: 50 in 20 s; green new: 40 in 20 s
	record(10*time.Second, map[history.DeploymentKey]uint64{blue: 50, green: 140}) // none; 100 in 10 s
	got := h.Workspace("lab", clk.Now())
	want := map[string][]float64{"blue": {10, 20, 2.5, 0}, "green": {2, 10}}
	if len(got.Deployments) != 2 {
		t.Fatalf("history has %d deployments; want 2", len(got.Deployments))
	}
	for _, d := range got.Deployments {
		w := want[d.Deployment]
		if len(d.Points) != len(w) {
			t.Fatalf("%s has %d points; want %d", d.Deployment, len(d.Points), len(w))
		}
		for i, p := range d.Points {
			if p.RequestRate != w[i] || p.Instances != 2 {
				t.Errorf("%s point %d: rate %v, instances %d; want rate %v, instances 2", d.Deployment, i, p.RequestRate, p.Instances, w[i])
			}
		}
	}
	if r := history.Rate(5, 9, 0); r != 0 {
		t.Errorf("rate over no time is %v; want 0", r)
	}
}

// A compute that is no longer sampled keeps its points for an hour, then its series goes;
// a read after sampling stalled shows only points inside the window; workspaces are kept
// apart even when one's name starts with another's.
func TestHistorySeriesExpireAndWorkspacesStayApart(t *testing.T) {
	clk := clocktesting.NewFakeClock(start)
	h := history.New(clk.Now())
	clk.Step(history.Interval)
	h.Record(clk.Now(), history.Snapshot{Computes: map[string]history.ComputeCounts{"lab/old": {Nodes: 3}, "lab2/cpu": {Nodes: 1}}})
	if got := h.Workspace("lab", clk.Now()); len(got.Computes) != 1 || got.Computes[0].Compute != "old" {
		t.Fatalf("workspace lab shows %+v; want only its compute old", got.Computes)
	}
	clk.Step(history.Window - history.Interval)
	h.Record(clk.Now(), history.Snapshot{Computes: map[string]history.ComputeCounts{"lab/new": {Nodes: 1}}})
	if got := h.Workspace("lab", clk.Now()); len(got.Computes) != 2 {
		t.Fatalf("59m50s after its last sample compute old is gone: %+v", got.Computes)
	}
	clk.Step(history.Interval)
	h.Record(clk.Now(), history.Snapshot{Computes: map[string]history.ComputeCounts{"lab/new": {Nodes: 1}}})
	if got := h.Workspace("lab", clk.Now()); len(got.Computes) != 1 || got.Computes[0].Compute != "new" {
		t.Fatalf("an hour after its last sample compute old is still shown: %+v", got.Computes)
	}
	if got := h.Workspace("lab", clk.Now().Add(2*time.Hour)); len(got.Computes) != 0 {
		t.Fatalf("two hours after the last sample the history shows %+v; want nothing", got.Computes)
	}
}

// Run samples at once and then on every tick of the clock it is given.
func TestRunSamplesOnTheClocksTicks(t *testing.T) {
	clk := clocktesting.NewFakeClock(start)
	h := history.New(clk.Now())
	reads := make(chan struct{})
	var n int64
	read := func(context.Context) (history.Snapshot, error) {
		n++
		return history.Snapshot{Computes: map[string]history.ComputeCounts{"lab/cpu": {Nodes: n}}}, nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.Run(ctx, clk, func(ctx context.Context) (history.Snapshot, error) {
			s, err := read(ctx)
			reads <- struct{}{}
			return s, err
		}, hclog.NewNullLogger())
	}()
	<-reads // the sample at start
	for range 3 {
		clk.Step(history.Interval)
		<-reads
	}
	cancel()
	clk.Step(history.Interval) // wakes Run if it waits on the ticker
	select {
	case <-reads: // a tick won the race with ctx: one more sample
	case <-done:
	}
	<-done
	got := h.Workspace("lab", clk.Now())
	if len(got.Computes) != 1 || len(got.Computes[0].Points) < 4 {
		t.Fatalf("after the start and 3 ticks the history holds %+v; want at least 4 points", got.Computes)
	}
	for i, p := range got.Computes[0].Points[:4] {
		if want := start.Add(time.Duration(i) * history.Interval); !p.Time.Equal(want) || p.Nodes != int64(i+1) {
			t.Fatalf("point %d is %+v; want time %v, nodes %d", i, p, want, i+1)
		}
	}
}
