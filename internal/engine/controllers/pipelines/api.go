package pipelines

import (
	"context"
	"maps"
	"slices"
	"strings"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/catalog"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/rules/environment"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/rules/pipeline"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/validation"
)

// The controller's API calls: submit, cancel, rerun and describe a pipeline job.

// Submit stores a pipeline job, Queued, after checking its shape and that every step's
// compute and environment exist (each error names its YAML path). Idempotent under the key.
func (c *Controller) Submit(ctx context.Context, workspace string, spec api.JobSpec, idempotencyKey string) (*api.Job, error) {
	ps := spec.Pipeline
	if ps == nil {
		return nil, api.Errorf(api.CodeInvalid, "pipeline", "a pipeline job needs its steps (pipeline.steps)")
	}
	if err := validate(*ps); err != nil {
		return nil, err
	}
	now := c.clock.Now().UTC()
	var p model.Job
	err := c.write(func(tx *store.Tx) error {
		if _, err := model.GetWorkspace(tx, workspace); err != nil {
			return err
		}
		if prior, ok, err := model.IdempotentJob(tx, workspace, idempotencyKey); err != nil || ok {
			p = prior
			return err
		}
		if err := checkTargets(tx, workspace, *ps, c.noRuntime); err != nil {
			return err
		}
		id, err := c.jobs.NewJobID(tx, spec.Name)
		if err != nil {
			return err
		}
		inputs := maps.Clone(ps.Inputs)
		for _, name := range slices.Sorted(maps.Keys(inputs)) {
			in := inputs[name]
			if strings.HasPrefix(in.Path, "azureml:") {
				// Pinned while the pipeline runs, as a job's input is.
				out, err := model.ResolveJobOutput(tx, workspace, in.Path)
				if err != nil {
					return api.Errorf(api.CodeOf(err), "inputs."+name+".path", "inputs.%s.path: %v", name, err)
				}
				in.Digest, in.Size, in.FileCount = out.Digest, out.Size, out.FileCount
				inputs[name] = in
			}
		}
		outputs := map[string]api.JobOutput{}
		for name, o := range ps.Outputs {
			outputs[name] = api.JobOutput{Type: outType(o), Mode: o.Mode}
		}
		p = model.Job{
			Job: api.Job{
				ID: id, Type: api.JobTypePipeline, Workspace: workspace, Status: api.JobQueued, Nodes: []string{}, SubmittedAt: now, Schedule: spec.Schedule,
				DisplayName: spec.DisplayName, ExperimentName: spec.ExperimentName, Description: spec.Description, Tags: spec.Tags,
				Inputs: inputs, Outputs: outputs,
			},
			ComputeKey:  model.PipelineComputeKey(workspace),
			PipelineRun: &model.PipelineRun{Spec: *ps, Steps: map[string]*model.StepRun{}},
		}
		if err := model.PutJob(tx, p); err != nil {
			return err
		}
		return model.Remember(tx, idempotencyKey, id, now)
	})
	if err != nil {
		return nil, err
	}
	c.log.Info("pipeline queued", "job", p.ID, "steps", len(ps.Steps))
	c.mark(p.Key())
	out := p.Job
	return &out, nil
}

// checkTargets refuses a step whose compute or environment the workspace does not have,
// naming the YAML path the name was written at.
func checkTargets(tx *store.Tx, workspace string, ps api.PipelineSpec, noRuntime func(rec model.Compute, name string) string) error {
	for _, s := range ps.Steps {
		var rec model.Compute // a serverless step's: the engine's own nodes
		path := cmpOr(s.ComputePath, "jobs."+s.Name+".compute")
		switch s.Job.Compute {
		case "":
			return api.Errorf(api.CodeInvalid, path, "%s: step %q has no compute (give jobs.%s.compute or settings.default_compute)", path, s.Name, s.Name)
		case api.ServerlessCompute:
			// Refused here rather than when the step starts: serverless needs a size.
			field := "jobs." + s.Name + ".resources.instance_type"
			if s.Job.InstanceType == "" {
				return api.Errorf(api.CodeInvalid, field, "%s: step %q runs on serverless, which needs a VM size such as Standard_DS3_v2", field, s.Name)
			}
			if _, err := validation.VMSize(field, s.Job.InstanceType, catalog.ComputeCluster); err != nil {
				return api.Errorf(api.CodeInvalid, field, "%s: %v", field, err)
			}
		default:
			var err error
			if rec, err = model.GetCompute(tx, workspace, s.Job.Compute); err != nil || rec.Serverless {
				return api.Errorf(api.CodeInvalid, path, "%s: unknown compute %q in workspace %q (computes: %s)", path, s.Job.Compute, workspace, names(tx, store.Computes, workspace))
			}
		}
		if s.Job.Environment != "" {
			path := cmpOr(s.EnvironmentPath, "jobs."+s.Name+".environment")
			env, err := model.GetEnvironment(tx, workspace, s.Job.Environment)
			if err != nil {
				return api.Errorf(api.CodeInvalid, path, "%s: unknown environment %q in workspace %q (environments: %s)", path, s.Job.Environment, workspace, names(tx, store.Environments, workspace))
			}
			if err := environment.CannotRun(env.Name, env.Definition(), noRuntime(rec, s.Job.Compute)); err != nil {
				return api.Errorf(api.CodeInvalid, path, "%s: %v", path, err)
			}
		}
	}
	return nil
}

