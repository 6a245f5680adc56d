package computes_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/computes/computestest"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/controllers/clusters"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/fake"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/runtime"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
)

// setup builds the core with the clusters' pass, the real one, for its passes.
func setup(t *testing.T, opts computestest.Options) *computestest.Env {
	t.Helper()
	env := computestest.New(t, opts)
	env.Core.RegisterPass(api.TypeComputeCluster, clusters.New(env.Core).Pass)
	env.Workspace("lab", map[string]int64{"standardDSv2Family": 8})
	return env
}

// cluster is a cluster record of Standard_DS3_v2 (4 vCPUs) nodes.
func cluster(name string, min, max int64, priority string) model.Compute {
	return model.Compute{
		Workspace: "lab", Name: name, Type: api.TypeComputeCluster, VMSize: "Standard_DS3_v2", VMPriority: priority,
		ScaleSettings: &api.ScaleSettings{MinNodeCount: min, MaxNodeCount: max, ScaleDownNodesAfterIdleDuration: "PT5M"},
	}
}

func insert(t *testing.T, env *computestest.Env, rec model.Compute) {
	t.Helper()
	if _, err := env.Core.Insert(context.Background(), rec, "", rec.QuotaField()); err != nil {
		t.Fatal(err)
	}
}

func states(nodes []model.Node) []string {
	var out []string
	for _, n := range nodes {
		out = append(out, n.State)
	}
	return out
}

func TestInsertChecksTheNameAndTheQuotaInTurn(t *testing.T) {
	env := setup(t, computestest.Options{})
	got, err := env.Core.Insert(context.Background(), cluster("a", 0, 1, api.PriorityDedicated), "key-1", "scale_settings.max_node_count")
	if err != nil || got.ID != api.ComputeID("lab", "a") {
		t.Fatalf("Insert = %+v, %v", got, err)
	}
	// A retry under the same key returns what the first call made.
	if again, err := env.Core.Insert(context.Background(), cluster("a", 0, 1, api.PriorityDedicated), "key-1", "scale_settings.max_node_count"); err != nil || again.ID != got.ID {
		t.Fatalf("retried Insert = %+v, %v; want the first result", again, err)
	}
	_, err = env.Core.Insert(context.Background(), cluster("a", 0, 1, api.PriorityDedicated), "", "scale_settings.max_node_count")
	_ = computestest.WantError(t, err, api.CodeConflict, "name")
	// 4 of the 8 vCPUs are held by a (its max_node_count of 1); b asks for 8 more.
	_, err = env.Core.Insert(context.Background(), cluster("b", 0, 2, api.PriorityDedicated), "", "scale_settings.max_node_count")
	_ = computestest.WantError(t, err, api.CodeQuotaExceeded, "scale_settings.max_node_count")
	if !strings.Contains(err.Error(), "already used by a (4 vCPUs)") {
		t.Fatalf("quota error %q does not name what holds the quota", err)
	}
	insert(t, env, cluster("c", 0, 1, api.PriorityDedicated))
	_, err = env.Core.Insert(context.Background(), cluster("d", 0, 1, api.PriorityDedicated), "", "scale_settings.max_node_count")
	_ = computestest.WantError(t, err, api.CodeQuotaExceeded, "scale_settings.max_node_count")
}

func TestModifyChecksTheQuotaOnlyWhenWhatItHoldsChanges(t *testing.T) {
	env := setup(t, computestest.Options{})
	insert(t, env, cluster("a", 0, 2, api.PriorityDedicated))
	_, err := env.Core.Modify(context.Background(), "lab", "a", func(_ *api.Workspace, rec *model.Compute) error {
		s := *rec.ScaleSettings // new settings, as the controllers' updates make them
		s.MaxNodeCount = 3
		rec.ScaleSettings = &s
		return nil
	})
	_ = computestest.WantError(t, err, api.CodeQuotaExceeded, "scale_settings.max_node_count")
	got, err := env.Core.Modify(context.Background(), "lab", "a", func(_ *api.Workspace, rec *model.Compute) error {
		rec.Description = "same size"
		return nil
	})
	if err != nil || got.Description != "same size" {
		t.Fatalf("Modify of the description = %+v, %v", got, err)
	}
}

