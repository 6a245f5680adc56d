//go:build unix

package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
)

// TestE2E_PipelineExample follows examples/pipeline/README.md as a user would: apply, then
// submit the pipeline over three targets (cluster, serverless, compute instance); each
// output reaches the next step with the digest it was registered with; the endpoint of
// examples/train-and-serve serves the pipeline's model; an unchanged resubmit reuses every
// step; an edit to train.py reruns train and score and reuses prep; a blob of train's
// output deleted from the store reruns train alone.
func TestE2E_PipelineExample(t *testing.T) {
	t.Parallel()
	u := newUser(t)
	if _, err := exec.LookPath("python3"); err != nil {
		t.Fatal("python3 not found: the example needs it (make test installs it: scripts/test-deps.sh)")
	}
	dir := filepath.Join(u.copyExamples(), "pipeline")
	u.mustTerraformIn(dir, "get")
	u.mustTerraformIn(dir, "apply", "-auto-approve")
	// The nightly schedule is there, with its next tick at 02:00 UTC.
	if next := u.mustTerraformIn(dir, "state", "show", "mlcompute_schedule.nightly"); !regexp.MustCompile(`next_run_time\s+= "\d{4}-\d\d-\d\dT02:00:00Z"`).MatchString(next) {
		t.Fatalf("mlcompute_schedule.nightly has no next tick at 02:00 UTC:\n%s", next)
	}

	submit := func() (api.Job, map[string]api.Job) {
		t.Helper()
		began := time.Now()
		out, code := u.cli("job", "submit", "-f", filepath.Join(dir, "pipeline.yaml"), "--workspace", "mlops", "--stream")
		if code != 0 || !strings.Contains(out, "job:") {
			t.Fatalf("job submit -f pipeline.yaml --stream: exit %d:\n%s", code, out)
		}
		id := strings.Fields(out[strings.Index(out, "job:"):])[1]
		t.Logf("pipeline %s in %s (CLI start, uploads and the run):\n%s", id, time.Since(began).Round(time.Millisecond), out)
		p := u.showJob("mlops", id)
		if p.Status != api.JobCompleted {
			t.Fatalf("pipeline %s: %s (%s): %+v", id, p.Status, p.Error, p.Steps)
		}
		steps := map[string]api.Job{}
		for _, s := range p.Steps {
			steps[s.Name] = u.showJob("mlops", s.Job)
		}
		return p, steps
	}
	reusedFrom := func(p api.Job) map[string]string {
		got := map[string]string{}
		for _, s := range p.Steps {
			got[s.Name] = s.ReusedFrom
		}
		return got
	}

	p1, s1 := submit()
	for name, c := range map[string]string{"prep": "cpu", "train": api.ServerlessCompute, "score": "dev"} {
		if j := s1[name]; j.Compute != c || j.Status != api.JobCompleted {
			t.Errorf("step %s: job %s on %q, %s; want Completed on %q", name, j.ID, j.Compute, j.Status, c)
		}
	}
	// Each output reaches the next step with the digest it was registered with.
	for _, hop := range []struct{ from, out, to, in string }{
		{"prep", "data", "train", "data"}, {"prep", "data", "score", "data"}, {"train", "model", "score", "model"},
	} {
		d := s1[hop.from].Outputs[hop.out].Digest
		if d == "" || s1[hop.to].Inputs[hop.in].Digest != d {
			t.Errorf("%s registered output %s %q; %s took input %s %q", hop.from, hop.out, d, hop.to, hop.in, s1[hop.to].Inputs[hop.in].Digest)
		}
	}
	if p1.Outputs["model"].Digest != s1["train"].Outputs["model"].Digest || p1.Outputs["metrics"].Digest != s1["score"].Outputs["metrics"].Digest {
		t.Fatalf("pipeline outputs %+v; want train's model %s and score's metrics %s", p1.Outputs, s1["train"].Outputs["model"].Digest, s1["score"].Outputs["metrics"].Digest)
	}
	dl := filepath.Join(u.workDir, "out")
	if out, code := u.cli("job", "download", "--workspace", "mlops", p1.ID, "--output-name", "metrics", "--download-path", dl); code != 0 {
		t.Fatalf("job download: exit %d: %s", code, out)
	}
	var metrics struct {
		Rows     int     `json:"rows"`
		Accuracy float64 `json:"accuracy"`
		Trained  struct {
			Rows int `json:"rows"`
		} `json:"model_trained_on"`
	}
	decodeJSON(t, string(mustRead(t, filepath.Join(dl, "named-outputs", "metrics", "metrics.json"))), &metrics)
	// 42 lines of data, 2 of them unusable: prep keeps 40, 30 to train and 10 to test.
	if metrics.Rows != 10 || metrics.Trained.Rows != 30 {
		t.Fatalf("metrics.json %+v; want 10 rows scored by a model trained on 30", metrics)
	}
	t.Logf("accuracy on the held-out rows: %v", metrics.Accuracy)

	// The same file again: every step reused, nothing runs.
	p2, _ := submit()
	for step, from := range reusedFrom(p2) {
		if from != p1.ID+"/"+step {
			t.Errorf("unchanged resubmit: step %s reused_from %q; want %s/%s", step, from, p1.ID, step)
		}
	}

	// The endpoint of train-and-serve serves the pipeline's model.
	u.mustTerraformIn(dir, "apply", "-auto-approve", "-var", "model_job="+p1.ID)
	if got := u.mustTerraformIn(dir, "output", "-raw", "model_digest"); got != p1.Outputs["model"].Digest {
		t.Fatalf("model_digest %q; want the pipeline output's %q", got, p1.Outputs["model"].Digest)
	}
	raw, code := u.cli("endpoint", "invoke", "--workspace", "mlops", "churn", "--data", `{"data": [[0.5, 4, 1.0]]}`)
	if code != 0 {
		t.Fatalf("endpoint invoke: exit %d: %s", code, raw)
	}
	var answer struct {
		Predictions []float64 `json:"predictions"`
		Model       modelFile `json:"model"`
	}
	decodeJSON(t, raw, &answer)
	if len(answer.Predictions) != 1 || answer.Predictions[0] <= 0.5 || answer.Model.TrainedOn.Rows != 30 {
		t.Fatalf("the endpoint answered %s; want one churn probability above 0.5 from the model trained on 30 rows", raw)
	}

	// An edit to train.py that changes the model: train runs, and score, whose input
	// changed; prep is reused.
	trainPy := filepath.Join(dir, "train", "train.py")
	src := string(mustRead(t, trainPy))
	edited := strings.ReplaceAll(src, "round(w, 6)", "round(w, 3)")
	if edited == src {
		t.Fatal("train.py no longer rounds its weights to 6 digits; update this test's edit")
	}
	if err := os.WriteFile(trainPy, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	// The schedule snapshotted train.py at apply: the edit plans its update in place.
	if plan := u.mustTerraformIn(dir, "plan", "-var", "model_job="+p1.ID, "-no-color"); !strings.Contains(plan, "mlcompute_schedule.nightly will be updated in-place") || !strings.Contains(plan, "content_hash") {
		t.Fatalf("after editing train.py the plan does not update the schedule in place:\n%s", plan)
	}
	p3, s3 := submit()
	if got := reusedFrom(p3); got["prep"] != p1.ID+"/prep" || got["train"] != "" || got["score"] != "" {
		t.Fatalf("after editing train.py: reused_from %v; want prep from %s, train and score run", got, p1.ID)
	}
	if s3["train"].Outputs["model"].Digest == p1.Outputs["model"].Digest {
		t.Fatalf("the edited train.py registered the first model again (%s)", p1.Outputs["model"].Digest)
	}

	// One blob of train's output deleted from the engine's store
	// (artifacts/blobs/<2 hex>/<64 hex>, a manifest and each file named by its sha256):
	// train runs again and registers the same content; score is reused.
	model := s3["train"].Outputs["model"].Digest
	blob := func(digest string) string {
		hex := strings.TrimPrefix(digest, "sha256:")
		return filepath.Join(u.home, "artifacts", "blobs", hex[:2], hex)
	}
	var manifest struct {
		Files []struct {
			Path, Digest string
		} `json:"files"`
	}
	if err := json.Unmarshal(mustRead(t, blob(model)), &manifest); err != nil || len(manifest.Files) != 1 || manifest.Files[0].Path != "model.json" {
		t.Fatalf("manifest of %s: %+v (%v); want model.json alone", model, manifest, err)
	}
	if err := os.Remove(blob(manifest.Files[0].Digest)); err != nil {
		t.Fatal(err)
	}
	p4, s4 := submit()
	if got := reusedFrom(p4); got["prep"] != p1.ID+"/prep" || got["train"] != "" || got["score"] != p3.ID+"/score" {
		t.Fatalf("after deleting a blob of train's output: reused_from %v; want prep from %s, train run, score from %s", got, p1.ID, p3.ID)
	}
	if d := s4["train"].Outputs["model"].Digest; d != model {
		t.Fatalf("train's rerun registered %s; want the same content again, %s", d, model)
	}
	if _, err := os.Stat(blob(manifest.Files[0].Digest)); err != nil {
		t.Fatalf("train's rerun did not bring the deleted blob back: %v", err)
	}

	u.mustTerraformIn(dir, "destroy", "-auto-approve", "-var", "model_job="+p1.ID)
}
