package engine

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/fake"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/runtime"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
)

// rig is an engine with a running controller over a fake driver and a fake clock.
type rig struct {
	t      *testing.T
	e      *Engine
	st     *store.Store
	drv    *fake.Driver
	clk    *clocktesting.FakeClock
	cancel context.CancelFunc
	path   string
	// capacity is the engine's vCPU capacity (0: unlimited).
	capacity int64
	// async runs the engine's own loop (for tests of real transports); the default is a
	// manual engine that the test drives with settle.
	async bool
	// configure, when set, adjusts the engine before it starts (at every start).
	configure func(*Config, *Engine)
}

func newRig(t *testing.T) *rig { return newRigWithCapacity(t, 0) }

func newRigWithCapacity(t *testing.T, capacity int64) *rig {
	t.Helper()
	return newRigWithDriver(t, capacity, fake.Options{})
}

func newRigWithDriver(t *testing.T, capacity int64, opts fake.Options) *rig {
	t.Helper()
	path := filepath.Join(t.TempDir(), "state.db")
	clk := clocktesting.NewFakeClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	r := &rig{t: t, clk: clk, drv: fake.NewWithOptions(clk, opts), path: path, capacity: capacity}
	r.start()
	t.Cleanup(func() { r.stop() })
	return r
}

func (r *rig) start() {
	r.t.Helper()
	st, err := store.Open(r.path, time.Second)
	if err != nil {
		r.t.Fatal(err)
	}
	cfg := Config{Store: st, Clock: r.clk, Driver: r.drv, DataDir: filepath.Dir(r.path), CapacityVCPUs: r.capacity, Manual: !r.async}
	if r.configure != nil {
		r.configure(&cfg, nil)
	}
	e, err := New(cfg)
	if err != nil {
		r.t.Fatal(err)
	}
	if r.configure != nil {
		r.configure(&cfg, e)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := e.Start(ctx); err != nil {
		r.t.Fatal(err)
	}
	r.e, r.st, r.cancel = e, st, cancel
}

// stop ends the controller as a crash would: nothing is cleaned up.
func (r *rig) stop() {
	if r.cancel == nil {
		return
	}
	r.cancel()
	r.e.loop.Stop()
	r.st.Close()
	r.cancel = nil
}

// settlesTo settles the engine (runs every piece of pending work; see package runtime)
// and checks that it reached a state. No sleep, no poll: the manual engine has done all it
// will do until the clock moves or the test acts.
func (r *rig) settlesTo(what string, cond func() bool) {
	r.t.Helper()
	r.settle()
	if !cond() {
		r.t.Fatalf("not reached once the engine settled: %s", what)
	}
}

// eventuallyWithin is for waits on real transports (the ssh driver's machines), whose events
// arrive in real time: it settles and polls until cond holds or limit passes.
func (r *rig) eventuallyWithin(limit time.Duration, what string, cond func() bool) {
	r.t.Helper()
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		r.settle()
		if cond() {
			return
		}
	}
	r.t.Fatalf("never reached: %s", what)
}

// settle runs the manual engine's pending work until none is left.
func (r *rig) settle() {
	r.t.Helper()
	if r.async {
		r.t.Fatal("settle needs a manual engine")
	}
	if err := r.e.Settle(context.Background()); err != nil {
		r.t.Fatal(err)
	}
}

func (r *rig) workspace(name string, quotas map[string]int64) {
	r.t.Helper()
	if _, err := r.e.CreateWorkspace(context.Background(), api.WorkspaceSpec{Name: name, Quotas: quotas}, ""); err != nil {
		r.t.Fatal(err)
	}
}

func (r *rig) cluster(ws, name string, min, max int64, idle string) {
	r.t.Helper()
	_, err := r.e.CreateCompute(context.Background(), ws, api.ComputeSpec{
		Name: name, VMSize: "Standard_DS3_v2",
		ScaleSettings: &api.ScaleSettings{MinNodeCount: min, MaxNodeCount: max, ScaleDownNodesAfterIdleDuration: idle},
	}, "")
	if err != nil {
		r.t.Fatal(err)
	}
}

