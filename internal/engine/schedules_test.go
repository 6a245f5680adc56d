package engine

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
)

// scheduleEvery5m is a schedule of a one-node command job on cluster cpu, every five
// minutes (the rig's clock starts at 12:00 UTC).
func scheduleEvery5m(name, overlap, catchUp string) api.JobScheduleSpec {
	return api.JobScheduleSpec{
		Name:      name,
		Trigger:   api.JobScheduleTrigger{Type: "cron", Expression: "*/5 * * * *"},
		CreateJob: "command: python train.py\ncompute: cpu\n",
		Job:       api.JobSpec{Compute: "cpu", Command: []string{"sh", "-c", "python train.py"}, InstanceCount: 1},
		Overlap:   overlap, CatchUp: catchUp,
	}
}

func (r *rig) schedule(ws string, spec api.JobScheduleSpec) *api.JobSchedule {
	r.t.Helper()
	s, err := r.e.CreateSchedule(context.Background(), ws, spec, "")
	if err != nil {
		r.t.Fatal(err)
	}
	return s
}

func (r *rig) getSchedule(ws, name string) *api.JobSchedule {
	r.t.Helper()
	s, err := r.e.GetSchedule(context.Background(), ws, name)
	if err != nil {
		r.t.Fatal(err)
	}
	return s
}

// scheduledJobs lists the jobs a schedule started, by ID.
func (r *rig) scheduledJobs(ws, schedule string) []string {
	r.t.Helper()
	var out []string
	_ = r.st.View(func(tx *store.Tx) error {
		all, err := store.List[model.Job](tx, store.Jobs, ws+"/")
		for _, j := range all {
			if j.Schedule == schedule {
				out = append(out, j.ID)
			}
		}
		return err
	})
	return out
}

// finishRun ends the task of a scheduled run with exit code 0.
func (r *rig) finishRun(ws, id string) {
	r.t.Helper()
	r.settlesTo("run "+id+" running", r.status(ws, id, api.JobRunning))
	r.drv.FinishTask(r.job(ws, id).Nodes[0], r.task(ws, id, 0), 0)
	r.settlesTo("run "+id+" completed", r.status(ws, id, api.JobCompleted))
}

// A schedule fires at each tick of its cron, on the fake clock: the job is named for the
// tick, records its schedule, and the schedule its last run and next tick.
func TestScheduleFiresEveryTick(t *testing.T) {
	r := newRig(t)
	r.workspace("lab", nil)
	r.cluster("lab", "cpu", 0, 2, "PT120S")
	s := r.schedule("lab", scheduleEvery5m("nightly", "", ""))
	if s.NextRunTime == nil || !s.NextRunTime.Equal(time.Date(2026, 3, 1, 12, 5, 0, 0, time.UTC)) {
		t.Fatalf("next_run_time %v; want 12:05", s.NextRunTime)
	}
	if s.Overlap != "forbid" || s.CatchUp != "latest" || s.Enabled == nil || !*s.Enabled {
		t.Fatalf("defaults %q %q %v; want forbid, latest, enabled", s.Overlap, s.CatchUp, s.Enabled)
	}
	if !r.e.HasWork() {
		t.Fatal("an enabled schedule must keep the engine up")
	}
	r.settle()
	r.clk.Step(5*time.Minute - time.Second)
	r.settlesTo("nothing before the tick", func() bool { return len(r.scheduledJobs("lab", "nightly")) == 0 })
	for i, want := range []string{"nightly-20260301T120500Z", "nightly-20260301T121000Z", "nightly-20260301T121500Z"} {
		if i == 0 {
			r.clk.Step(time.Second)
		} else {
			r.clk.Step(5 * time.Minute)
		}
		r.settlesTo("the tick's job submitted", func() bool { return len(r.scheduledJobs("lab", "nightly")) == i+1 })
		j := r.job("lab", want)
		if j.Schedule != "nightly" {
			t.Fatalf("job %s records schedule %q; want nightly", want, j.Schedule)
		}
		r.finishRun("lab", want)
		got := r.getSchedule("lab", "nightly")
		if got.LastRunJob != want || got.LastRunStatus != api.JobCompleted {
			t.Fatalf("last run %q %q; want %s Completed", got.LastRunJob, got.LastRunStatus, want)
		}
		if wantNext := r.clk.Now().Add(5 * time.Minute); got.NextRunTime == nil || !got.NextRunTime.Equal(wantNext) {
			t.Fatalf("next_run_time %v; want %v", got.NextRunTime, wantNext)
		}
	}
}

