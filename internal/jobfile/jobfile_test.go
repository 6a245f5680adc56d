package jobfile

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
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
	sub, err := Parse(file, dir, yaml)
	if err != nil || sub.pipeline == nil {
		t.Fatalf("Parse: %+v %v", sub, err)
	}
	spec, up := sub.Spec, *sub.pipeline
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
	if _, err = Parse(file, dir, bad); err == nil || !strings.Contains(err.Error(), `line 25: jobs.train.inputs.data.path: unknown step "b" (steps: prep, train)`) {
		t.Fatalf("error %v", err)
	}
}

// uploads records what an upload sent, as the engine's snapshot store would name it.
type uploads struct{ ids []string }

func (u *uploads) PutSnapshot(ctx context.Context, ws string, archive []byte) (string, error) {
	id, err := hashOnly{}.PutSnapshot(ctx, ws, archive)
	u.ids = append(u.ids, id)
	return id, err
}

// The content hash computed with nothing uploaded is the one the upload returns; it
// stays while nothing changes, and an edit of a code file or of a uri_file input changes
// it.
func TestContentHashFollowsTheFiles(t *testing.T) {
	dir := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Mkdir(filepath.Join(dir, "src"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "src", "train.py"), []byte("print(1)\n"), 0o600))
	must(os.WriteFile(filepath.Join(dir, "labels.csv"), []byte("a,b\n"), 0o600))
	yaml := "command: python train.py ${{inputs.labels}}\ncode: src\ncompute: cpu\ninputs:\n  labels: {type: uri_file, path: labels.csv}\n"
	hash := func() string {
		t.Helper()
		sub, err := Parse("create_job", dir, yaml)
		must(err)
		h, err := sub.ContentHash(context.Background())
		must(err)
		if sub.Spec.SnapshotID != "" || sub.Spec.Inputs["labels"].SnapshotID != "" {
			t.Fatalf("ContentHash filled snapshot IDs in the submission: %+v", sub.Spec)
		}
		return h
	}
	first := hash()
	sub, err := Parse("create_job", dir, yaml)
	must(err)
	var up uploads
	uploaded, err := sub.Upload(context.Background(), &up, "lab")
	must(err)
	if uploaded != first || len(up.ids) != 2 || sub.Spec.SnapshotID != up.ids[0] || sub.Spec.Inputs["labels"].SnapshotID != up.ids[1] {
		t.Fatalf("upload hash %s ids %v spec %+v; want hash %s and the code's and the input's snapshots", uploaded, up.ids, sub.Spec, first)
	}
	if again := hash(); again != first {
		t.Fatalf("hash changed with nothing changed: %s then %s", first, again)
	}
	later := time.Now().Add(time.Hour)
	must(os.WriteFile(filepath.Join(dir, "src", "train.py"), []byte("print(2)\n"), 0o600))
	must(os.Chtimes(filepath.Join(dir, "src", "train.py"), later, later))
	edited := hash()
	if edited == first {
		t.Fatal("an edit of train.py left the hash as it was")
	}
	must(os.WriteFile(filepath.Join(dir, "labels.csv"), []byte("a,c\n"), 0o600))
	if hash() == edited {
		t.Fatal("an edit of the uri_file input left the hash as it was")
	}
}
