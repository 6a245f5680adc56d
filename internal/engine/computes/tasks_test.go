package computes_test

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/computes/computestest"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/fake"
)

// DESIGN 4: MASTER_PORT comes from rank 0's node. Its driver is asked once, before any rank
// starts; a job of several nodes commits the answer first, so every rank, and a restarted
// engine's start, agree on it.
func TestMasterPortComesFromRankZerosNode(t *testing.T) {
	env := setup(t, computestest.Options{})
	insert(t, env, cluster("a", 2, 2, api.PriorityDedicated))
	env.Settle()
	j := env.PutJob("lab/a", "job-00000001", 2)
	env.Core.Kick("lab/a")
	env.Settle()
	got := env.Job("lab", j.ID)
	if got.Status != api.JobRunning || got.MasterPort != fake.FirstTaskPort {
		t.Fatalf("job %s with MASTER_PORT %d; want running on the driver's port %d, stored", got.Status, got.MasterPort, fake.FirstTaskPort)
	}
	if asks := env.Driver.CallsTo(fake.MethodTaskPort); !slices.Equal(asks, []string{got.Nodes[0]}) {
		t.Fatalf("TaskPort calls %v; want one, to rank 0's node %s", asks, got.Nodes[0])
	}
	calls := env.Driver.Calls()
	asked := slices.Index(calls, fake.Call{Method: fake.MethodTaskPort, Key: got.Nodes[0]})
	if first := slices.IndexFunc(calls, func(c fake.Call) bool { return c.Method == fake.MethodStartTask }); first < asked {
		t.Fatalf("calls %v; want the port asked before any rank starts", calls)
	}
	for rank, node := range got.Nodes {
		task, ok := env.Driver.Task(node, got.TaskKey(rank))
		if !ok || task.Spec.Env["MASTER_PORT"] != strconv.Itoa(fake.FirstTaskPort) {
			t.Fatalf("rank %d: task %+v; want MASTER_PORT=%d", rank, task.Spec, fake.FirstTaskPort)
		}
	}
}

// A one-node job takes the driver's answer without a commit; a node that cannot answer
// fails the job's start (on the cluster's other node), and no rank starts.
func TestMasterPortOfOneNodeAndAFailedAsk(t *testing.T) {
	env := setup(t, computestest.Options{})
	insert(t, env, cluster("a", 2, 2, api.PriorityDedicated))
	env.Settle()
	one := env.PutJob("lab/a", "job-00000001", 1)
	env.Core.Kick("lab/a")
	env.Settle()
	got := env.Job("lab", one.ID)
	task, ok := env.Driver.Task(got.Nodes[0], got.TaskKey(0))
	if got.Status != api.JobRunning || got.MasterPort != 0 || !ok || task.Spec.Env["MASTER_PORT"] != strconv.Itoa(fake.FirstTaskPort) {
		t.Fatalf("job %s, stored port %d, task %+v; want running with MASTER_PORT=%d, not stored", got.Status, got.MasterPort, task.Spec, fake.FirstTaskPort)
	}

	env.Driver.FailNext(fake.MethodTaskPort, driver.Transient(errors.New("no route to host")))
	failed := env.PutJob("lab/a", "job-00000002", 1)
	env.Core.Kick("lab/a")
	env.Settle()
	got = env.Job("lab", failed.ID)
	if got.Status != api.JobFailed || !strings.Contains(got.Error, "MASTER_PORT") {
		t.Fatalf("job %s (%q); want failed, asking for MASTER_PORT", got.Status, got.Error)
	}
	if starts := env.Driver.CallsTo(fake.MethodStartTask); slices.ContainsFunc(starts, func(k string) bool { return strings.HasSuffix(k, "/"+failed.TaskKey(0)) }) {
		t.Fatalf("starts %v; want none of the failed job", starts)
	}
}
