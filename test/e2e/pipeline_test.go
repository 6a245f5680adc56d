//go:build unix

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
)

// pipelineYAML is prep -> train -> score on the cluster cpu. Each step appends a line to
// its file in runs/ (outside the engine), so the test counts how often each really ran;
// train waits for the file GATE before it finishes.
const pipelineYAML = `$schema: https://azuremlschemas.azureedge.net/latest/pipelineJob.schema.json
type: pipeline
inputs:
  raw:
    type: uri_folder
    path: ./raw
outputs:
  model:
    type: uri_folder
settings:
  default_compute: azureml:cpu
jobs:
  prep:
    command: echo ran >> RUNS/prep && cp -R ${{inputs.raw}}/. ${{outputs.data}}/ && echo prepared > ${{outputs.data}}/extra
    inputs:
      raw: ${{parent.inputs.raw}}
    outputs:
      data:
        type: uri_folder
  train:
    code: ./src
    command: echo ran >> RUNS/train && while [ ! -e GATE ]; do sleep 0.1; done && sh train.sh ${{inputs.data}} ${{outputs.model}}
    inputs:
      data: ${{parent.jobs.prep.outputs.data}}
    outputs:
      model: ${{parent.outputs.model}}
  score:
    command: echo ran >> RUNS/score && cat ${{inputs.model}}/lines > ${{outputs.scores}}/result
    inputs:
      model: ${{parent.jobs.train.outputs.model}}
    outputs:
      scores:
        type: uri_folder
`

