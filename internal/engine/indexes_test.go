package engine

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
)

func clusterSpec(name string, min, max int64) api.ComputeSpec {
	return api.ComputeSpec{Name: name, VMSize: "Standard_DS3_v2", ScaleSettings: &api.ScaleSettings{MinNodeCount: min, MaxNodeCount: max}}
}

// Node counts are bounded: a cluster asking for 2^62 nodes is refused instead of wedging
// the engine, and a product that would overflow never passes a quota.
func TestNodeCountsAreBoundedAndQuotaArithmeticChecked(t *testing.T) {
	r := newRig(t)
	r.workspace("team", map[string]int64{"standardDSv2Family": 100})
	ctx := context.Background()

	for _, tc := range []struct {
		name     string
		min, max int64
		field    string
	}{
		{"huge-min", 1<<62 - 1, 1 << 62, "scale_settings.min_node_count"},
		{"overflowing-max", 0, 1 << 61, "scale_settings.max_node_count"},
	} {
		_, err := r.e.CreateCompute(ctx, "team", clusterSpec(tc.name, tc.min, tc.max), "")
		var apiErr *api.Error
		if !errors.As(err, &apiErr) || apiErr.Code != api.CodeInvalid || apiErr.Field != tc.field {
			t.Fatalf("%s: CreateCompute = %v; want an invalid-input error on %s", tc.name, err, tc.field)
		}
	}
	// The engine still serves writes (a wedged engine hangs here).
	r.cluster("team", "fits", 0, 25, "")
	// DS3_v2 has 4 vCPUs: 25 nodes take the whole quota of 100, one more node does not fit.
	_, err := r.e.CreateCompute(ctx, "team", clusterSpec("over", 0, 1), "")
	if err == nil || !strings.Contains(err.Error(), "has 0 of 100 left") {
		t.Fatalf("CreateCompute over quota = %v; want a quota error", err)
	}
	if _, err := r.e.UpdateCompute(ctx, "team", "fits", api.ComputeUpdate{ScaleSettings: &api.ScaleSettings{MaxNodeCount: 26}}); err == nil {
		t.Fatal("raising max_node_count past the quota was accepted")
	}
	// Lowering it frees quota for another compute at once (the quota index follows updates).
	if _, err := r.e.UpdateCompute(ctx, "team", "fits", api.ComputeUpdate{ScaleSettings: &api.ScaleSettings{MaxNodeCount: 20}}); err != nil {
		t.Fatal(err)
	}
	r.cluster("team", "second", 0, 5, "")
	// And a deleted compute gives its quota back.
	if err := r.e.DeleteCompute(ctx, "team", "second"); err != nil {
		t.Fatal(err)
	}
	r.cluster("team", "third", 0, 5, "")

	// A job cannot ask for more nodes than any cluster may have.
	_, err = r.e.SubmitJob(ctx, "team", api.JobSpec{Compute: "fits", InstanceCount: 1 << 40, Command: []string{"x"}}, "")
	if err == nil || !strings.Contains(err.Error(), "instance_count must be between 1 and 65000") {
		t.Fatalf("SubmitJob with 2^40 nodes = %v", err)
	}
}

// The quota index is rebuilt from the store when the engine starts again.
func TestQuotaIndexSurvivesARestart(t *testing.T) {
	r := newRig(t)
	r.workspace("team", map[string]int64{"standardDSv2Family": 40})
	r.cluster("team", "big", 0, 10, "")
	r.stop()
	r.start()
	if _, err := r.e.CreateCompute(context.Background(), "team", clusterSpec("more", 0, 1), ""); err == nil || !strings.Contains(err.Error(), "already used by big (40 vCPUs)") {
		t.Fatalf("CreateCompute after restart = %v; want a quota error naming big", err)
	}
}

// A store written without the active-jobs index (an older engine) gets one when the engine
// starts: a queued job is still found and started.
func TestActiveJobsIndexRebuiltOnStart(t *testing.T) {
	r := newRig(t)
	r.workspace("team", nil)
	r.cluster("team", "one", 0, 1, "PT120S")
	first := r.submit("team", "one", 1)
	r.settlesTo("first job running", r.status("team", first.ID, api.JobRunning))
	second := r.submit("team", "one", 1)
	r.settle()
	r.restartAfter(func(tx *store.Tx) error {
		for _, k := range tx.Keys(store.ActiveJobs, "") {
			if err := tx.Delete(store.ActiveJobs, k); err != nil {
				return err
			}
		}
		return nil
	})
	r.settle()
	got := r.job("team", first.ID)
	r.drv.FinishTask(got.Nodes[0], r.task("team", first.ID, 0), 0)
	r.settlesTo("the queued job runs after the first", r.status("team", second.ID, api.JobRunning))
}

// Durations are parsed once where they come in; a record from an engine that stored none
// gets them at start, so its idle node still waits its full scale-down time.
func TestParsedDurationsFilledForOldRecords(t *testing.T) {
	r := newRig(t)
	r.workspace("team", nil)
	r.cluster("team", "cpu", 0, 1, "PT10M")
	j := r.submit("team", "cpu", 1)
	r.settlesTo("job running", r.status("team", j.ID, api.JobRunning))
	r.restartAfter(func(tx *store.Tx) error {
		var rec model.Compute
		if _, err := tx.Get(store.Computes, "team/cpu", &rec); err != nil {
			return err
		}
		rec.Durations = model.Durations{} // as an older engine wrote it
		return tx.Put(store.Computes, rec.Key(), rec)
	})
	r.settle()
	r.drv.FinishTask(r.job("team", j.ID).Nodes[0], r.task("team", j.ID, 0), 0)
	r.settle()
	r.clk.Step(10*time.Minute - time.Millisecond)
	r.settle()
	if n := r.compute("team", "cpu").CurrentNodeCount; n != 1 {
		t.Fatalf("%d nodes before the 10 minute scale-down time; want the idle node kept", n)
	}
	r.clk.Step(time.Millisecond)
	r.settle()
	if c := r.compute("team", "cpu"); c.CurrentNodeCount != 0 {
		t.Fatalf("nodes %+v at the deadline; want the idle node released", c.Nodes)
	}
}

// restartAfter stops the engine as a crash would, changes its store with edit (to stand for
// a store an older engine wrote), and starts the engine again.
func (r *rig) restartAfter(edit func(tx *store.Tx) error) {
	r.t.Helper()
	r.stop()
	st, err := store.Open(r.path, time.Second)
	if err != nil {
		r.t.Fatal(err)
	}
	err = st.Update(edit)
	st.Close()
	if err != nil {
		r.t.Fatal(err)
	}
	r.start()
}