func TestNodeLifecycleFromAdmissionToRelease(t *testing.T) {
	env := setup(t, computestest.Options{Fake: fake.Options{CreatePending: true}})
	insert(t, env, cluster("a", 1, 1, api.PriorityDedicated))
	env.Settle()
	nodes := env.Nodes("lab/a")
	if len(nodes) != 1 || nodes[0].State != api.NodePreparing || nodes[0].Reason != "Resources" {
		t.Fatalf("nodes = %+v; want one node preparing for the driver's reason", nodes)
	}
	env.Driver.MakeReady(nodes[0].ID)
	env.Settle()
	if got := states(env.Nodes("lab/a")); !slices.Equal(got, []string{api.NodeIdle}) {
		t.Fatalf("after NodeReady states = %v; want idle", got)
	}
	// A node that dies fails its job, shows on the compute, and is replaced.
	j := env.PutJob("lab/a", "job-00000001", 1)
	env.Core.Kick("lab/a")
	env.Settle()
	env.Driver.KillNode(nodes[0].ID)
	env.Settle()
	if got := env.Job("lab", j.ID); got.Status != api.JobFailed || !strings.Contains(got.Error, "was lost") {
		t.Fatalf("job = %s (%q); want failed, its node lost", got.Status, got.Error)
	}
	rec := env.Compute("lab/a")
	if len(rec.Errors) == 0 || rec.Errors[0].Code != api.ErrorNodeLost {
		t.Fatalf("compute errors = %+v; want the lost node", rec.Errors)
	}
	after := env.Nodes("lab/a")
	if len(after) != 1 || after[0].ID == nodes[0].ID {
		t.Fatalf("nodes after the loss = %+v; want one replacement", after)
	}
}

