//go:build unix

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/slurm/slurmtest"
)

var slurmClusterConfig = requiredProviders + `
provider "mlcompute" {}

resource "mlcompute_workspace" "ws" {
  name = "e2e-team"
}

resource "mlcompute_compute_cluster" "cpu" {
  name         = "cpu"
  workspace_id = mlcompute_workspace.ws.id
  vm_size      = "Standard_DS3_v2"
  scale_settings = {
    min_node_count                       = 0
    max_node_count                       = 3
    scale_down_nodes_after_idle_duration = "PT3S"
  }
}
`

// engineJobs lists the Slurm jobs of this user's engine (named <engine id>/<node key>) that
// squeue shows, by node key.
func (u *user) engineJobs() []string {
	u.t.Helper()
	raw, err := os.ReadFile(filepath.Join(u.home, "engine-id"))
	if err != nil {
		u.t.Fatalf("reading the engine id: %v", err)
	}
	prefix := strings.TrimSpace(string(raw)) + "/"
	out, err := exec.Command("squeue", "-h", "-o", "%j").Output()
	if err != nil {
		u.t.Fatalf("squeue: %v", err)
	}
	var keys []string
	for _, name := range strings.Fields(string(out)) {
		if key, ok := strings.CutPrefix(name, prefix); ok {
			keys = append(keys, key)
		}
	}
	slices.Sort(keys)
	return keys
}