// names lists the records of a workspace in bucket b, skipping the engine's own computes.
func names(tx *store.Tx, b store.Bucket, workspace string) string {
	var out []string
	for _, k := range tx.Keys(b, workspace+"/") {
		name := strings.TrimPrefix(k, workspace+"/")
		if b == store.Computes {
			if rec, err := model.GetCompute(tx, workspace, name); err != nil || rec.Serverless {
				continue
			}
		}
		out = append(out, name)
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ", ")
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// Cancel asks a pipeline to stop: its running steps are canceled and it ends Canceled
// once they have. A finished pipeline is returned as is.
func (c *Controller) Cancel(ctx context.Context, workspace, id string) (*api.Job, error) {
	var p model.Job
	err := c.write(func(tx *store.Tx) error {
		var ok bool
		if p, ok = model.GetJob(tx, workspace, id); !ok || p.PipelineRun == nil {
			return model.NotFoundJob(workspace, id)
		}
		if api.Terminal(p.Status) || p.PipelineRun.CancelRequested {
			return nil
		}
		p.PipelineRun.CancelRequested = true
		return model.PutJob(tx, p)
	})
	if err != nil {
		return nil, err
	}
	// The first pass cancels the running steps' jobs (at once, in their own writes); the
	// second takes their ends in and ends the pipeline, so the answer shows it Canceled.
	// Both are safe to run beside the work loop's: each decides from the store.
	c.Reconcile(ctx, p.Key())
	c.Reconcile(ctx, p.Key())
	err = c.view(func(tx *store.Tx) error {
		p, _ = model.GetJob(tx, workspace, id)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return c.Describe(ctx, &p.Job)
}

// Rerun submits a new run of a pipeline job's definition, as it was submitted: steps are
// reused by key as in any run. from names a step that runs anew with every step after it;
// force runs every step anew.
func (c *Controller) Rerun(ctx context.Context, workspace, id string, req api.RerunRequest) (*api.Job, error) {
	var spec api.JobSpec
	err := c.view(func(tx *store.Tx) error {
		p, ok := model.GetJob(tx, workspace, id)
		if !ok {
			return model.NotFoundJob(workspace, id)
		}
		if p.PipelineRun == nil {
			return api.Errorf(api.CodeInvalid, "job", "job %q is a command job; job rerun takes a pipeline job (submit a command job again with job submit)", id)
		}
		ps := p.PipelineRun.Spec
		ps.Steps = slices.Clone(ps.Steps)
		ps.ForceRerun = ps.ForceRerun || req.Force
		if req.From != "" {
			shape, _ := shape(ps)
			anew := downstream(shape, req.From)
			if anew == nil {
				return api.Errorf(api.CodeInvalid, "from", "pipeline %q has no step %q (steps: %s)", id, req.From, stepNames(ps))
			}
			for i := range ps.Steps {
				ps.Steps[i].ForceRerun = ps.Steps[i].ForceRerun || anew[ps.Steps[i].Name]
			}
		}
		spec = api.JobSpec{Type: api.JobTypePipeline, Pipeline: &ps, DisplayName: p.DisplayName, ExperimentName: p.ExperimentName, Description: p.Description, Tags: p.Tags}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return c.Submit(ctx, workspace, spec, "")
}

// downstream returns the step from and every step that depends on it, directly or
// through others; nil when there is no such step.
func downstream(p pipeline.Pipeline, from string) map[string]bool {
	if !slices.ContainsFunc(p.Steps, func(s pipeline.Step) bool { return s.Name == from }) {
		return nil
	}
	out := map[string]bool{from: true}
	for grew := true; grew; {
		grew = false
		for _, s := range p.Steps {
			if out[s.Name] {
				continue
			}
			for _, up := range s.Upstream() {
				if out[up] {
					out[s.Name], grew = true, true
					break
				}
			}
		}
	}
	return out
}

func stepNames(ps api.PipelineSpec) string {
	names := make([]string, len(ps.Steps))
	for i, s := range ps.Steps {
		names[i] = s.Name
	}
	return strings.Join(names, ", ")
}

// Describe fills a pipeline job's Steps from its record and its steps' jobs.
func (c *Controller) Describe(_ context.Context, j *api.Job) (*api.Job, error) {
	if j.Type != api.JobTypePipeline {
		return j, nil
	}
	err := c.view(func(tx *store.Tx) error {
		p, ok := model.GetJob(tx, j.Workspace, j.ID)
		if !ok || p.PipelineRun == nil {
			return nil
		}
		shape, _ := shape(p.PipelineRun.Spec)
		j.Steps = j.Steps[:0]
		for i, s := range p.PipelineRun.Spec.Steps {
			st := api.PipelineStep{Name: s.Name, Compute: s.Job.Compute, Status: api.StepPending, Upstream: shape.Steps[i].Upstream(), InputBindings: s.InputBindings}
			if sr := p.PipelineRun.Steps[s.Name]; sr != nil {
				st.Job, st.Reason, st.ReusedFrom, st.Retries, st.Requeues = sr.Job, sr.Reason, sr.ReusedFrom, sr.Retries, sr.Requeues
				st.Key, st.KeyMissing = sr.Key, sr.KeyMissing
				if sr.KeyParts != nil {
					kp := api.ReuseKeyParts(*sr.KeyParts)
					st.KeyParts = &kp
				}
				status, child, found := stepStatus(tx, p.Workspace, sr)
				st.Status = status
				if found {
					st.StartedAt, st.EndedAt = child.StartedAt, child.EndedAt
					if st.Reason == "" && child.Status == api.JobFailed {
						st.Reason = child.Error
					}
				}
			}
			j.Steps = append(j.Steps, st)
		}
		return nil
	})
	return j, err
}
