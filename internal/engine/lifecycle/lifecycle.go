// Package lifecycle is the engine's one node lifecycle (DESIGN 2). A node of a cluster, a
// compute instance, a serverless job or an endpoint deployment is created under a key its
// owner committed first, waited for until the driver reports it ready, released once and
// confirmed gone, and found again after a restart, by this code; the driver's events about
// a node reach the controller that owns it.
//
// Owners keep their records and their rule: the computes core (how many nodes a compute
// needs, which go) and the endpoints controller (how many instances a deployment runs,
// which drain). Nodes keeps only what is in flight: which keys are being created, which
// wait for the driver to report them ready, which are being released, and whose they are.
package lifecycle

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/hashicorp/go-hclog"
	"k8s.io/utils/clock"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/runtime"
)

// Owner is a controller whose nodes the lifecycle runs.
type Owner interface {
	// HandleNodeEvent applies a driver event about one of the owner's nodes (NodeReady,
	// NodeGone, TaskExited).
	HandleNodeEvent(ctx context.Context, ev driver.Event)
}

// Config is what the lifecycle is built from.
type Config struct {
	Clock  clock.PassiveClock
	Logger hclog.Logger
	Loop   *runtime.Loop
}

// Nodes runs the node lifecycle for every owner. Its methods are safe for concurrent use.
type Nodes struct {
	clock clock.PassiveClock
	log   hclog.Logger
	loop  *runtime.Loop
	// drv is set by Start.
	drv driver.Driver

	mu        sync.Mutex
	owners    map[string]Owner          // node key -> the controller that owns it
	creating  map[string]bool           // a Create (and its owner's follow-up) in flight
	held      map[string][]driver.Event // events about a node being created, delivered after
	waiting   map[string]bool           // created not ready: waits for NodeReady or NodeGone
	releasing map[string]bool           // a Terminate in flight
}

// New builds the lifecycle; Start gives it the driver.
func New(cfg Config) *Nodes {
	return &Nodes{
		clock: cfg.Clock, log: cfg.Logger.Named("nodes"), loop: cfg.Loop,
		owners: map[string]Owner{}, creating: map[string]bool{}, held: map[string][]driver.Event{}, waiting: map[string]bool{}, releasing: map[string]bool{},
	}
}

// Start gives the lifecycle the engine's node driver.
func (n *Nodes) Start(drv driver.Driver) { n.drv = drv }

// Describe returns a node as its driver sees it now: its address, and whether it is ready.
func (n *Nodes) Describe(ctx context.Context, key string) (driver.NodeInfo, error) {
	return n.drv.Describe(ctx, key)
}

// Register makes owner the owner of the nodes under keys: the nodes it recorded before a
// restart, registered before the driver's events flow so that none is lost.
func (n *Nodes) Register(owner Owner, keys ...string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, k := range keys {
		n.owners[k] = owner
	}
}

// Owns reports whether some owner holds the node under key.
func (n *Nodes) Owns(key string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	_, ok := n.owners[key]
	return ok
}

// Create asks the driver for the node spec describes, whose key its owner has committed,
// through the work loop's Go so that a slow node blocks nothing else. done gets the outcome
// in the same goroutine; the node counts as being created until done returns, so the
// owner's follow-up (recording the outcome, starting the node's first task) is never raced
// by a second Create or a Release of the same key. A node the driver returns not ready
// waits until the driver reports it ready or gone. Events about the node that arrive while
// it is being created are held and delivered to the owner after done, so the owner never
// sees its node ready before it recorded the node created. Create reports false, and does
// nothing, when the node is already being created or waits to be ready. done is not called
// when ctx ended during the call: the engine is stopping, and recovery finds the node.
func (n *Nodes) Create(ctx context.Context, owner Owner, spec driver.NodeSpec, done func(driver.NodeInfo, error)) bool {
	n.mu.Lock()
	if n.creating[spec.Key] || n.waiting[spec.Key] {
		n.mu.Unlock()
		return false
	}
	n.creating[spec.Key] = true
	n.owners[spec.Key] = owner
	n.mu.Unlock()
	n.loop.Go(func() {
		info, err := n.drv.Create(ctx, spec)
		if ctx.Err() == nil {
			done(info, err)
		}
		n.mu.Lock()
		delete(n.creating, spec.Key)
		held := n.held[spec.Key]
		delete(n.held, spec.Key)
		settled := slices.ContainsFunc(held, func(ev driver.Event) bool { return ev.Kind == driver.NodeReady || ev.Kind == driver.NodeGone })
		if err == nil && !info.Ready && !settled && ctx.Err() == nil {
			n.waiting[spec.Key] = true
		}
		n.mu.Unlock()
		for _, ev := range held {
			owner.HandleNodeEvent(ctx, ev)
		}
	})
	return true
}

// Waiting reports whether a node was created not ready and the driver has not yet said
// what became of it.
func (n *Nodes) Waiting(key string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.waiting[key]
}

