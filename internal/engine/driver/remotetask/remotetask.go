// Package remotetask is what the drivers of machines reached through a shell (Slurm's and
// Kubernetes') share around package ssh's TaskStore: the table of the nodes a driver
// watches (Table, whose Node each driver's node type embeds with what only it knows: a
// Slurm job, a pod), which of a node's tasks are watched, the watch that waits on the
// machine for a task's end and reports it, and the adoption of the tasks a node runs when
// a restarted engine finds it.
package remotetask

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"k8s.io/utils/clock"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
)

// retryAfter is how long a watch waits after a failed wait (a broken stream, a machine
// that did not answer) before it waits again.
const retryAfter = time.Second

// Tasks are one node's watched tasks. Their watches end with the node's context: a node
// that is replaced (a new pod under the same key) gets new Tasks.
type Tasks struct {
	ctx   context.Context
	clock clock.Clock
	wg    *sync.WaitGroup
	log   hclog.Logger

	mu       sync.Mutex
	watching map[string]bool
	adopted  bool
}

// New returns the watched tasks of a node that lives as long as ctx; the watches'
// goroutines are counted in wg, which the driver's Close waits for.
func New(ctx context.Context, clk clock.Clock, wg *sync.WaitGroup, log hclog.Logger) *Tasks {
	return &Tasks{ctx: ctx, clock: clk, wg: wg, log: log, watching: map[string]bool{}}
}

// WaitFunc waits on the machine for a task's end and says how it ended
// (ssh.TaskStore.Wait).
type WaitFunc func(ctx context.Context) (running bool, exitCode int, err error)

// Watch waits for a task's end with wait, again a second after each failure, and then
// calls ended with the node's context and the task's exit status. It stops when the
// node's context ends or the machine no longer has the task (driver.ErrNotFound). A task
// already watched is not watched twice.
func (t *Tasks) Watch(taskKey string, wait WaitFunc, ended func(ctx context.Context, exitCode int)) {
	t.mu.Lock()
	if t.watching[taskKey] {
		t.mu.Unlock()
		return
	}
	t.watching[taskKey] = true
	t.mu.Unlock()
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		for {
			running, code, err := wait(t.ctx)
			if t.ctx.Err() != nil {
				return
			}
			if err == nil && !running {
				ended(t.ctx, code)
				return
			}
			if driver.IsNotFound(err) {
				return
			}
			t.log.Debug("waiting for a task's end failed; waiting again", "task", taskKey, "error", err)
			select {
			case <-t.ctx.Done():
				return
			case <-t.clock.After(retryAfter):
			}
		}
	}()
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
