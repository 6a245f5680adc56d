package pipelines

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store/storetest"
)

// fakeJobs is the jobs' controller as the pipelines' sees it: SubmitStep stores a Queued
// job (idempotent under its ID) and records the call; CancelJob ends a job Canceled.
type fakeJobs struct {
	st        *store.Store
	submitted []string
	canceled  []string
	// crash makes SubmitStep fail as an engine stopping does (its context canceled).
	crash bool
	// names are the IDs NewJobID gives, in turn, to jobs submitted without a name.
	names []string
}

func (f *fakeJobs) SubmitStep(ctx context.Context, ws string, spec api.JobSpec, key, pipeline, step string) (*api.Job, error) {
	if f.crash {
		return nil, context.Canceled
	}
	j := model.Job{Job: api.Job{ID: spec.Name, Workspace: ws, Compute: spec.Compute, Status: api.JobQueued, Inputs: spec.Inputs,
		Outputs: spec.Outputs, Pipeline: pipeline, Step: step}, ComputeKey: ws + "/" + spec.Compute}
	err := f.st.Update(func(tx *store.Tx) error {
		if _, ok := model.GetJob(tx, ws, spec.Name); ok {
			return nil
		}
		for name, in := range j.Inputs {
			if in.Path != "" {
				out, err := model.ResolveJobOutput(tx, ws, in.Path)
				if err != nil {
					return err
				}
				in.Digest = out.Digest
				j.Inputs[name] = in
			}
		}
		f.submitted = append(f.submitted, spec.Name)
		return model.PutJob(tx, j)
	})
	return &j.Job, err
}

func (f *fakeJobs) CancelJob(_ context.Context, ws, id string) (*api.Job, error) {
	var j model.Job
	err := f.st.Update(func(tx *store.Tx) error {
		var ok bool
		if j, ok = model.GetJob(tx, ws, id); !ok || api.Terminal(j.Status) {
			return nil
		}
		f.canceled = append(f.canceled, id)
		j.Finish(api.JobCanceled, nil, "canceled by user", time.Now())
		return model.PutJob(tx, j)
	})
	return &j.Job, err
}

func (f *fakeJobs) NewJobID(_ *store.Tx, name string) (string, error) {
	if name == "" {
		if len(f.names) == 0 {
			return "", errors.New("the test named no more pipelines")
		}
		name, f.names = f.names[0], f.names[1:]
	}
	return name, nil
}

// present is the artifacts store as a set of digests whose blobs are all there.
type present map[string]bool

func (p present) Verify(_ context.Context, digest string) error {
	if !p[digest] {
		return fmt.Errorf("%s is not in the store", digest)
	}
	return nil
}

type rig struct {
	t      *testing.T
	st     *store.Store
	clock  *clocktesting.FakeClock
	jobs   *fakeJobs
	blobs  present
	c      *Controller
	marked []string
}

func newRig(t *testing.T) *rig {
	st := storetest.Open(t, t.TempDir())
	clock := clocktesting.NewFakeClock(time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC))
	storetest.PutWorkspace(t, st, "lab", nil, clock.Now())
	err := st.Update(func(tx *store.Tx) error {
		for _, name := range []string{"cpu", "gpu"} {
			if err := tx.Put(store.Computes, "lab/"+name, model.Compute{Workspace: "lab", Name: name}); err != nil {
				return err
			}
		}
		env := model.Environment{Environment: api.Environment{EnvironmentSpec: api.EnvironmentSpec{Name: "py"}, Workspace: "lab", ContentHash: "envhash"}}
		return tx.Put(store.Environments, env.Key(), env)
	})
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, st: st, clock: clock, jobs: &fakeJobs{st: st}, blobs: present{}}
	r.restart()
	return r
}

// restart builds a new controller over the same store, as an engine that starts again.
func (r *rig) restart() {
	r.c = New(Config{Write: r.st.Update, View: r.st.View, Clock: r.clock, Jobs: r.jobs, Artifacts: r.blobs,
		Mark: func(name string) { r.marked = append(r.marked, name) }})
}