func (r *rig) compute(ws, name string) *api.Compute {
	r.t.Helper()
	c, err := r.e.GetCompute(context.Background(), ws, name)
	if err != nil {
		r.t.Fatal(err)
	}
	return c
}

func (r *rig) submit(ws, compute string, count int64) *api.Job {
	r.t.Helper()
	j, err := r.e.SubmitJob(context.Background(), ws, api.JobSpec{Compute: compute, InstanceCount: count, Command: []string{"train"}}, "")
	if err != nil {
		r.t.Fatal(err)
	}
	return j
}

func (r *rig) job(ws, id string) *api.Job {
	r.t.Helper()
	j, err := r.e.GetJob(context.Background(), ws, id)
	if err != nil {
		r.t.Fatal(err)
	}
	return j
}

func (r *rig) status(ws, id, want string) func() bool {
	return func() bool { return r.job(ws, id).Status == want }
}

func countState(c *api.Compute, state string) int {
	n := 0
	for _, node := range c.Nodes {
		if node.State == state {
			n++
		}
	}
	return n
}

func TestJobScalesClusterFromZeroAndBackDownAfterIdle(t *testing.T) {
	r := newRig(t)
	r.workspace("lab", nil)
	r.cluster("lab", "cpu", 0, 2, "PT120S")
	r.settle()
	if n := len(r.drv.Nodes()); n != 0 {
		t.Fatalf("%d nodes before any work; min is 0", n)
	}

	j := r.submit("lab", "cpu", 1)
	r.settlesTo("job running on one node", r.status("lab", j.ID, api.JobRunning))
	if n := len(r.drv.Nodes()); n != 1 {
		t.Fatalf("%d nodes for a one-node job", n)
	}
	got := r.job("lab", j.ID)
	task, ok := r.drv.Task(got.Nodes[0], r.task("lab", got.ID, 0))
	if !ok || task.Spec.Env["RANK"] != "0" || task.Spec.Env["WORLD_SIZE"] != "1" || task.Spec.Env["MASTER_PORT"] == "" {
		t.Fatalf("task %+v; want RANK 0, WORLD_SIZE 1 and a MASTER_PORT", task.Spec)
	}

	r.drv.FinishTask(got.Nodes[0], r.task("lab", got.ID, 0), 0)
	r.settlesTo("job completed", r.status("lab", j.ID, api.JobCompleted))
	if code := r.job("lab", j.ID).ExitCode; code == nil || *code != 0 {
		t.Fatalf("exit code %v; want 0", code)
	}
	r.settlesTo("node idle", func() bool { return countState(r.compute("lab", "cpu"), api.NodeIdle) == 1 })

	r.clk.Step(119 * time.Second)
	r.settle()
	if n := len(r.drv.Nodes()); n != 1 {
		t.Fatal("node released before its idle deadline")
	}
	r.clk.Step(time.Second)
	r.settlesTo("idle node released at its deadline", func() bool { return len(r.drv.Nodes()) == 0 })
	r.settlesTo("node record gone", func() bool {
		return r.compute("lab", "cpu").CurrentNodeCount == 0 && len(r.compute("lab", "cpu").Nodes) == 0
	})
}

func TestMinNodesKeptAndDeadNodeReplaced(t *testing.T) {
	r := newRig(t)
	r.workspace("lab", nil)
	r.cluster("lab", "cpu", 2, 4, "PT0S")
	r.settlesTo("two idle nodes", func() bool { return countState(r.compute("lab", "cpu"), api.NodeIdle) == 2 })

	// Idle past the deadline does not take a cluster below its minimum.
	r.clk.Step(time.Hour)
	r.settle()
	if n := len(r.drv.Nodes()); n != 2 {
		t.Fatalf("%d nodes after an idle hour; min is 2", n)
	}

	dead := r.drv.Nodes()[0]
	r.drv.KillNode(dead)
	r.settlesTo("dead node replaced", func() bool {
		nodes := r.drv.Nodes()
		return len(nodes) == 2 && !slices.Contains(nodes, dead) && countState(r.compute("lab", "cpu"), api.NodeIdle) == 2
	})
}

