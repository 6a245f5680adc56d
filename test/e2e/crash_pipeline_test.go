//go:build unix

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
)

// crashPipelineYAML is prep (warm) -> train (cold, a node started for it) -> score (warm).
// Each step appends a line to its file in RUNS (outside the engine) so the round counts
// its real runs, sleeps a random moment (SLEEP_<step>) and writes an output made from
// its input, so the pipeline's output is known in advance.
const crashPipelineYAML = `type: pipeline
inputs:
  raw:
    type: uri_folder
    path: ./raw
outputs:
  scores:
    type: uri_folder
settings:
  default_compute: azureml:warm
jobs:
  prep:
    command: echo ran >> RUNS/prep && sleep SLEEP_prep && sort ${{inputs.raw}}/a.csv > ${{outputs.data}}/sorted
    inputs:
      raw: ${{parent.inputs.raw}}
    outputs:
      data:
        type: uri_folder
  train:
    compute: azureml:cold
    command: echo ran >> RUNS/train && sleep SLEEP_train && wc -l < ${{inputs.data}}/sorted > ${{outputs.model}}/lines
    inputs:
      data: ${{parent.jobs.prep.outputs.data}}
    outputs:
      model:
        type: uri_folder
  score:
    command: echo ran >> RUNS/score && sleep SLEEP_score && echo "score $(cat ${{inputs.model}}/lines)" > ${{outputs.scores}}/result
    inputs:
      model: ${{parent.jobs.train.outputs.model}}
    outputs:
      scores: ${{parent.outputs.scores}}
`

var crashPipelineSteps = []string{"prep", "train", "score"}

// crashDuringPipeline: the engine dies at a random moment of a three-step pipeline over
// two clusters (half the time again while it recovers). The pipeline ends Completed; a
// step seen Completed before the kill is not run again, and no step runs twice (the
// running one is adopted where its process lives); every output reaches the next step
// with its digest and the pipeline's output is what the steps make of the input; no step
// is left Running.
func crashDuringPipeline(r *crashRound) {
	r.writeConfig(crashConfig(false, "", 0))
	r.mustTerraform("apply", "-auto-approve")
	dir := r.t.TempDir()
	runs := filepath.Join(dir, "runs")
	for _, d := range []string{"raw", "runs"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			r.t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "raw", "a.csv"), []byte("3\n1\n2\n5\n4\n"), 0o644); err != nil {
		r.t.Fatal(err)
	}
	repl := []string{"RUNS", runs}
	for _, s := range crashPipelineSteps {
		repl = append(repl, "SLEEP_"+s, fmt.Sprintf("%.1f", 0.2+r.rng.Float64()))
	}
	file := filepath.Join(dir, "pipeline.yaml")
	if err := os.WriteFile(file, []byte(strings.NewReplacer(repl...).Replace(crashPipelineYAML)), 0o644); err != nil {
		r.t.Fatal(err)
	}
	out, code := r.cli("job", "submit", "--workspace", "crash", "-f", file)
	if code != 0 {
		r.t.Fatalf("job submit -f pipeline.yaml: exit %d: %s", code, out)
	}
	id := strings.TrimSpace(out)
	count := func(step string) int {
		b, _ := os.ReadFile(filepath.Join(runs, step))
		return strings.Count(string(b), "ran\n")
	}

	time.Sleep(time.Duration(r.rng.Int64N(int64(3 * time.Second))))
	// What the engine says just before it dies: a step it calls Completed is finished.
	before := map[string]string{}
	pj, err := r.client().GetJob(context.Background(), "crash", id)
	if err != nil {
		r.t.Fatalf("job show %s before the kill: %v", id, err)
	}
	p := *pj
	for _, s := range p.Steps {
		before[s.Name] = s.Status
	}
	r.killedMidOperation = !api.Terminal(p.Status)
	r.t.Logf("killing the engine with the pipeline %s, steps %v", p.Status, before)
	<-r.crash()
	if r.rng.IntN(2) == 0 {
		r.wake()
		r.crashAgainWhileRecovering()
	}

	r.waitFor("pipeline "+id+" ended", 90*time.Second, func() bool { p = r.showJob("crash", id); return api.Terminal(p.Status) })
	if p.Status != api.JobCompleted {
		r.t.Fatalf("pipeline %s after the crash: %s (%s), steps %+v", id, p.Status, p.Error, p.Steps)
	}
	jobs := map[string]api.Job{}
	for _, s := range p.Steps {
		j := r.showJob("crash", s.Job)
		jobs[s.Name] = j
		if s.Status != api.JobCompleted || j.Status != api.JobCompleted {
			r.t.Errorf("step %s: %s, its job %s %s; want both Completed", s.Name, s.Status, j.ID, j.Status)
		}
		// Steps run exactly once: a finished step is not rerun, and the running one is
		// adopted on its node (the node agents outlive the engine).
		if n := count(s.Name); n != 1 {
			r.t.Errorf("step %s (%s before the kill) ran %d times; want once", s.Name, before[s.Name], n)
		}
	}
	for _, hop := range []struct{ from, out, to, in string }{{"prep", "data", "train", "data"}, {"train", "model", "score", "model"}} {
		d := jobs[hop.from].Outputs[hop.out].Digest
		if d == "" || jobs[hop.to].Inputs[hop.in].Digest != d {
			r.t.Errorf("%s registered %s %q, %s took %q", hop.from, hop.out, d, hop.to, jobs[hop.to].Inputs[hop.in].Digest)
		}
	}
	if d := jobs["score"].Outputs["scores"].Digest; d == "" || p.Outputs["scores"].Digest != d {
		r.t.Errorf("pipeline output %+v, score's %+v", p.Outputs["scores"], jobs["score"].Outputs["scores"])
	}
	dl := r.t.TempDir()
	if out, code := r.cli("job", "download", "--workspace", "crash", id, "--output-name", "scores", "--download-path", dl); code != 0 {
		r.t.Fatalf("job download: exit %d: %s", code, out)
	}
	if b, err := os.ReadFile(filepath.Join(dl, "named-outputs", "scores", "result")); err != nil || string(b) != "score 5\n" {
		r.t.Errorf("the pipeline's output %q (%v); want \"score 5\\n\"", b, err)
	}
	out, code = r.terraform("plan", "-detailed-exitcode")
	if code != 0 {
		r.t.Fatalf("a plan after the crash is not empty (exit %d):\n%s", code, out)
	}
	r.checkStateMatchesEngine()
	r.checkClustersAtMinimum("crash", crashMinimums)
}
