package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
)

// A pipeline file becomes a pipeline submission: each step a command job with its
// bindings apart, paths from the file's directory, the compute's YAML path kept for the
// engine's errors. A bad binding is refused at its line before anything is sent.
func TestPipelineFromFile(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"src", "raw"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	file := filepath.Join(dir, "pipeline.yaml")
	yaml := `type: pipeline
inputs:
  raw: {type: uri_folder, path: ./raw}
  epochs: 3
outputs:
  model: {type: uri_folder}
settings:
  default_compute: azureml:cpu
  continue_on_step_failure: true
jobs:
  prep:
    command: cp -r ${{inputs.raw}} ${{outputs.data}}
    inputs:
      raw: ${{parent.inputs.raw}}
    outputs:
      data: {type: uri_folder}
  train:
    code: src
    compute: gpu
    is_deterministic: false
    retry_settings: {max_retries: 2, timeout: 60}
    limits: {timeout: 90}
    command: python train.py ${{inputs.data}} ${{inputs.epochs}} ${{outputs.model}}
    inputs:
      data: {path: "${{parent.jobs.prep.outputs.data}}", mode: ro_mount}
      epochs: ${{parent.inputs.epochs}}
    outputs:
      model: ${{parent.outputs.model}}
`
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := pipelineFile(file)
	if err != nil || p == nil {
		t.Fatalf("pipelineFile: %v %v", p, err)
	}
	spec, up, err := pipelineFromFile(file, p)
	if err != nil {
		t.Fatal(err)
	}
	ps := spec.Pipeline
	if spec.Type != "pipeline" || !ps.ContinueOnStepFailure || ps.ForceRerun || len(ps.Steps) != 2 {
		t.Fatalf("spec %+v", spec)
	}
	if *ps.Inputs["epochs"].Value != "3" || ps.Inputs["raw"].Type != "uri_folder" || up.own["raw"] != filepath.Join(dir, "raw") {
		t.Fatalf("pipeline inputs %+v, uploads %v", ps.Inputs, up.own)
	}
	prep, train := ps.Steps[0], ps.Steps[1]
	if prep.Name != "prep" || prep.Job.Compute != "cpu" || prep.ComputePath != "settings.default_compute" || *prep.IsDeterministic != true {
		t.Fatalf("prep %+v", prep)
	}
	if prep.InputBindings["raw"] != "parent.inputs.raw" || prep.Job.Inputs["raw"].Type != "uri_folder" {
		t.Fatalf("prep's inputs %+v bindings %v", prep.Job.Inputs, prep.InputBindings)
	}
	if train.Job.Compute != "gpu" || train.ComputePath != "jobs.train.compute" || *train.IsDeterministic || train.MaxRetries != 2 || train.Job.TimeoutSeconds != 60 {
		t.Fatalf("train %+v", train)
	}
	if train.InputBindings["data"] != "parent.jobs.prep.outputs.data" || train.Job.Inputs["data"].Mode != "ro_mount" ||
		train.InputBindings["epochs"] != "parent.inputs.epochs" || train.OutputBindings["model"] != "model" {
		t.Fatalf("train's bindings %v %v, inputs %+v", train.InputBindings, train.OutputBindings, train.Job.Inputs)
	}
	if up.code["train"] != filepath.Join(dir, "src") || up.code["prep"] != "" {
		t.Fatalf("code uploads %v", up.code)
	}
	// A pipeline with a bad binding is refused for the binding, at its line.
	bad := strings.Replace(yaml, "${{parent.jobs.prep.outputs.data}}", "${{parent.jobs.b.outputs.o}}", 1)
	if err := os.WriteFile(file, []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err = pipelineFile(file); err == nil || !strings.Contains(err.Error(), `line 25: jobs.train.inputs.data.path: unknown step "b" (steps: prep, train)`) {
		t.Fatalf("error %v", err)
	}
}

func TestJobFileTimeoutIsSentInWholeSeconds(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		timeout string
		want    int64
	}{{"3600", 3600}, {"2h", 7200}, {"1500ms", 2}} {
		file := filepath.Join(dir, "job.yaml")
		if err := os.WriteFile(file, []byte("command: echo hi\ncompute: cpu\nlimits:\n  timeout: "+tc.timeout+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		spec, _, _, err := jobFromFile(&cobra.Command{}, submitFlags{file: file}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if spec.TimeoutSeconds != tc.want {
			t.Errorf("limits.timeout %s sent as %d s; want %d", tc.timeout, spec.TimeoutSeconds, tc.want)
		}
	}
}

// job show of a pipeline prints its steps as a tree: each under the step it waits on
// longest, with status, reused_from, duration, job and reason.
func TestPrintPipelineTree(t *testing.T) {
	at := func(s int) *time.Time { v := time.Date(2026, 3, 1, 9, 0, s, 0, time.UTC); return &v }
	j := &api.Job{ID: "p2", Type: api.JobTypePipeline, Status: api.JobFailed, Error: "steps failed: train", Steps: []api.PipelineStep{
		{Name: "prep", Job: "p2-prep", Status: api.JobCompleted, ReusedFrom: "p1/prep", StartedAt: at(0), EndedAt: at(0)},
		{Name: "score", Status: api.JobSkipped, Reason: "upstream train failed", Upstream: []string{"prep", "train"}},
		{Name: "train", Job: "p2-train", Status: api.JobFailed, Reason: "exit code 1", Upstream: []string{"prep"}, StartedAt: at(1), EndedAt: at(43)},
		{Name: "eval", Job: "p2-eval", Status: api.JobRunning, Upstream: []string{"prep"}, StartedAt: at(2)},
	}}
	var out strings.Builder
	printPipeline(&out, j)
	want := `job:     p2
type:    pipeline
status:  Failed
error:   steps failed: train
steps:
  prep: Completed  reused_from: p1/prep  0s  job p2-prep
     └─ train: Failed  42s  job p2-train  exit code 1
     └─ eval: Running  running  job p2-eval
        └─ score: Skipped  after prep, train  upstream train failed
`
	if out.String() != want {
		t.Fatalf("got:\n%s\nwant:\n%s", out.String(), want)
	}
}