func TestMaxNeverExceededAndQueuedWorkWaits(t *testing.T) {
	r := newRig(t)
	r.workspace("lab", nil)
	r.cluster("lab", "cpu", 0, 2, "PT120S")
	jobs := []*api.Job{r.submit("lab", "cpu", 1), r.submit("lab", "cpu", 1), r.submit("lab", "cpu", 1)}
	r.settlesTo("two jobs running", func() bool {
		return r.job("lab", jobs[0].ID).Status == api.JobRunning && r.job("lab", jobs[1].ID).Status == api.JobRunning
	})
	r.settle()
	if n := len(r.drv.CallsTo("Create")); n != 2 {
		t.Fatalf("%d nodes created for max 2", n)
	}
	if s := r.job("lab", jobs[2].ID).Status; s != api.JobQueued {
		t.Fatalf("third job %s; want Queued while both nodes are busy", s)
	}
	first := r.job("lab", jobs[0].ID)
	r.drv.FinishTask(first.Nodes[0], r.task("lab", first.ID, 0), 0)
	r.settlesTo("third job runs on the freed node", r.status("lab", jobs[2].ID, api.JobRunning))
	if n := len(r.drv.CallsTo("Create")); n != 2 {
		t.Fatalf("%d nodes created; the freed node should have been reused", n)
	}
}

func TestLoweringMaxDrainsBusyNodes(t *testing.T) {
	r := newRig(t)
	r.workspace("lab", nil)
	r.cluster("lab", "cpu", 0, 2, "PT120S")
	a, b := r.submit("lab", "cpu", 1), r.submit("lab", "cpu", 1)
	r.settlesTo("both running", func() bool {
		return r.job("lab", a.ID).Status == api.JobRunning && r.job("lab", b.ID).Status == api.JobRunning
	})
	_, err := r.e.UpdateCompute(context.Background(), "lab", "cpu", api.ComputeUpdate{ScaleSettings: &api.ScaleSettings{MaxNodeCount: 1}})
	if err != nil {
		t.Fatal(err)
	}
	r.settlesTo("one node leaving", func() bool { return countState(r.compute("lab", "cpu"), api.NodeLeaving) == 1 })
	if n := len(r.drv.Nodes()); n != 2 {
		t.Fatalf("a busy node was released before its job ended (%d nodes)", n)
	}
	c := r.compute("lab", "cpu")
	var leaving api.Node
	for _, n := range c.Nodes {
		if n.State == api.NodeLeaving {
			leaving = n
		}
	}
	job := r.job("lab", leaving.JobID)
	r.drv.FinishTask(leaving.ID, r.task("lab", job.ID, 0), 0)
	r.settlesTo("drained node released after its job", func() bool { return len(r.drv.Nodes()) == 1 })
	if s := r.job("lab", job.ID).Status; s != api.JobCompleted {
		t.Fatalf("drained job %s; want Completed", s)
	}
}

func TestDeleteComputeCancelsJobsAndReleasesEveryNode(t *testing.T) {
	r := newRig(t)
	r.workspace("lab", nil)
	r.cluster("lab", "cpu", 1, 3, "PT120S")
	running := r.submit("lab", "cpu", 2)
	r.settlesTo("job running", r.status("lab", running.ID, api.JobRunning))
	queued := r.submit("lab", "cpu", 3)

	if err := r.e.DeleteCompute(context.Background(), "lab", "cpu"); err != nil {
		t.Fatal(err)
	}
	// DeleteCompute returned, so every node must already be confirmed gone.
	if n := len(r.drv.Nodes()); n != 0 {
		t.Fatalf("%d nodes left after delete returned", n)
	}
	for _, id := range []string{running.ID, queued.ID} {
		if s := r.job("lab", id).Status; s != api.JobCanceled {
			t.Errorf("job %s is %s; want Canceled", id, s)
		}
	}
	if _, err := r.e.GetCompute(context.Background(), "lab", "cpu"); !api.IsNotFound(err) {
		t.Fatalf("compute still there: %v", err)
	}
}