func TestAFailedTerminateIsRetried(t *testing.T) {
	env := setup(t, computestest.Options{})
	insert(t, env, cluster("a", 1, 1, api.PriorityDedicated))
	env.Settle()
	env.Driver.FailNext("Terminate", driver.Transient(errors.New("api down")))
	if _, err := env.Core.Modify(context.Background(), "lab", "a", func(_ *api.Workspace, rec *model.Compute) error {
		rec.ScaleSettings.MinNodeCount = 0
		rec.ScaleSettings.ScaleDownNodesAfterIdleDuration = "PT0S"
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	env.Settle()
	if nodes := env.Nodes("lab/a"); len(nodes) != 1 || !nodes[0].Released {
		t.Fatalf("nodes after a failed terminate = %+v; want the node kept, marked released", nodes)
	}
	env.Step(runtime.RetryAfter)
	if nodes := env.Nodes("lab/a"); len(nodes) != 0 {
		t.Fatalf("nodes after the retry = %+v; want none", nodes)
	}
	if got := env.Driver.CallsTo("Terminate"); len(got) != 2 {
		t.Fatalf("terminates = %v; want the failed one and its retry", got)
	}
}

func TestDeleteComputeCancelsItsJobsAndReleasesItsNodes(t *testing.T) {
	env := setup(t, computestest.Options{})
	insert(t, env, cluster("a", 1, 1, api.PriorityDedicated))
	j := env.PutJob("lab/a", "job-00000001", 1)
	env.Settle()
	if got := env.Job("lab", j.ID).Status; got != api.JobRunning {
		t.Fatalf("job = %s; want running", got)
	}
	if err := env.Core.DeleteCompute(context.Background(), "lab", "a"); err != nil {
		t.Fatal(err)
	}
	if !env.Gone("lab/a") || len(env.Driver.Nodes()) != 0 {
		t.Fatalf("after delete: record gone %v, driver nodes %v", env.Gone("lab/a"), env.Driver.Nodes())
	}
	if got := env.Job("lab", j.ID).Status; got != api.JobCanceled {
		t.Fatalf("job = %s; want canceled", got)
	}
	_ = computestest.WantError(t, env.Core.DeleteCompute(context.Background(), "lab", "a"), api.CodeNotFound, "")
}

func TestCapacityPreemptsALowPriorityNodeForADedicatedOne(t *testing.T) {
	env := setup(t, computestest.Options{CapacityVCPUs: 4})
	insert(t, env, cluster("low", 1, 1, api.PriorityLowPriority))
	env.Settle()
	low := env.Nodes("lab/low")
	if !slices.Equal(states(low), []string{api.NodeIdle}) {
		t.Fatalf("low priority nodes = %v; want one idle", states(low))
	}
	insert(t, env, cluster("ded", 1, 1, api.PriorityDedicated))
	env.Settle()
	if got := states(env.Nodes("lab/ded")); !slices.Equal(got, []string{api.NodeIdle}) {
		t.Fatalf("dedicated nodes = %v; want one idle", got)
	}
	if got := env.Nodes("lab/low"); len(got) != 1 || got[0].State != api.NodePreempted || got[0].Admitted {
		t.Fatalf("low priority nodes = %+v; want one preempted, waiting for capacity", got)
	}
	if got := env.Driver.CallsTo("Terminate"); len(got) != 1 || got[0] != low[0].ID {
		t.Fatalf("terminates = %v; want the low priority node", got)
	}
}

func TestRecoverAdoptsReleasesAndRestarts(t *testing.T) {
	env := setup(t, computestest.Options{})
	insert(t, env, cluster("a", 0, 2, api.PriorityDedicated))
	ctx := context.Background()
	// What an engine that stopped left: a live node it recorded, a node it recorded that
	// died while it was down, a node it committed but never created, and an orphan.
	live, err := env.Driver.Create(ctx, driver.NodeSpec{Key: "a-live", Owner: "lab/a"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.Driver.Create(ctx, driver.NodeSpec{Key: "orphan", Owner: "lab/gone"}); err != nil {
		t.Fatal(err)
	}
	put := func(n model.Node) {
		if err := env.Store.Update(func(tx *store.Tx) error { return tx.Put(store.Nodes, n.Key(), n) }); err != nil {
			t.Fatal(err)
		}
	}
	put(model.Node{ID: live.Key, Compute: "lab/a", State: api.NodeIdle, Admitted: true, IdleSince: computestest.Start})
	put(model.Node{ID: "a-dead", Compute: "lab/a", State: api.NodeIdle, Admitted: true, IdleSince: computestest.Start})
	put(model.Node{ID: "a-new", Compute: "lab/a", State: api.NodePreparing, Admitted: true, CreatedOn: computestest.Start})
	env.Driver.ResetCalls()
	if err := env.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	env.Settle()
	if got := env.Driver.CallsTo("Terminate"); !slices.Contains(got, "orphan") || slices.Contains(got, live.Key) {
		t.Fatalf("terminates = %v; want the orphan and not the live node", got)
	}
	if got := env.Driver.CallsTo("Create"); !slices.Equal(got, []string{"a-new"}) {
		t.Fatalf("creates = %v; want the committed node created again", got)
	}
	byID := map[string]model.Node{}
	for _, n := range env.Nodes("lab/a") {
		byID[n.ID] = n
	}
	if byID[live.Key].State != api.NodeIdle || byID["a-new"].State != api.NodeIdle {
		t.Fatalf("nodes = %+v; want the live one adopted and the new one up", byID)
	}
	if _, ok := byID["a-dead"]; ok {
		t.Fatalf("the dead node is still recorded: %+v", byID["a-dead"])
	}
	if !env.Core.HasWork() {
		t.Fatal("HasWork = false with nodes up")
	}
}

// Creates that come at once (terraform's parallelism) share commits; each still gets its
// own outcome, and what the quota allows is what is stored, whatever the grouping.
func TestConcurrentInsertsAndDeletesEachGetTheirOwnOutcome(t *testing.T) {
	env := setup(t, computestest.Options{}) // 8 vCPUs: two clusters of one DS3_v2 node
	const callers = 12
	errs := make([]error, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = env.Core.Insert(context.Background(), cluster(fmt.Sprintf("c%02d", i), 0, 1, api.PriorityDedicated), "", "scale_settings.max_node_count")
		}()
	}
	wg.Wait()
	var created []string
	for i, err := range errs {
		name := fmt.Sprintf("c%02d", i)
		switch {
		case err == nil:
			created = append(created, name)
		case api.IsQuotaExceeded(err):
			if !env.Gone("lab/" + name) {
				t.Errorf("%s was refused (%v) but is stored", name, err)
			}
		default:
			t.Errorf("Insert %s: %v", name, err)
		}
	}
	if len(created) != 2 {
		t.Fatalf("created %v; want exactly the two the quota allows", created)
	}
	// Deleting them at once (they have no node) removes them, and frees the quota.
	for _, name := range created {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := env.Core.DeleteCompute(context.Background(), "lab", name); err != nil {
				t.Errorf("DeleteCompute %s: %v", name, err)
			}
		}()
	}
	wg.Wait()
	for _, name := range created {
		if !env.Gone("lab/" + name) {
			t.Errorf("%s is still stored after its delete returned", name)
		}
	}
	insert(t, env, cluster("after", 0, 2, api.PriorityDedicated))
}

// A pass over a compute that is no longer stored tells whoever waits for it to go: a
// delete that committed, then registered to wait after an earlier pass had already
// removed the record, must not wait until its timeout.
func TestAwaitingTheDeletionOfAComputeAlreadyGoneReturns(t *testing.T) {
	env := setup(t, computestest.Options{})
	insert(t, env, cluster("a", 0, 1, api.PriorityDedicated))
	env.Settle()
	if err := env.Store.Update(func(tx *store.Tx) error { return tx.Delete(store.Computes, "lab/a") }); err != nil {
		t.Fatal(err)
	}
	if k, ok := env.Loop.AwaitDeleted(context.Background(), []runtime.Key{runtime.ComputeKey("lab/a")}); !ok {
		t.Fatalf("AwaitDeleted did not return for %v, whose record is gone", k)
	}
}
