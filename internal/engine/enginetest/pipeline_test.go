package enginetest_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/client"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/enginetest"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/snapshot"
)

// pipelineRig is a real engine on local nodes, with a workspace and two computes, and
// the code of a three-step pipeline (prep -> train -> score) in a directory.
type pipelineRig struct {
	t    *testing.T
	e    *enginetest.Engine
	c    *client.Client
	ctx  context.Context
	code string
}

func newPipelineRig(t *testing.T) *pipelineRig {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	e := enginetest.Start(t, enginetest.Options{AgentArgv: []string{exe, "node-agent"}})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	r := &pipelineRig{t: t, e: e, c: e.Client(t, ""), ctx: ctx, code: t.TempDir()}
	if _, err := r.c.CreateWorkspace(ctx, api.WorkspaceSpec{Name: "mlws"}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"cpu", "big"} {
		if _, err := r.c.CreateCompute(ctx, "mlws", api.ComputeSpec{Name: name, VMSize: "Standard_DS3_v2",
			ScaleSettings: &api.ScaleSettings{MaxNodeCount: 2}}); err != nil {
			t.Fatal(err)
		}
	}
	r.write("train.sh", "# train\ncat \"$1\"/* | wc -l > \"$2\"/lines\n")
	return r
}

func (r *pipelineRig) write(name, content string) {
	if err := os.WriteFile(filepath.Join(r.code, name), []byte(content), 0o644); err != nil {
		r.t.Fatal(err)
	}
	// The snapshot keeps whole seconds of modification time: a fixed one keeps the code's
	// snapshot (and so the step's key) a function of its content here.
	fixed := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := os.Chtimes(filepath.Join(r.code, name), fixed, fixed); err != nil {
		r.t.Fatal(err)
	}
}

func (r *pipelineRig) snapshot(dir string) string {
	var archive bytes.Buffer
	if _, err := snapshot.Pack(dir, &archive, snapshot.DefaultLimits); err != nil {
		r.t.Fatal(err)
	}
	id, err := r.c.PutSnapshot(r.ctx, "mlws", archive.Bytes())
	if err != nil {
		r.t.Fatal(err)
	}
	return id
}

// spec is the three-step pipeline over raw (a snapshot of the input data): prep copies
// it and adds a line, train (in the code directory) counts lines, score takes both.
func (r *pipelineRig) spec(raw string) api.JobSpec {
	code := r.snapshot(r.code)
	folder := func() map[string]api.JobOutput { return map[string]api.JobOutput{} }
	prep := api.PipelineStepSpec{Name: "prep", InputBindings: map[string]string{"raw": "parent.inputs.raw"},
		Job: api.JobSpec{Compute: "cpu", Command: []string{"sh", "-c", `cp -r ${{inputs.raw}}/. ${{outputs.data}}/ && echo prepared > ${{outputs.data}}/extra`},
			Inputs: map[string]api.JobInput{"raw": {Type: api.URIFolder}}, Outputs: folder()}}
	prep.Job.Outputs["data"] = api.JobOutput{}
	train := api.PipelineStepSpec{Name: "train", InputBindings: map[string]string{"data": "parent.jobs.prep.outputs.data"},
		OutputBindings: map[string]string{"model": "model"},
		Job: api.JobSpec{Compute: "big", SnapshotID: code, Command: []string{"sh", "-c", `sh train.sh ${{inputs.data}} ${{outputs.model}}`},
			Inputs: map[string]api.JobInput{}, Outputs: map[string]api.JobOutput{"model": {}}}}
	score := api.PipelineStepSpec{Name: "score",
		InputBindings: map[string]string{"model": "parent.jobs.train.outputs.model", "data": "parent.jobs.prep.outputs.data"},
		Job: api.JobSpec{Compute: "cpu", Command: []string{"sh", "-c", `cat ${{inputs.model}}/lines > ${{outputs.scores}}/result && ls ${{inputs.data}} >> ${{outputs.scores}}/result`},
			Inputs: map[string]api.JobInput{}, Outputs: map[string]api.JobOutput{"scores": {}}}}
	return api.JobSpec{Type: api.JobTypePipeline, Pipeline: &api.PipelineSpec{
		Inputs:  map[string]api.JobInput{"raw": {Type: api.URIFolder, SnapshotID: raw, Path: "raw"}},
		Outputs: map[string]api.JobOutput{"model": {}},
		Steps:   []api.PipelineStepSpec{prep, train, score},
	}}
}

// run submits a pipeline and waits for its end.
func (r *pipelineRig) run(spec api.JobSpec) *api.Job {
	r.t.Helper()
	j, err := r.c.SubmitJob(r.ctx, "mlws", spec)
	if err != nil {
		r.t.Fatal(err)
	}
	return r.wait(j.ID)
}