func TestSubmitRefusesMoreNodesThanMax(t *testing.T) {
	r := newRig(t)
	r.workspace("lab", nil)
	r.cluster("lab", "cpu", 0, 2, "PT120S")
	_, err := r.e.SubmitJob(context.Background(), "lab", api.JobSpec{Compute: "cpu", InstanceCount: 3, Command: []string{"x"}}, "")
	if !api.IsInvalid(err) || api.FieldOf(err) != "instance_count" || !strings.Contains(err.Error(), "max_node_count 2") {
		t.Fatalf("err = %v; want invalid instance_count naming max_node_count 2", err)
	}
	if _, err := r.e.SubmitJob(context.Background(), "lab", api.JobSpec{Compute: "nope", Command: []string{"x"}}, ""); !api.IsNotFound(err) {
		t.Fatalf("unknown compute: %v", err)
	}
}

func TestMultiNodeJobRanksAndFailure(t *testing.T) {
	r := newRig(t)
	r.workspace("lab", nil)
	r.cluster("lab", "cpu", 0, 3, "PT120S")
	j := r.submit("lab", "cpu", 3)
	r.settlesTo("running on 3 nodes", r.status("lab", j.ID, api.JobRunning))
	got := r.job("lab", j.ID)
	if len(got.Nodes) != 3 {
		t.Fatalf("nodes %v", got.Nodes)
	}
	port := ""
	for rank, node := range got.Nodes {
		task, ok := r.drv.Task(node, r.task("lab", got.ID, rank))
		if !ok {
			t.Fatalf("rank %d not started", rank)
		}
		env := task.Spec.Env
		if env["RANK"] != strconv.Itoa(rank) || env["NODE_RANK"] != strconv.Itoa(rank) || env["WORLD_SIZE"] != "3" || env["MASTER_ADDR"] == "" {
			t.Errorf("rank %d env %v", rank, env)
		}
		if port != "" && env["MASTER_PORT"] != port {
			t.Errorf("ranks disagree on MASTER_PORT: %s vs %s", env["MASTER_PORT"], port)
		}
		port = env["MASTER_PORT"]
	}
	// One rank failing fails the job with its exit code and kills the other ranks.
	r.drv.FinishTask(got.Nodes[1], r.task("lab", got.ID, 1), 3)
	r.settlesTo("job failed", r.status("lab", j.ID, api.JobFailed))
	if code := r.job("lab", j.ID).ExitCode; code == nil || *code != 3 {
		t.Fatalf("exit code %v; want 3", code)
	}
	r.settlesTo("other ranks killed", func() bool { return len(r.drv.RunningTasks()) == 0 })
}

func TestCancelQueuedAndRunningJobs(t *testing.T) {
	r := newRig(t)
	r.workspace("lab", nil)
	r.cluster("lab", "cpu", 0, 1, "PT120S")
	a, b := r.submit("lab", "cpu", 1), r.submit("lab", "cpu", 1)
	r.settlesTo("first running", r.status("lab", a.ID, api.JobRunning))
	if j, err := r.e.CancelJob(context.Background(), "lab", b.ID); err != nil || j.Status != api.JobCanceled {
		t.Fatalf("cancel queued: %+v, %v", j, err)
	}
	if j, err := r.e.CancelJob(context.Background(), "lab", a.ID); err != nil || j.Status != api.JobCanceled {
		t.Fatalf("cancel running: %+v, %v", j, err)
	}
	r.settlesTo("task killed and node idle", func() bool {
		return len(r.drv.RunningTasks()) == 0 && countState(r.compute("lab", "cpu"), api.NodeIdle) == 1
	})
	if s := r.job("lab", a.ID).Status; s != api.JobCanceled {
		t.Fatalf("a canceled job became %s when its task exited", s)
	}
}

