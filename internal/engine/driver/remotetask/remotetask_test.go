package remotetask

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
)

func newTasks(t *testing.T) (*Tasks, *clocktesting.FakeClock, context.CancelFunc, *sync.WaitGroup) {
	t.Helper()
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC))
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	return New(ctx, clk, &wg, hclog.NewNullLogger()), clk, cancel, &wg
}

// A watch waits again, a second after a failed wait (the fake clock moved by hand), and
// reports the end once; a second Watch of the same task starts nothing.
func TestWatchRetriesAFailedWaitAndReportsTheEndOnce(t *testing.T) {
	tasks, clk, _, wg := newTasks(t)
	var mu sync.Mutex
	calls := 0
	wait := func(context.Context) (bool, int, error) {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if calls == 1 {
			return false, 0, errors.New("the stream broke")
		}
		return false, 3, nil
	}
	ended := make(chan int, 2)
	report := func(_ context.Context, code int) { ended <- code }
	tasks.Watch("job-0", wait, report)
	tasks.Watch("job-0", wait, report)
	for !clk.HasWaiters() {
		time.Sleep(time.Millisecond)
	}
	clk.Step(retryAfter)
	if code := <-ended; code != 3 {
		t.Fatalf("ended with %d; want the task's 3", code)
	}
	wg.Wait()
	if len(ended) != 0 || calls != 2 {
		t.Fatalf("%d more ends and %d waits; want one end after two waits", len(ended), calls)
	}
}

// A task the machine no longer has, and a node that goes, end the watch without a report.
func TestWatchEndsWithoutReportWhenTheTaskOrTheNodeIsGone(t *testing.T) {
	tasks, _, cancel, wg := newTasks(t)
	reported := false
	tasks.Watch("gone", func(context.Context) (bool, int, error) { return false, 0, driver.ErrNotFound },
		func(context.Context, int) { reported = true })
	wg.Wait()
	blocked := make(chan struct{})
	tasks.Watch("running", func(ctx context.Context) (bool, int, error) {
		close(blocked)
		<-ctx.Done()
		return false, 0, ctx.Err()
	}, func(context.Context, int) { reported = true })
	<-blocked
	cancel()
	wg.Wait()
	if reported {
		t.Fatal("a watch reported an end of a task that is gone, or of a node that went")
	}
}

// Adopt lists a node's running tasks once and has them watched, in key order, before it
// returns; a list that failed is tried again at the next Adopt.
func TestAdoptListsOnceAndWatchesInOrder(t *testing.T) {
	tasks, _, _, _ := newTasks(t)
	ctx := context.Background()
	lists := 0
	var watched []string
	list := func(context.Context) ([]string, error) {
		lists++
		if lists == 1 {
			return nil, errors.New("the machine did not answer")
		}
		return []string{"job-2", "job-0", "job-1"}, nil
	}
	watch := func(k string) { watched = append(watched, k) }
	tasks.Adopt(ctx, list, watch)
	if lists != 1 || len(watched) != 0 {
		t.Fatalf("after a failed list: %d lists, watched %v; want one list and nothing watched", lists, watched)
	}
	tasks.Adopt(ctx, list, watch)
	if lists != 2 || !slices.Equal(watched, []string{"job-0", "job-1", "job-2"}) {
		t.Fatalf("when Adopt returned: %d lists, watched %v; want a second list and the three in order", lists, watched)
	}
	tasks.Adopt(ctx, list, watch)
	if lists != 2 || len(watched) != 3 {
		t.Fatalf("a third Adopt: %d lists, watched %v; want no list after the one that answered", lists, watched)
	}
}
