package engine

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"k8s.io/utils/clock"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
)

// BenchmarkPipelineSubmitQueued times a pipeline's submit (the API call) on an engine
// whose one-node cluster is held by a job that never ends, first with nothing queued
// behind it, then with 1,000 pipelines queued there (their first step's job Queued, as
// tools/bench -mode pipeline-queue does against a real engine). DESIGN 10: submit stays
// flat with 1,000 queued. Each probe waits, untimed, until its first step's job is
// Queued (so the compute's pass it starts runs before the next probe) and is canceled
// again, so the queue keeps its length. It prints the ratio of the two medians; it
// asserts nothing about time.
func BenchmarkPipelineSubmitQueued(b *testing.B) {
	medians := map[int]time.Duration{}
	full := *pipelineQueueLength
	for _, queued := range []int{0, full} {
		b.Run(fmt.Sprintf("queued=%d", queued), func(b *testing.B) {
			q := pipelineQueue(b, queued)
			var took []time.Duration
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				took = append(took, q.probe(b, fmt.Sprintf("probe-%d-%d", queued, i)))
			}
			medians[queued] = medianDuration(took)
			b.ReportMetric(float64(medians[queued].Microseconds()), "median-µs/submit")
		})
	}
	if medians[0] > 0 && medians[full] > 0 {
		b.Logf("pipeline submit: median %s with nothing queued, %s with %d pipelines queued: %.2fx (target: near 1.0x)",
			medians[0], medians[full], full, float64(medians[full])/float64(medians[0]))
	}
}

// pipelineQueueLength is the full queue's length: DESIGN's 1,000 (filled in about 10 s on
// 2 shared cores); -pipeline-queue N queues N instead.
var pipelineQueueLength = flag.Int("pipeline-queue", 1000, "pipelines queued in BenchmarkPipelineSubmitQueued's full run")

// queueRig is an engine with a one-node cluster held by a job that never ends.
type queueRig struct {
	e   *Engine
	ctx context.Context
}

const queueRigWorkspace = "bench"

// pipelineQueue starts the rig and queues n three-step pipelines behind the held node.
func pipelineQueue(b *testing.B, n int) *queueRig {
	b.Helper()
	e, ctx := benchEngine(b, benchStore(b), clock.RealClock{}, false)
	q := &queueRig{e: e, ctx: ctx}
	if _, err := e.CreateWorkspace(ctx, api.WorkspaceSpec{Name: queueRigWorkspace, Location: api.DefaultLocation}, ""); err != nil {
		b.Fatal(err)
	}
	spec := api.ComputeSpec{Name: "busy", VMSize: "Standard_DS1_v2", ScaleSettings: &api.ScaleSettings{MinNodeCount: 1, MaxNodeCount: 1}}
	if _, err := e.CreateCompute(ctx, queueRigWorkspace, spec, ""); err != nil {
		b.Fatal(err)
	}
	blocker, err := e.SubmitJob(ctx, queueRigWorkspace, api.JobSpec{Name: "blocker", Compute: "busy", Command: []string{"sleep", "forever"}}, "")
	if err != nil {
		b.Fatal(err)
	}
	q.wait(b, blocker.ID, func(j *api.Job) bool { return j.Status == api.JobRunning })
	const callers = 8
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for c := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := c; i < n; i += callers {
				if _, err := e.SubmitJob(ctx, queueRigWorkspace, chain(fmt.Sprintf("queued-%04d", i)), ""); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	for i := range n {
		q.wait(b, fmt.Sprintf("queued-%04d", i), firstStepQueued)
	}
	b.Logf("%d pipelines queued in %s", n, time.Since(start).Round(time.Millisecond))
	return q
}

// probe submits one more pipeline and returns how long the submit took; it then waits
// for the pipeline's first step to be Queued and cancels the pipeline, untimed.
func (q *queueRig) probe(b *testing.B, name string) time.Duration {
	start := time.Now()
	j, err := q.e.SubmitJob(q.ctx, queueRigWorkspace, chain(name), "")
	took := time.Since(start)
	if err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	defer b.StartTimer()
	q.wait(b, j.ID, firstStepQueued)
	if _, err := q.e.CancelJob(q.ctx, queueRigWorkspace, j.ID); err != nil {
		b.Fatal(err)
	}
	q.wait(b, j.ID, func(j *api.Job) bool { return api.Terminal(j.Status) })
	return took
}

// wait polls a job every millisecond until done holds; a job that ends first fails b.
func (q *queueRig) wait(b *testing.B, id string, done func(*api.Job) bool) {
	b.Helper()
	for {
		j, err := q.e.GetJob(q.ctx, queueRigWorkspace, id)
		if err != nil {
			b.Fatal(err)
		}
		if done(j) {
			return
		}
		if api.Terminal(j.Status) {
			b.Fatalf("job %s ended %s: %s", id, j.Status, j.Error)
		}
		time.Sleep(time.Millisecond)
	}
}

// chain is a three-step pipeline (prep -> train -> score) on the cluster busy; its steps'
// commands name the pipeline, so it shares no step with another (DESIGN's step reuse).
func chain(name string) api.JobSpec {
	step := func(stepName, from string) api.PipelineStepSpec {
		s := api.PipelineStepSpec{Name: stepName, InputBindings: map[string]string{}, OutputBindings: map[string]string{},
			Job: api.JobSpec{Compute: "busy", Inputs: map[string]api.JobInput{}, Outputs: map[string]api.JobOutput{"out": {Type: api.URIFolder}},
				Command: []string{"echo", name + "-" + stepName}}} // its own reuse key: no step waits for another pipeline's
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

// firstStepQueued: the pipeline's first step, prep, has its job, and it is Queued.
func firstStepQueued(j *api.Job) bool {
	for _, s := range j.Steps {
		if s.Name == "prep" {
			return s.Job != "" && s.Status == api.JobQueued
		}
	}
	return false
}

func medianDuration(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
