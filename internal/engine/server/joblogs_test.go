package server_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/client"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/enginetest"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/syncbuf"
)

// A followed job's output arrives as the task prints it, in one stream, and the follow
// returns when the job ends, with the offset after the last byte.
func TestFollowJobLogsStreamsOutput(t *testing.T) {
	e := enginetest.Start(t, enginetest.Options{})
	// The client's own clock never moves: a client that polled instead of reading the
	// stream would wait on it forever.
	c := newClient(t, e.Endpoint, "", client.WithClock(clocktesting.NewFakeClock(time.Unix(0, 0))))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.CreateWorkspace(ctx, api.WorkspaceSpec{Name: "lab"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateCompute(ctx, "lab", api.ComputeSpec{
		Name: "cpu", Type: api.TypeComputeCluster, VMSize: "Standard_DS3_v2",
		ScaleSettings: &api.ScaleSettings{MaxNodeCount: 1},
	}); err != nil {
		t.Fatal(err)
	}
	job, err := c.SubmitJob(ctx, "lab", api.JobSpec{Compute: "cpu", Command: []string{"train"}})
	if err != nil {
		t.Fatal(err)
	}

	var out syncbuf.Buffer
	type result struct {
		next int64
		err  error
	}
	done := make(chan result, 1)
	go func() {
		next, err := c.FollowJobLogs(ctx, "lab", job.ID, 0, 0, &out)
		done <- result{next, err}
	}()

	// The engine re-reads a silent task's output on its (fake) clock: step it until the
	// follower has the line the task printed.
	var node, task string
	eventually(t, "the job's task running", func() bool {
		for _, nt := range e.Driver.RunningTasks() {
			node, task, _ = strings.Cut(nt, "/")
			return true
		}
		return false
	})
	e.Driver.AppendOutput(node, task, []byte("epoch 1\n"))
	eventually(t, "the first line streamed", func() bool {
		e.Clock.Step(time.Second)
		return out.String() == "epoch 1\n"
	})
	select {
	case r := <-done:
		t.Fatalf("follow returned while the job runs: %+v", r)
	default:
	}

	e.Driver.AppendOutput(node, task, []byte("epoch 2\n"))
	e.Driver.FinishTask(node, task, 0)
	var r result
	eventually(t, "the follow to end with the job", func() bool {
		e.Clock.Step(time.Second)
		select {
		case r = <-done:
			return true
		default:
			return false
		}
	})
	if r.err != nil || r.next != int64(len("epoch 1\nepoch 2\n")) || out.String() != "epoch 1\nepoch 2\n" {
		t.Fatalf("follow = %d, %v with output %q; want 16, nil and both lines", r.next, r.err, out.String())
	}
}

// Following a job that does not exist is the engine's not_found, not an empty stream.
func TestFollowJobLogsUnknownJob(t *testing.T) {
	e := enginetest.Start(t, enginetest.Options{})
	c := e.Client(t, "")
	ctx := context.Background()
	if _, err := c.CreateWorkspace(ctx, api.WorkspaceSpec{Name: "lab"}); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if _, err := c.FollowJobLogs(ctx, "lab", "job-404", 0, 0, &out); !api.IsNotFound(err) {
		t.Fatalf("follow of an unknown job: %v; want not_found", err)
	}
}

// eventually polls cond (which may step the fake clock) until it holds.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for range 2000 {
		if cond() {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("never happened: %s", what)
}