// TestRestartAdoptsNodesAndFinishesJobs: the engine dies while a job runs and the job
// ends while it is down. The restarted engine adopts the node, records the job's true exit
// code, and releases a node it has no record of.
func TestRestartAdoptsNodesAndFinishesJobs(t *testing.T) {
	r := newRig(t)
	r.workspace("lab", nil)
	r.cluster("lab", "cpu", 0, 2, "PT120S")
	j := r.submit("lab", "cpu", 1)
	r.settlesTo("job running", r.status("lab", j.ID, api.JobRunning))
	node := r.job("lab", j.ID).Nodes[0]
	task := r.task("lab", j.ID, 0)

	r.stop()
	r.drv.FinishTask(node, task, 7) // ends while no engine watches
	r.drv.Reopen()
	if _, err := r.drv.Create(context.Background(), fakeSpec("orphan-1", "lab/cpu")); err != nil {
		t.Fatal(err)
	}
	r.start()

	r.settlesTo("job finished with its true exit code", r.status("lab", j.ID, api.JobFailed))
	if code := r.job("lab", j.ID).ExitCode; code == nil || *code != 7 {
		t.Fatalf("exit code %v; want 7", code)
	}
	r.settlesTo("orphan released, adopted node kept", func() bool {
		nodes := r.drv.Nodes()
		return len(nodes) == 1 && nodes[0] == node
	})
	if n := len(r.drv.CallsTo("Create")); n != 2 { // the first node and the orphan, none by the engine after restart
		t.Fatalf("Create called %d times; the adopted node should not be recreated", n)
	}
}

func TestQuotaPerFamily(t *testing.T) {
	r := newRig(t)
	r.workspace("lab", map[string]int64{"standardDSv2Family": 8})
	// Standard_DS3_v2 has 4 vCPUs: max 2 fits a quota of 8 exactly.
	r.cluster("lab", "aaa", 0, 2, "")
	_, err := r.e.CreateCompute(context.Background(), "lab", api.ComputeSpec{Name: "bbb", VMSize: "Standard_DS3_v2", ScaleSettings: &api.ScaleSettings{MaxNodeCount: 1}}, "")
	if !api.IsQuotaExceeded(err) || !strings.Contains(err.Error(), "standardDSv2Family") || api.FieldOf(err) != "scale_settings.max_node_count" {
		t.Fatalf("second cluster: %v; want quota_exceeded naming the family", err)
	}
	_, err = r.e.UpdateCompute(context.Background(), "lab", "aaa", api.ComputeUpdate{ScaleSettings: &api.ScaleSettings{MaxNodeCount: 3}})
	if !api.IsQuotaExceeded(err) {
		t.Fatalf("scale-up past quota: %v", err)
	}
	// A family that requires approval has no quota until one is set.
	_, err = r.e.CreateCompute(context.Background(), "lab", api.ComputeSpec{Name: "gpu", VMSize: "Standard_NC6s_v3", ScaleSettings: &api.ScaleSettings{MaxNodeCount: 1}}, "")
	if !api.IsQuotaExceeded(err) || !strings.Contains(err.Error(), "requires approval") {
		t.Fatalf("GPU cluster without quota: %v", err)
	}
}

func TestForceDeleteWorkspaceReleasesNodes(t *testing.T) {
	r := newRig(t)
	r.workspace("lab", nil)
	r.cluster("lab", "cpu", 1, 2, "")
	r.settlesTo("min node up", func() bool { return len(r.drv.Nodes()) == 1 })
	err := r.e.DeleteWorkspace(context.Background(), "lab", false)
	if !api.IsConflict(err) || !strings.Contains(err.Error(), "/workspaces/lab/computes/cpu") {
		t.Fatalf("delete without force: %v", err)
	}
	if err := r.e.DeleteWorkspace(context.Background(), "lab", true); err != nil {
		t.Fatal(err)
	}
	if n := len(r.drv.Nodes()); n != 0 {
		t.Fatalf("%d nodes left after a forced workspace delete", n)
	}
	if r.e.HasWork() {
		t.Fatal("engine reports work after everything was deleted")
	}
}

// task is the driver key of a rank of a job's current attempt, as the engine stores it.
func (r *rig) task(ws, jobID string, rank int) string {
	r.t.Helper()
	var key string
	_ = r.st.View(func(tx *store.Tx) error {
		j, _ := model.GetJob(tx, ws, jobID)
		key = j.TaskKey(rank)
		return nil
	})
	return key
}

