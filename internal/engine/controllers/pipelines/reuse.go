package pipelines

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strings"

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
	// The words as a JSON array, with <, > and & as written (readable in --explain).
	var cmd bytes.Buffer
	enc := json.NewEncoder(&cmd)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(spec.Command) // strings only: cannot fail
	p := reuse.Parts{
		Command: strings.TrimSuffix(cmd.String(), "\n"), Env: maps.Clone(spec.Env), CodeHash: spec.SnapshotID,
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

// candidates lists the recorded runs of key whose pipeline and step job still exist,
// the step job Completed, with those jobs by the run's ReusedFrom.
func candidates(tx *store.Tx, workspace, key string) ([]reuse.Run, map[string]model.Job) {
	runs, err := model.ReuseRuns(tx, workspace, key)
	if err != nil {
		return nil, nil
	}
	sources := map[string]model.Job{}
	var out []reuse.Run
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
		out = append(out, r)
	}
	return out, sources
}

// reusable finds the earlier run a step reuses, and the job of that run whose outputs it
// takes: the newest candidate whose every output is present (rules/reuse's Hit).
func reusable(tx *store.Tx, workspace, key string, policy reuse.Policy, present func(string) bool) (reuse.Run, model.Job, bool) {
	runs, sources := candidates(tx, workspace, key)
	hit, ok := reuse.Hit(key != "", policy, runs, present)
	if !ok {
		return reuse.Run{}, model.Job{}, false
	}
	return hit, sources[hit.ReusedFrom()], true
}

// verifyCandidates reads, outside any write, the outputs of every run that a step of the
// pipeline could reuse now (a step not started whose upstream steps Completed), and
// returns which digests are in the artifacts store whole (Verify). A digest it did not
// verify counts as absent: the step runs.
func (c *Controller) verifyCandidates(ctx context.Context, workspace, id string) map[string]bool {
	if c.artifacts == nil {
		return nil
	}
	var digests []string
	_ = c.view(func(tx *store.Tx) error {
		p, ok := model.GetJob(tx, workspace, id)
		if !ok || p.PipelineRun == nil || api.Terminal(p.Status) || p.PipelineRun.Spec.ForceRerun {
			return nil
		}
		run := p.PipelineRun
		shape, _ := shape(run.Spec)
		for i, s := range run.Spec.Steps {
			if run.Steps[s.Name] != nil || s.ForceRerun || (s.IsDeterministic != nil && !*s.IsDeterministic) || !upstreamCompleted(tx, &p, shape.Steps[i].Upstream()) {
				continue
			}
			key, ok, _ := reuse.Key(keyParts(tx, workspace, bindStep(&p, s, "")))
			if !ok {
				continue
			}
			runs, _ := candidates(tx, workspace, key)
			for _, r := range runs {
				digests = append(digests, r.Outputs...)
			}
		}
		return nil
	})
	out := map[string]bool{}
	for _, d := range digests {
		if _, done := out[d]; !done {
			out[d] = c.artifacts.Verify(ctx, d) == nil
		}
	}
	return out
}

func upstreamCompleted(tx *store.Tx, p *model.Job, upstream []string) bool {
	for _, up := range upstream {
		sr := p.PipelineRun.Steps[up]
		if sr == nil {
			return false
		}
		if st, _, _ := stepStatus(tx, p.Workspace, sr); st != api.JobCompleted {
			return false
		}
	}
	return true
}

// outputDigests lists a completed job's registered outputs' manifest digests.
func outputDigests(j model.Job) []string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(j.Outputs)) {
		if d := j.Outputs[name].Digest; d != "" {
			out = append(out, d)
		}
	}
	return out
}
