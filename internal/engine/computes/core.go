// Package computes is the core every compute controller shares (clusters, instances,
// attached machines and jobs, in package controllers/...): the computes' side of the node
// lifecycle (package lifecycle creates, readies, releases and recovers every node; the core
// keeps the node records, commits each outcome and backs off creation after failures),
// capacity admission and preemption, job tasks (start, kill, free their nodes), the quota
// check over the quota index, and the part of a compute's pass that is the same for every
// kind (a delete in progress, releases to retry, capacity to hand out). The
// kind-specific decisions come from each controller's Pass, which the engine registers.
//
// Controllers do not embed the core: each names the small interfaces it uses (Records,
// Transactions, Kicker, NodeLifecycle, Tasks, Runtime). Writers go one at a time: the
// passes, the driver's outcomes and every Write run in turn, so a read-check-write (name
// taken? quota left? capacity free?) sees a consistent store and quota index.
//
// Every pass reads the store, decides, commits, and only then acts; slow work (driver
// calls) goes through the work loop's Go, so a slow node never blocks another compute.
// Files: core.go (the core, its interfaces, compute records), computes.go (reads, quota,
// deletes), pass.go (one pass), nodes.go (node records and their events), capacity.go (admission and
// preemption), tasks.go and environments.go (jobs' tasks), recovery.go (after a restart).
package computes

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"k8s.io/utils/clock"

	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/api"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/artifacts"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/lifecycle"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/metrics"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/model"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/runtime"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/store"
	"github.com/mlcompute/terraform-provider-mlcompute/internal/engine/tasks"
)

// Config is what the core is built from.
type Config struct {
	Store     *store.Store
	Clock     clock.WithTicker
	Logger    hclog.Logger
	Loop      *runtime.Loop
	Snapshots model.SnapshotStore
	// Artifacts holds jobs' outputs, which later jobs take as inputs (nil: none).
	Artifacts *artifacts.Store
	DataDir   string
	// EnvCacheDir is the environment cache shared by the local nodes of this machine
	// (DESIGN 8); empty when nodes are not local.
	EnvCacheDir string
	// CapacityVCPUs bounds the vCPUs all nodes together may hold; 0 means unlimited.
	CapacityVCPUs int64
	// Local says the engine's own nodes run on this machine (mlcompute serve --nodes
	// local): isolated sizes run alone on it, and GPUs are handed out to them.
	Local bool
	// GPUs are this machine's GPUs, handed to local nodes of GPU sizes; empty: none.
	GPUs []string
	// Containers says the engine's own nodes run tasks in container images (local nodes
	// whose driver has a containerd, or Slurm nodes through the engine's container runner):
	// jobs in container environments may run on the engine's own computes.
	Containers bool
	// PodNodes says the engine's own nodes are Kubernetes pods (--nodes kubernetes): a task
	// in an image runs in a container of its own in the node's pod, which the size's GPUs
	// (given to the node's container) do not reach.
	PodNodes bool
	// AttachedContainers says attached machines run tasks in container images (the engine
	// can copy its own binary there: it is a Linux engine).
	AttachedContainers bool
	// NewID makes node IDs ("<prefix>-<unique>").
	NewID func(prefix string) string
	// Nodes is the engine's node lifecycle, which creates and releases the computes' nodes
	// and routes the driver's events about them back (HandleNodeEvent).
	Nodes *lifecycle.Nodes
	// Tasks is how the computes' tasks are started and killed on their nodes (package
	// tasks, which the engine starts with its driver).
	Tasks *tasks.Tasks
}

