// Package computes is the core every compute controller shares (clusters, instances,
// attached machines and jobs, in package controllers/...): the node lifecycle (create a
// node under a key persisted first, wait for it to be ready, release it and confirm it
// gone), capacity admission and preemption, job tasks (start, kill, free their nodes), the
// quota check over the quota index, and the part of a compute's pass that is the same for
// every kind (a delete in progress, releases to retry, capacity to hand out). The
// kind-specific decisions come from the Pass each controller registers.
//
// Every pass reads the store, decides, commits, and only then acts; slow work (driver
// calls) goes through the work loop's Go, so a slow node never blocks another compute.
package computes

import (
	"context"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"k8s.io/utils/clock"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/driver"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/metrics"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/runtime"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
)

// MaxNodesPerPass bounds the node records one pass creates, so no pass does unbounded work
// whatever min_node_count or a job asks for.
const MaxNodesPerPass = 64

// Config is what the core is built from.
type Config struct {
	Store     *store.Store
	Clock     clock.WithTicker
	Logger    hclog.Logger
	Loop      *runtime.Loop
	Snapshots model.SnapshotStore
	DataDir   string
	// EnvCacheDir is the environment cache shared by the local nodes of this machine
	// (DESIGN 8); empty when nodes are not local.
	EnvCacheDir string
	// CapacityVCPUs bounds the vCPUs all nodes together may hold; 0 means unlimited.
	CapacityVCPUs int64
	// NewID makes node IDs ("<prefix>-<unique>").
	NewID func(prefix string) string
}

// Pass is one kind of compute's decision at one pass, made inside the pass's transaction:
// it may change rec (and say so with Actions.SaveCompute), its nodes and jobs in tx, and
// returns what to do once the transaction is committed.
type Pass func(tx *store.Tx, rec *model.Compute, nodes []model.Node, jobs []model.Job, now time.Time) (Actions, error)

// Actions is what a pass decided to do after its commit.
type Actions struct {
	// SaveCompute: the pass changed the compute record; the core stores it.
	SaveCompute bool
	// Release are nodes the pass marked released: they are terminated, and their records go
	// once the driver confirms.
	Release []model.Node
	// KillTasks are tasks to kill (a setup script past its timeout, a job on a stopped node).
	KillTasks []TaskRef
	// KillJobs are jobs the pass finished whose tasks may still run.
	KillJobs []model.Job
	// StartJobs are jobs the pass gave nodes to.
	StartJobs []model.Job
	// Run is other work, run through the loop's Go (a setup script's start).
	Run []func(ctx context.Context)
	// Timers are deadlines to set (At non-zero) or clear (At zero) once committed.
	Timers []TimerChange
	// Logs are what the pass decided, logged once committed (never a decision that rolled back).
	Logs []LogLine
}

// TimerChange sets a timer to At, or clears it when At is zero.
type TimerChange struct {
	Timer runtime.Timer
	At    time.Time
}

// SetTimer and ClearTimer record timer changes.
func (a *Actions) SetTimer(t runtime.Timer, at time.Time) {
	a.Timers = append(a.Timers, TimerChange{t, at})
}
func (a *Actions) ClearTimer(t runtime.Timer) { a.Timers = append(a.Timers, TimerChange{Timer: t}) }

// LogLine is one log line of a pass.
type LogLine struct {
	Level hclog.Level
	Msg   string
	Args  []any
}

// Log records a log line.
func (a *Actions) Log(level hclog.Level, msg string, args ...any) {
	a.Logs = append(a.Logs, LogLine{level, msg, args})
}

// backoff holds back a compute's node creation after failures: RetryAfter after the first,
// doubling with each failure in a row up to maxCreateBackoff, and at least a minute after a
// permanent refusal (a setting to fix), so a refusing cluster manager is not asked again and
// again. A node that starts, or an update of the compute, ends it.
type backoff struct {
	until time.Time
	delay time.Duration
}

// maxCreateBackoff caps the wait between node creations that keep failing.
const maxCreateBackoff = 5 * time.Minute

// nextBackoff is the back-off after one more failure.
func nextBackoff(prev backoff, permanent bool, now time.Time) backoff {
	delay := min(max(2*prev.delay, runtime.RetryAfter), maxCreateBackoff)
	if permanent {
		delay = max(delay, time.Minute)
	}
	return backoff{until: now.Add(delay), delay: delay}
}

// TaskRef names one task on one node.
type TaskRef struct{ Node, Task string }

// Core is shared by the compute controllers. Its methods are safe for concurrent use.
type Core struct {
	Store     *store.Store
	Clock     clock.WithTicker
	Log       hclog.Logger
	Loop      *runtime.Loop
	Snapshots model.SnapshotStore
	DataDir   string
	// EnvCacheDir: see Config.
	EnvCacheDir string
	Capacity    int64
	NewID       func(prefix string) string
	// Quota sums the vCPUs computes hold per workspace and family (updated under Mu).
	Quota *model.QuotaIndex
	// Driver and Ctx are set by Start.
	Driver driver.Driver
	Ctx    context.Context

	// Mu serialises the computes' writers so that read-check-write sequences (name taken?
	// quota left? capacity free?) see a consistent store; bbolt already serialises the
	// commits themselves. The fields below it are guarded by it.
	Mu        sync.Mutex
	backoff   map[string]backoff // compute key -> no node creation before
	releasing map[string]bool    // node keys with a Terminate in flight

	passes map[string]Pass // compute type -> its controller's pass
	// Recorder gets the node lifecycle's durations for the engine's metrics.
	Recorder metrics.Recorder
	// OnTaskExit applies a task's end (set by the engine: a job's rank or a setup script);
	// Recover calls it for tasks that ended while the engine was down.
	OnTaskExit func(ctx context.Context, node, task string, code int)
	// OnTaskNotStarted is what Recover calls for a task the store records on a node but the
	// node does not know: the engine stopped after committing it and before starting it
	// (set by the engine; nil ignores it).
	OnTaskNotStarted func(node, task string)
}