// overlap: forbid skips a tick whose last run is active (recorded with the reason), allow
// starts another, replace cancels the active run first.
func TestScheduleOverlap(t *testing.T) {
	r := newRig(t)
	r.workspace("lab", nil)
	r.cluster("lab", "cpu", 0, 4, "PT120S")
	r.schedule("lab", scheduleEvery5m("forbid", "forbid", ""))
	r.schedule("lab", scheduleEvery5m("allow", "allow", ""))
	r.schedule("lab", scheduleEvery5m("replace", "replace", ""))
	r.settle()
	r.clk.Step(5 * time.Minute)
	r.settlesTo("first runs running", func() bool {
		for _, name := range []string{"forbid", "allow", "replace"} {
			if r.job("lab", name+"-20260301T120500Z").Status != api.JobRunning {
				return false
			}
		}
		return true
	})
	r.clk.Step(5 * time.Minute)
	r.settle()

	if got := r.scheduledJobs("lab", "forbid"); len(got) != 1 {
		t.Fatalf("forbid started %v; want only the first run", got)
	}
	skip := r.getSchedule("lab", "forbid").LastSkip
	if skip == nil || !skip.Tick.Equal(time.Date(2026, 3, 1, 12, 10, 0, 0, time.UTC)) || skip.Reason != "the last run forbid-20260301T120500Z is still active and overlap is forbid" {
		t.Fatalf("forbid's skip %+v; want the 12:10 tick with its reason", skip)
	}
	if got := r.scheduledJobs("lab", "allow"); len(got) != 2 {
		t.Fatalf("allow started %v; want two runs", got)
	}
	if st := r.job("lab", "allow-20260301T120500Z").Status; st != api.JobRunning {
		t.Fatalf("allow's first run %s; want still Running", st)
	}
	if st := r.job("lab", "replace-20260301T120500Z").Status; st != api.JobCanceled {
		t.Fatalf("replace's first run %s; want Canceled", st)
	}
	if got := r.getSchedule("lab", "replace"); got.LastRunJob != "replace-20260301T121000Z" {
		t.Fatalf("replace's last run %s; want the 12:10 run", got.LastRunJob)
	}
}

// With the engine down across three ticks, catch_up latest fires exactly one run after
// restart, for the last missed tick, and none fires none; both carry on at the next tick.
func TestScheduleCatchUpAfterDowntime(t *testing.T) {
	r := newRig(t)
	r.workspace("lab", nil)
	r.cluster("lab", "cpu", 0, 4, "PT120S")
	r.schedule("lab", scheduleEvery5m("latest", "allow", "latest"))
	r.schedule("lab", scheduleEvery5m("none", "allow", "none"))
	r.settle()

	r.stop()
	r.clk.Step(17 * time.Minute) // 12:05, 12:10 and 12:15 missed
	r.start()
	r.settle()
	if got := r.scheduledJobs("lab", "latest"); len(got) != 1 || got[0] != "latest-20260301T121500Z" {
		t.Fatalf("catch_up latest started %v; want one run, for 12:15", got)
	}
	if got := r.scheduledJobs("lab", "none"); len(got) != 0 {
		t.Fatalf("catch_up none started %v; want none", got)
	}
	if skip := r.getSchedule("lab", "none").LastSkip; skip == nil || !skip.Tick.Equal(time.Date(2026, 3, 1, 12, 15, 0, 0, time.UTC)) {
		t.Fatalf("catch_up none's skip %+v; want the 12:15 tick recorded", skip)
	}
	r.settle() // a second pass fires nothing more
	if got := r.scheduledJobs("lab", "latest"); len(got) != 1 {
		t.Fatalf("catch-up fired again: %v", got)
	}
	r.clk.Step(3 * time.Minute)
	r.settlesTo("both fire at 12:20", func() bool {
		return len(r.scheduledJobs("lab", "latest")) == 2 && len(r.scheduledJobs("lab", "none")) == 1
	})
}

