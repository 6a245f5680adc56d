package model

import (
	"reflect"
	"testing"

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