// New builds the core and fills the quota index from the store.
func New(cfg Config) (*Core, error) {
	c := &Core{
		Store: cfg.Store, Clock: cfg.Clock, Log: cfg.Logger.Named("computes"), Loop: cfg.Loop,
		Snapshots: cfg.Snapshots, DataDir: cfg.DataDir, EnvCacheDir: cfg.EnvCacheDir, Capacity: cfg.CapacityVCPUs, NewID: cfg.NewID,
		Quota: model.NewQuotaIndex(), Ctx: context.Background(), Recorder: metrics.Nop{},
		backoff: map[string]backoff{}, releasing: map[string]bool{}, passes: map[string]Pass{},
	}
	if err := c.LoadQuotaIndex(); err != nil {
		return nil, err
	}
	return c, nil
}

// RegisterPass makes p decide the passes of computes of type computeType.
func (c *Core) RegisterPass(computeType string, p Pass) { c.passes[computeType] = p }

// Start gives the core the engine's node driver and its lifetime; call Recover next.
func (c *Core) Start(ctx context.Context, drv driver.Driver) { c.Ctx, c.Driver = ctx, drv }

// Kick marks a compute for a pass.
func (c *Core) Kick(computeKey string) { c.Loop.Mark(runtime.ComputeKey(computeKey)) }

// Insert stores a new compute that its controller built and validated: the workspace must
// exist, the name must be free, and its quota must fit (on quotaField). A retry under the
// same idempotency key returns what the first call made.
func (c *Core) Insert(ctx context.Context, rec model.Compute, idempotencyKey, quotaField string) (*api.Compute, error) {
	id := api.ComputeID(rec.Workspace, rec.Name)
	rec.ParseDurations()
	c.Mu.Lock()
	defer c.Mu.Unlock()
	err := c.Store.Update(func(tx *store.Tx) error {
		ws, err := model.GetWorkspace(tx, rec.Workspace)
		if err != nil {
			return err
		}
		if done, err := model.Replayed(tx, idempotencyKey, id); done || err != nil {
			return err
		}
		var existing model.Compute
		if ok, err := tx.Get(store.Computes, rec.Key(), &existing); err != nil {
			return err
		} else if ok {
			return api.Errorf(api.CodeConflict, "name", "compute %q already exists in workspace %q; to manage it with Terraform, import it: terraform import %s.<name> %s", rec.Name, rec.Workspace, rec.ResourceType(), id)
		}
		if quotaField != "" {
			if err := c.CheckQuota(ws, rec, quotaField); err != nil {
				return err
			}
		}
		if err := tx.Put(store.Computes, rec.Key(), rec); err != nil {
			return err
		}
		return model.Remember(tx, idempotencyKey, id, c.Clock.Now())
	})
	if err != nil {
		return nil, err
	}
	c.IndexCompute(rec)
	c.Log.Info("compute created", "compute", rec.Key(), "type", rec.Type, "vm_size", rec.VMSize)
	c.Kick(rec.Key())
	return c.GetCompute(ctx, rec.Workspace, rec.Name)
}

// Modify applies a controller's update to a stored compute (not one being deleted) and
// checks the quota again; f gets the workspace and the record to change.
func (c *Core) Modify(ctx context.Context, workspace, name string, f func(ws *api.Workspace, rec *model.Compute) error) (*api.Compute, error) {
	c.Mu.Lock()
	defer c.Mu.Unlock()
	var updated model.Compute
	err := c.Store.Update(func(tx *store.Tx) error {
		ws, err := model.GetWorkspace(tx, workspace)
		if err != nil {
			return err
		}
		rec, err := model.GetCompute(tx, workspace, name)
		if err != nil {
			return err
		}
		if rec.Deleting {
			return api.Errorf(api.CodeConflict, "", "compute %q is being deleted", name)
		}
		prev := rec
		if err := f(ws, &rec); err != nil {
			return err
		}
		rec.ParseDurations()
		// The quota is checked again when what the compute holds changed (its size or
		// max_node_count), not on a change of its description after a quota was lowered.
		before, _ := holding(prev)
		if after, held := holding(rec); held && after != before {
			if err := c.CheckQuota(ws, rec, rec.QuotaField()); err != nil {
				return err
			}
		}
		updated = rec
		return tx.Put(store.Computes, rec.Key(), rec)
	})
	if err != nil {
		return nil, err
	}
	c.IndexCompute(updated)
	delete(c.backoff, updated.Key()) // new settings deserve a new try at once
	c.Log.Info("compute updated", "compute", workspace+"/"+name)
	c.Kick(workspace + "/" + name)
	return c.GetCompute(ctx, workspace, name)
}

// Type returns a stored compute's type (and NotFound like GetCompute).
func (c *Core) Type(workspace, name string) (string, error) {
	var typ string
	err := c.Store.View(func(tx *store.Tx) error {
		rec, err := model.GetCompute(tx, workspace, name)
		if err != nil || rec.Serverless {
			return model.NotFoundCompute(workspace, name)
		}
		typ = rec.Type
		return nil
	})
	return typ, err
}
