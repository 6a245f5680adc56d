//go:build unix

package slurm

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/slurm/slurmtest"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/envprep"
)

// waitLimit bounds each wait of the tests. A job starts within a second or two, but after a
// controller restart or a killed slurmd a loaded machine has seen one wait over 30 s: the
// bound is for a test that hangs, not a measure.
const waitLimit = 90 * time.Second

// newTestDriver returns a driver of a fresh engine id on the cluster SLURM_CONF names, with
// its workdir in a temporary directory; closed when t ends.
func newTestDriver(t *testing.T, cfg Config) *Driver {
	t.Helper()
	if cfg.EngineID == "" {
		cfg.EngineID = NewEngineID()
	}
	if cfg.Workdir == "" {
		cfg.Workdir = t.TempDir()
	}
	if cfg.Resources == "" {
		cfg.Resources = ResourcesGPUs // the test cluster's nodes have 1 CPU and 500 MB
	}
	if testing.Verbose() {
		cfg.Logger = hclog.New(&hclog.LoggerOptions{Level: hclog.Debug, Output: testWriter{t}})
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	d, err := New(ctx, cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}

// waitEvent returns the first event of d that match accepts, failing after waitLimit.
func waitEvent(t *testing.T, d *Driver, what string, match func(driver.Event) bool) driver.Event {
	t.Helper()
	timer := time.NewTimer(waitLimit)
	defer timer.Stop()
	var others []string // what came instead, for the failure's message
	for {
		select {
		case ev := <-d.Events():
			if match(ev) {
				return ev
			}
			others = append(others, fmt.Sprintf("%s %s %q", ev.Kind, ev.NodeKey, ev.Reason))
		case <-timer.C:
			queue, err := d.command(context.Background(), "squeue", "-h", "-o", "%i %j %T %r %N")
			t.Fatalf("no %s within %s; other events: %v; squeue (id name state reason nodes): %s %v", what, waitLimit, others, queue, err)
		}
	}
}

// createReady creates the node of spec and returns once it is ready: at once when Create
// says so (a job Slurm started before Create looked again, common on a busy machine: no
// NodeReady follows then), else at its NodeReady. The node is released when t ends, so a
// failure does not leave its job to the tests after this one.
func createReady(t *testing.T, d *Driver, spec driver.NodeSpec) {
	t.Helper()
	info, err := d.Create(ctxT(t), spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		_ = d.Terminate(ctx, spec.Key)
	})
	if !info.Ready {
		waitEvent(t, d, "NodeReady of "+spec.Key, isEvent(driver.NodeReady, spec.Key))
	}
}

func isEvent(kind driver.EventKind, key string) func(driver.Event) bool {
	return func(ev driver.Event) bool { return ev.Kind == kind && ev.NodeKey == key }
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*waitLimit)
	t.Cleanup(cancel)
	return ctx
}

// TestSlurm runs the driver's own scenarios on one cluster, one subtest each.
func TestSlurm(t *testing.T) {
	c := slurmtest.Start(t)
	t.Run("LatencyOfCreateAndRelease", func(t *testing.T) { testLatency(t, c) })
	t.Run("RefusedSubmissionIsPermanent", func(t *testing.T) { testRefused(t, c) })
	t.Run("StartTimeoutCancelsTheJob", func(t *testing.T) { testStartTimeout(t, c) })
	t.Run("RestartAdoptsNodesAndTasks", func(t *testing.T) { testRestart(t, c) })
	t.Run("ControllerRestartKeepsNodes", func(t *testing.T) { testControllerRestart(t, c) })
	t.Run("KilledSlurmdIsNodeGone", func(t *testing.T) { testKilledSlurmd(t, c) })
	t.Run("ScancelUnderATaskIsNodeGone", func(t *testing.T) { testScancelUnderATask(t, c) })
	t.Run("CyclesLeaveNoJobs", func(t *testing.T) { testCycles(t, c) })
}

