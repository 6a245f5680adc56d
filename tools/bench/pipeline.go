//go:build unix

package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/client"
)

// -mode pipeline: the engine's overhead per pipeline step, and a pipeline whose every step
// is reused (issue "Pipelines and schedules", Speed). A fan-out/fan-in pipeline of
// pipelineSteps steps that do next to nothing (src, then pipelineSteps-2 steps that each
// take src's output, then sink, which takes all of theirs) runs on a cluster of
// pipelineNodes warm local nodes, in the embedded engine the CLI would start. Its wall time,
// from submit to Completed, is compared with the same commands run directly by this
// process in the same shape and with the same parallelism (pipelineNodes at once): the
// difference, over the number of steps, is the engine's overhead per step. The same
// pipeline submitted again then reuses every step; its wall time is printed too.
const (
	pipelineWorkspace = "bench-pipeline"
	pipelineCompute   = "cpu"
	pipelineNodes     = 4
	pipelineSteps     = 100
)

// pipelineCommand is each step's command (sh -c), of its salted name and output directory:
// it writes one small file into its output.
const pipelineCommand = `echo %s > "%s/done"`

// fanPipeline is the bench's pipeline; salt makes its steps' reuse keys its own.
func fanPipeline(name, salt string) api.JobSpec {
	step := func(stepName string, inputs map[string]string) api.PipelineStepSpec {
		s := api.PipelineStepSpec{Name: stepName, InputBindings: map[string]string{}, OutputBindings: map[string]string{},
			Job: api.JobSpec{Compute: pipelineCompute, Inputs: map[string]api.JobInput{},
				Outputs: map[string]api.JobOutput{"out": {Type: api.URIFolder}},
				Command: []string{"sh", "-c", fmt.Sprintf(pipelineCommand, salt+"-"+stepName, "${{outputs.out}}")}}}
		for in, from := range inputs {
			s.Job.Inputs[in] = api.JobInput{Type: api.URIFolder}
			s.InputBindings[in] = "parent.jobs." + from + ".outputs.out"
		}
		return s
	}
	steps := []api.PipelineStepSpec{step("src", nil)}
	sinkInputs := map[string]string{}
	for i := range pipelineSteps - 2 {
		mid := fmt.Sprintf("mid%02d", i)
		steps = append(steps, step(mid, map[string]string{"src": "src"}))
		sinkInputs[mid] = mid
	}
	steps = append(steps, step("sink", sinkInputs))
	return api.JobSpec{Name: name, Type: api.JobTypePipeline, Pipeline: &api.PipelineSpec{Steps: steps}}
}

// runPipeline is -mode pipeline.
func runPipeline(ctx context.Context, o options) (err error) {
	e, err := startBenchEngine(ctx, o, "mlcompute-pipeline-")
	if err != nil {
		return err
	}
	defer func() {
		if serr := e.stop(o.keepDir); err == nil {
			err = serr
		}
	}()
	c, dir := e.c, e.dir
	if _, err := c.CreateWorkspace(ctx, api.WorkspaceSpec{Name: pipelineWorkspace}); err != nil {
		return err
	}
	if _, err := c.CreateCompute(ctx, pipelineWorkspace, api.ComputeSpec{
		Name: pipelineCompute, Type: api.TypeComputeCluster, VMSize: "Standard_DS1_v2",
		ScaleSettings: &api.ScaleSettings{MinNodeCount: pipelineNodes, MaxNodeCount: pipelineNodes},
	}); err != nil {
		return err
	}
	// An untimed run brings the nodes up and warms the engine; its salt keeps its steps
	// out of the timed runs' reuse.
	if _, err := timePipeline(ctx, c, fanPipeline("warm-up", "warm")); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}

	fmt.Printf("==> pipeline: %d steps (src, %d in parallel, sink) on %d local nodes, against the same commands run directly %d at a time (%d runs)\n",
		pipelineSteps, pipelineSteps-2, pipelineNodes, pipelineNodes, o.runs)
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "run\tdirect\tpipeline\toverhead per step\tall reused\t")
	for run := range o.runs {
		salt := fmt.Sprintf("run%d", run)
		direct, err := timeDirect(ctx, dir, salt)
		if err != nil {
			return err
		}
		fresh, err := timePipeline(ctx, c, fanPipeline("fan-"+salt, salt))
		if err != nil {
			return err
		}
		reused, err := timePipeline(ctx, c, fanPipeline("fan-"+salt+"-again", salt))
		if err != nil {
			return err
		}
		perStep := (fresh - direct) / pipelineSteps
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t\n", run+1, direct.Round(time.Millisecond), fresh.Round(time.Millisecond),
			perStep.Round(time.Millisecond), reused.Round(time.Millisecond))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Println("    targets: overhead per step at most 50 ms; a pipeline whose every step is reused in at most 2 s")
	return nil
}

// timePipeline submits spec and returns the time until the pipeline Completed.
func timePipeline(ctx context.Context, c *client.Client, spec api.JobSpec) (time.Duration, error) {
	start := time.Now()
	j, err := c.SubmitJob(ctx, pipelineWorkspace, spec)
	if err != nil {
		return 0, fmt.Errorf("submitting %s: %w", spec.Name, err)
	}
	for !api.Terminal(j.Status) {
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
		if j, err = c.GetJob(ctx, pipelineWorkspace, j.ID); err != nil {
			return 0, err
		}
	}
	took := time.Since(start)
	if j.Status != api.JobCompleted {
		return 0, fmt.Errorf("pipeline %s ended %s: %s", j.ID, j.Status, j.Error)
	}
	return took, nil
}

// timeDirect runs the pipeline's commands as plain processes in its shape: src, then the
// middle steps pipelineNodes at a time, then sink, each into a directory of its own.
func timeDirect(ctx context.Context, dir, salt string) (time.Duration, error) {
	root := filepath.Join(dir, "direct-"+salt)
	runStep := func(name string) error {
		out := filepath.Join(root, name)
		if err := os.MkdirAll(out, 0o755); err != nil {
			return err
		}
		cmd := exec.CommandContext(ctx, "sh", "-c", fmt.Sprintf(pipelineCommand, salt+"-"+name, out))
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %w: %s", name, err, b)
		}
		return nil
	}
	start := time.Now()
	if err := runStep("src"); err != nil {
		return 0, err
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	slots := make(chan struct{}, pipelineNodes)
	for i := range pipelineSteps - 2 {
		slots <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-slots; wg.Done() }()
			if err := runStep(fmt.Sprintf("mid%02d", i)); err != nil {
				mu.Lock()
				first = err
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if first != nil {
		return 0, first
	}
	if err := runStep("sink"); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}