// settle reconciles the pipeline, and again while a pass asks for another or a step's
// end left a wake marker (the engine reconciles the pipeline then). With crash set, the
// context is canceled, as an engine's that stops.
func (r *rig) settle(id string) {
	r.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	if r.jobs.crash {
		cancel()
	}
	defer cancel()
	for i := 0; ; i++ {
		if i > 10 {
			r.t.Fatal("the pipeline asks for passes without end")
		}
		r.marked = nil
		r.c.Reconcile(ctx, "lab/"+id)
		woken := false
		_ = r.st.View(func(tx *store.Tx) error { woken = len(tx.Keys(store.PipelineWakes, "lab/"+id+"/")) > 0; return nil })
		if len(r.marked) == 0 && !woken {
			return
		}
	}
}

func (r *rig) submit(spec api.JobSpec) string {
	r.t.Helper()
	j, err := r.c.Submit(context.Background(), "lab", spec, "")
	if err != nil {
		r.t.Fatal(err)
	}
	r.settle(j.ID)
	return j.ID
}

// end ends a step's job with status; a Completed one registers each output with digest
// "<job>.<output>" (present in the artifacts store).
func (r *rig) end(job, status string) {
	r.t.Helper()
	err := r.st.Update(func(tx *store.Tx) error {
		j, ok := model.GetJob(tx, "lab", job)
		if !ok {
			return fmt.Errorf("no job %s", job)
		}
		j.Status = api.JobRunning
		if status == api.JobCompleted {
			for name, o := range j.Outputs {
				o.Digest = j.ID + "." + name
				r.blobs[o.Digest] = true
				j.PendingOutputs = map[string]api.JobOutput{name: o}
				j.Outputs[name] = o
			}
		}
		j.Finish(status, nil, "", r.clock.Now())
		return model.PutJob(tx, j)
	})
	if err != nil {
		r.t.Fatal(err)
	}
}

func (r *rig) pipeline(id string) *api.Job {
	r.t.Helper()
	var j model.Job
	_ = r.st.View(func(tx *store.Tx) error { j, _ = model.GetJob(tx, "lab", id); return nil })
	out, err := r.c.Describe(context.Background(), &j.Job)
	if err != nil {
		r.t.Fatal(err)
	}
	return out
}

// steps lists each step as "name status" (with its reason or reused_from when any).
func (r *rig) steps(id string) []string {
	var out []string
	for _, s := range r.pipeline(id).Steps {
		line := s.Name + " " + s.Status
		if s.Reason != "" {
			line += " (" + s.Reason + ")"
		}
		if s.ReusedFrom != "" {
			line += " reused_from " + s.ReusedFrom
		}
		out = append(out, line)
	}
	return out
}