// TestE2E_SlurmCluster runs a cluster on a real Slurm cluster (three nodes on loopback,
// see slurmtest) with `mlcompute serve --nodes slurm`: it scales from 0 for a 3-node job
// with the right ranks, releases idle nodes with their allocations gone from squeue within
// 1 s of the idle deadline, and after a SIGKILL of the engine with allocations held and a
// job running (and an allocation it never recorded), a restarted engine finishes the job,
// cancels the orphan and leaves no allocation no compute owns.
func TestE2E_SlurmCluster(t *testing.T) {
	requireAcc(t)
	c := slurmtest.Start(t) // sets SLURM_CONF, which the user's environment inherits
	u := newUser(t)
	workdir := t.TempDir()
	serveFlags := []string{"--nodes", "slurm", "--slurm-resources", "gpus", "--slurm-workdir", workdir, "--slurm-partition", slurmtest.Partition}
	u.startServe(serveFlags...)
	u.writeConfig(slurmClusterConfig)
	u.mustTerraform("apply", "-auto-approve")
	if c := u.compute("cpu"); c.CurrentNodeCount != 0 || len(u.engineJobs()) != 0 {
		t.Fatalf("fresh cluster has %d nodes and jobs %v; min is 0", c.CurrentNodeCount, u.engineJobs())
	}

	// A 3-node job: one allocation per node, ranks 0..2, MASTER_ADDR rank 0's host.
	script := `echo "rank $RANK of $WORLD_SIZE master $MASTER_ADDR host $(hostname) slurm job $SLURM_JOB_ID"`
	start := time.Now()
	out, exit := u.cli("job", "submit", "--workspace", "e2e-team", "--compute", "cpu", "--instance-count", "3", "--stream", "--", "sh", "-c", script)
	if exit != 0 {
		t.Fatalf("job submit --stream: exit %d:\n%s", exit, out)
	}
	t.Logf("3-node job from 0 nodes done in %s:\n%s", time.Since(start).Round(time.Millisecond), out)
	host, _ := os.Hostname()
	id := jobIDOf(t, out)
	// The three allocations stay, held by idle nodes, for the compute's idle time (3 s).
	ended := u.nodesStayIdle("e2e-team", id, 3*time.Second, 3, func() int { return len(u.engineJobs()) })
	jobIDs := map[string]bool{}
	for rank := range 3 {
		logs, _ := u.cli("job", "logs", "--workspace", "e2e-team", "--rank", fmt.Sprint(rank), id)
		line := fmt.Sprintf("rank %d of 3 master localhost host %s slurm job ", rank, host)
		i := strings.Index(logs, line)
		if i < 0 {
			t.Fatalf("no line %q in rank %d's output:\n%s", line, rank, logs)
		}
		jobIDs[strings.Fields(logs[i+len(line):])[0]] = true
	}
	if len(jobIDs) != 3 {
		t.Fatalf("the 3 ranks ran in Slurm jobs %v; want three allocations", jobIDs)
	}

	// Idle scale-down: the allocations leave squeue once the idle deadline has passed.
	for _, n := range u.compute("cpu").Nodes {
		if n.State != api.NodeIdle && n.State != api.NodeLeaving {
			t.Fatalf("node %s is %s after the job; want idle (or leaving, past its idle time)", n.ID, n.State)
		}
	}
	deadline := ended.Add(3 * time.Second)
	for len(u.engineJobs()) > 0 {
		if time.Since(deadline) > 30*time.Second {
			t.Fatalf("allocations %v still held 30 s after the idle deadline", u.engineJobs())
		}
		time.Sleep(20 * time.Millisecond)
	}
	// How soon is measured, not asserted (the idle rule's timing is its table tests', on a
	// fake clock): a busy machine delays squeue, not the rule.
	t.Logf("MEASURE idle scale-down: the last allocation left squeue %s after the idle deadline", time.Since(deadline).Round(time.Millisecond))
	u.waitFor("cluster back to 0 nodes", 30*time.Second, func() bool { return len(u.compute("cpu").Nodes) == 0 })

	// SIGKILL the engine while a 2-node job runs, then start it again.
	marker := filepath.Join(workdir, "go")
	cmd := fmt.Sprintf("echo start-$RANK; while [ ! -e %s ]; do sleep 0.05; done; echo end-$RANK; exit 5", marker)
	out, exit = u.cli("job", "submit", "--workspace", "e2e-team", "--compute", "cpu", "--instance-count", "2", "--", "sh", "-c", cmd)
	if exit != 0 {
		t.Fatalf("submit: %s", out)
	}
	id = strings.TrimSpace(out)
	jobShow := func() api.Job {
		out, code := u.cli("job", "show", "--workspace", "e2e-team", id, "-o", "json")
		if code != 0 {
			t.Fatalf("job show: %s", out)
		}
		var j api.Job
		decodeJSON(t, out, &j)
		return j
	}
	u.waitFor("the job running", 60*time.Second, func() bool { return jobShow().Status == api.JobRunning })
	held := u.engineJobs()
	if len(held) < 2 {
		t.Fatalf("the 2-node job runs, but squeue shows the engine's jobs %v", held)
	}
	pid := u.enginePID()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	u.waitGone(pid, 10*time.Second)
	if err := os.WriteFile(marker, nil, 0o644); err != nil { // the job ends while no engine runs
		t.Fatal(err)
	}
	// An allocation the engine submitted but never recorded (a crash between sbatch and
	// its write): the restarted engine must find it by name and cancel it.
	raw, _ := os.ReadFile(filepath.Join(u.home, "engine-id"))
	orphan := exec.Command("sbatch", "--parsable", "--nodes=1", "--output=/dev/null",
		"--job-name="+strings.TrimSpace(string(raw))+"/node-orphan", "--comment=e2e-team/cpu/node-orphan", "--wrap", "exec sleep 1000")
	if out, err := orphan.CombinedOutput(); err != nil {
		t.Fatalf("sbatch of an orphan: %v: %s", err, out)
	}
	u.startServe(serveFlags...)
	u.waitFor("the job finished", 60*time.Second, func() bool { return api.Terminal(jobShow().Status) })
	if j := jobShow(); j.ExitCode == nil || *j.ExitCode != 5 {
		t.Fatalf("job after the engine's SIGKILL: status %s exit %v; want exit 5", j.Status, j.ExitCode)
	}
	logs, _ := u.cli("job", "logs", "--workspace", "e2e-team", id)
	if !strings.Contains(logs, "start-0") || !strings.Contains(logs, "end-0") {
		t.Fatalf("the job's log is not complete:\n%s", logs)
	}
	var owned []string
	for _, n := range u.compute("cpu").Nodes {
		owned = append(owned, n.ID)
	}
	slices.Sort(owned)
	if jobs := u.engineJobs(); !slices.Equal(jobs, owned) {
		t.Fatalf("after the restart squeue shows the engine's jobs %v, the compute owns nodes %v (held before the kill: %v)", jobs, owned, held)
	}
	u.waitFor("every node released", 60*time.Second, func() bool { return len(u.compute("cpu").Nodes) == 0 })
	if jobs := u.engineJobs(); len(jobs) != 0 {
		t.Fatalf("every node released, but squeue shows the engine's jobs %v", jobs)
	}
	u.mustTerraform("destroy", "-auto-approve")
	if jobs := c.Jobs(); len(jobs) != 0 {
		t.Fatalf("after destroy squeue shows %v", jobs)
	}
}