// testLatency measures Create to NodeReady and Terminate to the job gone from squeue, on
// jobs that start at once, and checks the address is the node's host name.
func testLatency(t *testing.T, c *slurmtest.Cluster) {
	d := newTestDriver(t, Config{})
	ctx := ctxT(t)
	var ready, release []time.Duration
	for i := range 3 {
		key := fmt.Sprintf("lat%d", i)
		start := time.Now()
		info, err := d.Create(ctx, driver.NodeSpec{Key: key, Owner: "ws/c"})
		if err != nil {
			t.Fatal(err)
		}
		if !info.Ready {
			waitEvent(t, d, "NodeReady of "+key, isEvent(driver.NodeReady, key))
		}
		ready = append(ready, time.Since(start))
		info, err = d.Describe(ctx, key)
		if err != nil || !info.Ready || info.Address != "localhost" {
			t.Fatalf("Describe(%s) of a running node: %+v, %v; want ready at localhost (NodeHostname)", key, info, err)
		}
		start = time.Now()
		if err := d.Terminate(ctx, key); err != nil {
			t.Fatal(err)
		}
		release = append(release, time.Since(start))
		if jobs := c.Jobs(); len(jobs) > 0 {
			t.Fatalf("after Terminate squeue still shows %v", jobs)
		}
	}
	t.Logf("Create to NodeReady: %v; Terminate until gone from squeue: %v", ready, release)
}

// testRefused: a partition that does not exist is a permanent error carrying Slurm's
// message, and no job is left.
func testRefused(t *testing.T, c *slurmtest.Cluster) {
	d := newTestDriver(t, Config{Partition: "nosuchpartition"})
	_, err := d.Create(ctxT(t), driver.NodeSpec{Key: "refused", Owner: "ws/c"})
	if !driver.IsPermanent(err) || !strings.Contains(err.Error(), "Invalid partition") {
		t.Fatalf("Create on a bad partition: %v; want a permanent error with sbatch's message", err)
	}
	if jobs := c.Jobs(); len(jobs) > 0 {
		t.Fatalf("squeue shows %v", jobs)
	}
}

// testStartTimeout: a job still pending at the start timeout is cancelled and NodeGone.
func testStartTimeout(t *testing.T, c *slurmtest.Cluster) {
	d := newTestDriver(t, Config{SbatchArgs: []string{"--hold"}, StartTimeout: 2 * time.Second})
	info, err := d.Create(ctxT(t), driver.NodeSpec{Key: "late", Owner: "ws/c"})
	if err != nil || info.Ready || info.Reason != "JobHeldUser" {
		t.Fatalf("Create of a held job: %+v, %v; want pending with reason JobHeldUser", info, err)
	}
	waitEvent(t, d, "NodeGone of a job that never started", isEvent(driver.NodeGone, "late"))
	if jobs := c.Jobs(); len(jobs) > 0 {
		t.Fatalf("the timed out job is still in squeue: %v", jobs)
	}
}

