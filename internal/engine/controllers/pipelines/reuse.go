package pipelines

import (
	"context"
	"encoding/json"
	"maps"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/rules/reuse"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
)

// keyParts gathers a step's reuse key parts from its bound job spec, as stored: the
// command, environment variables, code snapshot (content-addressed), the environment's
// content hash, each input's content digest, the literals and the output declarations.
// The compute and the node count are left out. A part it cannot know is reuse.Unknown,
// so the step has no key (and runs).
func keyParts(tx *store.Tx, workspace string, spec api.JobSpec) reuse.Parts {
	cmd, _ := json.Marshal(spec.Command)
	p := reuse.Parts{
		Command: string(cmd), Env: maps.Clone(spec.Env), CodeHash: spec.SnapshotID,
		Inputs: map[string]string{}, Literals: map[string]string{}, Outputs: map[string]string{},
	}
	if spec.Environment != "" {
		p.EnvironmentHash = reuse.Unknown
		if env, err := model.GetEnvironment(tx, workspace, spec.Environment); err == nil && env.ContentHash != "" {
			p.EnvironmentHash = env.ContentHash
		}
	}
	for name, in := range spec.Inputs {
		switch {
		case in.Value != nil:
			p.Literals[name] = *in.Value
		case in.SnapshotID != "":
			// A snapshot's ID is the sha256 of its archive: its content.
			p.Inputs[name] = ioType(in) + " snapshot:" + in.SnapshotID + "/" + in.FileName
		default:
			p.Inputs[name] = reuse.Unknown
			if out, err := model.ResolveJobOutput(tx, workspace, in.Path); err == nil && out.Digest != "" {
				p.Inputs[name] = ioType(in) + " " + out.Digest
			}
		}
	}
	for name, out := range spec.Outputs {
		mode := out.Mode
		if mode == "" {
			mode = api.ModeUpload
		}
		p.Outputs[name] = outType(out) + " " + mode
	}
	return p
}

// reusable finds the earlier run a step reuses, and the job of that run whose outputs it
// takes: the newest run of key whose every output is in the artifacts store with its
// digest (Verify reads each blob). A run whose pipeline or step job was deleted is not a
// candidate.
func (c *Controller) reusable(ctx context.Context, tx *store.Tx, workspace, key string, policy reuse.Policy) (reuse.Run, model.Job, bool) {
	if key == "" || c.artifacts == nil {
		return reuse.Run{}, model.Job{}, false
	}
	runs, err := model.ReuseRuns(tx, workspace, key)
	if err != nil {
		c.log.Warn("reading the reuse index failed", "error", err)
		return reuse.Run{}, model.Job{}, false
	}
	sources := map[string]model.Job{}
	var candidates []reuse.Run
	for _, r := range runs {
		p, ok := model.GetJob(tx, workspace, r.Job)
		if !ok || p.PipelineRun == nil || p.PipelineRun.Steps[r.Step] == nil {
			continue
		}
		j, ok := model.GetJob(tx, workspace, p.PipelineRun.Steps[r.Step].Job)
		if !ok || j.Status != api.JobCompleted {
			continue
		}
		sources[r.ReusedFrom()] = j
		candidates = append(candidates, r)
	}
	present := func(digest string) bool { return c.artifacts.Verify(ctx, digest) == nil }
	hit, ok := reuse.Hit(true, policy, candidates, present)
	if !ok {
		return reuse.Run{}, model.Job{}, false
	}
	return hit, sources[hit.ReusedFrom()], true
}

// outputDigests lists a completed job's registered outputs' manifest digests.
func outputDigests(j model.Job) []string {
	var out []string
	for _, name := range sortedKeys(j.Outputs) {
		if d := j.Outputs[name].Digest; d != "" {
			out = append(out, d)
		}
	}
	return out
}