func fakeSpec(key, owner string) driver.NodeSpec {
	return driver.NodeSpec{Key: key, Owner: owner, VMSize: "Standard_DS3_v2", VCPUs: 4}
}

func (r *rig) clusterWith(ws, name string, priority string, min, max int64, idle string) {
	r.t.Helper()
	_, err := r.e.CreateCompute(context.Background(), ws, api.ComputeSpec{
		Name: name, VMSize: "Standard_DS3_v2", VMPriority: priority,
		ScaleSettings: &api.ScaleSettings{MinNodeCount: min, MaxNodeCount: max, ScaleDownNodesAfterIdleDuration: idle},
	}, "")
	if err != nil {
		r.t.Fatal(err)
	}
}

// TestNodesBeyondCapacityWaitInPreparing: with 8 vCPUs of capacity, a cluster of 4-vCPU
// nodes asking for 3 gets 2; the third waits in preparing until capacity frees up.
func TestNodesBeyondCapacityWaitInPreparing(t *testing.T) {
	r := newRigWithCapacity(t, 8)
	r.workspace("lab", nil)
	r.cluster("lab", "first", 1, 1, "")
	r.settlesTo("first cluster's node up", func() bool { return countState(r.compute("lab", "first"), api.NodeIdle) == 1 })
	r.cluster("lab", "second", 2, 2, "")
	r.settlesTo("one node up, one waiting", func() bool {
		c := r.compute("lab", "second")
		return countState(c, api.NodeIdle) == 1 && countState(c, api.NodePreparing) == 1
	})
	r.settle()
	if n := len(r.drv.Nodes()); n != 2 {
		t.Fatalf("%d driver nodes with capacity for 2", n)
	}
	if err := r.e.DeleteCompute(context.Background(), "lab", "first"); err != nil {
		t.Fatal(err)
	}
	r.settlesTo("waiting node admitted once capacity freed", func() bool { return countState(r.compute("lab", "second"), api.NodeIdle) == 2 })
}

// TestDedicatedPreemptsLowPriority: a LowPriority 2-node job fills the capacity; a job on a
// Dedicated cluster preempts one of its nodes. The LowPriority job goes back to the queue,
// runs again (a new attempt) once the Dedicated work is done and its node released, and
// exits of the killed attempt never count for the new one.
func TestDedicatedPreemptsLowPriority(t *testing.T) {
	r := newRigWithCapacity(t, 8)
	r.workspace("lab", nil)
	r.clusterWith("lab", "spot", api.PriorityLowPriority, 0, 2, "PT120S")
	r.clusterWith("lab", "prod", api.PriorityDedicated, 0, 1, "PT0S")
	spotJob := r.submit("lab", "spot", 2)
	r.settlesTo("spot job running", r.status("lab", spotJob.ID, api.JobRunning))
	oldTask := r.task("lab", spotJob.ID, 0)
	oldNodes := r.job("lab", spotJob.ID).Nodes

	prodJob := r.submit("lab", "prod", 1)
	r.settlesTo("prod job running", r.status("lab", prodJob.ID, api.JobRunning))
	spot := r.compute("lab", "spot")
	if spot.NodeStateCounts.Preempted != 1 {
		t.Fatalf("spot cluster %+v; want one preempted node", spot.NodeStateCounts)
	}
	if got := r.job("lab", spotJob.ID); got.Status != api.JobQueued {
		t.Fatalf("spot job %s after preemption; want Queued", got.Status)
	}
	// The killed attempt's rank exits; it must not finish the requeued job.
	r.drv.FinishTask(oldNodes[0], oldTask, 137)
	r.settle()
	if got := r.job("lab", spotJob.ID); got.Status != api.JobQueued {
		t.Fatalf("an exit of the preempted attempt changed the job to %s", got.Status)
	}

	prod := r.job("lab", prodJob.ID)
	r.drv.FinishTask(prod.Nodes[0], r.task("lab", prodJob.ID, 0), 0)
	r.settlesTo("spot job running again", r.status("lab", spotJob.ID, api.JobRunning))
	if newTask := r.task("lab", spotJob.ID, 0); newTask == oldTask {
		t.Fatalf("the new attempt reuses the task key %s", newTask)
	}
	got := r.job("lab", spotJob.ID)
	for rank, node := range got.Nodes {
		r.drv.FinishTask(node, r.task("lab", spotJob.ID, rank), 0)
	}
	r.settlesTo("spot job completed", r.status("lab", spotJob.ID, api.JobCompleted))
}

