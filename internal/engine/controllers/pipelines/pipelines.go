// Package pipelines is the pipelines' controller: it takes a pipeline job, starts each
// step as a job of its own once the outputs it binds are registered, reuses an earlier
// run of a step when rules/reuse finds one, and ends the pipeline. Its decisions are
// rules/pipeline's and rules/reuse's; its state is only in the store (the pipeline's
// record, its steps' jobs, the wake markers a step's end leaves, the reuse index), so a
// restarted engine resumes a pipeline without running a finished step again.
package pipelines

import (
	"context"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"k8s.io/utils/clock"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/rules/pipeline"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/rules/reuse"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
)

var stepNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,254}$`)

// Jobs is what the controller uses of the jobs' controller.
type Jobs interface {
	// SubmitStep queues a step's job, idempotent under key.
	SubmitStep(ctx context.Context, workspace string, spec api.JobSpec, key, pipeline, step string) (*api.Job, error)
	// CancelJob cancels a job; a finished one is returned as is.
	CancelJob(ctx context.Context, workspace, id string) (*api.Job, error)
	// NewJobID picks the ID of a new job in a write (name, when given, must be free).
	NewJobID(tx *store.Tx, name string) (string, error)
}

// Verifier checks that an output's manifest and every blob it names are in the
// artifacts store with their digests (artifacts.Store).
type Verifier interface {
	Verify(ctx context.Context, digest string) error
}

// Config builds a Controller.
type Config struct {
	// Write and View run transactions (the compute core's, so writes take their turn).
	Write  func(func(*store.Tx) error) error
	View   func(func(*store.Tx) error) error
	Clock  clock.PassiveClock
	Logger hclog.Logger
	Jobs   Jobs
	// Mark has a pipeline ("<workspace>/<id>") reconciled soon (the work loop's Mark).
	Mark func(name string)
	// Artifacts is the store of outputs; nil: no step is ever reused.
	Artifacts Verifier
	// NoContainerRuntime says why a compute's nodes cannot run container images, or ""
	// (the compute core's): a step in a container environment is refused at submit there.
	NoContainerRuntime func(rec model.Compute, name string) string
}

// Controller runs pipeline jobs.
type Controller struct {
	write, view func(func(*store.Tx) error) error
	clock       clock.PassiveClock
	log         hclog.Logger
	jobs        Jobs
	mark        func(string)
	artifacts   Verifier
	noRuntime   func(rec model.Compute, name string) string
}

// New builds the controller.
func New(cfg Config) *Controller {
	log := cfg.Logger
	if log == nil {
		log = hclog.NewNullLogger()
	}
	if cfg.NoContainerRuntime == nil {
		cfg.NoContainerRuntime = func(model.Compute, string) string { return "this engine runs no container images" }
	}
	return &Controller{write: cfg.Write, view: cfg.View, clock: cfg.Clock, log: log.Named("pipelines"), jobs: cfg.Jobs, mark: cfg.Mark, artifacts: cfg.Artifacts,
		noRuntime: cfg.NoContainerRuntime}
}

// Name names the controller in logs.
func (c *Controller) Name() string { return "pipelines" }

// stepStatus is a started step's status: the pipeline's own decision when it made one,
// else its job's ("Queued" while the job is being submitted).
func stepStatus(tx *store.Tx, workspace string, sr *model.StepRun) (string, model.Job, bool) {
	if sr.Status != "" {
		return sr.Status, model.Job{}, false
	}
	child, ok := model.GetJob(tx, workspace, sr.Job)
	if !ok {
		return api.JobQueued, child, false
	}
	return child.Status, child, true
}

// submission is a step's job to queue once the pass is committed.
type submission struct {
	step, job string
	spec      api.JobSpec
}

// actions are what a pass does once committed.
type actions struct {
	submit []submission
	cancel []string
	again  bool
}

// Reconcile is one pass over a pipeline ("<workspace>/<id>"): it reads the pipeline and
// its steps' jobs, decides with rules/pipeline, commits every change in one write (the
// wake markers it took in cleared there), and then queues and cancels steps' jobs. It
// decides from stored state only and is safe to run twice.
func (c *Controller) Reconcile(ctx context.Context, name string) {
	workspace, id, _ := strings.Cut(name, "/")
	// The outputs of the runs that ready steps could reuse are verified (every blob read)
	// before the write, not in it: a write holds up every other writer.
	verified := c.verifyCandidates(ctx, workspace, id)
	present := func(digest string) bool { return verified[digest] }
	var act actions
	err := c.write(func(tx *store.Tx) error {
		act = actions{}
		for _, k := range tx.Keys(store.PipelineWakes, name+"/") {
			if err := tx.Delete(store.PipelineWakes, k); err != nil {
				return err
			}
		}
		p, ok := model.GetJob(tx, workspace, id)
		if !ok || p.PipelineRun == nil || api.Terminal(p.Status) {
			return nil
		}
		changed, err := c.pass(tx, &p, present, &act)
		if err != nil || !changed {
			return err
		}
		return model.PutJob(tx, p)
	})
	if err != nil {
		c.log.Error("pipeline pass failed", "pipeline", name, "error", err)
		return
	}
	for _, s := range act.submit {
		_, err := c.jobs.SubmitStep(ctx, workspace, s.spec, submitKey(name, s.job), id, s.step)
		if err == nil {
			continue
		}
		if ctx.Err() != nil {
			return // the engine is stopping: the next start submits it again
		}
		c.log.Warn("step could not be queued", "pipeline", name, "step", s.step, "error", err)
		c.stepNotQueued(workspace, id, s, err)
		act.again = true
	}
	for _, job := range act.cancel {
		if _, err := c.jobs.CancelJob(ctx, workspace, job); err != nil && !api.IsNotFound(err) {
			c.log.Error("canceling a step failed", "pipeline", name, "job", job, "error", err)
		}
	}
	if act.again {
		c.mark(name)
	}
}

// submitKey is the idempotency key of a step's job: queued again after a restart, it is
// the same job.
func submitKey(pipeline, job string) string { return "pipeline-step:" + pipeline + "/" + job }

// stepNotQueued records that a step's job was refused: the step fails with the refusal.
func (c *Controller) stepNotQueued(workspace, id string, s submission, why error) {
	err := c.write(func(tx *store.Tx) error {
		p, ok := model.GetJob(tx, workspace, id)
		if !ok || p.PipelineRun == nil {
			return nil
		}
		sr := p.PipelineRun.Steps[s.step]
		if sr == nil || sr.Job != s.job || sr.Status != "" {
			return nil
		}
		if _, exists := model.GetJob(tx, workspace, s.job); exists {
			return nil
		}
		sr.Status, sr.Reason = api.JobFailed, "its job was refused: "+why.Error()
		if err := model.EndFlight(tx, workspace, sr.Key, sr.Job); err != nil {
			return err
		}
		return model.PutJob(tx, p)
	})
	if err != nil {
		c.log.Error("recording a refused step failed", "pipeline", workspace+"/"+id, "step", s.step, "error", err)
	}
}

// pass decides a pipeline's next moves and records them in p (and in the store: reused
// steps' jobs, the reuse index). It reports whether p changed.
func (c *Controller) pass(tx *store.Tx, p *model.Job, present func(string) bool, act *actions) (bool, error) {
	run := p.PipelineRun
	if run.Steps == nil {
		run.Steps = map[string]*model.StepRun{}
	}
	now := c.clock.Now().UTC()
	changed := false
	states := map[string]pipeline.StepState{}
	for _, s := range run.Spec.Steps {
		sr := run.Steps[s.Name]
		if sr == nil {
			continue
		}
		if sr.Status != "" {
			states[s.Name] = pipeline.StepState{Status: pipeline.Status(sr.Status), Reason: sr.Reason}
			continue
		}
		child, ok := model.GetJob(tx, p.Workspace, sr.Job)
		if !ok {
			// Chosen and stored, but the engine stopped before it was queued.
			act.submit = append(act.submit, submission{step: s.Name, job: sr.Job, spec: *sr.Spec})
			states[s.Name] = pipeline.StepState{Status: pipeline.Running}
			continue
		}
		if api.Terminal(child.Status) && sr.Key != "" {
			if err := model.EndFlight(tx, p.Workspace, sr.Key, sr.Job); err != nil {
				return false, err
			}
		}
		switch child.Status {
		case api.JobCompleted:
			states[s.Name] = pipeline.StepState{Status: pipeline.Completed}
			if sr.Key != "" && sr.ReusedFrom == "" && !sr.Recorded {
				// In the write that takes the step's end in: its outputs are registered.
				if err := model.PutReuseRun(tx, p.Workspace, sr.Key, reuse.Run{Job: p.ID, Step: s.Name, Outputs: outputDigests(child)}); err != nil {
					return false, err
				}
				sr.Recorded, changed = true, true
			}
		case api.JobFailed:
			exit := pipeline.ExitFailed
			if child.NodeLost {
				exit = pipeline.ExitNodeLost
			}
			next := pipeline.Retry(exit, int(sr.Retries), int(s.MaxRetries))
			if !run.CancelRequested && next != pipeline.Fail {
				if next == pipeline.Requeue {
					sr.Requeues++
				} else {
					sr.Retries++
				}
				sr.Job = model.StepJobID(p.ID, s.Name, sr.Retries, sr.Requeues)
				spec := *sr.Spec
				spec.Name = sr.Job
				sr.Spec = &spec
				act.submit = append(act.submit, submission{step: s.Name, job: sr.Job, spec: spec})
				states[s.Name] = pipeline.StepState{Status: pipeline.Running}
				changed = true
				c.log.Info("step runs again", "pipeline", p.Key(), "step", s.Name, "node_lost", child.NodeLost, "retries", sr.Retries, "max_retries", s.MaxRetries, "requeues", sr.Requeues)
				continue
			}
			states[s.Name] = pipeline.StepState{Status: pipeline.Failed}
		case api.JobCanceled:
			states[s.Name] = pipeline.StepState{Status: pipeline.Canceled}
		default:
			states[s.Name] = pipeline.StepState{Status: pipeline.Running}
		}
	}
	shape, _ := shape(run.Spec)
	d := pipeline.Decide(shape, states, pipeline.Settings{ContinueOnStepFailure: run.Spec.ContinueOnStepFailure, Canceled: run.CancelRequested})
	for _, name := range slices.Sorted(maps.Keys(d.Skip)) {
		run.Steps[name] = &model.StepRun{Status: api.JobSkipped, Reason: d.Skip[name]}
		changed = true
	}
	for _, name := range slices.Sorted(maps.Keys(d.Abandon)) {
		run.Steps[name] = &model.StepRun{Status: api.JobCanceled, Reason: d.Abandon[name]}
		changed = true
	}
	for _, name := range d.Cancel {
		act.cancel = append(act.cancel, run.Steps[name].Job)
	}
	for _, name := range d.Start {
		reused, err := c.start(tx, p, stepSpec(run.Spec, name), present, act)
		if err != nil {
			return false, err
		}
		act.again = act.again || reused
		changed = true
	}
	if len(d.Start) > 0 && p.Status == api.JobQueued {
		p.Status, p.StartedAt = api.JobRunning, &now
	}
	if d.Done && len(d.Cancel) == 0 {
		c.finish(tx, p, d.Status, now)
		changed = true
	}
	return changed, nil
}

func stepSpec(spec api.PipelineSpec, name string) api.PipelineStepSpec {
	i := slices.IndexFunc(spec.Steps, func(s api.PipelineStepSpec) bool { return s.Name == name })
	return spec.Steps[i]
}

// start starts a ready step: it binds its inputs to the pipeline's inputs and to its
// upstream steps' jobs' outputs, computes its reuse key, and either takes an earlier
// run's outputs (a job of the step, Completed at once) or has its job queued once the
// pass is committed. It reports whether the step was reused.
func (c *Controller) start(tx *store.Tx, p *model.Job, s api.PipelineStepSpec, present func(string) bool, act *actions) (bool, error) {
	run := p.PipelineRun
	sr := &model.StepRun{Job: model.StepJobID(p.ID, s.Name, 0, 0)}
	run.Steps[s.Name] = sr
	spec := bindStep(p, s, sr.Job)
	sr.Spec = &spec
	parts := keyParts(tx, p.Workspace, spec)
	sr.KeyParts = &parts
	key, ok, missing := reuse.Key(parts)
	if ok {
		sr.Key = key
	} else {
		sr.KeyMissing = missing
	}
	policy := reuse.Policy{ForceRerun: run.Spec.ForceRerun || s.ForceRerun, Deterministic: s.IsDeterministic == nil || *s.IsDeterministic}
	if src, job, hit := reusable(tx, p.Workspace, sr.Key, policy, present); hit {
		if _, taken := model.GetJob(tx, p.Workspace, sr.Job); !taken {
			now := c.clock.Now().UTC()
			zero := 0
			j := model.Job{
				Job: api.Job{
					ID: sr.Job, Workspace: p.Workspace, Compute: spec.Compute, Status: api.JobCompleted, ExitCode: &zero, Nodes: []string{},
					Command: spec.Command, Env: spec.Env, Count: job.Count, SnapshotID: spec.SnapshotID, Environment: spec.Environment,
					EnvironmentHash: job.EnvironmentHash, Inputs: spec.Inputs, Outputs: maps.Clone(job.Outputs),
					SubmittedAt: now, StartedAt: &now, EndedAt: &now, Pipeline: p.ID, Step: s.Name, ReusedFrom: src.ReusedFrom(),
				},
				ComputeKey: p.Workspace + "/" + spec.Compute,
			}
			if err := model.PutJob(tx, j); err != nil {
				return false, err
			}
			sr.ReusedFrom = src.ReusedFrom()
			c.log.Info("step reused", "pipeline", p.Key(), "step", s.Name, "reused_from", sr.ReusedFrom)
			return true, model.ClearPipelineWake(tx, p.Workspace, p.ID, j.ID)
		}
	}
	if sr.Key != "" && policy.Deterministic && !policy.ForceRerun {
		// Single flight: a step whose key another step runs now waits for that run's end
		// (its pipeline is woken then) and reuses it, instead of running it twice.
		if f, ok := model.GetFlight(tx, p.Workspace, sr.Key); ok && f.Job != sr.Job && inFlight(tx, p.Workspace, f) {
			delete(run.Steps, s.Name)
			if !slices.Contains(f.Waiters, p.ID) {
				f.Waiters = append(f.Waiters, p.ID)
				if err := model.PutFlight(tx, p.Workspace, sr.Key, f); err != nil {
					return false, err
				}
			}
			c.log.Debug("step waits for a run of the same key", "pipeline", p.Key(), "step", s.Name, "job", f.Job)
			return false, nil
		}
		if err := model.PutFlight(tx, p.Workspace, sr.Key, model.Flight{Pipeline: p.ID, Step: s.Name, Job: sr.Job}); err != nil {
			return false, err
		}
	}
	act.submit = append(act.submit, submission{step: s.Name, job: sr.Job, spec: spec})
	return false, nil
}

// inFlight reports whether the step job of a recorded flight still runs, or is about to
// be queued (its pipeline chose it and it has not ended).
func inFlight(tx *store.Tx, workspace string, f model.Flight) bool {
	if j, ok := model.GetJob(tx, workspace, f.Job); ok {
		return !api.Terminal(j.Status)
	}
	p, ok := model.GetJob(tx, workspace, f.Pipeline)
	if !ok || p.PipelineRun == nil || api.Terminal(p.Status) {
		return false
	}
	sr := p.PipelineRun.Steps[f.Step]
	return sr != nil && sr.Job == f.Job && sr.Status == ""
}

// bindStep is a step's job as submitted: named jobID, its inputs bound to the pipeline's
// inputs and to its upstream steps' jobs' outputs (azureml://jobs/<job>/outputs/<o>).
func bindStep(p *model.Job, s api.PipelineStepSpec, jobID string) api.JobSpec {
	run := p.PipelineRun
	spec := s.Job
	spec.Type, spec.Name = api.JobTypeCommand, jobID
	spec.Inputs = maps.Clone(spec.Inputs)
	if spec.Inputs == nil {
		spec.Inputs = map[string]api.JobInput{}
	}
	for _, name := range slices.Sorted(maps.Keys(s.InputBindings)) {
		b, _ := parseBinding(s.InputBindings[name])
		decl := spec.Inputs[name]
		var in api.JobInput
		if b.parentInput != "" {
			in = p.Inputs[b.parentInput]
			in.Digest, in.Size, in.FileCount = "", 0, 0 // the step's job resolves its own
		} else {
			up := ""
			if r := run.Steps[b.step]; r != nil {
				up = r.Job
			}
			in = api.JobInput{Type: decl.Type, Path: api.JobOutputURI(up, b.output)}
			if in.Type == "" {
				in.Type = outType(stepSpec(run.Spec, b.step).Job.Outputs[b.output])
			}
		}
		if in.Value == nil && decl.Mode != "" {
			in.Mode = decl.Mode
		}
		spec.Inputs[name] = in
	}
	return spec
}

// finish ends the pipeline: when it Completed its outputs are registered from the step
// outputs bound to them; when it Failed its error names the steps that failed.
func (c *Controller) finish(tx *store.Tx, p *model.Job, status pipeline.Status, now time.Time) {
	run := p.PipelineRun
	var failed []string
	outputs := maps.Clone(p.Outputs)
	for _, s := range run.Spec.Steps {
		sr := run.Steps[s.Name]
		if sr == nil {
			continue
		}
		st, child, _ := stepStatus(tx, p.Workspace, sr)
		if st == api.JobFailed {
			failed = append(failed, s.Name)
		}
		if st != api.JobCompleted {
			continue
		}
		for out, parent := range s.OutputBindings {
			if o, ok := child.Outputs[out]; ok && o.Digest != "" {
				outputs[parent] = o
			}
		}
	}
	why := ""
	switch status {
	case pipeline.Completed:
		p.Outputs = outputs
	case pipeline.Failed:
		why = "steps failed: " + strings.Join(failed, ", ")
	case pipeline.Canceled:
		why = "canceled by user"
		if !run.CancelRequested {
			why = "a step was canceled"
		}
	}
	p.Finish(string(status), nil, why, now)
	c.log.Info("pipeline ended", "pipeline", p.Key(), "status", status)
}