var slurmFailuresConfig = requiredProviders + `
provider "mlcompute" {}

resource "mlcompute_workspace" "ws" {
  name = "e2e-team"
}

resource "mlcompute_compute_cluster" "steady" {
  name         = "steady"
  workspace_id = mlcompute_workspace.ws.id
  vm_size      = "Standard_DS3_v2"
  scale_settings = {
    min_node_count                       = 1
    max_node_count                       = 1
    scale_down_nodes_after_idle_duration = "PT3S"
  }
}

resource "mlcompute_compute_instance" "dev" {
  name                      = "dev-box"
  workspace_id              = mlcompute_workspace.ws.id
  vm_size                   = "Standard_DS3_v2"
  idle_time_before_shutdown = "PT3S"
}
`

// slurmNodeOf returns the Slurm node that runs the engine's job of a node key.
func slurmNodeOf(t *testing.T, engineJobName string) string {
	t.Helper()
	out, err := exec.Command("squeue", "-h", "--name="+engineJobName, "-t", "RUNNING", "-o", "%N").Output()
	if err != nil {
		t.Fatalf("squeue: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// TestE2E_SlurmNodeFailureAndInstance: on Slurm, a cluster keeps its minimum when the
// slurmd of its node is killed (the node becomes unusable and a replacement starts on
// another Slurm node), and a compute instance's stop, start and idle shutdown cancel and
// create its allocation.
func TestE2E_SlurmNodeFailureAndInstance(t *testing.T) {
	requireAcc(t)
	c := slurmtest.Start(t)
	u := newUser(t)
	u.startServe("--nodes", "slurm", "--slurm-resources", "gpus", "--slurm-workdir", t.TempDir(), "--min-idle-shutdown", "1s")
	u.writeConfig(slurmFailuresConfig)
	u.mustTerraform("apply", "-auto-approve")
	raw, _ := os.ReadFile(filepath.Join(u.home, "engine-id"))
	engineID := strings.TrimSpace(string(raw))

	// The instance: running after apply, its allocation cancelled by a stop and made again
	// by a start.
	instanceJobs := func() int {
		n := 0
		for _, k := range u.engineJobs() {
			for _, node := range u.compute("dev-box").Nodes {
				if node.ID == k {
					n++
				}
			}
		}
		return n
	}
	u.waitFor("the instance running", 60*time.Second, func() bool { return u.compute("dev-box").State == api.InstanceRunning })
	if n := instanceJobs(); n != 1 {
		t.Fatalf("a running instance holds %d allocations; want 1", n)
	}
	if out, code := u.cli("compute", "stop", "--workspace", "e2e-team", "dev-box"); code != 0 {
		t.Fatalf("compute stop: %s", out)
	}
	u.waitFor("the instance stopped, its allocation gone", 30*time.Second, func() bool {
		return u.compute("dev-box").State == api.InstanceStopped && len(u.engineJobs()) == 1 // the cluster's node
	})
	if out, code := u.cli("compute", "start", "--workspace", "e2e-team", "dev-box"); code != 0 {
		t.Fatalf("compute start: %s", out)
	}
	u.waitFor("the instance running again on a new allocation", 60*time.Second, func() bool {
		return u.compute("dev-box").State == api.InstanceRunning && len(u.engineJobs()) == 2
	})
	u.waitFor("idle shutdown cancels the allocation", 60*time.Second, func() bool {
		return u.compute("dev-box").State == api.InstanceStopped && len(u.engineJobs()) == 1
	})

	// The cluster: kill the slurmd of its one node; Slurm sets it DOWN and ends the job,
	// and the cluster gets a node on another Slurm node.
	var first string
	u.waitFor("the cluster's minimum node idle", 60*time.Second, func() bool {
		nodes := u.compute("steady").Nodes
		if len(nodes) == 1 && nodes[0].State == api.NodeIdle {
			first = nodes[0].ID
			return true
		}
		return false
	})
	victim := slurmNodeOf(t, engineID+"/"+first)
	if victim == "" {
		t.Fatalf("no running Slurm job for node %s; squeue: %v", first, c.Jobs())
	}
	c.KillNode(victim)
	t.Cleanup(func() {
		c.StartNode(victim)
		c.Resume(victim)
	})
	start := time.Now()
	var replacement string
	u.waitFor("a replacement node idle on another Slurm node", 120*time.Second, func() bool {
		for _, n := range u.compute("steady").Nodes {
			if n.ID != first && n.State == api.NodeIdle {
				replacement = n.ID
				return true
			}
		}
		return false
	})
	t.Logf("slurmd of %s killed: replacement node idle after %s", victim, time.Since(start).Round(time.Millisecond))
	if on := slurmNodeOf(t, engineID+"/"+replacement); on == "" || on == victim {
		t.Fatalf("the replacement runs on Slurm node %q; want another than %s", on, victim)
	}
	u.mustTerraform("destroy", "-auto-approve")
	u.waitFor("no allocation left", 30*time.Second, func() bool { return len(u.engineJobs()) == 0 })
}

// TestE2E_SlurmEnvironment: a job in a system-managed environment on Slurm nodes. The
// environment is built once, in the work dir every node shares (--slurm-workdir), and both
// ranks of a 2-node job run in that one build.
func TestE2E_SlurmEnvironment(t *testing.T) {
	requireAcc(t)
	needVenv(t)
	slurmtest.Start(t)
	u := newUser(t)
	workdir, err := os.MkdirTemp("", "mlc-e2e-slurm-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(workdir) })
	u.startServe("--nodes", "slurm", "--slurm-resources", "gpus", "--slurm-workdir", workdir, "--slurm-partition", slurmtest.Partition)
	u.writeConfig(trainConfig(wheelDir(t)))
	u.mustTerraform("apply", "-auto-approve")

	out, code := u.cli("job", "submit", "--workspace", envWorkspace, "--compute", "cpu", "--instance-count", "2",
		"--environment", "train", "--", "python", "-c", importMLCTest)
	if code != 0 {
		t.Fatalf("job submit: exit %d: %s", code, out)
	}
	id := strings.TrimSpace(out)
	job, log := u.finished(id, 3*time.Minute)
	rank1, code := u.cli("job", "logs", "--workspace", envWorkspace, "--rank", "1", id)
	if code != 0 {
		t.Fatalf("job logs --rank 1: exit %d: %s", code, rank1)
	}
	cache := filepath.Join(workdir, ".mlcompute", "envs")
	for rank, log := range []string{log, rank1} {
		if job.Status != api.JobCompleted || !strings.Contains(log, "hello from mlctest in "+cache+"/") {
			t.Fatalf("job %s (%s); want rank %d to import mlctest from a build in %s:\n%s", job.Status, job.Error, rank, cache, log)
		}
	}
	if n := strings.Count(log+rank1, "mlcompute: building environment"); n != 1 {
		t.Fatalf("the environment was built %d times for the two ranks; want once:\n%s\n%s", n, log, rank1)
	}
	u.mustTerraform("destroy", "-auto-approve")
}