// TestFailedReleaseIsRetried: a Terminate that fails leaves the node marked released, and
// the controller tries again until the driver confirms it gone: nothing leaks.
func TestFailedReleaseIsRetried(t *testing.T) {
	r := newRig(t)
	r.workspace("lab", nil)
	r.cluster("lab", "cpu", 0, 1, "PT0S")
	j := r.submit("lab", "cpu", 1)
	r.settlesTo("job running", r.status("lab", j.ID, api.JobRunning))
	r.drv.FailNext("Terminate", errors.New("connection reset"))
	got := r.job("lab", j.ID)
	r.drv.FinishTask(got.Nodes[0], r.task("lab", j.ID, 0), 0)
	r.settlesTo("first terminate attempted", func() bool { return len(r.drv.CallsTo("Terminate")) >= 1 })
	r.clk.Step(runtime.RetryAfter)
	r.settlesTo("node released on retry", func() bool {
		return len(r.drv.Nodes()) == 0 && len(r.compute("lab", "cpu").Nodes) == 0
	})
}

// TestFailedPreemptionIsRetried: a preempted node whose Terminate fails keeps holding its
// capacity until a retry confirms it gone; then the Dedicated node gets the capacity.
func TestFailedPreemptionIsRetried(t *testing.T) {
	r := newRigWithCapacity(t, 4)
	r.workspace("lab", nil)
	r.clusterWith("lab", "spot", api.PriorityLowPriority, 1, 1, "PT120S")
	r.settlesTo("spot node up", func() bool { return countState(r.compute("lab", "spot"), api.NodeIdle) == 1 })
	r.clusterWith("lab", "prod", api.PriorityDedicated, 0, 1, "PT120S")
	r.drv.FailNext("Terminate", errors.New("connection reset"))
	j := r.submit("lab", "prod", 1)
	r.settlesTo("first terminate attempted", func() bool { return len(r.drv.CallsTo("Terminate")) >= 1 })
	r.settle()
	if s := r.job("lab", j.ID).Status; s != api.JobQueued {
		t.Fatalf("prod job %s while the preempted node still holds the capacity; want Queued", s)
	}
	r.clk.Step(runtime.RetryAfter)
	r.settlesTo("prod job running after the retry", r.status("lab", j.ID, api.JobRunning))
	if c := r.compute("lab", "spot"); c.NodeStateCounts.Preempted != 1 {
		t.Fatalf("spot counts %+v; want one preempted node", c.NodeStateCounts)
	}
}

// A driver's Create may return before the node is usable (a queued allocation): the node
// stays preparing with the driver's reason, gets no job, and becomes idle on NodeReady.
func TestNodeCreatedNotReadyWaitsForNodeReady(t *testing.T) {
	r := newRigWithDriver(t, 0, fake.Options{CreatePending: true})
	r.workspace("lab", nil)
	r.cluster("lab", "cpu", 0, 2, "PT120S")
	j := r.submit("lab", "cpu", 1)
	r.settle()
	c := r.compute("lab", "cpu")
	if len(c.Nodes) != 1 || c.Nodes[0].State != api.NodePreparing || c.Nodes[0].Reason == "" {
		t.Fatalf("nodes %+v; want one preparing node with the driver's reason", c.Nodes)
	}
	if got := r.job("lab", j.ID).Status; got != api.JobQueued {
		t.Fatalf("job %s on a node that is not ready; want Queued", got)
	}
	r.drv.MakeReady(c.Nodes[0].ID)
	r.settlesTo("job running once the node is ready", r.status("lab", j.ID, api.JobRunning))
	if n := r.compute("lab", "cpu").Nodes[0]; n.Reason != "" {
		t.Fatalf("a ready node still shows reason %q", n.Reason)
	}
}

