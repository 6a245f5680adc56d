package remotetask

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
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

// A watch waits again after a failed wait (the fake clock moved by hand), and reports the
// end once; a second Watch of the same task while it is watched starts nothing.
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
	tasks.Watch("job-0", wait, report, nil)
	tasks.Watch("job-0", wait, report, nil)
	awaitTimer(clk)
	clk.Step(firstRetry)
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
		func(context.Context, int) { reported = true }, nil)
	wg.Wait()
	blocked := make(chan struct{})
	tasks.Watch("running", func(ctx context.Context) (bool, int, error) {
		close(blocked)
		<-ctx.Done()
		return false, 0, ctx.Err()
	}, func(context.Context, int) { reported = true }, nil)
	<-blocked
	cancel()
	wg.Wait()
	if reported {
		t.Fatal("a watch reported an end of a task that is gone, or of a node that went")
	}
}

// awaitTimer returns once a watch waits on clk before it tries again.
func awaitTimer(clk *clocktesting.FakeClock) {
	for !clk.HasWaiters() {
		time.Sleep(time.Millisecond)
	}
}

// A watch whose waits keep failing tries again after 200 ms, then twice as long each time
// up to 10 s, timed by the node's clock: a step just short of the back-off starts no wait,
// the step that reaches it does.
func TestWatchBacksOffOnTheClock(t *testing.T) {
	tasks, clk, _, wg := newTasks(t)
	backoff := []time.Duration{
		200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond, 1600 * time.Millisecond,
		3200 * time.Millisecond, 6400 * time.Millisecond, 10 * time.Second, 10 * time.Second,
	}
	var calls atomic.Int32
	wait := func(context.Context) (bool, int, error) {
		if int(calls.Add(1)) <= len(backoff) {
			return false, 0, errors.New("the machine did not answer")
		}
		return false, 0, nil
	}
	ended := make(chan int, 1)
	tasks.Watch("job-0", wait, func(_ context.Context, code int) { ended <- code }, nil)
	for i, d := range backoff {
		awaitTimer(clk)
		clk.Step(d - time.Millisecond)
		// A timer that fired was removed by Step; a wait it started comes before its next timer.
		if !clk.HasWaiters() || calls.Load() != int32(i+1) {
			t.Fatalf("the watch tried again before the back-off of %s after failure %d", d, i+1)
		}
		clk.Step(time.Millisecond)
	}
	<-ended
	wg.Wait()
	if got := calls.Load(); got != int32(len(backoff)+1) {
		t.Fatalf("%d waits; want %d", got, len(backoff)+1)
	}
}

// A task the machine no longer has ends its watch with the end lost says (its code), or
// without a report when lost says so; lost is given the wait's error.
func TestWatchAsksLostAboutATaskTheMachineNoLongerHas(t *testing.T) {
	tasks, _, _, wg := newTasks(t)
	ends := map[string]int{}
	var mu sync.Mutex
	report := func(key string) func(context.Context, int) {
		return func(_ context.Context, code int) { mu.Lock(); ends[key] = code; mu.Unlock() }
	}
	notFound := func(context.Context) (bool, int, error) { return false, 0, driver.ErrNotFound }
	var asked []error
	lost := func(report bool) LostFunc {
		return func(_ context.Context, err error) (int, bool) {
			mu.Lock()
			asked = append(asked, err)
			mu.Unlock()
			return 250, report
		}
	}
	tasks.Watch("removed", notFound, report("removed"), lost(true))
	tasks.Watch("node-gone", notFound, report("node-gone"), lost(false))
	wg.Wait()
	if len(ends) != 1 || ends["removed"] != 250 {
		t.Fatalf("ends %v; want only the removed task's, with lost's 250", ends)
	}
	if len(asked) != 2 || !driver.IsNotFound(asked[0]) || !driver.IsNotFound(asked[1]) {
		t.Fatalf("lost was given %v; want the two waits' ErrNotFound", asked)
	}
}

// Await returns once every running watch ended and reported its end; while one is still
// reporting, an Await whose context ended says so. A node with no watch is awaited at once.
func TestAwaitWaitsForTheWatchesToReport(t *testing.T) {
	tasks, _, _, _ := newTasks(t)
	if err := tasks.Await(context.Background()); err != nil {
		t.Fatalf("Await with no watch: %v", err)
	}
	release := make(chan struct{})
	wait := func(ctx context.Context) (bool, int, error) {
		<-release
		return false, 143, nil
	}
	reporting, letReport := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	var ended []string
	tasks.Watch("a", wait, func(context.Context, int) { mu.Lock(); ended = append(ended, "a"); mu.Unlock() }, nil)
	tasks.Watch("b", wait, func(context.Context, int) {
		close(reporting)
		<-letReport
		mu.Lock()
		ended = append(ended, "b")
		mu.Unlock()
	}, nil)
	gaveUp, cancel := context.WithCancel(context.Background())
	cancel()
	if err := tasks.Await(gaveUp); err == nil {
		t.Fatal("Await returned nil while the watches wait")
	}
	close(release)
	<-reporting
	if err := tasks.Await(gaveUp); err == nil {
		t.Fatal("Await returned nil while a watch reports its end")
	}
	close(letReport)
	if err := tasks.Await(context.Background()); err != nil {
		t.Fatalf("Await: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Contains(ended, "a") || !slices.Contains(ended, "b") {
		t.Fatalf("when Await returned, ended %v; want a and b", ended)
	}
}

// A watch forgets its task when it ends, so the task can be watched again (started again
// under its key); once the node's context ended, Watch starts nothing.
func TestWatchForgetsItsTaskWhenItEnds(t *testing.T) {
	tasks, _, cancel, wg := newTasks(t)
	var waits atomic.Int32
	wait := func(context.Context) (bool, int, error) { waits.Add(1); return false, 0, nil }
	var ends atomic.Int32
	ended := func(context.Context, int) { ends.Add(1) }
	tasks.Watch("job-0", wait, ended, nil)
	wg.Wait()
	tasks.Watch("job-0", wait, ended, nil)
	wg.Wait()
	if waits.Load() != 2 || ends.Load() != 2 {
		t.Fatalf("%d waits and %d ends; want the task watched again after its watch ended", waits.Load(), ends.Load())
	}
	cancel()
	tasks.Watch("job-1", wait, ended, nil)
	wg.Wait()
	if waits.Load() != 2 {
		t.Fatal("a task of a node no longer watched was watched")
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