// Core is shared by the compute controllers, which reach it through the small interfaces
// below (each controller names the ones it uses). Its methods are safe for concurrent use.
type Core struct {
	store              *store.Store
	clock              clock.WithTicker
	log                hclog.Logger
	loop               *runtime.Loop
	dataDir            string
	envCacheDir        string // see Config
	capacity           int64
	local              bool     // see Config
	containers         bool     // see Config
	podNodes           bool     // see Config
	attachedContainers bool     // see Config
	gpus               []string // see Config
	newID              func(prefix string) string
	snapshots          model.SnapshotStore
	artifacts          *artifacts.Store
	// quota sums the vCPUs computes hold per workspace and family (changed only in turn,
	// under mu).
	quota *model.QuotaIndex
	nodes *lifecycle.Nodes
	tasks *tasks.Tasks
	// ctx is set by Start.
	ctx context.Context
	// recorder gets the node lifecycle's durations for the engine's metrics.
	recorder metrics.Recorder
	passes   map[string]Pass // compute type -> its controller's pass
	// owners are the controllers whose tasks run on computes' nodes (tasks.go), in the
	// order they are asked to claim a task.
	owners []TaskOwner

	// mu serialises the computes' writers (Write, the passes, the driver's outcomes) and
	// the endpoints' (Turn) so that read-check-write sequences (name taken? quota left?
	// capacity free?) see a consistent store and quota index; bbolt already serialises the
	// commits themselves. The fields below it are guarded by it.
	mu        sync.Mutex
	backoff   map[string]createBackoff // compute key -> no node creation before
	committed []func()                 // what the current write does once committed
	undo      []func()                 // what the current write undoes if it does not commit

	// grouped are the writeGrouped calls waiting for their turn (guarded by groupMu, not
	// mu, so that callers can join while a write holds mu).
	groupMu sync.Mutex
	grouped []*groupedWrite
}

// groupedWrite is one writeGrouped call; err and done are set in turn (under mu).
type groupedWrite struct {
	f    func(tx *store.Tx) error
	err  error
	done bool
}

// The small interfaces the controllers use of the core.

// Transactions are the computes' reads and writes. Writes go one at a time, in turn with
// the passes, so a read-check-write inside one sees a consistent store and quota index.
type Transactions interface {
	View(f func(tx *store.Tx) error) error
	Write(f func(tx *store.Tx) error) error
	// Changed is closed at the next commit that changes bucket b (store.Store.Changed).
	Changed(b store.Bucket) <-chan struct{}
}

// Turns let the endpoints controller's writers take their turns with the computes' (one
// write path for the engine's controllers): a read-check-write inside Turn sees a
// consistent store and quota index, whichever kind of record wrote last, and commits with
// WriteInTurn. Turn is not reentrant: f must not call Turn or Write.
type Turns interface {
	Turn(f func())
	WriteInTurn(f func(tx *store.Tx) error, undo func()) error
}

// WriteTurn takes a turn in t and commits f in it (Turns.WriteInTurn): the write of a
// caller that is in no turn yet, such as an API call.
func WriteTurn(t Turns, f func(tx *store.Tx) error, undo func()) (err error) {
	t.Turn(func() { err = t.WriteInTurn(f, undo) })
	return err
}

// Kicker marks a compute for a pass.
type Kicker interface {
	Kick(computeKey string)
}

// Records create, change and read compute records for their controllers.
type Records interface {
	Insert(ctx context.Context, rec model.Compute, idempotencyKey, quotaField string) (*api.Compute, error)
	Modify(ctx context.Context, workspace, name string, f func(ws *api.Workspace, rec *model.Compute) error) (*api.Compute, error)
	GetCompute(ctx context.Context, workspace, name string) (*api.Compute, error)
}

// NodeLifecycle is the node lifecycle as a compute's pass and its events use it.
type NodeLifecycle interface {
	NewNode(rec model.Compute, now time.Time) model.Node
	CreateBackedOff(key string, now time.Time) bool
	NodeByID(tx *store.Tx, id string) (model.Node, bool)
}

// Tasks start and stop jobs' tasks on their nodes, and say where their output is kept.
type Tasks interface {
	StartJob(ctx context.Context, j model.Job)
	KillJob(ctx context.Context, j model.Job)
	FreeNodes(j model.Job)
	JobLogPath(jobID string, rank int) string
	EnvLogPath(jobID string, rank int) string
	JobDir(jobID string) string
	MountPath(j api.Job, dir, name string) string
}

// Runtime is what a controller acts with: the clock, the computes' logger, the tasks on
// its nodes (package tasks), the engine's lifetime (set by Start), and the work loop's Go
// for slow work.
type Runtime interface {
	Clock() clock.PassiveClock
	Logger() hclog.Logger
	Tasks() *tasks.Tasks
	Lifetime() context.Context
	Go(f func())
}

// New builds the core and fills the quota index from the store.
func New(cfg Config) (*Core, error) {
	c := &Core{
		store: cfg.Store, clock: cfg.Clock, log: cfg.Logger.Named("computes"), loop: cfg.Loop,
		snapshots: cfg.Snapshots, artifacts: cfg.Artifacts, dataDir: cfg.DataDir, envCacheDir: cfg.EnvCacheDir, capacity: cfg.CapacityVCPUs, newID: cfg.NewID,
		local: cfg.Local, containers: cfg.Containers, podNodes: cfg.PodNodes, attachedContainers: cfg.AttachedContainers, gpus: slices.Clone(cfg.GPUs),
		quota: model.NewQuotaIndex(), ctx: context.Background(), recorder: metrics.Nop{},
		nodes: cfg.Nodes, tasks: cfg.Tasks, backoff: map[string]createBackoff{}, passes: map[string]Pass{},
	}
	if err := c.loadQuotaIndex(); err != nil {
		return nil, err
	}
	return c, nil
}