// A compute that cannot get nodes says so in its errors, and its queued job says why it
// waits; a node that starts clears the errors.
func TestFailuresShowOnTheComputeAndTheQueuedJob(t *testing.T) {
	r := newRig(t)
	r.workspace("lab", nil)
	r.cluster("lab", "cpu", 0, 2, "PT120S")
	r.drv.FailNext(fake.MethodCreate, driver.Transient(errors.New("mkdir /nodes/x: permission denied")))
	j := r.submit("lab", "cpu", 1)
	r.settle()
	c := r.compute("lab", "cpu")
	if len(c.Errors) != 1 || c.Errors[0].Code != api.ErrorNodeStartRetrying || !strings.Contains(c.Errors[0].Message, "permission denied") {
		t.Fatalf("errors %+v; want one NodeStartRetrying naming the cause", c.Errors)
	}
	if got := r.job("lab", j.ID); got.Status != api.JobQueued || !strings.Contains(got.Reason, "permission denied") {
		t.Fatalf("job %s with reason %q; want Queued with the compute's error as its reason", got.Status, got.Reason)
	}
	// The retry after the back-off gets a node: the errors clear and the job runs.
	r.clk.Step(runtime.RetryAfter)
	r.settlesTo("job running after the retry", r.status("lab", j.ID, api.JobRunning))
	if c := r.compute("lab", "cpu"); len(c.Errors) != 0 {
		t.Fatalf("errors %+v after a node started; want none", c.Errors)
	}
	if got := r.job("lab", j.ID); got.Reason != "" {
		t.Fatalf("a running job has reason %q", got.Reason)
	}
}

// A cluster manager that refuses a node (a setting to fix) is not asked again every few
// seconds: the retry waits at least a minute, and longer after each refusal in a row; an
// update of the compute tries again at once.
func TestRefusedNodesBackOff(t *testing.T) {
	r := newRig(t)
	r.workspace("lab", nil)
	r.cluster("lab", "cpu", 1, 2, "PT120S")
	refuse := func() {
		r.drv.FailNext(fake.MethodCreate, driver.Permanent(errors.New("sbatch: error: invalid partition specified")))
	}
	creates := func() int { return len(r.drv.CallsTo(fake.MethodCreate)) }
	refuse()
	r.settle()
	if n := creates(); n != 1 {
		t.Fatalf("%d creates; want 1", n)
	}
	if errs := r.compute("lab", "cpu").Errors; len(errs) != 1 || errs[0].Code != api.ErrorNodeStartFailed || !strings.Contains(errs[0].Message, "invalid partition") {
		t.Fatalf("errors %+v; want the refusal as NodeStartFailed", errs)
	}
	refuse()
	r.clk.Step(59 * time.Second)
	r.settle()
	if n := creates(); n != 1 {
		t.Fatalf("%d creates 59 s after a refusal; want no retry before a minute", n)
	}
	r.clk.Step(time.Second)
	r.settle()
	if n := creates(); n != 2 {
		t.Fatalf("%d creates a minute after a refusal; want the retry", n)
	}
	// The second refusal in a row doubles the wait.
	r.clk.Step(119 * time.Second)
	r.settle()
	if n := creates(); n != 2 {
		t.Fatalf("%d creates 119 s after the second refusal; want no retry before 2 minutes", n)
	}
	// An update of the compute (the user fixed something) tries again at once.
	if _, err := r.e.UpdateCompute(context.Background(), "lab", "cpu", api.ComputeUpdate{Description: "fixed", ScaleSettings: &api.ScaleSettings{MinNodeCount: 1, MaxNodeCount: 2}}); err != nil {
		t.Fatal(err)
	}
	r.settlesTo("a node after the update", func() bool { return r.compute("lab", "cpu").CurrentNodeCount == 1 })
}
