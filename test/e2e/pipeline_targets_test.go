//go:build unix

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver/ssh/sshtest"
)

// attachedMachineHCL is an mlcompute_attached_compute named name for a test sshd host, in
// the workspace mlcompute_workspace.ws.
func attachedMachineHCL(t *testing.T, name string, h *sshtest.Host) string {
	return fmt.Sprintf(`
resource "mlcompute_attached_compute" %[1]q {
  name         = %[1]q
  workspace_id = mlcompute_workspace.ws.id
  virtual_machine = {
    address     = %[2]q
    ssh_port    = %[3]d
    username    = %[4]q
    private_key = file(%[5]q)
  }
}
`, name, h.Address, h.Port, h.User, h.KeyFile(t))
}

// targetsPipelineYAML is prep on the cluster cpu, train on serverless (a cluster of its
// own, of the size asked) and score on the attached machine box. Each step counts its
// runs in a file (score's in the machine user's home: the step runs as that user).
const targetsPipelineYAML = `type: pipeline
inputs:
  raw:
    type: uri_folder
    path: ./raw
outputs:
  scores:
    type: uri_folder
settings:
  default_compute: azureml:cpu
jobs:
  prep:
    command: echo ran >> RUNS/prep && cp -R ${{inputs.raw}}/. ${{outputs.data}}/
    inputs:
      raw: ${{parent.inputs.raw}}
    outputs:
      data:
        type: uri_folder
  train:
    compute: serverless
    resources:
      instance_type: Standard_DS2_v2
    command: echo ran >> RUNS/train && cat ${{inputs.data}}/* | wc -l > ${{outputs.model}}/lines
    inputs:
      data: ${{parent.jobs.prep.outputs.data}}
    outputs:
      model:
        type: uri_folder
  score:
    compute: azureml:box
    command: echo ran >> BOX/score-runs && echo "$(cat ${{inputs.model}}/lines) via ${SSH_CONNECTION%% *}" > ${{outputs.scores}}/result
    inputs:
      model: ${{parent.jobs.train.outputs.model}}
    outputs:
      scores: ${{parent.outputs.scores}}
`