func (r *rig) wantSteps(id string, want ...string) {
	r.t.Helper()
	if got := r.steps(id); !slices.Equal(got, want) {
		r.t.Fatalf("steps:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

func (r *rig) wantSubmitted(want ...string) {
	r.t.Helper()
	if !slices.Equal(r.jobs.submitted, want) {
		r.t.Fatalf("submitted %v; want %v", r.jobs.submitted, want)
	}
}

func step(name, compute string, bindings map[string]string, outputs ...string) api.PipelineStepSpec {
	s := api.PipelineStepSpec{Name: name, InputBindings: bindings, OutputBindings: map[string]string{},
		Job: api.JobSpec{Compute: compute, Command: []string{"sh", "-c", "run " + name}, Inputs: map[string]api.JobInput{}, Outputs: map[string]api.JobOutput{}}}
	for _, o := range outputs {
		s.Job.Outputs[o] = api.JobOutput{Type: api.URIFolder}
	}
	return s
}

// diamond is a -> (b, c) -> d; d's output is the pipeline's output "result".
func diamond(name string) api.JobSpec {
	d := step("d", "cpu", map[string]string{"x": "parent.jobs.b.outputs.out", "y": "parent.jobs.c.outputs.out"}, "out")
	d.OutputBindings["out"] = "result"
	return api.JobSpec{Name: name, Type: api.JobTypePipeline, Pipeline: &api.PipelineSpec{
		Outputs: map[string]api.JobOutput{"result": {}},
		Steps: []api.PipelineStepSpec{
			step("a", "cpu", nil, "out"),
			step("b", "gpu", map[string]string{"x": "parent.jobs.a.outputs.out"}, "out"),
			step("c", "cpu", map[string]string{"x": "parent.jobs.a.outputs.out"}, "out"),
			d,
		},
	}}
}

func TestPipelineStartsEachStepOnceItsInputsAreRegistered(t *testing.T) {
	r := newRig(t)
	p := r.submit(diamond("p1"))
	r.wantSubmitted("p1-a")
	r.wantSteps(p, "a Queued", "b Pending", "c Pending", "d Pending")

	// a's end starts both branches at once, each bound to a's registered output.
	r.end("p1-a", api.JobCompleted)
	r.settle(p)
	r.wantSubmitted("p1-a", "p1-b", "p1-c")
	var b model.Job
	_ = r.st.View(func(tx *store.Tx) error { b, _ = model.GetJob(tx, "lab", "p1-b"); return nil })
	if in := b.Inputs["x"]; in.Path != "azureml://jobs/p1-a/outputs/out" || in.Digest != "p1-a.out" || b.Compute != "gpu" {
		t.Fatalf("b's job %+v", b.Job)
	}
	// d waits for both.
	r.end("p1-b", api.JobCompleted)
	r.settle(p)
	r.wantSubmitted("p1-a", "p1-b", "p1-c")
	r.end("p1-c", api.JobCompleted)
	r.settle(p)
	r.wantSubmitted("p1-a", "p1-b", "p1-c", "p1-d")
	r.end("p1-d", api.JobCompleted)
	r.settle(p)
	got := r.pipeline(p)
	if got.Status != api.JobCompleted || got.Outputs["result"].Digest != "p1-d.out" {
		t.Fatalf("pipeline %s, outputs %+v", got.Status, got.Outputs)
	}
	if got.Steps[3].Upstream[0] != "b" || got.Steps[3].Upstream[1] != "c" {
		t.Fatalf("d's upstream %v", got.Steps[3].Upstream)
	}
	_ = r.st.View(func(tx *store.Tx) error {
		if w := model.PipelineWakes(tx); len(w) != 0 {
			t.Fatalf("wake markers left: %+v", w)
		}
		return nil
	})
}

func TestPipelineFailedStepSkipsItsDependents(t *testing.T) {
	r := newRig(t)
	p := r.submit(diamond("p1"))
	r.end("p1-a", api.JobCompleted)
	r.settle(p)
	r.end("p1-b", api.JobFailed)
	r.settle(p)
	// Without continue_on_step_failure the running branch is canceled.
	r.wantSteps(p, "a Completed", "b Failed", "c Canceled", "d Skipped (upstream b failed)")
	if !slices.Equal(r.jobs.canceled, []string{"p1-c"}) {
		t.Fatalf("canceled %v", r.jobs.canceled)
	}
	if got := r.pipeline(p); got.Status != api.JobFailed || got.Error != "steps failed: b" || got.Outputs["result"].Digest != "" {
		t.Fatalf("pipeline %s (%s) %+v", got.Status, got.Error, got.Outputs)
	}
}

func TestPipelineContinueOnStepFailureLetsIndependentBranchesFinish(t *testing.T) {
	r := newRig(t)
	spec := diamond("p1")
	spec.Pipeline.ContinueOnStepFailure = true
	spec.Pipeline.Steps = append(spec.Pipeline.Steps, step("e", "cpu", map[string]string{"x": "parent.jobs.c.outputs.out"}, "out"))
	p := r.submit(spec)
	r.end("p1-a", api.JobCompleted)
	r.settle(p)
	r.end("p1-b", api.JobFailed)
	r.settle(p)
	r.wantSteps(p, "a Completed", "b Failed", "c Queued", "d Skipped (upstream b failed)", "e Pending")
	r.end("p1-c", api.JobCompleted)
	r.settle(p)
	r.wantSubmitted("p1-a", "p1-b", "p1-c", "p1-e")
	r.end("p1-e", api.JobCompleted)
	r.settle(p)
	if got := r.pipeline(p); got.Status != api.JobFailed {
		t.Fatalf("pipeline %s", got.Status)
	}
	if len(r.jobs.canceled) != 0 {
		t.Fatalf("canceled %v", r.jobs.canceled)
	}
}

func TestPipelineCancelCancelsRunningSteps(t *testing.T) {
	r := newRig(t)
	p := r.submit(diamond("p1"))
	r.end("p1-a", api.JobCompleted)
	r.settle(p)
	got, err := r.c.Cancel(context.Background(), "lab", p)
	if err != nil {
		t.Fatal(err)
	}
	// The answer already shows the pipeline and its steps canceled.
	if got.Status != api.JobCanceled || got.Steps[1].Status != api.JobCanceled {
		t.Fatalf("cancel answered %s, steps %+v", got.Status, got.Steps)
	}
	if !slices.Equal(r.jobs.canceled, []string{"p1-b", "p1-c"}) {
		t.Fatalf("canceled %v", r.jobs.canceled)
	}
	r.settle(p)
	r.wantSteps(p, "a Completed", "b Canceled", "c Canceled", "d Canceled (pipeline canceled)")
	if got := r.pipeline(p); got.Status != api.JobCanceled || got.Error != "canceled by user" {
		t.Fatalf("pipeline %s (%s)", got.Status, got.Error)
	}
}

func TestPipelineRetriesAStepThatFails(t *testing.T) {
	r := newRig(t)
	spec := diamond("p1")
	spec.Pipeline.Steps[0].MaxRetries = 1
	p := r.submit(spec)
	r.end("p1-a", api.JobFailed)
	r.settle(p)
	r.wantSubmitted("p1-a", "p1-a-retry1")
	r.end("p1-a-retry1", api.JobFailed)
	r.settle(p)
	r.wantSteps(p, "a Failed", "b Skipped (upstream a failed)", "c Skipped (upstream a failed)", "d Skipped (upstream a failed)")
	if got := r.pipeline(p); got.Steps[0].Retries != 1 || got.Steps[0].Job != "p1-a-retry1" {
		t.Fatalf("a: %+v", got.Steps[0])
	}
}

// Crash safety: a step chosen but not queued when the engine stopped is queued under the
// same job after the restart, and a step that finished is not queued again.
func TestPipelineResumesAfterARestartWithoutRerunningFinishedSteps(t *testing.T) {
	r := newRig(t)
	p := r.submit(diamond("p1"))
	r.end("p1-a", api.JobCompleted)
	r.jobs.crash = true
	r.settle(p) // b and c chosen and stored; the engine stops before they are queued
	r.wantSubmitted("p1-a")
	r.jobs.crash = false
	r.restart()
	r.settle(p)
	r.wantSubmitted("p1-a", "p1-b", "p1-c")
	r.restart()
	r.settle(p)
	r.wantSubmitted("p1-a", "p1-b", "p1-c")
	r.wantSteps(p, "a Completed", "b Queued", "c Queued", "d Pending")
}

func TestPipelineReusesStepsByKeyAndOnlyWithTheirBlobs(t *testing.T) {
	r := newRig(t)
	run := func(spec api.JobSpec) string {
		p := r.submit(spec)
		for _, s := range []string{"a", "b", "c", "d"} {
			if st := r.pipeline(p).Steps; st[slices.IndexFunc(st, func(x api.PipelineStep) bool { return x.Name == s })].Status == api.JobQueued {
				r.end(p+"-"+s, api.JobCompleted)
				r.settle(p)
			}
		}
		if got := r.pipeline(p); got.Status != api.JobCompleted {
			t.Fatalf("pipeline %s: %s %v", p, got.Status, r.steps(p))
		}
		return p
	}
	run(diamond("p1"))
	r.jobs.submitted = nil

	// The same pipeline again: every step reused, none queued, the output the same.
	p2 := run(diamond("p2"))
	r.wantSubmitted()
	r.wantSteps(p2, "a Completed reused_from p1/a", "b Completed reused_from p1/b", "c Completed reused_from p1/c", "d Completed reused_from p1/d")
	if got := r.pipeline(p2).Outputs["result"].Digest; got != "p1-d.out" {
		t.Fatalf("p2's output %s", got)
	}

	// A step's blob gone: that step runs again; its output has new content ("p3-b.out"),
	// so d, which takes it, runs too; c is reused.
	delete(r.blobs, "p1-b.out")
	p3 := run(diamond("p3"))
	r.wantSubmitted("p3-b", "p3-d")
	r.wantSteps(p3, "a Completed reused_from p1/a", "b Completed", "c Completed reused_from p1/c", "d Completed")

	// A changed command changes the key; compute does not.
	r.jobs.submitted = nil
	spec := diamond("p4")
	spec.Pipeline.Steps[2].Job.Command = []string{"sh", "-c", "run c differently"}
	spec.Pipeline.Steps[0].Job.Compute = "gpu"
	run(spec)
	r.wantSubmitted("p4-c", "p4-d")

	// force_rerun and is_deterministic: false run; their results are recorded for later.
	r.jobs.submitted = nil
	spec = diamond("p5")
	spec.Pipeline.ForceRerun = true
	run(spec)
	r.wantSubmitted("p5-a", "p5-b", "p5-c", "p5-d")
	r.jobs.submitted = nil
	spec = diamond("p6")
	no := false
	spec.Pipeline.Steps[0].IsDeterministic = &no
	p6 := run(spec)
	r.wantSubmitted("p6-a", "p6-b", "p6-c", "p6-d") // a's new output changes every dependent's inputs
	r.jobs.submitted = nil
	p7 := run(diamond("p7"))
	r.wantSubmitted()
	r.wantSteps(p7, "a Completed reused_from "+p6+"/a", "b Completed reused_from "+p6+"/b", "c Completed reused_from "+p6+"/c", "d Completed reused_from "+p6+"/d")
}

// A key that cannot be computed (an input whose digest is unknown) means the step runs.
func TestPipelineStepWithoutAKeyRuns(t *testing.T) {
	r := newRig(t)
	spec := diamond("p1")
	spec.Pipeline.Steps[0].Job.Inputs["x"] = api.JobInput{Type: api.URIFolder, Path: "azureml://jobs/gone/outputs/o"}
	p := r.submit(spec)
	var run model.PipelineRun
	_ = r.st.View(func(tx *store.Tx) error { j, _ := model.GetJob(tx, "lab", p); run = *j.PipelineRun; return nil })
	if a := run.Steps["a"]; a.Key != "" || a.KeyMissing != "inputs.x" {
		t.Fatalf("a's key %q, missing %q", a.Key, a.KeyMissing)
	}
}

func TestPipelineSubmitRefusals(t *testing.T) {
	r := newRig(t)
	for _, tc := range []struct {
		name string
		edit func(*api.PipelineSpec)
		want string
	}{
		{"unknown compute from the settings", func(p *api.PipelineSpec) {
			p.Steps[1].Job.Compute, p.Steps[1].ComputePath = "tpu", "settings.default_compute"
		}, `settings.default_compute: unknown compute "tpu" in workspace "lab" (computes: cpu, gpu)`},
		{"unknown compute of a step", func(p *api.PipelineSpec) { p.Steps[2].Job.Compute = "tpu" },
			`jobs.c.compute: unknown compute "tpu" in workspace "lab" (computes: cpu, gpu)`},
		{"serverless without a size", func(p *api.PipelineSpec) { p.Steps[1].Job.Compute = api.ServerlessCompute },
			`jobs.b.resources.instance_type: step "b" runs on serverless, which needs a VM size such as Standard_DS3_v2`},
		{"serverless of an unknown size", func(p *api.PipelineSpec) {
			p.Steps[1].Job.Compute, p.Steps[1].Job.InstanceType = api.ServerlessCompute, "Standard_Nope"
		}, `jobs.b.resources.instance_type: unknown VM size "Standard_Nope"`},
		{"unknown environment", func(p *api.PipelineSpec) { p.Steps[0].Job.Environment = "conda" },
			`jobs.a.environment: unknown environment "conda" in workspace "lab" (environments: py)`},
		{"cycle", func(p *api.PipelineSpec) {
			p.Steps[0].InputBindings = map[string]string{"z": "parent.jobs.d.outputs.out"}
		},
			"jobs.a: steps form a cycle: a -> b -> d -> a"},
		{"unknown output", func(p *api.PipelineSpec) { p.Steps[1].InputBindings["x"] = "parent.jobs.a.outputs.nope" },
			`jobs.b.inputs.x: step "a" has no output "nope" (outputs: out)`},
		{"unknown pipeline output", func(p *api.PipelineSpec) { p.Steps[3].OutputBindings["out"] = "nope" },
			`jobs.d.outputs.out: unknown pipeline output "nope" (outputs: result)`},
		{"type mismatch", func(p *api.PipelineSpec) {
			p.Steps[1].Job.Inputs["x"] = api.JobInput{Type: api.URIFile}
		}, `jobs.b.inputs.x: input "x" is uri_file but output a.out is uri_folder`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := diamond("p-" + strings.ReplaceAll(tc.name, " ", "-"))
			tc.edit(spec.Pipeline)
			_, err := r.c.Submit(context.Background(), "lab", spec, "")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v; want %q", err, tc.want)
			}
		})
	}
}

// Single flight: two pipelines with the same steps submitted together run each step
// once; the second's steps wait for the first's runs and reuse them.
func TestPipelinesWithTheSameStepsRunEachStepOnce(t *testing.T) {
	r := newRig(t)
	p1 := r.submit(diamond("p1"))
	p2 := r.submit(diamond("p2"))
	r.wantSubmitted("p1-a")
	r.wantSteps(p2, "a Pending", "b Pending", "c Pending", "d Pending")
	for _, s := range []string{"a", "b", "c", "d"} {
		for _, job := range r.jobs.submitted {
			if strings.HasSuffix(job, "-"+s) {
				r.end(job, api.JobCompleted)
			}
		}
		r.settle(p1)
		r.settle(p2)
	}
	r.wantSubmitted("p1-a", "p1-b", "p1-c", "p1-d")
	r.wantSteps(p2, "a Completed reused_from p1/a", "b Completed reused_from p1/b", "c Completed reused_from p1/c", "d Completed reused_from p1/d")

	// A run that fails lets the waiting step run itself.
	spec := diamond("p3")
	spec.Pipeline.Steps[0].Job.Command = []string{"sh", "-c", "new a"}
	p3 := r.submit(spec)
	spec.Name = "p4"
	p4 := r.submit(spec)
	r.wantSubmitted("p1-a", "p1-b", "p1-c", "p1-d", "p3-a")
	r.end("p3-a", api.JobFailed)
	r.settle(p3)
	r.settle(p4)
	r.wantSubmitted("p1-a", "p1-b", "p1-c", "p1-d", "p3-a", "p4-a")
	r.wantSteps(p4, "a Queued", "b Pending", "c Pending", "d Pending")
}

// job rerun: a new run of the definition; --from runs the step and the steps after it
// anew, the others are reused; --force runs every step.
func TestPipelineRerun(t *testing.T) {
	r := newRig(t)
	p1 := r.submit(diamond("p1"))
	for _, s := range []string{"a", "b", "c", "d"} {
		r.end("p1-"+s, api.JobCompleted)
		r.settle(p1)
	}
	r.jobs.submitted = nil
	rerun := func(req api.RerunRequest) string {
		j, err := r.c.Rerun(context.Background(), "lab", p1, req)
		if err != nil {
			t.Fatal(err)
		}
		r.settle(j.ID)
		return j.ID
	}
	// A rerun has no name of its own: the fake's NewJobID gives these.
	r.jobs.names = []string{"p2", "p3"}
	p2 := rerun(api.RerunRequest{From: "b"})
	r.wantSteps(p2, "a Completed reused_from p1/a", "b Queued", "c Completed reused_from p1/c", "d Pending")
	r.jobs.submitted = nil
	p3 := rerun(api.RerunRequest{Force: true})
	r.wantSubmitted(p3 + "-a")
	if _, err := r.c.Rerun(context.Background(), "lab", p1, api.RerunRequest{From: "z"}); err == nil || !strings.Contains(err.Error(), `pipeline "p1" has no step "z" (steps: a, b, c, d)`) {
		t.Fatalf("rerun --from z: %v", err)
	}
}

// A step whose node was lost runs again without using a retry; a failure of its own then
// fails it (max_retries 0).
func TestPipelineRequeuesAStepWhoseNodeWasLost(t *testing.T) {
	r := newRig(t)
	p := r.submit(diamond("p1"))
	err := r.st.Update(func(tx *store.Tx) error {
		j, _ := model.GetJob(tx, "lab", "p1-a")
		j.Finish(api.JobFailed, nil, "node n1 was lost while the job ran", r.clock.Now())
		j.NodeLost = true
		return model.PutJob(tx, j)
	})
	if err != nil {
		t.Fatal(err)
	}
	r.settle(p)
	r.wantSubmitted("p1-a", "p1-a-requeue1")
	if a := r.pipeline(p).Steps[0]; a.Requeues != 1 || a.Retries != 0 || a.Status != api.JobQueued {
		t.Fatalf("a: %+v", a)
	}
	r.end("p1-a-requeue1", api.JobFailed)
	r.settle(p)
	r.wantSteps(p, "a Failed", "b Skipped (upstream a failed)", "c Skipped (upstream a failed)", "d Skipped (upstream a failed)")
}