// Release terminates the node under key, one call at a time per node and never while its
// Create is in flight (that Create's outcome brings the owner's next pass, which releases
// it then); it reports whether it started. When the driver confirms the node gone, gone
// records it (the owner deletes or updates its record) and then after runs; the node is
// no longer the owner's. When the driver or gone fails, the owner's record keeps its mark,
// and retry is set a little later so that the owner's next pass releases it again.
func (n *Nodes) Release(ctx context.Context, key string, retry runtime.Timer, gone func() error, after func()) bool {
	n.mu.Lock()
	if n.releasing[key] || n.creating[key] {
		n.mu.Unlock()
		return false
	}
	n.releasing[key] = true
	n.mu.Unlock()
	n.loop.Go(func() {
		err := n.drv.Terminate(ctx, key)
		if err == nil {
			err = gone()
		}
		n.mu.Lock()
		delete(n.releasing, key)
		if err == nil {
			delete(n.waiting, key)
			delete(n.owners, key)
		}
		n.mu.Unlock()
		if err != nil {
			if ctx.Err() == nil {
				n.log.Error("releasing node failed; will retry", "node", key, "error", err)
				n.loop.SetTimer(retry, n.clock.Now().Add(runtime.RetryAfter))
			}
			return
		}
		after()
	})
	return true
}

// HandleEvent routes a driver event to the owner of its node, after ending the node's wait
// to be ready when the event ends it; an event about a node being created is held until
// its owner recorded the outcome (Create). An event about a node no owner holds is
// dropped: its node was released, or is an orphan that recovery releases.
func (n *Nodes) HandleEvent(ctx context.Context, ev driver.Event) {
	n.mu.Lock()
	owner, ok := n.owners[ev.NodeKey]
	if n.creating[ev.NodeKey] {
		n.held[ev.NodeKey] = append(n.held[ev.NodeKey], ev)
		n.mu.Unlock()
		return
	}
	if ev.Kind == driver.NodeReady || ev.Kind == driver.NodeGone {
		delete(n.waiting, ev.NodeKey)
	}
	n.mu.Unlock()
	if !ok {
		n.log.Debug("event about a node no controller holds", "node", ev.NodeKey, "kind", ev.Kind)
		return
	}
	owner.HandleNodeEvent(ctx, ev)
}

// Adopt reports whether a node its owner recorded before a restart is gone: the driver
// does not know it any more. An error is the driver's, other than the node not being found.
// The owner registered the node (Register) before the driver's events began to flow.
func (n *Nodes) Adopt(ctx context.Context, key string) (gone bool, err error) {
	_, err = n.drv.Describe(ctx, key)
	if driver.IsNotFound(err) {
		return true, nil
	}
	return false, err
}

// TaskState is what became of a task an owner recorded on a node, found after a restart.
type TaskState struct {
	// Running, or ended with ExitCode.
	Running  bool
	ExitCode int
	// NeverStarted: the node does not know the task; the engine stopped between recording
	// it and starting it.
	NeverStarted bool
}

// Task describes a task an owner recorded on an adopted node. An error is the driver's
// (the node cannot be reached), other than the task not being found.
func (n *Nodes) Task(ctx context.Context, key, task string) (TaskState, error) {
	st, err := n.drv.TaskStatus(ctx, key, task)
	switch {
	case driver.IsNotFound(err):
		return TaskState{NeverStarted: true}, nil
	case err != nil:
		return TaskState{}, err
	}
	return TaskState{Running: st.Running, ExitCode: st.ExitCode}, nil
}

// Recoverer is an owner that finds its nodes again after a restart.
type Recoverer interface {
	Owner
	// NodeKeys lists the driver keys of every node the owner records.
	NodeKeys() ([]string, error)
	// Recover adopts those nodes (Adopt, Task), creates again those it committed and may
	// not have created, and resumes its rule's timers.
	Recover(ctx context.Context) error
}

// Recover runs once at the engine's start, before the driver's events are applied: every
// owner's recorded nodes become its own, each owner adopts them, and the nodes the driver
// has that no owner records are released.
func (n *Nodes) Recover(ctx context.Context, owners ...Recoverer) error {
	for _, o := range owners {
		keys, err := o.NodeKeys()
		if err != nil {
			return fmt.Errorf("reading the recorded nodes: %w", err)
		}
		n.Register(o, keys...)
	}
	for _, o := range owners {
		if err := o.Recover(ctx); err != nil {
			return err
		}
	}
	if err := n.releaseOrphans(ctx); err != nil {
		return fmt.Errorf("listing nodes: %w", err)
	}
	return nil
}

// releaseOrphans terminates, each in the background, the nodes the driver has that no
// owner holds: nodes made by an engine that stopped before it recorded them, or whose
// owner's record went while the engine was down.
func (n *Nodes) releaseOrphans(ctx context.Context) error {
	live, err := n.drv.List(ctx, "")
	if err != nil {
		return err
	}
	for _, o := range live {
		if n.Owns(o.Key) {
			continue
		}
		// Each in the background: a cluster manager may take seconds per allocation.
		n.log.Warn("releasing orphaned node", "node", o.Key, "owner", o.Owner)
		n.loop.Go(func() {
			if err := n.drv.Terminate(ctx, o.Key); err != nil {
				n.log.Error("releasing orphaned node failed", "node", o.Key, "error", err)
			}
		})
	}
	return nil
}
