//go:build unix

package main

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/client"
)

// -mode pipeline-queue: does a pipeline's submit stay flat with 1,000 pipelines queued
// (issue "Pipelines and schedules", Speed)? The queue is real: a cluster
// of one node, held by a command job that never ends, and queuedPipelines three-step
// pipelines on it, each with its first step's job Queued behind that job and its other
// steps Pending. A probe is one more such pipeline: the bench times its submit (the API
// call) and the time until its first step's job is recorded (the pipeline's first pass),
// first with the queue empty, then with it full, then once the queued pipelines are
// canceled (the queue empty again, the store as large as when it was full): that third
// column tells the queue's cost from the store's size.
const (
	queueCompute    = "busy"
	queuedPipelines = 1000
	queueSubmitters = 8 // the queue is filled by this many callers at once
)

// chainPipeline is a three-step pipeline (prep -> train -> score) on the cluster busy.
func chainPipeline(name string) api.JobSpec {
	step := func(stepName, from string) api.PipelineStepSpec {
		s := api.PipelineStepSpec{Name: stepName, InputBindings: map[string]string{}, OutputBindings: map[string]string{},
			Job: api.JobSpec{Compute: queueCompute, Inputs: map[string]api.JobInput{},
				Outputs: map[string]api.JobOutput{"out": {Type: api.URIFolder}},
				Command: []string{"sh", "-c", fmt.Sprintf(pipelineCommand, name+"-"+stepName, "${{outputs.out}}")}}}
		if from != "" {
			s.Job.Inputs["in"] = api.JobInput{Type: api.URIFolder}
			s.InputBindings["in"] = "parent.jobs." + from + ".outputs.out"
		}
		return s
	}
	return api.JobSpec{Name: name, Type: api.JobTypePipeline, Pipeline: &api.PipelineSpec{Steps: []api.PipelineStepSpec{
		step("prep", ""), step("train", "prep"), step("score", "train"),
	}}}
}

// runPipelineQueue is -mode pipeline-queue, in an embedded engine of its own: o.runs
// probes with the queue empty, full and canceled; it prints the medians and their ratios
// and asserts nothing about time.
func runPipelineQueue(ctx context.Context, o options) (err error) {
	e, err := startBenchEngine(ctx, o, "mlcompute-pipeline-queue-")
	if err != nil {
		return err
	}
	defer func() {
		if serr := e.stop(o.keepDir); err == nil {
			err = serr
		}
	}()
	c := e.c
	if _, err := c.CreateWorkspace(ctx, api.WorkspaceSpec{Name: pipelineWorkspace}); err != nil {
		return err
	}
	if _, err := c.CreateCompute(ctx, pipelineWorkspace, api.ComputeSpec{
		Name: queueCompute, Type: api.TypeComputeCluster, VMSize: "Standard_DS1_v2",
		ScaleSettings: &api.ScaleSettings{MinNodeCount: 1, MaxNodeCount: 1},
	}); err != nil {
		return err
	}
	blocker, err := c.SubmitJob(ctx, pipelineWorkspace, api.JobSpec{Name: "blocker", Compute: queueCompute, Command: []string{"sh", "-c", "exec sleep 86400"}})
	if err != nil {
		return err
	}
	if err := waitJob(ctx, c, blocker.ID, func(j *api.Job) bool { return j.Status == api.JobRunning }); err != nil {
		return fmt.Errorf("the job holding %s's node: %w", queueCompute, err)
	}

	probe := func(name string) (submit, firstPass time.Duration, err error) {
		start := time.Now()
		j, err := c.SubmitJob(ctx, pipelineWorkspace, chainPipeline(name))
		if err != nil {
			return 0, 0, fmt.Errorf("submitting %s: %w", name, err)
		}
		submit = time.Since(start)
		if err := waitJob(ctx, c, j.ID, firstStepQueued); err != nil {
			return 0, 0, fmt.Errorf("probe %s: %w", name, err)
		}
		return submit, time.Since(start), nil
	}
	probes := func(label string) (submits, passes []time.Duration, err error) {
		for run := range o.runs {
			s, p, err := probe(fmt.Sprintf("probe-%s-%d", label, run))
			if err != nil {
				return nil, nil, err
			}
			submits, passes = append(submits, s), append(passes, p)
		}
		return submits, passes, nil
	}

	emptySubmit, emptyPass, err := probes("empty")
	if err != nil {
		return err
	}
	fillStart := time.Now()
	if err := fillQueue(ctx, c); err != nil {
		return err
	}
	fill := time.Since(fillStart)
	queued, err := queuedSteps(ctx, c)
	if err != nil {
		return err
	}
	fullSubmit, fullPass, err := probes("full")
	if err != nil {
		return err
	}
	if err := forEach(ctx, queuedPipelines, func(i int) error {
		id := fmt.Sprintf("queued-%04d", i)
		if _, err := c.CancelJob(ctx, pipelineWorkspace, id); err != nil {
			return err
		}
		return waitJob(ctx, c, id, func(j *api.Job) bool { return api.Terminal(j.Status) })
	}); err != nil {
		return fmt.Errorf("canceling the queued pipelines: %w", err)
	}
	drainedSubmit, drainedPass, err := probes("drained")
	if err != nil {
		return err
	}

	fmt.Printf("==> pipeline submit with the queue empty and with %d pipelines queued (3-step pipelines on a one-node cluster held by a job that never ends; %d runs each)\n",
		queuedPipelines, o.runs)
	fmt.Printf("    filling the queue: %d pipelines submitted by %d callers at once in %s; %d step jobs Queued on %s behind the blocker\n",
		queuedPipelines, queueSubmitters, fill.Round(time.Millisecond), queued, queueCompute)
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "\tqueue empty\tqueue full\tfull / empty\tcanceled\tcanceled / empty\t")
	cell := func(ds []time.Duration) string {
		return fmt.Sprintf("%s [%s-%s]", median(ds).Round(time.Microsecond), slices.Min(ds).Round(time.Microsecond), slices.Max(ds).Round(time.Microsecond))
	}
	ratio := func(ds, base []time.Duration) string {
		r := ratios(ds, base)
		return fmt.Sprintf("%.2fx [%.2f-%.2f]", medianFloat(r), slices.Min(r), slices.Max(r))
	}
	row := func(what string, empty, full, drained []time.Duration) {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t\n", what, cell(empty), cell(full), ratio(full, empty), cell(drained), ratio(drained, empty))
	}
	row("submit (the API call)", emptySubmit, fullSubmit, drainedSubmit)
	row("until the first step's job is recorded", emptyPass, fullPass, drainedPass)
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Println("    target: submit flat (a ratio near 1.0x) with 1,000 pipelines queued")
	return nil
}