// An engine killed after a tick's decision was committed but before its job was
// submitted submits that job when it comes back, once; one killed after the submission
// does not submit it again.
func TestScheduleCommittedTickSubmittedOnceAfterCrash(t *testing.T) {
	r := newRig(t)
	r.workspace("lab", nil)
	r.cluster("lab", "cpu", 0, 4, "PT120S")
	r.schedule("lab", scheduleEvery5m("nightly", "allow", "none"))
	r.settle()
	r.clk.Step(5 * time.Minute)
	r.settle()
	tick := time.Date(2026, 3, 1, 12, 5, 0, 0, time.UTC)
	// Put the record back as the decision's write left it, before the submission.
	must(t, r.st.Update(func(tx *store.Tx) error {
		s, err := model.GetSchedule(tx, "lab", "nightly")
		if err != nil {
			return err
		}
		s.Firing, s.LastRunJob = &tick, ""
		return tx.Put(store.Schedules, s.Key(), s)
	}))
	r.stop()
	r.start()
	r.settle()
	if got := r.scheduledJobs("lab", "nightly"); len(got) != 1 {
		t.Fatalf("after the crash the schedule started %v; want the one 12:05 job", got)
	}
	if got := r.getSchedule("lab", "nightly"); got.LastRunJob != "nightly-20260301T120500Z" {
		t.Fatalf("last run %q; want the 12:05 job", got.LastRunJob)
	}
}

// A disabled schedule has no next run, fires nothing and does not keep the engine up;
// enabling it again plans the next tick from now.
func TestScheduleDisabled(t *testing.T) {
	r := newRig(t)
	r.workspace("lab", nil)
	r.cluster("lab", "cpu", 0, 2, "PT120S")
	spec := scheduleEvery5m("nightly", "", "")
	off := false
	spec.Enabled = &off
	if s := r.schedule("lab", spec); s.NextRunTime != nil {
		t.Fatalf("disabled schedule has next_run_time %v", s.NextRunTime)
	}
	if r.e.HasWork() {
		t.Fatal("a disabled schedule kept the engine up")
	}
	r.clk.Step(time.Hour)
	r.settlesTo("nothing fired", func() bool { return len(r.scheduledJobs("lab", "nightly")) == 0 })
	on := true
	s, err := r.e.UpdateSchedule(context.Background(), "lab", "nightly", api.JobScheduleUpdate{Trigger: spec.Trigger, CreateJob: spec.CreateJob, Job: spec.Job, Enabled: &on})
	must(t, err)
	if s.NextRunTime == nil || !s.NextRunTime.Equal(time.Date(2026, 3, 1, 13, 5, 0, 0, time.UTC)) {
		t.Fatalf("re-enabled next_run_time %v; want 13:05", s.NextRunTime)
	}
}

// Bad settings are refused naming the attribute and the allowed values.
func TestScheduleRefusesBadSettings(t *testing.T) {
	r := newRig(t)
	r.workspace("lab", nil)
	for _, tc := range []struct {
		edit  func(*api.JobScheduleSpec)
		field string
	}{
		{func(s *api.JobScheduleSpec) { s.Trigger.Expression = "*/5 * * *" }, "trigger.expression"},
		{func(s *api.JobScheduleSpec) { s.Trigger.TimeZone = "Mars/Olympus" }, "trigger.time_zone"},
		{func(s *api.JobScheduleSpec) {
			s.Trigger = api.JobScheduleTrigger{Type: "recurrence", Frequency: "fortnight", Interval: 1}
		}, "trigger.frequency"},
		{func(s *api.JobScheduleSpec) {
			s.Trigger.StartTime, s.Trigger.EndTime = "2026-04-01T00:00:00Z", "2026-03-01T00:00:00Z"
		}, "trigger.end_time"},
		{func(s *api.JobScheduleSpec) { s.Overlap = "queue" }, "overlap"},
		{func(s *api.JobScheduleSpec) { s.CatchUp = "all" }, "catch_up"},
		{func(s *api.JobScheduleSpec) { s.Name = "bad name" }, "name"},
	} {
		spec := scheduleEvery5m("nightly", "", "")
		tc.edit(&spec)
		_, err := r.e.CreateSchedule(context.Background(), "lab", spec, "")
		var apiErr *api.Error
		if !errors.As(err, &apiErr) || apiErr.Code != api.CodeInvalid || apiErr.Field != tc.field {
			t.Errorf("%s: got %v; want invalid naming %s", tc.field, err, tc.field)
		}
	}
}