// testRestart: a driver closed with a node and a running task (an engine that stopped)
// is replaced by a new one of the same engine id, which lists and adopts the node, sees
// the task end with its code and output, and keeps other engines' jobs out of List.
func testRestart(t *testing.T, c *slurmtest.Cluster) {
	workdir := t.TempDir()
	id := NewEngineID()
	ctx := ctxT(t)
	d1, err := New(ctx, Config{EngineID: id, Workdir: workdir})
	if err != nil {
		t.Fatal(err)
	}
	createReady(t, d1, driver.NodeSpec{Key: "kept", Owner: "ws/c"})
	marker := filepath.Join(workdir, "go")
	cmd := []string{"sh", "-c", "echo before; while [ ! -e " + marker + " ]; do sleep 0.05; done; echo after; exit 4"}
	if err := d1.StartTask(ctx, "kept", driver.TaskSpec{Key: "t1", Command: cmd}); err != nil {
		t.Fatal(err)
	}
	d1.Close()
	other := newTestDriver(t, Config{})
	if _, err := other.Create(ctx, driver.NodeSpec{Key: "kept", Owner: "ws/c"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Terminate(context.Background(), "kept") })

	d2 := newTestDriver(t, Config{EngineID: id, Workdir: workdir})
	nodes, err := d2.List(ctx, "")
	if err != nil || len(nodes) != 1 || nodes[0].Key != "kept" || nodes[0].Owner != "ws/c" || !nodes[0].Ready {
		t.Fatalf("List after a restart: %+v, %v; want the one ready node kept of ws/c", nodes, err)
	}
	if err := os.WriteFile(marker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	ev := waitEvent(t, d2, "TaskExited of the adopted task", func(ev driver.Event) bool { return ev.Kind == driver.TaskExited && ev.TaskKey == "t1" })
	out, err := d2.TaskOutput(ctx, "kept", "t1", 0)
	if ev.ExitCode != 4 || err != nil || string(out) != "before\nafter\n" {
		t.Fatalf("adopted task: exit %d, output %q, %v; want 4 and both lines", ev.ExitCode, out, err)
	}
	if err := d2.Terminate(ctx, "kept"); err != nil {
		t.Fatal(err)
	}
}

// testControllerRestart: slurmctld restarted while a node is held and a task runs on
// it: the watch sees the node through (no NodeGone while squeue fails and after), the task
// ends normally, and the node is released. (New steps wait for the nodes to register
// again after a restart, up to a minute here: srun retries by itself.)
func testControllerRestart(t *testing.T, c *slurmtest.Cluster) {
	d := newTestDriver(t, Config{})
	ctx := ctxT(t)
	createReady(t, d, driver.NodeSpec{Key: "held", Owner: "ws/c"})
	marker := filepath.Join(d.cfg.Workdir, "go")
	cmd := []string{"sh", "-c", "echo started; while [ ! -e " + marker + " ]; do sleep 0.05; done; echo done"}
	if err := d.StartTask(ctx, "held", driver.TaskSpec{Key: "during", Command: cmd}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(waitLimit); ; time.Sleep(50 * time.Millisecond) { // the step runs
		if out, _ := d.TaskOutput(ctx, "held", "during", 0); string(out) == "started\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the task did not start")
		}
	}
	c.StopController()
	c.StartController(false)
	before := d.ticks.Load()
	for d.ticks.Load() < before+4 { // four squeues that answered since the restart
		select {
		case ev := <-d.Events():
			t.Fatalf("event %s of %s after a controller restart; want none", ev.Kind, ev.NodeKey)
		case <-time.After(50 * time.Millisecond):
		}
	}
	if err := os.WriteFile(marker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	ev := waitEvent(t, d, "TaskExited or NodeGone", func(ev driver.Event) bool {
		return ev.NodeKey == "held" && (ev.Kind == driver.NodeGone || ev.Kind == driver.TaskExited)
	})
	if ev.Kind != driver.TaskExited || ev.ExitCode != 0 {
		t.Fatalf("after a controller restart: %s exit %d; want the task to end with 0", ev.Kind, ev.ExitCode)
	}
	if err := d.Terminate(ctx, "held"); err != nil {
		t.Fatal(err)
	}
	// The nodes register again with the new controller; the next test starts once they have.
	c.WaitIdle(slurmtest.Nodes...)
}

// watchedJob is the Slurm job of a node the driver watches, as the driver last saw it.
func watchedJob(t *testing.T, d *Driver, key string) job {
	t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	n, ok := d.nodes.Get(key)
	if !ok {
		t.Fatalf("node %s is not watched", key)
	}
	return n.job
}

// testKilledSlurmd: killing the slurmd of a held node makes Slurm set it DOWN and end the
// job: NodeGone. The slurmd is started again afterwards.
func testKilledSlurmd(t *testing.T, c *slurmtest.Cluster) {
	d := newTestDriver(t, Config{})
	ctx := ctxT(t)
	createReady(t, d, driver.NodeSpec{Key: "victim", Owner: "ws/c"})
	name := watchedJob(t, d, "victim").Node
	c.KillNode(name)
	t.Cleanup(func() {
		c.StartNode(name)
		c.Resume(name)
		c.WaitIdle(slurmtest.Nodes...) // the next test starts on a cluster whose nodes are all back
	})
	start := time.Now()
	waitEvent(t, d, "NodeGone of the node whose slurmd died", isEvent(driver.NodeGone, "victim"))
	t.Logf("slurmd of %s killed: NodeGone after %s (SlurmdTimeout=5)", name, time.Since(start).Round(time.Millisecond))
	if err := d.Terminate(ctx, "victim"); err != nil {
		t.Fatal(err)
	}
}

// testScancelUnderATask: scancel of a held node's job while a task runs on it ends both
// the job and the task's srun (exit 143); the driver reports NodeGone, never the task's
// exit, so a job on the node fails with its node lost rather than by its own exit. Three
// rounds, since which of the two Slurm ends first varies.
func testScancelUnderATask(t *testing.T, c *slurmtest.Cluster) {
	d := newTestDriver(t, Config{})
	ctx := ctxT(t)
	for round := range 3 {
		key := fmt.Sprintf("scancelled%d", round)
		createReady(t, d, driver.NodeSpec{Key: key, Owner: "ws/c"})
		cmd := []string{"sh", "-c", "echo started; exec sleep 600"}
		if err := d.StartTask(ctx, key, driver.TaskSpec{Key: "t", Command: cmd}); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(waitLimit); ; time.Sleep(50 * time.Millisecond) {
			if out, _ := d.TaskOutput(ctx, key, "t", 0); string(out) == "started\n" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the task did not start")
			}
		}
		id := watchedJob(t, d, key).ID
		start := time.Now()
		c.Run("scancel", id)
		ev := waitEvent(t, d, "NodeGone or TaskExited", func(ev driver.Event) bool {
			return ev.NodeKey == key && (ev.Kind == driver.NodeGone || ev.Kind == driver.TaskExited)
		})
		if ev.Kind != driver.NodeGone {
			t.Fatalf("round %d: scancel of the node's job %s gave %s (exit %d); want NodeGone", round, id, ev.Kind, ev.ExitCode)
		}
		t.Logf("round %d: scancel %s: NodeGone after %s", round, id, time.Since(start).Round(time.Millisecond))
	}
	// A job the driver saw COMPLETING (NodeGone) leaves squeue once Slurm has finished it.
	jobs := c.Jobs()
	for deadline := time.Now().Add(waitLimit); len(jobs) > 0 && time.Now().Before(deadline); jobs = c.Jobs() {
		time.Sleep(100 * time.Millisecond)
	}
	if len(jobs) > 0 {
		t.Fatalf("%s after the rounds squeue still shows %v", waitLimit, jobs)
	}
}

