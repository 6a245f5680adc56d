package model

import (
	"reflect"
	"testing"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store/storetest"
)

// A step job that ends leaves a wake marker for its pipeline in the write that ends it;
// a running step and a job of its own leave none. The marker is on disk: a store opened
// again (an engine restarted after a crash) still has it, until the pipeline clears it.
func TestPutJobLeavesAPipelineWakeWhenAStepEnds(t *testing.T) {
	dir := t.TempDir()
	st := storetest.Open(t, dir)
	step := func(id, status string) Job {
		j := Job{ComputeKey: "ws/cpu"}
		j.Workspace, j.ID, j.Status, j.Pipeline, j.Step = "ws", "pipe-1-"+id, status, "pipe-1", id
		return j
	}
	own := Job{ComputeKey: "ws/cpu"}
	own.Workspace, own.ID, own.Status = "ws", "alone", api.JobFailed
	put := func(jobs ...Job) {
		t.Helper()
		if err := st.Update(func(tx *store.Tx) error {
			for _, j := range jobs {
				if err := PutJob(tx, j); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	wakes := func(st *store.Store) []PipelineWake {
		t.Helper()
		var out []PipelineWake
		if err := st.View(func(tx *store.Tx) error { out = PipelineWakes(tx); return nil }); err != nil {
			t.Fatal(err)
		}
		return out
	}

	put(step("prep", api.JobRunning), step("train", api.JobQueued), own)
	if got := wakes(st); len(got) != 0 {
		t.Fatalf("wakes before any step ended: %+v", got)
	}
	put(step("prep", api.JobCompleted), step("train", api.JobFailed))
	want := []PipelineWake{{Workspace: "ws", Pipeline: "pipe-1", Steps: []string{"pipe-1-prep", "pipe-1-train"}}}
	if got := wakes(st); !reflect.DeepEqual(got, want) {
		t.Fatalf("wakes = %+v, want %+v", got, want)
	}

	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st = storetest.Open(t, dir)
	if got := wakes(st); !reflect.DeepEqual(got, want) {
		t.Fatalf("wakes after reopening = %+v, want %+v", got, want)
	}
	if err := st.Update(func(tx *store.Tx) error { return ClearPipelineWake(tx, "ws", "pipe-1", "pipe-1-prep") }); err != nil {
		t.Fatal(err)
	}
	want[0].Steps = []string{"pipe-1-train"}
	if got := wakes(st); !reflect.DeepEqual(got, want) {
		t.Fatalf("wakes after clearing prep = %+v, want %+v", got, want)
	}
}

// A cluster's pass reads every job a node holds and only the head of its queue, in queue
// order (submit time, then ID), until the fitting jobs read need twice max_node_count
// nodes; a job that leaves Queued leaves the queued-jobs index, and the index rebuilt on
// start is the one PutJob kept.
func TestPlacingJobsReadsTheHeadOfTheQueue(t *testing.T) {
	st := storetest.Open(t, t.TempDir())
	rec := Compute{Workspace: "ws", Name: "cpu", ScaleSettings: &api.ScaleSettings{MaxNodeCount: 2}}
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	job := func(id, status string, count int64, submitted time.Time) Job {
		j := Job{ComputeKey: rec.Key()}
		j.Workspace, j.ID, j.Status, j.Count, j.SubmittedAt = "ws", id, status, count, submitted
		return j
	}
	jobs := []Job{
		job("running", api.JobRunning, 1, at.Add(time.Hour)), // submitted after the queue, still read
		job("q0-too-big", api.JobQueued, 3, at),              // needs more than max: read, not counted
		job("q2", api.JobQueued, 1, at.Add(2*time.Second)),
		job("q1b", api.JobQueued, 1, at.Add(time.Second)),
		job("q1a", api.JobQueued, 1, at.Add(time.Second)),
		job("q3", api.JobQueued, 2, at.Add(3*time.Second)),
		job("q4", api.JobQueued, 1, at.Add(4*time.Second)),
		job("q5", api.JobQueued, 1, at.Add(5*time.Second)),
		job("done", api.JobCompleted, 1, at),
	}
	ids := func(tx *store.Tx, maxNodes int64) []string {
		t.Helper()
		got, err := PlacingJobs(tx, rec, maxNodes)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, j := range got {
			out = append(out, j.ID)
		}
		return out
	}
	check := func(st *store.Store, maxNodes int64, want ...string) {
		t.Helper()
		if err := st.View(func(tx *store.Tx) error {
			if got := ids(tx, maxNodes); !reflect.DeepEqual(got, want) {
				t.Errorf("max %d: PlacingJobs = %v, want %v", maxNodes, got, want)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Update(func(tx *store.Tx) error {
		for _, j := range jobs {
			if err := PutJob(tx, j); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// q1a, q1b, q2 need 3 nodes and q3 brings them to 5 >= 2*2.
	check(st, 2, "q0-too-big", "q1a", "q1b", "q2", "q3", "running")
	check(st, 1, "q0-too-big", "q1a", "q1b", "running")
	check(st, 0, "q0-too-big", "q1a", "q1b", "q2", "q3", "q4", "q5", "running")
	check(st, 100, "q0-too-big", "q1a", "q1b", "q2", "q3", "q4", "q5", "running")

	// q1a starts: it is read as a held job, and the head moves on by one.
	q1a := jobs[4]
	q1a.Status = api.JobPreparing
	if err := st.Update(func(tx *store.Tx) error { return PutJob(tx, q1a) }); err != nil {
		t.Fatal(err)
	}
	check(st, 1, "q0-too-big", "q1a", "q1b", "q2", "running")

	// The index rebuilt from the jobs is the one PutJob kept.
	var kept []string
	if err := st.Update(func(tx *store.Tx) error {
		kept = tx.Keys(store.QueuedJobs, "")
		return IndexActiveJobs(tx)
	}); err != nil {
		t.Fatal(err)
	}
	if err := st.View(func(tx *store.Tx) error {
		if rebuilt := tx.Keys(store.QueuedJobs, ""); !reflect.DeepEqual(rebuilt, kept) || len(kept) != 6 {
			t.Errorf("queued-jobs index: kept %v, rebuilt %v (want 6 keys)", kept, rebuilt)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	check(st, 1, "q0-too-big", "q1a", "q1b", "q2", "running")
}
