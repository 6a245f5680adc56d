package ui

import (
	"slices"
	"testing"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/computes"
)

// Each content hash an environment's jobs used is a build, the current one first; its state
// is the newest verdict of its jobs, and a build in progress wins.
func TestEnvironmentViewsFromJobs(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	job := func(id, env, hash, status, reason, errText string, age time.Duration, nodes ...string) api.Job {
		return api.Job{ID: id, Environment: env, EnvironmentHash: hash, Status: status, Reason: reason, Error: errText, SubmittedAt: t0.Add(-age), Nodes: nodes}
	}
	envs := []api.Environment{
		{EnvironmentSpec: api.EnvironmentSpec{Name: "torch"}, ContentHash: "h2"},
		{EnvironmentSpec: api.EnvironmentSpec{Name: "fresh"}, ContentHash: "f1"},
		{EnvironmentSpec: api.EnvironmentSpec{Name: "broken"}, ContentHash: "b1"},
	}
	jobs := []api.Job{
		job("old-1", "torch", "h1", api.JobCompleted, "", "", 3*time.Hour, "n1"),
		job("new-1", "torch", "h2", api.JobCompleted, "", "", 2*time.Hour, "n1"),
		job("new-2", "torch", "h2", api.JobRunning, "", "", time.Hour, "n2", "n1"),
		job("new-3", "torch", "h2", api.JobPreparing, computes.ReasonBuilding, "", time.Minute, "n3"),
		job("bad-1", "broken", "b1", api.JobCompleted, "", "", 2*time.Hour, "n1"),
		job("bad-2", "broken", "b1", api.JobFailed, "", `building environment "broken" failed on node n4 (exit status 1):`+"\nERROR: no matching distribution", time.Hour, "n4"),
		job("other", "", "", api.JobCompleted, "", "", time.Hour, "n1"),
		func() api.Job {
			j := job("reused", "torch", "h2", api.JobCompleted, "", "", 0)
			j.ReusedFrom = "p1/train"
			return j
		}(),
	}
	got := environmentViews(envs, jobs)
	if len(got) != 3 {
		t.Fatalf("%d environments; want 3", len(got))
	}
	torch := got[0].Builds
	if len(torch) != 2 || torch[0].ContentHash != "h2" || !torch[0].Current || torch[1].ContentHash != "h1" || torch[1].Current {
		t.Fatalf("torch's builds %+v; want h2 (current) then h1", torch)
	}
	if b := torch[0]; b.State != BuildBuilding || b.Jobs != 3 || b.LastJob != "new-3" || !slices.Equal(b.Nodes, []string{"n2", "n1"}) {
		t.Errorf("torch h2 %+v; want building, 3 jobs, last new-3, nodes n2 n1", b)
	}
	if b := torch[1]; b.State != BuildReady || b.Jobs != 1 || !slices.Equal(b.Nodes, []string{"n1"}) {
		t.Errorf("torch h1 %+v; want ready on n1", b)
	}
	if b := got[1].Builds; len(b) != 1 || b[0].State != BuildNone || b[0].Jobs != 0 || !b[0].Current {
		t.Errorf("fresh's builds %+v; want its current hash, not built", b)
	}
	if b := got[2].Builds[0]; b.State != BuildFailed || b.Error == "" || b.LastJob != "bad-2" {
		t.Errorf("broken's build %+v; want failed with the newest job's error", b)
	}
}
