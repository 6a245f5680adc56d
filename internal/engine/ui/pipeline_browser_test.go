package ui_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/enginetest"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/enginetest/scorer"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/nodeagent"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/server"
)

// TestMain lets this test binary be a local node's agent (enginetest.Options.AgentArgv) and
// an endpoint's model server.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "node-agent":
			fs := flag.NewFlagSet("node-agent", flag.ExitOnError)
			dir := fs.String("dir", "", "node dir")
			_ = fs.Parse(os.Args[2:])
			if err := nodeagent.Run(context.Background(), *dir, hclog.NewNullLogger()); err != nil {
				fmt.Fprintln(os.Stderr, "node agent:", err)
				os.Exit(1)
			}
			os.Exit(0)
		case "scorer":
			if err := scorer.Serve(context.Background()); err != nil {
				fmt.Fprintln(os.Stderr, "scorer:", err)
				os.Exit(1)
			}
			os.Exit(0)
		}
	}
	os.Exit(m.Run())
}

// TestStatusPageShowsPipelinesHistoryAndEnvironments runs a real three-step pipeline on
// local nodes (prep -> train -> score, score also taking prep's output) and checks, in a
// real headless Chromium, that the page draws it as a graph with each step's state and an
// edge per binding, then a second run reused step by step; that the compute's plot of the
// last hour has the engine's samples; and that the pipeline's environment is listed with
// its build.
func TestStatusPageShowsPipelinesHistoryAndEnvironments(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Fatal("no python3 on PATH: the environment of this test is the system's python3")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	const token = "ui-pipeline-token"
	e := enginetest.Start(t, enginetest.Options{Token: token, AgentArgv: []string{exe, "node-agent"}})
	p := openPage(t, e, token, server.Options{})
	c, ctx := p.c, context.Background()
	if _, err := c.CreateWorkspace(ctx, api.WorkspaceSpec{Name: "lab"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateCompute(ctx, "lab", api.ComputeSpec{
		Name: "cpu", Type: api.TypeComputeCluster, VMSize: "Standard_DS3_v2",
		ScaleSettings: &api.ScaleSettings{MaxNodeCount: 2, ScaleDownNodesAfterIdleDuration: "PT10M"},
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateEnvironment(ctx, "lab", api.EnvironmentSpec{Name: "system-python",
		UserManaged: &api.UserManagedEnvironment{InterpreterPath: python}}); err != nil {
		t.Fatal(err)
	}
	// train waits for a gate file, so the page is seen with steps in three states at once.
	gate := filepath.Join(t.TempDir(), "gate")
	spec := func() api.JobSpec {
		step := func(name, command string, outputs ...string) api.PipelineStepSpec {
			s := api.PipelineStepSpec{Name: name, InputBindings: map[string]string{},
				Job: api.JobSpec{Compute: "cpu", Environment: "system-python", Command: []string{"sh", "-c", command},
					Inputs: map[string]api.JobInput{}, Outputs: map[string]api.JobOutput{}}}
			for _, o := range outputs {
				s.Job.Outputs[o] = api.JobOutput{}
			}
			return s
		}
		prep := step("prep", `echo 1 > ${{outputs.data}}/rows`, "data")
		prep.InputBindings["size"] = "parent.inputs.size"
		train := step("train", fmt.Sprintf(`while [ ! -e %s ]; do sleep 0.05; done; python3 -c 'print(1)' > ${{outputs.model}}/weights`, gate), "model")
		train.InputBindings["data"] = "parent.jobs.prep.outputs.data"
		score := step("score", `cat ${{inputs.model}}/weights ${{inputs.rows}}/rows > ${{outputs.scores}}/result`, "scores")
		score.InputBindings["model"] = "parent.jobs.train.outputs.model"
		score.InputBindings["rows"] = "parent.jobs.prep.outputs.data"
		size := "3"
		return api.JobSpec{Type: api.JobTypePipeline, Pipeline: &api.PipelineSpec{
			Inputs: map[string]api.JobInput{"size": {Value: &size}},
			Steps:  []api.PipelineStepSpec{prep, train, score},
		}}
	}
	first, err := c.SubmitJob(ctx, "lab", spec())
	if err != nil {
		t.Fatal(err)
	}
	p.login()
	graph := fmt.Sprintf(`[data-pipeline="lab/%s"]`, first.ID)
	p.waitFor("prep completed, train running and score pending", fmt.Sprintf(
		`!!document.querySelector('%[1]s .step[data-step="prep"][data-status="Completed"]') &&
		 !!document.querySelector('%[1]s .step[data-step="train"][data-status="Running"]') &&
		 !!document.querySelector('%[1]s .step[data-step="score"][data-status="Pending"]')`, graph))
	if n := p.count(graph + " .step"); n != 3 {
		t.Fatalf("the graph has %d step boxes; want 3", n)
	}
	for _, edge := range []struct{ from, to, label string }{
		{"prep", "train", "data"},
		{"train", "score", "model"},
		{"prep", "score", "data → rows"},
	} {
		sel := fmt.Sprintf(`%s .edge[data-from=%q][data-to=%q]`, graph, edge.from, edge.to)
		if got := p.attr(sel, "data-label"); got != edge.label {
			t.Errorf("edge %s -> %s is labelled %q; want %q", edge.from, edge.to, got, edge.label)
		}
		if p.count(sel+" path") != 1 {
			t.Errorf("edge %s -> %s is not drawn", edge.from, edge.to)
		}
	}
	if n := p.count(graph + " .edge"); n != 3 {
		t.Errorf("the graph has %d edges; want 3 (one per pair of bound steps)", n)
	}
	// Boxes of a later layer sit to the right of the steps they take outputs from.
	x := func(step string) string {
		return p.attr(fmt.Sprintf(`%s .step[data-step=%q]`, graph, step), "transform")
	}
	if x("prep") == x("train") || x("train") == x("score") {
		t.Errorf("steps share a place: prep %s, train %s, score %s", x("prep"), x("train"), x("score"))
	}

	// Two samples of the engine's history while train runs: the compute's plot has them.
	for range 2 {
		if err := e.SampleHistory(ctx); err != nil {
			t.Fatal(err)
		}
	}
	plot := `[data-compute="lab/cpu"] .plot[data-plot="compute:lab/cpu"]`
	p.waitFor("the compute's plot with two samples, a node and a running job", fmt.Sprintf(
		`(() => { const pl = document.querySelector('%[1]s'); return !!pl && +pl.dataset.points >= 2 &&
		   +pl.querySelector('.series[data-series="nodes"]').dataset.last >= 1 &&
		   pl.querySelector('.series[data-series="running"]').dataset.last === "1" &&
		   pl.querySelectorAll('polyline').length === 3 })()`, plot))
	if pts := p.attr(plot+` .series[data-series="nodes"] polyline`, "points"); pts == "" {
		t.Errorf("the nodes series has no points drawn")
	}
	env := `[data-environment="lab/system-python"]`
	p.waitFor("the environment with a ready build", fmt.Sprintf(`!!document.querySelector('%s .build[data-current="true"][data-state="ready"]')`, env))
	dir := artifactDir(t)
	screenshot(t, p.ctx, filepath.Join(dir, "status-page-pipeline-running.png"))

	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	p.waitFor("the first pipeline completed", fmt.Sprintf(`!!document.querySelector('%s[data-status="Completed"]')`, graph))

	// The same pipeline again: every step is reused from the first run, and says so.
	second, err := c.SubmitJob(ctx, "lab", spec())
	if err != nil {
		t.Fatal(err)
	}
	again := fmt.Sprintf(`[data-pipeline="lab/%s"]`, second.ID)
	p.waitFor("the second pipeline reused every step", fmt.Sprintf(
		`document.querySelectorAll('%s .step[data-status="Completed"][data-reused-from]').length === 3`, again))
	for _, step := range []string{"prep", "train", "score"} {
		if got, want := p.attr(fmt.Sprintf(`%s .step[data-step=%q]`, again, step), "data-reused-from"), first.ID+"/"+step; got != want {
			t.Errorf("step %s of the second run shows reused_from %q; want %q", step, got, want)
		}
	}
	if err := e.SampleHistory(ctx); err != nil {
		t.Fatal(err)
	}
	p.waitFor("a third sample, with no job running", fmt.Sprintf(
		`(() => { const pl = document.querySelector('%s'); return +pl.dataset.points >= 3 &&
		   pl.querySelector('.series[data-series="running"]').dataset.last === "0" })()`, plot))
	screenshot(t, p.ctx, filepath.Join(dir, "status-page-pipeline-reused.png"))
	t.Logf("screenshots in %s (first run %s, second %s)", dir, first.ID, second.ID)
}
