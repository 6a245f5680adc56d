package schedules

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/runtime"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store/storetest"
)

// recordingJobs is the engine's job API as the controller sees it: it records each
// submission and can refuse the next ones.
type recordingJobs struct {
	submitted []string // "<name> <idempotency key>"
	refuse    error
	status    map[string]string
}

func (j *recordingJobs) SubmitJob(_ context.Context, _ string, spec api.JobSpec, key string) (*api.Job, error) {
	if j.refuse != nil {
		return nil, j.refuse
	}
	j.submitted = append(j.submitted, spec.Name+" "+key)
	j.status[spec.Name] = api.JobQueued
	return &api.Job{ID: spec.Name, Status: api.JobQueued, Schedule: spec.Schedule}, nil
}

func (j *recordingJobs) GetJob(_ context.Context, _, id string) (*api.Job, error) {
	st, ok := j.status[id]
	if !ok {
		return nil, api.Errorf(api.CodeNotFound, "", "no job %s", id)
	}
	return &api.Job{ID: id, Status: st}, nil
}

func (j *recordingJobs) CancelJob(_ context.Context, _, id string) (*api.Job, error) {
	j.status[id] = api.JobCanceled
	return &api.Job{ID: id, Status: api.JobCanceled}, nil
}

// timers records the deadline the controller set last.
type timers struct{ at map[runtime.Timer]time.Time }

func (t *timers) SetTimer(tm runtime.Timer, at time.Time) { t.at[tm] = at }
func (t *timers) RemoveTimer(tm runtime.Timer)            { delete(t.at, tm) }

// A pass on the fake clock: before the tick it only sets the timer at the tick; at the
// tick it submits the job named for it under the tick's key and sets the next timer; a
// second pass at the same time submits nothing; a refused submission is recorded as a
// skipped tick with the refusal, and the next tick is still planned.
func TestReconcileFiresOncePerTick(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	st := storetest.Open(t, t.TempDir())
	storetest.PutWorkspace(t, st, "lab", nil, clk.Now())
	jobs := &recordingJobs{status: map[string]string{}}
	tq := &timers{at: map[runtime.Timer]time.Time{}}
	c := New(Config{Store: st, Clock: clk, Logger: hclog.NewNullLogger(), Jobs: jobs, Timers: tq, Mark: func(string) {}})
	ctx := context.Background()
	if _, err := c.Create(ctx, "lab", api.JobScheduleSpec{
		Name: "hourly", Trigger: api.JobScheduleTrigger{Type: "cron", Expression: "0 * * * *"},
		CreateJob: "command: train\n", Job: api.JobSpec{Compute: "cpu", Command: []string{"train"}}, Overlap: "allow",
	}, ""); err != nil {
		t.Fatal(err)
	}
	timer := runtime.Timer{Kind: runtime.Schedule, Object: runtime.JobScheduleKey("lab/hourly")}

	c.Reconcile(ctx, "lab/hourly")
	if got := tq.at[timer]; !got.Equal(time.Date(2026, 3, 1, 13, 0, 0, 0, time.UTC)) || len(jobs.submitted) != 0 {
		t.Fatalf("before the tick: timer %v, submitted %v; want the timer at 13:00 and nothing", got, jobs.submitted)
	}
	clk.SetTime(time.Date(2026, 3, 1, 13, 0, 0, 0, time.UTC))
	c.Reconcile(ctx, "lab/hourly")
	c.Reconcile(ctx, "lab/hourly")
	if len(jobs.submitted) != 1 || jobs.submitted[0] != "hourly-20260301T130000Z schedule:lab/hourly@2026-03-01T13:00:00Z" {
		t.Fatalf("at the tick, twice: submitted %v; want the tick's job once, under its key", jobs.submitted)
	}
	if got := tq.at[timer]; !got.Equal(time.Date(2026, 3, 1, 14, 0, 0, 0, time.UTC)) {
		t.Fatalf("after the tick: timer %v; want 14:00", got)
	}

	jobs.refuse = api.Errorf(api.CodeNotFound, "compute", "compute \"cpu\" not found")
	clk.SetTime(time.Date(2026, 3, 1, 14, 0, 0, 0, time.UTC))
	c.Reconcile(ctx, "lab/hourly")
	s, err := c.Get(ctx, "lab", "hourly")
	if err != nil {
		t.Fatal(err)
	}
	if s.LastSkip == nil || !s.LastSkip.Tick.Equal(clk.Now()) || s.LastRunJob != "hourly-20260301T130000Z" ||
		s.NextRunTime == nil || !s.NextRunTime.Equal(time.Date(2026, 3, 1, 15, 0, 0, 0, time.UTC)) {
		t.Fatalf("after a refused submission: %+v; want the 14:00 tick skipped with the refusal, the last run kept, 15:00 next", s)
	}
	if s.LastSkip.Reason != `submitting job hourly-20260301T140000Z failed: compute "cpu" not found` {
		t.Fatalf("skip reason %q", s.LastSkip.Reason)
	}
}
