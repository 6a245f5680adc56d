// Package remotetask is what the drivers of machines reached through a shell (Slurm's and
// Kubernetes') share around package ssh's TaskStore: the table of the nodes a driver
// watches (Table, whose Node each driver's node type embeds with what only it knows: a
// Slurm job, a pod), which of a node's tasks are watched, the watch that waits on the
// machine for a task's end and reports it, and the adoption of the tasks a node runs when
// a restarted engine finds it. The ssh driver's attached machines have no table (the
// engine's records are their list), but their tasks are watched by the same Tasks, so
// every driver of remote machines retries, reports and stops its watches alike.
package remotetask

import (
	"context"
	"errors"
	"sort"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"k8s.io/utils/clock"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
)

// firstRetry and maxRetry are the back-off between failed attempts at something on a
// machine (a wait for a task's end, a list of its tasks): 200 ms after the first failure,
// doubling up to 10 s. A broken stream or a dropped connection is tried again almost at
// once, so an end that came meanwhile is reported promptly, while a machine that stays
// unreachable is asked only every 10 s, not flooded with dials by every watch it has.
const (
	firstRetry = 200 * time.Millisecond
	maxRetry   = 10 * time.Second
)

// Tasks are one node's watched tasks. Their watches end with the node's context: a node
// that is replaced (a new pod under the same key) gets new Tasks.
type Tasks struct {
	ctx   context.Context
	clock clock.Clock
	wg    *sync.WaitGroup
	log   hclog.Logger

	mu sync.Mutex
	// watching holds the running watches by task key, each with a channel closed when it
	// ends (Await waits on them). A watch removes its task when it ends, so the task can
	// be watched again (started again under its key, or adopted).
	watching map[string]chan struct{}
	adopted  bool
}

// New returns the watched tasks of a node that lives as long as ctx; the watches'
// goroutines are counted in wg, which the driver's Close waits for.
func New(ctx context.Context, clk clock.Clock, wg *sync.WaitGroup, log hclog.Logger) *Tasks {
	return &Tasks{ctx: ctx, clock: clk, wg: wg, log: log, watching: map[string]chan struct{}{}}
}

// WaitFunc waits on the machine for a task's end and says how it ended
// (ssh.TaskStore.Wait).
type WaitFunc func(ctx context.Context) (running bool, exitCode int, err error)

// LostFunc decides what a watch reports when its wait says the machine no longer has the
// task (err matches driver.ErrNotFound): the exit code to report as the task's end, or
// report false to end the watch without a report. A task whose files were removed while
// its node lives did end, and the engine waits for that end; a node that is gone takes
// its tasks' ends with it.
type LostFunc func(ctx context.Context, err error) (exitCode int, report bool)

// Watch waits for a task's end with wait, again after each failure (with back-off, see
// firstRetry), and then calls ended with the node's context and the task's exit status. It
// stops when the node's context ends, or when the machine no longer has the task
// (driver.ErrNotFound): then lost, when set, says whether that is reported as an end and
// with which code (nil: it is not). A task already watched is not watched twice; one whose
// watch ended can be watched again.
func (t *Tasks) Watch(taskKey string, wait WaitFunc, ended func(ctx context.Context, exitCode int), lost LostFunc) {
	t.mu.Lock()
	if t.watching[taskKey] != nil || t.ctx.Err() != nil {
		t.mu.Unlock()
		return
	}
	done := make(chan struct{})
	t.watching[taskKey] = done
	t.wg.Add(1)
	t.mu.Unlock()
	go func() {
		defer t.wg.Done()
		defer func() {
			t.mu.Lock()
			delete(t.watching, taskKey)
			t.mu.Unlock()
			close(done)
		}()
		t.Retry("waiting for a task's end", func(ctx context.Context) error {
			running, code, err := wait(ctx)
			if ctx.Err() != nil {
				return ctx.Err() // the node is no longer watched: nobody waits for its tasks
			}
			if driver.IsNotFound(err) && lost != nil {
				var report bool
				if code, report = lost(ctx, err); !report {
					return err
				}
				running, err = false, nil
			}
			switch {
			case err != nil:
				return err
			case running:
				return errors.New("the wait returned while the task runs")
			}
			ended(ctx, code)
			return nil
		}, "task", taskKey)
	}()
}

// Retry calls attempt with the node's context until it succeeds, says that what it works
// on is gone (driver.ErrNotFound), or the node's context ends; a failed attempt is logged
// as doing, with the key-value pairs of logArgs, and tried again after a back-off (see
// firstRetry). A driver's own work on a node's machine (the ssh driver's list of an adopted
// machine's tasks) retries as the watches do.
func (t *Tasks) Retry(doing string, attempt func(ctx context.Context) error, logArgs ...any) {
	wait := firstRetry
	for t.ctx.Err() == nil {
		err := attempt(t.ctx)
		if err == nil || driver.IsNotFound(err) || t.ctx.Err() != nil {
			return
		}
		t.log.Debug(doing+" failed; trying again", append(logArgs, "error", err, "after", wait)...)
		select {
		case <-t.ctx.Done():
			return
		case <-t.clock.After(wait):
		}
		wait = min(2*wait, maxRetry)
	}
}

// Await waits until the watches running when it is called have ended, or ctx ends (then
// it returns ctx's error). The ssh driver's Terminate kills a node's tasks and then awaits
// their watches, so their ends are reported before it stops watching the node.
func (t *Tasks) Await(ctx context.Context) error {
	t.mu.Lock()
	done := make([]chan struct{}, 0, len(t.watching))
	for _, ch := range t.watching {
		done = append(done, ch)
	}
	t.mu.Unlock()
	for _, ch := range done {
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// Adopt watches, once per node, the tasks it runs when the driver adopts it (after an
// engine restart): list names them, and watch is called for each, in key order, before
// Adopt returns. The driver calls it before it answers the Describe or List that adopted
// the node, and without its lock. So a task that still ran when the engine then asks for
// its status is watched, and its end is reported even when it comes right after. A list
// done in the background could come after the task ended, and miss it: the engine would
// wait forever for an end that already happened. A failed list is logged and tried again
// at the next Adopt.
func (t *Tasks) Adopt(ctx context.Context, list func(ctx context.Context) ([]string, error), watch func(taskKey string)) {
	t.mu.Lock()
	if t.adopted {
		t.mu.Unlock()
		return
	}
	t.adopted = true
	t.mu.Unlock()
	keys, err := list(ctx)
	if err != nil {
		t.mu.Lock()
		t.adopted = false
		t.mu.Unlock()
		if ctx.Err() == nil && t.ctx.Err() == nil {
			t.log.Warn("listing the running tasks of an adopted node", "error", err)
		}
		return
	}
	sort.Strings(keys)
	for _, k := range keys {
		watch(k)
	}
}
