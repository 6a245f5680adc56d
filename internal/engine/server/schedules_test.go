package server_test

import (
	"context"
	"testing"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
)

// The schedules' API through the typed client: a contributor creates, updates and
// deletes, a reader reads and is refused every write, and an invalid trigger is a 400
// naming its attribute.
func TestSchedulesAPIAndPermissions(t *testing.T) {
	r := newAuthRig(t)
	ctx := context.Background()
	if _, err := r.op.CreateWorkspace(ctx, api.WorkspaceSpec{Name: "team-a"}); err != nil {
		t.Fatal(err)
	}
	contrib := r.client(r.token("ci-a", api.RoleContributor, "team-a"))
	reader := r.client(r.token("viewer-a", api.RoleReader, "team-a"))
	spec := api.JobScheduleSpec{
		Name:      "nightly",
		Trigger:   api.JobScheduleTrigger{Type: "cron", Expression: "0 2 * * *", TimeZone: "W. Europe Standard Time"},
		CreateJob: "command: echo hi\ncompute: cpu\n",
		Job:       api.JobSpec{Compute: "cpu", Command: []string{"sh", "-c", "echo hi"}},
	}
	created, err := contrib.CreateSchedule(ctx, "team-a", spec)
	if err != nil {
		t.Fatal(err)
	}
	if created.ID != "/workspaces/team-a/schedules/nightly" || created.NextRunTime == nil || created.Overlap != "forbid" || created.CatchUp != "latest" {
		t.Fatalf("created %+v", created)
	}
	_, err = reader.CreateSchedule(ctx, "team-a", api.JobScheduleSpec{Name: "other", Trigger: spec.Trigger, CreateJob: spec.CreateJob, Job: spec.Job})
	wantForbidden(t, err, `write on workspace "team-a"`)
	list, err := reader.ListSchedules(ctx, "team-a")
	if err != nil || len(list) != 1 || list[0].Name != "nightly" {
		t.Fatalf("reader's list %+v, %v; want the one schedule", list, err)
	}
	off := false
	upd := api.JobScheduleUpdate{Trigger: spec.Trigger, CreateJob: spec.CreateJob, Job: spec.Job, Enabled: &off, Overlap: "replace"}
	_, err = reader.UpdateSchedule(ctx, "team-a", "nightly", upd)
	wantForbidden(t, err, `write on workspace "team-a"`)
	got, err := contrib.UpdateSchedule(ctx, "team-a", "nightly", upd)
	if err != nil || *got.Enabled || got.NextRunTime != nil || got.Overlap != "replace" {
		t.Fatalf("updated %+v, %v; want disabled, no next run, overlap replace", got, err)
	}
	upd.Trigger.Expression = "0 2 * *"
	_, err = contrib.UpdateSchedule(ctx, "team-a", "nightly", upd)
	if !api.IsInvalid(err) || api.FieldOf(err) != "trigger.expression" {
		t.Fatalf("bad cron: %v; want invalid naming trigger.expression", err)
	}
	err = reader.DeleteSchedule(ctx, "team-a", "nightly")
	wantForbidden(t, err, `write on workspace "team-a"`)
	if err := contrib.DeleteSchedule(ctx, "team-a", "nightly"); err != nil {
		t.Fatal(err)
	}
	if _, err := reader.GetSchedule(ctx, "team-a", "nightly"); !api.IsNotFound(err) {
		t.Fatalf("after delete: %v; want not found", err)
	}
}
