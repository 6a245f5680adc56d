package sim

import (
	"context"
	"fmt"
	"strings"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
)

// pipelineModel is a pipeline job the harness submitted: its steps' upstream steps, and
// the job each step Completed with (a finished step never runs again, restarts included).
type pipelineModel struct {
	ws, id    string
	upstream  map[string][]string
	completed map[string]string
	status    string
}

// submitPipeline submits a pipeline of 2 to 4 steps on the harness's clusters: each step
// takes the output of a random earlier step (or none), so the shapes are chains, fans and
// diamonds; some steps are not deterministic, some pipelines continue on failure.
func (w *world) submitPipeline() error {
	var computes []*computeModel
	for _, k := range sortedKeys(w.computes) {
		if c := w.computes[k]; !c.instance {
			computes = append(computes, c)
		}
	}
	if len(computes) == 0 {
		return w.createCluster()
	}
	ws := pick(w, computes).ws
	var onWS []*computeModel
	for _, c := range computes {
		if c.ws == ws {
			onWS = append(onWS, c)
		}
	}
	n := 2 + w.rng.IntN(3)
	ps := &api.PipelineSpec{ContinueOnStepFailure: w.rng.IntN(3) == 0}
	m := &pipelineModel{ws: ws, upstream: map[string][]string{}, completed: map[string]string{}}
	for i := range n {
		name := fmt.Sprintf("s%d", i)
		step := api.PipelineStepSpec{Name: name, InputBindings: map[string]string{},
			Job: api.JobSpec{Compute: pick(w, onWS).name, Command: []string{"train", pick(w, []string{"a", "b"})},
				Outputs: map[string]api.JobOutput{"o": {}}}}
		if i > 0 && w.rng.IntN(4) != 0 {
			up := fmt.Sprintf("s%d", w.rng.IntN(i))
			step.InputBindings["x"] = "parent.jobs." + up + ".outputs.o"
			m.upstream[name] = []string{up}
		}
		if w.rng.IntN(4) == 0 {
			no := false
			step.IsDeterministic = &no
		}
		ps.Steps = append(ps.Steps, step)
	}
	j, err := w.e.SubmitJob(context.Background(), ws, api.JobSpec{Type: api.JobTypePipeline, Pipeline: ps}, "")
	if err != nil {
		w.logf("submit pipeline to %s: %v", ws, err)
		return nil
	}
	m.id, m.status = j.ID, j.Status
	w.logf("submit pipeline %s to %s: %d steps, upstream %v", j.ID, ws, n, m.upstream)
	w.pipelines[ws+"/"+j.ID] = m
	w.pipelineOrder = append(w.pipelineOrder, ws+"/"+j.ID)
	return nil
}

func (w *world) cancelPipeline() error {
	var active []*pipelineModel
	for _, k := range w.pipelineOrder {
		if p := w.pipelines[k]; !api.Terminal(p.status) {
			active = append(active, p)
		}
	}
	if len(active) == 0 {
		return nil
	}
	p := pick(w, active)
	_, err := w.e.CancelJob(context.Background(), p.ws, p.id)
	w.logf("cancel pipeline %s: %v", p.id, err)
	return nil
}

// checkPipelines holds the pipelines' rules: a step starts only once every step it takes
// an output from Completed; a skipped step names a failed or canceled step upstream of
// it; a finished step is never run again (its job stays the one it Completed with); an
// ended pipeline's steps have all ended, and it is Completed exactly when they all are.
func (w *world) checkPipelines(byKey map[string]api.Job) error {
	w.checks++
	for _, k := range w.pipelineOrder {
		m := w.pipelines[k]
		p, ok := byKey[k]
		if !ok {
			return w.fail("no job lost", "pipeline %s is gone", k)
		}
		if api.Terminal(m.status) && p.Status != m.status {
			return w.fail("no job lost", "pipeline %s ended %s, now %s", k, m.status, p.Status)
		}
		status := map[string]api.PipelineStep{}
		for _, s := range p.Steps {
			status[s.Name] = s
		}
		allCompleted, anyFailed := true, false
		for _, s := range p.Steps {
			if s.Job != "" && s.ReusedFrom == "" {
				for _, up := range m.upstream[s.Name] {
					if status[up].Status != api.JobCompleted {
						return w.fail("a step starts once its inputs are registered", "pipeline %s: step %s (job %s, %s) started while %s is %s", k, s.Name, s.Job, s.Status, up, status[up].Status)
					}
				}
			}
			if s.Status == api.JobSkipped {
				up := strings.TrimPrefix(strings.TrimSuffix(strings.TrimSuffix(s.Reason, " failed"), " was canceled"), "upstream ")
				if !w.isUpstream(m, up, s.Name) || (status[up].Status != api.JobFailed && status[up].Status != api.JobCanceled) {
					return w.fail("a failed step skips its dependents", "pipeline %s: step %s skipped with %q; %s is %s", k, s.Name, s.Reason, up, status[up].Status)
				}
			}
			if job, done := m.completed[s.Name]; done && (s.Status != api.JobCompleted || s.Job != job) {
				return w.fail("a finished step is not run again", "pipeline %s: step %s Completed as job %s, now %s as %s", k, s.Name, job, s.Status, s.Job)
			}
			if s.Status == api.JobCompleted {
				m.completed[s.Name] = s.Job
			}
			allCompleted = allCompleted && s.Status == api.JobCompleted
			anyFailed = anyFailed || s.Status == api.JobFailed
			if api.Terminal(p.Status) && !api.Terminal(s.Status) && s.Status != api.JobSkipped {
				return w.fail("a pipeline ends after its steps", "pipeline %s is %s while step %s is %s", k, p.Status, s.Name, s.Status)
			}
		}
		switch {
		case p.Status == api.JobCompleted && !allCompleted:
			return w.fail("a pipeline ends after its steps", "pipeline %s Completed with steps %+v", k, p.Steps)
		case api.Terminal(p.Status) && anyFailed && p.Status != api.JobFailed:
			return w.fail("a pipeline with a failed step fails", "pipeline %s is %s with a failed step", k, p.Status)
		case api.Terminal(p.Status) && !anyFailed && allCompleted && p.Status != api.JobCompleted:
			return w.fail("a pipeline ends after its steps", "pipeline %s is %s with every step Completed", k, p.Status)
		}
		if !api.Terminal(m.status) && api.Terminal(p.Status) {
			var steps []string
			for _, s := range p.Steps {
				line := s.Name + " " + s.Status
				if s.ReusedFrom != "" {
					line += " reused_from " + s.ReusedFrom
				}
				steps = append(steps, line)
			}
			w.logf("pipeline %s ended %s: %s", k, p.Status, strings.Join(steps, ", "))
		}
		m.status = p.Status
	}
	return nil
}

// isUpstream reports whether step up is upstream of step s, directly or through others.
func (w *world) isUpstream(m *pipelineModel, up, s string) bool {
	for _, u := range m.upstream[s] {
		if u == up || w.isUpstream(m, up, u) {
			return true
		}
	}
	return false
}