// RegisterPass makes p decide the passes of computes of type computeType.
func (c *Core) RegisterPass(computeType string, p Pass) { c.passes[computeType] = p }

// SetRecorder gives the node lifecycle's durations to r; call it before Start.
func (c *Core) SetRecorder(r metrics.Recorder) { c.recorder = r }

// Recorder is where the node lifecycle's durations go.
func (c *Core) Recorder() metrics.Recorder { return c.recorder }

// Start gives the core the engine's lifetime; call Recover next.
func (c *Core) Start(ctx context.Context) { c.ctx = ctx }

// Clock, Logger, Tasks, Lifetime and Go are the Runtime.
func (c *Core) Clock() clock.PassiveClock { return c.clock }

func (c *Core) Logger() hclog.Logger { return c.log }

func (c *Core) Tasks() *tasks.Tasks { return c.tasks }

func (c *Core) Lifetime() context.Context { return c.ctx }

func (c *Core) Go(f func()) { c.loop.Go(f) }

// Kick marks a compute for a pass.
func (c *Core) Kick(computeKey string) { c.loop.Mark(runtime.ComputeKey(computeKey)) }

// View runs f in a read transaction.
func (c *Core) View(f func(tx *store.Tx) error) error { return c.store.View(f) }

// Changed is closed at the next commit that changes bucket b.
func (c *Core) Changed(b store.Bucket) <-chan struct{} { return c.store.Changed(b) }

// Write runs f in a write transaction, in turn with every other writer of computes, and
// then, once committed and still in turn, what f asked to do on commit (onCommit).
func (c *Core) Write(f func(tx *store.Tx) error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.writeLocked(f)
}

// Turn runs f in turn with every writer of computes and endpoints (Turns).
func (c *Core) Turn(f func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f()
}

// WriteInTurn commits f for a caller inside Turn; undo, when not nil, puts back what f
// changed in memory when the transaction does not commit.
func (c *Core) WriteInTurn(f func(tx *store.Tx) error, undo func()) error {
	err := c.writeLocked(f)
	if err != nil && undo != nil {
		undo()
	}
	return err
}

// writeGrouped is Write for the API's creates and deletes, which come many at a time (a
// terraform apply runs ten at once): the calls that wait for their turn share one
// transaction, so one commit and its fsyncs make them all durable, instead of queueing one
// commit each behind the others. Each call still returns only once its write is committed.
// f must give the same outcome when it runs again: when one call of a group fails, the
// group is rolled back and each of its calls runs again alone, so each gets its own error.
func (c *Core) writeGrouped(f func(tx *store.Tx) error) error {
	w := &groupedWrite{f: f}
	c.groupMu.Lock()
	c.grouped = append(c.grouped, w)
	c.groupMu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	if !w.done { // else a call that had the turn before wrote it with its own group
		c.groupMu.Lock()
		group := c.grouped // w among them
		c.grouped = nil
		c.groupMu.Unlock()
		c.writeGroup(group)
	}
	return w.err
}

// writeGroup writes a group of writeGrouped calls in one transaction, in turn (under mu),
// and sets each call's outcome. When the transaction fails, nothing of it stays (the
// store rolls back, the calls' in-memory changes are undone) and each call runs again
// alone.
func (c *Core) writeGroup(group []*groupedWrite) {
	if len(group) > 1 {
		c.committed, c.undo = nil, nil
		err := c.store.Update(func(tx *store.Tx) error {
			for _, g := range group {
				if err := g.f(tx); err != nil {
					return err
				}
			}
			return nil
		})
		c.finishWrite(err)
		if err == nil {
			for _, g := range group {
				g.err, g.done = nil, true
			}
			return
		}
	}
	for _, g := range group {
		g.err, g.done = c.writeLocked(g.f), true
	}
}

// writeLocked is Write for a caller in turn (holding mu).
func (c *Core) writeLocked(f func(tx *store.Tx) error) error {
	c.committed, c.undo = nil, nil
	err := c.store.Update(f)
	c.finishWrite(err)
	return err
}