// wait waits for a pipeline's end.
func (r *pipelineRig) wait(id string) *api.Job {
	r.t.Helper()
	j := r.job(id)
	var err error
	for !api.Terminal(j.Status) {
		select {
		case <-r.ctx.Done():
			r.t.Fatalf("pipeline %s did not end: %+v", j.ID, j)
		case <-time.After(50 * time.Millisecond):
		}
		if j, err = r.c.GetJob(r.ctx, "mlws", j.ID); err != nil {
			r.t.Fatal(err)
		}
	}
	return j
}

func (r *pipelineRig) job(id string) *api.Job {
	r.t.Helper()
	j, err := r.c.GetJob(r.ctx, "mlws", id)
	if err != nil {
		r.t.Fatal(err)
	}
	return j
}

// steps maps each step's name to its reused_from ("" when it ran), checking each Completed.
func (r *pipelineRig) reusedFrom(p *api.Job) map[string]string {
	r.t.Helper()
	out := map[string]string{}
	for _, s := range p.Steps {
		if s.Status != api.JobCompleted {
			r.t.Fatalf("pipeline %s: step %s is %s (%s)", p.ID, s.Name, s.Status, s.Reason)
		}
		out[s.Name] = s.ReusedFrom
	}
	return out
}

func TestPipelineOnLocalNodesPassesOutputsAndReusesByContent(t *testing.T) {
	r := newPipelineRig(t)
	rawDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(rawDir, "a.csv"), []byte("1\n2\n3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	raw := r.snapshot(rawDir)

	// First run: every step runs, each on its compute, outputs passed by digest.
	p1 := r.run(r.spec(raw))
	if p1.Status != api.JobCompleted {
		t.Fatalf("first pipeline: %s (%s) %+v", p1.Status, p1.Error, p1.Steps)
	}
	if got := r.reusedFrom(p1); got["prep"] != "" || got["train"] != "" || got["score"] != "" {
		t.Fatalf("first run reused %v", got)
	}
	prep, train, score := r.job(p1.ID+"-prep"), r.job(p1.ID+"-train"), r.job(p1.ID+"-score")
	if train.Compute != "big" || prep.Compute != "cpu" || prep.Pipeline != p1.ID || train.Step != "train" {
		t.Fatalf("steps' jobs: prep %+v train %+v", prep, train)
	}
	if d := prep.Outputs["data"].Digest; d == "" || train.Inputs["data"].Digest != d || score.Inputs["data"].Digest != d {
		t.Fatalf("prep's output %q; train took %q, score took %q", d, train.Inputs["data"].Digest, score.Inputs["data"].Digest)
	}
	if d := train.Outputs["model"].Digest; d == "" || score.Inputs["model"].Digest != d || p1.Outputs["model"].Digest != d {
		t.Fatalf("train's output %q; score took %q; the pipeline registered %q", d, score.Inputs["model"].Digest, p1.Outputs["model"].Digest)
	}

	// An unchanged resubmit reuses every step, from the first run.
	p2 := r.run(r.spec(raw))
	want := map[string]string{"prep": p1.ID + "/prep", "train": p1.ID + "/train", "score": p1.ID + "/score"}
	if got := r.reusedFrom(p2); !equalMaps(got, want) {
		t.Fatalf("unchanged resubmit reused %v; want %v", got, want)
	}
	if p2.Outputs["model"].Digest != p1.Outputs["model"].Digest {
		t.Fatalf("reused pipeline's output %q, first run's %q", p2.Outputs["model"].Digest, p1.Outputs["model"].Digest)
	}

	// A change to train's code reruns train and score (whose input changed), not prep.
	r.write("train.sh", "# train, second version\ncat \"$1\"/* | wc -l > \"$2\"/lines\necho v2 >> \"$2\"/lines\n")
	p3 := r.run(r.spec(raw))
	want = map[string]string{"prep": p1.ID + "/prep", "train": "", "score": ""}
	if got := r.reusedFrom(p3); !equalMaps(got, want) {
		t.Fatalf("after a code change: %v; want %v", got, want)
	}

	// A deleted blob of train's output: train runs again; its output has the same
	// content, so score, keyed on its inputs' content, is reused.
	model := r.job(p3.ID + "-train").Outputs["model"].Digest
	m, err := r.e.Artifacts().Manifest(model)
	if err != nil {
		t.Fatal(err)
	}
	hex := strings.TrimPrefix(m.Files[0].Digest, "sha256:")
	if err := os.Remove(filepath.Join(r.e.DataDir, "artifacts", "blobs", hex[:2], hex)); err != nil {
		t.Fatal(err)
	}
	p4 := r.run(r.spec(raw))
	want = map[string]string{"prep": p1.ID + "/prep", "train": "", "score": p3.ID + "/score"}
	if got := r.reusedFrom(p4); !equalMaps(got, want) {
		t.Fatalf("after a deleted blob: %v; want %v", got, want)
	}
	if err := r.e.Artifacts().Verify(r.ctx, model); err != nil {
		t.Fatalf("train's rerun did not bring its output back: %v", err)
	}

	// force_rerun runs every step.
	forced := r.spec(raw)
	forced.Pipeline.ForceRerun = true
	p5 := r.run(forced)
	if got := r.reusedFrom(p5); !equalMaps(got, map[string]string{"prep": "", "train": "", "score": ""}) {
		t.Fatalf("force_rerun reused %v", got)
	}
}

func TestPipelineOnLocalNodesSkipsTheDependentsOfAFailedStep(t *testing.T) {
	r := newPipelineRig(t)
	rawDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(rawDir, "a.csv"), []byte("1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	spec := r.spec(r.snapshot(rawDir))
	spec.Pipeline.Steps[0].Job.Command = []string{"sh", "-c", "echo broken; exit 3"}
	p := r.run(spec)
	if p.Status != api.JobFailed || p.Error != "steps failed: prep" {
		t.Fatalf("pipeline %s (%s)", p.Status, p.Error)
	}
	got := map[string]string{}
	for _, s := range p.Steps {
		got[s.Name] = s.Status + ": " + s.Reason
	}
	want := map[string]string{
		"prep":  "Failed: exit code 3",
		"train": "Skipped: upstream prep failed",
		"score": "Skipped: upstream prep failed",
	}
	if got["train"] != want["train"] || got["score"] != want["score"] || !strings.HasPrefix(got["prep"], "Failed") {
		t.Fatalf("steps %v; want %v", got, want)
	}
	if _, err := r.c.GetJob(r.ctx, "mlws", p.ID+"-train"); !api.IsNotFound(err) {
		t.Fatalf("a skipped step's job exists: %v", err)
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// Two identical pipelines submitted together run each step once: for every step, one
// pipeline ran it and the other reused that run.
func TestPipelinesSubmittedTogetherRunEachStepOnce(t *testing.T) {
	r := newPipelineRig(t)
	rawDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(rawDir, "a.csv"), []byte("1\n2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	raw := r.snapshot(rawDir)
	first, err := r.c.SubmitJob(r.ctx, "mlws", r.spec(raw))
	if err != nil {
		t.Fatal(err)
	}
	second := r.run(r.spec(raw))
	p1 := r.wait(first.ID)
	ran := map[string]int{}
	for _, p := range []*api.Job{p1, second} {
		other := p1.ID
		if p == p1 {
			other = second.ID
		}
		for step, from := range r.reusedFrom(p) {
			switch from {
			case "":
				ran[step]++
			case other + "/" + step:
			default:
				t.Fatalf("pipeline %s: step %s reused %s", p.ID, step, from)
			}
		}
	}
	if !equalMaps(map[string]string{"prep": fmt.Sprint(ran["prep"]), "train": fmt.Sprint(ran["train"]), "score": fmt.Sprint(ran["score"])},
		map[string]string{"prep": "1", "train": "1", "score": "1"}) {
		t.Fatalf("steps ran %v times across the two pipelines; want once each", ran)
	}
}

// job cancel of a pipeline on local nodes kills its running step and ends it Canceled.
func TestPipelineOnLocalNodesCancel(t *testing.T) {
	r := newPipelineRig(t)
	rawDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(rawDir, "a.csv"), []byte("1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	spec := r.spec(r.snapshot(rawDir))
	started := filepath.Join(t.TempDir(), "started")
	spec.Pipeline.Steps[0].Job.Command = []string{"sh", "-c", "touch " + started + " && sleep 600"}
	p, err := r.c.SubmitJob(r.ctx, "mlws", spec)
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(started); err == nil {
			break
		}
		select {
		case <-r.ctx.Done():
			t.Fatal("prep never started")
		case <-time.After(50 * time.Millisecond):
		}
	}
	got, err := r.c.CancelJob(r.ctx, "mlws", p.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != api.JobCanceled {
		t.Fatalf("cancel answered %s: %+v", got.Status, got.Steps)
	}
	statuses := map[string]string{}
	for _, s := range r.wait(p.ID).Steps {
		statuses[s.Name] = s.Status
	}
	if !equalMaps(statuses, map[string]string{"prep": api.JobCanceled, "train": api.JobCanceled, "score": api.JobCanceled}) {
		t.Fatalf("steps %v", statuses)
	}
	if j := r.job(p.ID + "-prep"); j.Status != api.JobCanceled {
		t.Fatalf("prep's job %s", j.Status)
	}
}