// fillQueue submits queuedPipelines chain pipelines (queued-0000, ...) from
// queueSubmitters callers, then waits until each has its first step's job recorded.
func fillQueue(ctx context.Context, c *client.Client) error {
	if err := forEach(ctx, queuedPipelines, func(i int) error {
		_, err := c.SubmitJob(ctx, pipelineWorkspace, chainPipeline(fmt.Sprintf("queued-%04d", i)))
		return err
	}); err != nil {
		return fmt.Errorf("filling the queue: %w", err)
	}
	return forEach(ctx, queuedPipelines, func(i int) error {
		return waitJob(ctx, c, fmt.Sprintf("queued-%04d", i), firstStepQueued)
	})
}

// forEach calls f(0), ..., f(n-1) from queueSubmitters goroutines and returns the first
// error.
func forEach(ctx context.Context, n int, f func(i int) error) error {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	next := make(chan int)
	for range queueSubmitters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := f(i); err != nil {
					mu.Lock()
					first = cmp.Or(first, err)
					mu.Unlock()
				}
			}
		}()
	}
	for i := range n {
		if ctx.Err() != nil {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	return cmp.Or(first, ctx.Err())
}

// queuedSteps counts the Queued jobs on the cluster busy.
func queuedSteps(ctx context.Context, c *client.Client) (int, error) {
	jobs, err := c.ListJobs(ctx, pipelineWorkspace)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, j := range jobs {
		if j.Compute == queueCompute && j.Status == api.JobQueued {
			n++
		}
	}
	return n, nil
}

// firstStepQueued: the pipeline's first step, prep, has its job, and the queue holds it.
func firstStepQueued(j *api.Job) bool {
	for _, s := range j.Steps {
		if s.Name == "prep" {
			return s.Job != "" && s.Status == api.JobQueued
		}
	}
	return false
}

// waitJob polls job id every 5 ms until done(job) holds; a job that ends first is an error.
func waitJob(ctx context.Context, c *client.Client, id string, done func(*api.Job) bool) error {
	for {
		j, err := c.GetJob(ctx, pipelineWorkspace, id)
		if err != nil {
			return err
		}
		if done(j) {
			return nil
		}
		if api.Terminal(j.Status) {
			return fmt.Errorf("job %s ended %s: %s", id, j.Status, j.Error)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}