// testCycles: 200 create/release cycles, four at a time, some released while pending and
// some once running, leave no job behind.
func testCycles(t *testing.T, c *slurmtest.Cluster) {
	d := newTestDriver(t, Config{})
	// The bound only keeps a broken driver from hanging the run; 200 cycles take about
	// 40 s on an idle 2-core machine and more on a busy one.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const cycles, workers = 200, 4
	var wg sync.WaitGroup
	errs := make(chan error, cycles)
	for w := range workers {
		wg.Go(func() {
			for i := w; i < cycles; i += workers {
				key := fmt.Sprintf("cyc%d", i)
				if _, err := d.Create(ctx, driver.NodeSpec{Key: key, Owner: "ws/c"}); err != nil {
					errs <- err
					return
				}
				time.Sleep(time.Duration(i%4) * 100 * time.Millisecond) // released at various points of its start
				if err := d.Terminate(ctx, key); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if jobs := c.Jobs(); len(jobs) > 0 {
		t.Fatalf("after %d cycles squeue shows %v", cycles, jobs)
	}
}

// Environments on Slurm nodes are built in the work dir every node shares (DESIGN 8): a
// task's environment names that cache unless the engine named one itself.
func TestTaskEnvNamesTheSharedEnvironmentCache(t *testing.T) {
	d := &Driver{cfg: Config{Workdir: "/shared/work/"}}
	got := d.taskEnv(map[string]string{"RANK": "0"})
	if got[envprep.CacheVar] != "/shared/work/.mlcompute/envs" || got["RANK"] != "0" {
		t.Errorf("taskEnv = %v; want the cache in the work dir and RANK kept", got)
	}
	named := map[string]string{envprep.CacheVar: "/elsewhere"}
	if got := d.taskEnv(named); got[envprep.CacheVar] != "/elsewhere" {
		t.Errorf("taskEnv replaced the engine's own cache: %v", got)
	}
	if got := d.taskEnv(nil); got[envprep.CacheVar] != "/shared/work/.mlcompute/envs" {
		t.Errorf("taskEnv(nil) = %v", got)
	}
}