// TestE2E_PipelineAcrossComputeTargets: one pipeline whose three steps run on a compute
// cluster, on serverless and on an attached SSH machine (a real sshd in a network
// namespace), all applied with terraform; each step's output reaches the next with the
// digest it was registered with, the last one comes back from the machine, and the same
// file again reuses every step.
func TestE2E_PipelineAcrossComputeTargets(t *testing.T) {
	t.Parallel()
	u := newUser(t)
	h := sshtest.Start(t)
	u.writeConfig(clusterConfig + attachedMachineHCL(t, "box", h))
	u.mustTerraform("apply", "-auto-approve")

	dir := t.TempDir()
	runs := filepath.Join(dir, "runs")
	for _, d := range []string{"raw", "runs"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "raw", "a.csv"), []byte("1\n2\n3\n4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "pipeline.yaml")
	yaml := strings.NewReplacer("RUNS", runs, "BOX", h.Home).Replace(targetsPipelineYAML)
	if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	count := func(path string) int {
		b, _ := os.ReadFile(path)
		return strings.Count(string(b), "ran\n")
	}

	began := time.Now()
	out, code := u.cli("job", "submit", "--workspace", "e2e-team", "-f", file, "--stream")
	t.Logf("the pipeline over three targets took %s:\n%s", time.Since(began), out)
	if code != 0 {
		t.Fatalf("job submit -f --stream exited %d:\n%s", code, out)
	}
	id := strings.Fields(out[strings.Index(out, "job:"):])[1]
	p := u.showJob("e2e-team", id)
	if p.Status != api.JobCompleted {
		t.Fatalf("pipeline %s: %s (%s)", id, p.Status, p.Error)
	}
	prep, train, score := u.showJob("e2e-team", id+"-prep"), u.showJob("e2e-team", id+"-train"), u.showJob("e2e-team", id+"-score")
	for _, c := range []struct {
		job     api.Job
		compute string
	}{{prep, "cpu"}, {train, api.ServerlessCompute}, {score, "box"}} {
		if c.job.Compute != c.compute || c.job.Status != api.JobCompleted || len(c.job.Nodes) != 1 {
			t.Errorf("step job %s: compute %q, status %s, nodes %v; want compute %q, Completed on one node", c.job.ID, c.job.Compute, c.job.Status, c.job.Nodes, c.compute)
		}
	}
	t.Logf("nodes: prep %v, train %v, score %v", prep.Nodes, train.Nodes, score.Nodes)
	if count(filepath.Join(runs, "prep")) != 1 || count(filepath.Join(runs, "train")) != 1 || count(filepath.Join(h.Home, "score-runs")) != 1 {
		t.Fatalf("prep ran %d times, train %d, score %d; want once each", count(filepath.Join(runs, "prep")), count(filepath.Join(runs, "train")), count(filepath.Join(h.Home, "score-runs")))
	}
	// Each output reaches the next step, on another target, with the digest it was
	// registered with.
	for _, hop := range []struct {
		from    api.Job
		out, in string
		to      api.Job
	}{{prep, "data", "data", train}, {train, "model", "model", score}} {
		d := hop.from.Outputs[hop.out].Digest
		if d == "" || hop.to.Inputs[hop.in].Digest != d {
			t.Errorf("%s registered output %s %q; %s took input %s %q", hop.from.ID, hop.out, d, hop.to.ID, hop.in, hop.to.Inputs[hop.in].Digest)
		}
	}
	if d := score.Outputs["scores"].Digest; d == "" || p.Outputs["scores"].Digest != d {
		t.Errorf("pipeline output %+v, score's %+v", p.Outputs["scores"], score.Outputs["scores"])
	}
	dl := t.TempDir()
	if out, code := u.cli("job", "download", "--workspace", "e2e-team", id, "--output-name", "scores", "--download-path", dl); code != 0 {
		t.Fatalf("job download exited %d:\n%s", code, out)
	}
	result, err := os.ReadFile(filepath.Join(dl, "named-outputs", "scores", "result"))
	if err != nil {
		t.Fatalf("the pipeline's output: %v", err)
	}
	// 4 lines counted on serverless, written on the machine (reached over SSH).
	if got := strings.Fields(string(result)); len(got) != 3 || got[0] != "4" || got[2] == "" {
		t.Fatalf("score's result %q; want the 4 lines train counted and the SSH client's address", result)
	}

	// The same file again: every step reused, wherever it ran.
	out, code = u.cli("job", "submit", "--workspace", "e2e-team", "-f", file, "--stream")
	if code != 0 {
		t.Fatalf("second submit exited %d:\n%s", code, out)
	}
	for _, step := range []string{"prep", "train", "score"} {
		if want := step + ": Completed  reused_from: " + id + "/" + step; !strings.Contains(out, want) {
			t.Errorf("second run's tree lacks %q:\n%s", want, out)
		}
	}
	if count(filepath.Join(runs, "prep")) != 1 || count(filepath.Join(runs, "train")) != 1 || count(filepath.Join(h.Home, "score-runs")) != 1 {
		t.Fatalf("the reused run ran a step again")
	}
	u.mustTerraform("destroy", "-auto-approve")
}

// nodeLostYAML is prep -> train on the cluster cpu; train's first run never ends by itself
// (the test kills its node under it), a second one finishes.
const nodeLostYAML = `type: pipeline
settings:
  default_compute: azureml:cpu
jobs:
  prep:
    command: echo 7 > ${{outputs.data}}/n
    outputs:
      data:
        type: uri_folder
  train:
    command: echo ran >> RUNS/train && if [ "$(wc -l < RUNS/train)" -eq 1 ]; then sleep 600; fi && cp ${{inputs.data}}/n ${{outputs.model}}/n
    inputs:
      data: ${{parent.jobs.prep.outputs.data}}
    outputs:
      model:
        type: uri_folder
`

// TestE2E_PipelineStepRequeuedWhenItsNodeDies: kill -9 of the node agent under a running
// step: the step's job does not stay Running (it fails as NodeLost within 30 s), the
// pipeline runs the step again as <pipeline>-train-requeue1 without using a retry, and
// it completes with prep's output passed on by digest.
func TestE2E_PipelineStepRequeuedWhenItsNodeDies(t *testing.T) {
	t.Parallel()
	u := newUser(t)
	u.writeConfig(clusterConfig)
	u.mustTerraform("apply", "-auto-approve")
	dir := t.TempDir()
	runs := filepath.Join(dir, "runs")
	if err := os.Mkdir(runs, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "pipeline.yaml")
	if err := os.WriteFile(file, []byte(strings.ReplaceAll(nodeLostYAML, "RUNS", runs)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, code := u.cli("job", "submit", "--workspace", "e2e-team", "-f", file)
	if code != 0 {
		t.Fatalf("job submit -f: exit %d: %s", code, out)
	}
	id := strings.TrimSpace(out)
	u.waitFor("train running", 60*time.Second, func() bool {
		b, _ := os.ReadFile(filepath.Join(runs, "train"))
		return len(b) > 0
	})
	first := u.showJob("e2e-team", id+"-train")
	if first.Status != api.JobRunning || len(first.Nodes) != 1 {
		t.Fatalf("train's job: %s on %v; want Running on one node", first.Status, first.Nodes)
	}
	firstRun := func() []string {
		return slices.DeleteFunc(u.processesOfHome(), func(p string) bool { return !strings.HasSuffix(p, " sleep 600 ") })
	}
	u.waitFor("the first run's sleep seen", 30*time.Second, func() bool { return len(firstRun()) == 1 })
	var agent int
	for _, a := range u.nodeAgents() {
		if pid, node, _ := strings.Cut(a, " "); node == first.Nodes[0] {
			agent = atoi(pid)
		}
	}
	if agent == 0 {
		t.Fatalf("no node agent for %s among %v", first.Nodes[0], u.nodeAgents())
	}
	if err := syscall.Kill(agent, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	u.waitFor("train's job no longer Running after its node died", 30*time.Second, func() bool { return u.showJob("e2e-team", first.ID).Status != api.JobRunning })
	t.Logf("train's job left Running %s after kill -9 of its node agent", time.Since(killed).Round(10*time.Millisecond))
	if j := u.showJob("e2e-team", first.ID); j.Status != api.JobFailed || !strings.Contains(j.Error, "was lost") {
		t.Fatalf("train's first job: %s (%s); want Failed, its node lost", j.Status, j.Error)
	}
	// Nor does its process outlive the node (the first run's sleep 600).
	u.waitFor("the first run's process gone", 30*time.Second, func() bool { return len(firstRun()) == 0 })

	var p api.Job
	u.waitFor("pipeline ended", 90*time.Second, func() bool { p = u.showJob("e2e-team", id); return api.Terminal(p.Status) })
	if p.Status != api.JobCompleted {
		t.Fatalf("pipeline %s (%s): %+v", p.Status, p.Error, p.Steps)
	}
	var train api.PipelineStep
	for _, s := range p.Steps {
		if s.Name == "train" {
			train = s
		}
	}
	if train.Job != id+"-train-requeue1" || train.Retries != 0 {
		t.Fatalf("train step %+v; want job %s-train-requeue1 and no retry used", train, id)
	}
	again, prep := u.showJob("e2e-team", train.Job), u.showJob("e2e-team", id+"-prep")
	if d := prep.Outputs["data"].Digest; d == "" || again.Inputs["data"].Digest != d {
		t.Fatalf("prep registered %q, the requeued train took %q", d, again.Inputs["data"].Digest)
	}
	if b, _ := os.ReadFile(filepath.Join(runs, "train")); string(b) != "ran\nran\n" {
		t.Fatalf("train ran %q; want twice (killed, then requeued)", b)
	}
}

// showJob is `mlcompute job show JOB -o json` in workspace ws.
func (u *user) showJob(ws, job string) api.Job {
	u.t.Helper()
	out, code := u.cli("job", "show", "--workspace", ws, job, "-o", "json")
	if code != 0 {
		u.t.Fatalf("job show %s: exit %d: %s", job, code, out)
	}
	var j api.Job
	decodeJSON(u.t, out, &j)
	return j
}