// TestE2E_PipelineResumesAfterSIGKILLAndReuses: a three-step pipeline submitted with the
// real CLI; the engine is SIGKILLed while train runs; after it starts again the pipeline
// completes with prep run once, its output passed on by digest. The same file submitted
// again reuses every step, and job show prints the tree with reused_from.
func TestE2E_PipelineResumesAfterSIGKILLAndReuses(t *testing.T) {
	t.Parallel()
	u := newUser(t)
	u.writeConfig(clusterConfig)
	u.mustTerraform("apply", "-auto-approve")

	dir := t.TempDir()
	runs, gate := filepath.Join(dir, "runs"), filepath.Join(dir, "gate")
	for _, d := range []string{"raw", "src", "runs"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("raw/a.csv", "1\n2\n3\n")
	write("src/train.sh", "cat \"$1\"/* | wc -l > \"$2\"/lines\n")
	write("pipeline.yaml", strings.NewReplacer("RUNS", runs, "GATE", gate).Replace(pipelineYAML))
	file := filepath.Join(dir, "pipeline.yaml")

	out, code := u.cli("job", "submit", "--workspace", "e2e-team", "-f", file)
	if code != 0 {
		t.Fatalf("job submit -f pipeline.yaml exited %d:\n%s", code, out)
	}
	id := strings.TrimSpace(out)
	u.waitFor("train running", 60*time.Second, func() bool {
		b, _ := os.ReadFile(filepath.Join(runs, "train"))
		return len(b) > 0
	})

	pid := u.enginePID()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("killing engine %d: %v", pid, err)
	}
	if !u.waitGone(pid, 10*time.Second) {
		t.Fatalf("engine %d alive after SIGKILL", pid)
	}
	write("gate", "go\n")
	var p api.Job
	u.waitFor("pipeline ended", 120*time.Second, func() bool { p = u.showJob("e2e-team", id); return api.Terminal(p.Status) })
	if p.Status != api.JobCompleted {
		t.Fatalf("pipeline %s (%s): %+v", p.Status, p.Error, p.Steps)
	}
	count := func(step string) int {
		b, _ := os.ReadFile(filepath.Join(runs, step))
		return strings.Count(string(b), "ran\n")
	}
	if count("prep") != 1 || count("score") != 1 {
		t.Fatalf("after the restart prep ran %d times, score %d; want once each", count("prep"), count("score"))
	}
	prep, train := u.showJob("e2e-team", id+"-prep"), u.showJob("e2e-team", id+"-train")
	if d := prep.Outputs["data"].Digest; d == "" || train.Inputs["data"].Digest != d {
		t.Fatalf("prep registered %q, train took %q", d, train.Inputs["data"].Digest)
	}
	if p.Outputs["model"].Digest == "" || p.Outputs["model"].Digest != train.Outputs["model"].Digest {
		t.Fatalf("pipeline output %+v, train's %+v", p.Outputs["model"], train.Outputs["model"])
	}

	t.Logf("train ran %d time(s): adopted after the restart, or queued again", count("train"))

	// The same file again: every step reused from the first run, none ran.
	began := time.Now()
	out, code = u.cli("job", "submit", "--workspace", "e2e-team", "-f", file, "--stream")
	t.Logf("the resubmit, every step reused, took %s (CLI start, uploads and the pipeline)", time.Since(began))
	if code != 0 {
		t.Fatalf("second submit exited %d:\n%s", code, out)
	}
	for _, step := range []string{"prep", "train", "score"} {
		if want := "reused_from: " + id + "/" + step; !strings.Contains(out, step+": Completed  "+want) {
			t.Errorf("second run's tree lacks %q for %s:\n%s", want, step, out)
		}
	}
	if count("prep") != 1 || count("score") != 1 {
		t.Fatalf("the reused run ran prep %d times, score %d", count("prep"), count("score"))
	}
	second := strings.Fields(out[strings.Index(out, "job:"):])[1]

	// An edit to train's code: train and score run, prep is reused; --explain says which
	// parts of the key changed since the last run of the step.
	write("src/train.sh", "cat \"$1\"/* | wc -l > \"$2\"/lines\necho v2 >> \"$2\"/lines\n")
	out, code = u.cli("job", "submit", "--workspace", "e2e-team", "-f", file)
	if code != 0 {
		t.Fatalf("third submit exited %d:\n%s", code, out)
	}
	third := strings.TrimSpace(out)
	u.waitFor("third pipeline ended", 60*time.Second, func() bool { p = u.showJob("e2e-team", third); return api.Terminal(p.Status) })
	if p.Status != api.JobCompleted || count("prep") != 1 || count("train") < 2 || count("score") != 2 {
		t.Fatalf("after editing train.sh: %s; prep ran %d times, train %d, score %d", p.Status, count("prep"), count("train"), count("score"))
	}
	out, code = u.cli("job", "show", "--workspace", "e2e-team", third, "--explain", "train")
	if code != 0 {
		t.Fatalf("job show --explain: exit %d: %s", code, out)
	}
	t.Logf("job show %s --explain train:\n%s", third, out)
	for _, want := range []string{"last run of train: " + second + "/train", "\n* code: ", "\n  inputs.data: uri_folder sha256:", "\n  command: "} {
		if !strings.Contains(out, want) {
			t.Errorf("--explain train lacks %q:\n%s", want, out)
		}
	}
	out, _ = u.cli("job", "show", "--workspace", "e2e-team", third, "--explain", "score")
	if !strings.Contains(out, "\n* inputs.model: ") || strings.Contains(out, "\n* code") {
		t.Errorf("--explain score should mark inputs.model alone:\n%s", out)
	}

	// job rerun --from score: a new run in which score runs and the others are reused.
	trainRuns := count("train")
	out, code = u.cli("job", "rerun", "--workspace", "e2e-team", third, "--from", "score")
	if code != 0 {
		t.Fatalf("job rerun exited %d:\n%s", code, out)
	}
	fourth := strings.TrimSpace(out)
	u.waitFor("rerun ended", 60*time.Second, func() bool { p = u.showJob("e2e-team", fourth); return api.Terminal(p.Status) })
	if p.Status != api.JobCompleted || count("score") != 3 || count("train") != trainRuns || count("prep") != 1 {
		t.Fatalf("rerun --from score: %s; prep ran %d times, train %d (before: %d), score %d", p.Status, count("prep"), count("train"), trainRuns, count("score"))
	}
}