// finishWrite runs what the write that just ended asked to do once committed, or, when its
// transaction failed (err), undoes what it changed in memory, latest first.
func (c *Core) finishWrite(err error) {
	done, undo := c.committed, c.undo
	c.committed, c.undo = nil, nil
	if err == nil {
		for _, g := range done {
			g()
		}
	} else {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}
}

// onCommit runs g once the current Write commits. Callers are inside Write.
func (c *Core) onCommit(g func()) { c.committed = append(c.committed, g) }

// AddCompute stores a new compute in a Write's transaction, after checking that its quota
// fits (on quotaField; no check when it is empty); the quota index counts it once committed.
func (c *Core) AddCompute(tx *store.Tx, ws *api.Workspace, rec model.Compute, quotaField string) error {
	if err := c.checkGPUs(rec, quotaField); err != nil {
		return err
	}
	if quotaField != "" {
		if err := c.checkQuota(ws, rec, quotaField); err != nil {
			return err
		}
	}
	return c.putCompute(tx, rec)
}

// putCompute stores a compute in a Write's transaction. The quota index follows inside
// the transaction, not after it: the next quota check, of a compute or of an endpoint
// (whose writes take the same turn), counts it. A write that does not commit puts the
// index back.
func (c *Core) putCompute(tx *store.Tx, rec model.Compute) error {
	if err := tx.Put(store.Computes, rec.Key(), rec); err != nil {
		return err
	}
	prev, had := c.quota.Get(rec.Key())
	c.indexCompute(rec)
	c.undo = append(c.undo, func() {
		if had {
			c.quota.Set(rec.Key(), prev)
		} else {
			c.quota.Delete(rec.Key())
		}
	})
	return nil
}

// Insert stores a new compute that its controller built and validated: the workspace must
// exist, the name must be free, and its quota must fit (on quotaField). A retry under the
// same idempotency key returns what the first call made.
func (c *Core) Insert(ctx context.Context, rec model.Compute, idempotencyKey, quotaField string) (*api.Compute, error) {
	id := api.ComputeID(rec.Workspace, rec.Name)
	rec.ParseDurations()
	var out *api.Compute // read in the same turn as the write, as every pass after it sees it
	err := c.writeGrouped(func(tx *store.Tx) error {
		out = nil
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
		if err := c.AddCompute(tx, ws, rec, quotaField); err != nil {
			return err
		}
		if err := model.Remember(tx, idempotencyKey, id, c.clock.Now()); err != nil {
			return err
		}
		out, err = c.describe(tx, rec)
		return err
	})
	if err != nil {
		return nil, err
	}
	if out == nil { // a retry: what the first call made
		return c.GetCompute(ctx, rec.Workspace, rec.Name)
	}
	c.log.Info("compute created", "compute", rec.Key(), "type", rec.Type, "vm_size", rec.VMSize)
	c.Kick(rec.Key())
	return out, nil
}

// Modify applies a controller's update to a stored compute (not one being deleted) and
// checks the quota again; f gets the workspace and the record to change.
func (c *Core) Modify(_ context.Context, workspace, name string, f func(ws *api.Workspace, rec *model.Compute) error) (*api.Compute, error) {
	var out *api.Compute
	err := c.Write(func(tx *store.Tx) error {
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
			if err := c.checkQuota(ws, rec, rec.QuotaField()); err != nil {
				return err
			}
		}
		if err := c.putCompute(tx, rec); err != nil {
			return err
		}
		c.onCommit(func() { delete(c.backoff, rec.Key()) }) // new settings deserve a new try at once
		out, err = c.describe(tx, rec)
		return err
	})
	if err != nil {
		return nil, err
	}
	c.log.Info("compute updated", "compute", workspace+"/"+name)
	c.Kick(workspace + "/" + name)
	return out, nil
}

// Type returns a stored compute's type (and NotFound like GetCompute).
func (c *Core) Type(workspace, name string) (string, error) {
	var typ string
	err := c.store.View(func(tx *store.Tx) error {
		rec, err := model.GetCompute(tx, workspace, name)
		if err != nil || rec.Serverless {
			return model.NotFoundCompute(workspace, name)
		}
		typ = rec.Type
		return nil
	})
	return typ, err
}

// QuotaIndex is the workspaces' quota sums: the computes' holdings, kept by the core, and
// the endpoint deployments', kept by the endpoints controller; both check against it.
func (c *Core) QuotaIndex() *model.QuotaIndex { return c.quota }
